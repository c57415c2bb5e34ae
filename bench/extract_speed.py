"""Extraction throughput (messages/second, one process) on real kernel-list mail.

The mix is every message of the labelled corpus (bench/corpus: train, dev and test: real
reports, follow-ups, robot mails, patches, pulls, reviews), most of which pass the
prefilter, plus the bundled real threads (tests/data/threads).  The pipeline is built before
the clock starts (a long-running ingest pays that once); each run extracts every message
once.  Prints every run and the median.

    .venv/bin/python bench/extract_speed.py [--runs 5]
    .venv/bin/python bench/extract_speed.py --ingest [--runs 3]

``--ingest`` measures what a user waits for instead: ``regtriage ingest`` of every corpus
message into a new SQLite database, as a separate process (start-up included), with
``[triage] workers = 1`` and with ``workers = 2``; median wall seconds of the runs.
"""

from __future__ import annotations

import argparse
import mailbox
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._corpus import load_split, parse  # noqa: E402
import extractors  # noqa: E402
from extractors import pipeline  # noqa: E402


def real_mix() -> list[tuple[str | None, str]]:
    mix = [(m.subject, m.body) for split in ("train", "dev", "test") for m in load_split(split)]
    for f in sorted((ROOT / "tests" / "data" / "threads").glob("*")):
        if f.suffix in (".mbox", ".mboxrd") or f.name.endswith(".mbox"):
            for msg in mailbox.mbox(str(f)):
                subject, _mid, body = parse(msg.as_bytes())
                mix.append((subject, body))
        elif f.suffix == ".eml":
            subject, _mid, body = parse(f.read_bytes())
            mix.append((subject, body))
    return mix


def ingest_runs(runs: int) -> int:
    files = [str(f) for split in ("train", "dev", "test") for f in sorted((ROOT / "bench" / "corpus" / split).glob("*.eml"))]
    exe = str(Path(sys.executable).with_name("regtriage"))
    for workers in (1, 2):
        times = []
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as d:
                cfg = Path(d) / "r.toml"
                cfg.write_text(f"[triage]\nworkers = {workers}\n")
                t0 = time.perf_counter()
                subprocess.run([exe, "--config", str(cfg), "--db", f"sqlite:///{d}/db.sqlite3", "ingest", "--json",
                                *files], check=True, capture_output=True, env={"REGTRIAGE_HOME": d, "PATH": "/usr/bin:/bin"})
                times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        print(f"regtriage ingest of {len(files)} real messages, workers={workers}: "
              f"{', '.join(f'{t:.1f}' for t in times)} s; median {med:.1f} s ({len(files) / med:.0f} msg/s)")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--ingest", action="store_true", help="time `regtriage ingest` (start-up included)")
    a = ap.parse_args(argv)
    if a.ingest:
        return ingest_runs(max(1, a.runs if a.runs != 5 else 3))
    mix = real_mix()
    extractors.extract("warm-up: regression", "bisected to 1234567abc")  # build the pipeline
    passed = sum(1 for s, b in mix if extractors.prefilter(s, b))
    size = sum(len(b) for _, b in mix) / len(mix)
    rates = []
    for _ in range(a.runs):
        pipeline.get_nlp.cache_clear()  # a cold vocabulary: every run meets its strings for the first time,
        extractors.extract("warm-up: regression", "bisected to 1234567abc")  # as unseen mail does
        t0 = time.perf_counter()
        for s, b in mix:
            extractors.extract(s, b)
        rates.append(len(mix) / (time.perf_counter() - t0))
    print(f"real messages: {len(mix)}  mean body: {size:.0f} chars  passing the prefilter: {passed} "
          f"({100 * passed / len(mix):.0f}%)")
    print(f"runs: {', '.join(f'{r:.0f}' for r in rates)} msg/s")
    print(f"median: {statistics.median(rates):.0f} messages/second")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
