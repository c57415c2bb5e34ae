"""Extraction throughput (messages/second, one process) on real kernel-list mail.

The mix is every message of the labelled corpus (bench/corpus: train, dev and test: real
reports, follow-ups, robot mails, patches, pulls, reviews), most of which pass the
prefilter, plus the bundled real threads (tests/data/threads).  The pipeline is built before
the clock starts (a long-running ingest pays that once); each run extracts every message
once.  Prints every run and the median.

    .venv/bin/python bench/extract_speed.py [--runs 5]
"""

from __future__ import annotations

import argparse
import mailbox
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._corpus import load_split, parse  # noqa: E402
import extractors  # noqa: E402


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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args(argv)
    mix = real_mix()
    extractors.extract("warm-up: regression", "bisected to 1234567abc")  # build the pipeline
    passed = sum(1 for s, b in mix if extractors.prefilter(s, b))
    size = sum(len(b) for _, b in mix) / len(mix)
    rates = []
    for _ in range(a.runs):
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
