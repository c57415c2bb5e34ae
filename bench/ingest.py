#!/usr/bin/env python3
"""Ingest throughput, measured (not asserted).

Builds a public-inbox v2 inbox of N generated messages (bench/gen_mail.py: patch series,
reviews quoting patches, regression reports, robot reports, threads) the way lore mirrors are
written (git fast-import, one commit per message, blob ``m``), then reports messages/second for:

  git-epoch ingest   regtriage's public-inbox git walker into a fresh SQLite database
  mbox ingest        `regtriage ingest` of the same messages as one mboxrd file
  bare parse         email.message_from_bytes (compat32) over the same messages, nothing stored
  public-inbox-index the lore server's own indexer over the same epoch (if installed)

Each figure is the median of --runs runs (fresh database each run).

    .venv/bin/python bench/ingest.py [--messages 20000] [--runs 3] [--json]
"""

from __future__ import annotations

import argparse
import email
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from email.utils import parseaddr, parsedate_to_datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from gen_mail import generate  # noqa: E402

from bot.sources.files import to_mboxrd  # noqa: E402


def build_inbox(tmp: Path, messages: list[bytes]) -> tuple[Path, dict]:
    """A v2 inbox whose git/0.git holds one commit per message (like lore's epochs)."""
    env = dict(os.environ, PI_CONFIG=str(tmp / "pi-config"), PI_EMERGENCY=str(tmp / "emergency"),
               HOME=str(tmp))
    inbox = tmp / "inbox"
    (tmp / "pi-config").write_text("[publicinboxmda]\n\tspamcheck = none\n")
    have_pi = shutil.which("public-inbox-init") is not None
    if have_pi:
        subprocess.run(["public-inbox-init", "-V2", "-j1", "bench", str(inbox), "http://127.0.0.1/bench",
                        "bench@example.org"], env=env, check=True, capture_output=True)
    epoch = inbox / "git" / "0.git"
    if not epoch.exists():
        subprocess.run(["git", "init", "-q", "--bare", str(epoch)], check=True)
    stream = bytearray()
    for i, raw in enumerate(messages, 1):
        msg = email.message_from_bytes(raw.split(b"\n\n", 1)[0] + b"\n\n")
        name, addr = parseaddr(msg.get("From", ""))
        ts = int(parsedate_to_datetime(msg["Date"]).timestamp())
        subject = (msg.get("Subject") or "(no subject)").replace("\n", " ").encode()
        stream += b"blob\nmark :%d\ndata %d\n" % (2 * i, len(raw)) + raw + b"\n"
        stream += (b"commit refs/heads/master\nmark :%d\n" % (2 * i + 1)
                   + f"author {name or addr} <{addr}> {ts} +0000\n".encode()
                   + f"committer bench <bench@example.org> {ts} +0000\n".encode()
                   + b"data %d\n" % len(subject) + subject + b"\n"
                   + (b"deleteall\n" if i > 1 else b"") + b"M 100644 :%d m\n\n" % (2 * i))
    subprocess.run(["git", "--git-dir", str(epoch), "fast-import", "--quiet"], input=bytes(stream), check=True)
    return inbox, env


def median_rate(n: int, fn, runs: int) -> tuple[float, list[float]]:
    rates = []
    for _ in range(runs):
        seconds = fn()
        rates.append(n / seconds)
    return statistics.median(rates), rates


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from bot.sources.ingest import Ingester
    from bot.sources.files import iter_paths
    from bot.sources.pigit import ingest_epochs
    from storage.store import Store

    tmp = Path(tempfile.mkdtemp(prefix="rt-bench-"))
    try:
        messages = generate(args.messages)
        n = len(messages)
        total_bytes = sum(map(len, messages))
        inbox, env = build_inbox(tmp, messages)
        (tmp / "all.mbox").write_bytes(to_mboxrd(messages))
        results: dict = {"messages": n, "mean_size_bytes": round(total_bytes / n)}

        def fresh_store() -> Store:
            db = tmp / "db.sqlite3"
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
            return Store(f"sqlite:///{db}")

        def run_git() -> float:
            store = fresh_store()
            t = time.perf_counter()
            stats = ingest_epochs(store, str(inbox), workers=2)
            dt = time.perf_counter() - t
            stored = stats["stored"] if isinstance(stats, dict) else stats.stored
            assert stored == n, stats
            store.close()
            return dt

        def run_mbox() -> float:
            store = fresh_store()
            t = time.perf_counter()
            ing = Ingester(store, parallel=True)
            for item in iter_paths([str(tmp / "all.mbox")]):
                ing.add(item.raw, item.origin, item.reject)
            ing.flush()
            dt = time.perf_counter() - t
            assert ing.stats["stored"] == n, ing.stats
            store.close()
            return dt

        def run_bare() -> float:
            t = time.perf_counter()
            for raw in messages:
                email.message_from_bytes(raw)
            return time.perf_counter() - t

        def run_pi_index() -> float:
            # reindex from scratch: drop the index files public-inbox keeps beside the epochs
            for p in ("msgmap.sqlite3", "xap15"):
                target = inbox / p
                if target.is_dir():
                    shutil.rmtree(target)
                elif target.exists():
                    target.unlink()
            t = time.perf_counter()
            subprocess.run(["public-inbox-index", str(inbox)], env=env, check=True, capture_output=True)
            return time.perf_counter() - t

        for name, fn in (("git_epoch_ingest", run_git), ("mbox_ingest", run_mbox), ("bare_parse", run_bare)):
            med, all_rates = median_rate(n, fn, args.runs)
            results[name] = {"median_msgs_per_s": round(med), "runs": [round(r) for r in all_rates]}
            if not args.json:
                print(f"{name:20s} {med:10.0f} msg/s   runs: {', '.join(f'{r:.0f}' for r in all_rates)}", flush=True)
        if shutil.which("public-inbox-index"):
            med, all_rates = median_rate(n, run_pi_index, args.runs)
            results["public_inbox_index"] = {"median_msgs_per_s": round(med), "runs": [round(r) for r in all_rates]}
            if not args.json:
                print(f"{'public_inbox_index':20s} {med:10.0f} msg/s   runs: {', '.join(f'{r:.0f}' for r in all_rates)}")
        g, b = results["git_epoch_ingest"]["median_msgs_per_s"], results["bare_parse"]["median_msgs_per_s"]
        results["bare_parse_over_git_ingest"] = round(b / g, 2)
        if args.json:
            print(json.dumps(results, indent=2))
        else:
            print(f"\n{n} messages, mean {results['mean_size_bytes']} bytes; bare parse is "
                  f"{results['bare_parse_over_git_ingest']}x the git-epoch ingest rate (target: within 5x, >= 3000 msg/s)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
