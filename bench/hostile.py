#!/usr/bin/env python3
"""Hostile input: time and memory, measured (not asserted).

Generates the hostile corpus (tests/hostile_corpus.py) and reports:

  whole run   `regtriage ingest` of the whole corpus into a fresh SQLite database (or --db),
              under `/usr/bin/time -v`: wall seconds and peak memory (maximum resident set
              size, the largest of the process and its parse workers)
  per input   each input file alone through the same code as the CLI (read, parse, store into
              a fresh SQLite database, in this process), slowest first: seconds, and seconds
              per MB of the file (the target is at most 1 s per MB; for files under 64 KiB the
              seconds are shown, the per-MB figure of a tiny file measures fixed costs)

    .venv/bin/python bench/hostile.py [--top 15] [--db URL] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from tests import hostile_corpus  # noqa: E402

MB = 1_000_000
SMALL = 64 * 1024


def whole_run(corpus: Path, db: str, home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REGTRIAGE_")}
    env["REGTRIAGE_HOME"] = str(home)
    argv = ["/usr/bin/time", "-v", sys.executable, "-m", "bot.cli.main", "--db", db, "ingest", "--json",
            "--no-triage", str(corpus)]
    t = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, cwd=REPO, env=env)
    wall = time.perf_counter() - t
    err = r.stderr.decode("utf-8", "replace")
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", err)
    return {"exit": r.returncode, "seconds": round(wall, 2),
            "peak_rss_mib": round(int(peak.group(1)) / 1024, 1) if peak else None,
            "counts": json.loads(r.stdout) if r.returncode in (0, 1) else None,
            "tracebacks": err.count("Traceback")}


def per_input(corpus: Path, tmp: Path) -> list[dict]:
    from bot.sources.ingest import Ingester
    from bot.sources.files import InputError, iter_paths
    from storage.store import Store

    out = []
    for n, path in enumerate(sorted(p for p in corpus.iterdir() if p.is_file() and not p.is_symlink())):
        db = tmp / f"one-{n}.sqlite3"
        store = Store(f"sqlite:///{db}")
        size = path.stat().st_size
        ing = Ingester(store, workers=0)
        t = time.perf_counter()
        for item in iter_paths([str(path)]):
            if not isinstance(item, InputError):
                ing.add(item.raw, item.origin, item.reject, problems=item.problems,
                        sha256=item.sha256, size=item.size)
        ing.flush()
        dt = time.perf_counter() - t
        ing.close()
        store.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        out.append({"file": os.fsencode(path.name).decode("utf-8", "backslashreplace"), "bytes": size,
                    "seconds": round(dt, 4), "s_per_mb": round(dt / (size / MB), 3) if size >= SMALL else None,
                    **{k: v for k, v in ing.stats.items() if v}})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--db", help="database URL for the whole run (default: fresh SQLite)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not os.path.exists("/usr/bin/time"):
        print("needs /usr/bin/time (apt-get install time)", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="rt-hostile-"))
    try:
        corpus = tmp / "corpus"
        man = hostile_corpus.generate(corpus)
        whole = whole_run(corpus, args.db or f"sqlite:///{tmp / 'whole.sqlite3'}", tmp / "home")
        rows = per_input(corpus, tmp)
        big = [r for r in rows if r["s_per_mb"] is not None]
        slowest_rate = max(big, key=lambda r: r["s_per_mb"])
        slowest_small = max((r for r in rows if r["s_per_mb"] is None), key=lambda r: r["seconds"])
        result = {"inputs_messages": man.messages, "files": len(rows), "corpus_mib": round(man.total_bytes / 2**20, 1),
                  "whole_run": whole, "slowest_per_mb": slowest_rate, "slowest_small_file": slowest_small,
                  "by_seconds": sorted(rows, key=lambda r: -r["seconds"])[:args.top]}
        if args.json:
            print(json.dumps(result, indent=2))
            return 0
        w = whole
        print(f"corpus: {man.messages} messages in {len(rows)} files, {result['corpus_mib']} MiB")
        print(f"whole run (regtriage ingest): exit {w['exit']}, {w['seconds']} s, peak RSS {w['peak_rss_mib']} MiB, "
              f"tracebacks {w['tracebacks']}, {w['counts']}")
        print(f"slowest input per MB: {slowest_rate['file']} {slowest_rate['bytes']} bytes, "
              f"{slowest_rate['seconds']} s = {slowest_rate['s_per_mb']} s/MB")
        print(f"slowest small file (<64 KiB): {slowest_small['file']} {slowest_small['seconds']} s")
        print(f"\n{'file':<28}{'bytes':>12}{'seconds':>10}{'s/MB':>8}")
        for r in result["by_seconds"]:
            rate = "" if r["s_per_mb"] is None else f"{r['s_per_mb']:.3f}"
            print(f"{r['file'][:27]:<28}{r['bytes']:>12}{r['seconds']:>10.3f}{rate:>8}")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
