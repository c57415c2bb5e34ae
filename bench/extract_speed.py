"""Extraction throughput (messages/second) on a realistic list mix.

Mix: mostly synthetic patches and review replies (what the prefilter should drop quickly),
some synthetic regression-report-like mails and robot reports, plus the labelled corpus.
Prints the median of several runs.  Usage: .venv/bin/python bench/extract_speed.py [--runs N]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._corpus import load_corpus  # noqa: E402
import extractors  # noqa: E402

WORDS = ("the of to and a in is that for it with as was on be by this are page lock cpu memory "
         "buffer queue device driver return value pointer struct list entry update check error").split()


def prose(rng: random.Random, n: int) -> str:
    lines, line = [], []
    for i in range(n):
        line.append(rng.choice(WORDS))
        if len(" ".join(line)) > 68:
            lines.append(" ".join(line))
            line = []
        if rng.random() < 0.04:
            lines[-1:] = [(lines[-1] if lines else "") + "."]
    lines.append(" ".join(line) + ".")
    return "\n".join(lines)


def diff(rng: random.Random, hunks: int) -> str:
    out = ["diff --git a/mm/foo.c b/mm/foo.c", "index 1b1553c1156c..4d4079309760 100644",
           "--- a/mm/foo.c", "+++ b/mm/foo.c"]
    for h in range(hunks):
        out.append(f"@@ -{100 + h * 40},7 +{100 + h * 40},8 @@ static int foo_{h}(struct page *page)")
        for _ in range(rng.randint(6, 20)):
            op = rng.choice([" ", " ", " ", "+", "-"])
            out.append(op + "\t" + " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 8))) + ";")
    return "\n".join(out)


def patch(rng: random.Random, i: int) -> tuple[str, str]:
    subj = f"[PATCH v{rng.randint(1, 5)} {i % 7 + 1}/7] mm: {' '.join(rng.choice(WORDS) for _ in range(5))}"
    body = prose(rng, rng.randint(60, 200)) + "\n\nSigned-off-by: A Developer <dev@example.org>\n---\n" \
        + " mm/foo.c | 12 ++++++++----\n 1 file changed\n\n" + diff(rng, rng.randint(1, 6)) + "\n--\n2.43.0\n"
    return subj, body


def review(rng: random.Random, i: int) -> tuple[str, str]:
    subj, body = patch(rng, i)
    quoted = "\n".join("> " + ln for ln in body.splitlines()[:rng.randint(20, 80)])
    return "Re: " + subj, f"On Mon, Jan 1, 2024 at 10:00 AM A Developer wrote:\n{quoted}\n\n" + prose(rng, 80) + \
        "\n\nReviewed-by: B Reviewer <rev@example.org>\n"


def report(rng: random.Random, i: int) -> tuple[str, str]:
    a, b = rng.randint(1, 9), rng.randint(10, 19)
    h = "".join(rng.choice("0123456789abcdef") for _ in range(12))
    subj = f"[REGRESSION] 6.{b}: boot hangs on my laptop"
    body = (f"Hi,\n\nSince upgrading from 6.{a} to 6.{b} my machine fails to boot.\n" + prose(rng, 120) +
            f"\n\nI bisected it to commit {h} (\"mm: {rng.choice(WORDS)} {rng.choice(WORDS)}\").\n"
            f"Reverting it on top of 6.{b} fixes the problem.\n\n#regzbot introduced: {h}\n")
    return subj, body


def robot(rng: random.Random, i: int) -> tuple[str, str]:
    h = "".join(rng.choice("0123456789abcdef") for _ in range(10))
    pct = round(rng.uniform(-40, 40), 1)
    word = "regression" if pct < 0 else "improvement"
    subj = f"[linux-next:master] [mm] {h}: will-it-scale.per_thread_ops {pct:+.1f}% {word}"
    body = (f"Hello,\n\nkernel test robot noticed a {pct:+.1f}% {word} of will-it-scale.per_thread_ops on:\n\n"
            f"commit: {h}abcdef1234567890abcdef12345678 (\"mm: speed up things\")\n\n"
            "testcase: will-it-scale\ntest machine: 104 threads 2 sockets (Skylake) with 192G memory\n\n" +
            "\n".join(f"  {rng.uniform(1, 1e6):12.2f}  {rng.uniform(-30, 30):+6.1f}%  {rng.uniform(1, 1e6):12.2f}"
                      f"  will-it-scale.metric_{k}" for k in range(60)))
    return subj, body


def build_mix(seed: int = 1, n: int = 1000) -> list[tuple[str | None, str]]:
    rng = random.Random(seed)
    gens = [(patch, 0.55), (review, 0.30), (report, 0.05), (robot, 0.05)]
    corpus = [(m.subject, m.body) for m in load_corpus()]
    mix: list[tuple[str | None, str]] = []
    n_synth = n - len(corpus)
    for i in range(n_synth):
        r = rng.random() * 0.95
        acc = 0.0
        for g, w in gens:
            acc += w
            if r <= acc:
                mix.append(g(rng, i))
                break
        else:
            mix.append(review(rng, i))
    mix.extend(corpus)
    rng.shuffle(mix)
    return mix


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("-n", type=int, default=1000)
    a = ap.parse_args(argv)
    mix = build_mix(n=a.n)
    extractors.get_nlp()  # build the pipeline outside the timing
    passed = sum(1 for s, b in mix if extractors.prefilter(s, b))
    size = sum(len(b) for _, b in mix) / len(mix)
    rates = []
    for _ in range(a.runs):
        t0 = time.perf_counter()
        for s, b in mix:
            extractors.extract(s, b)
        rates.append(len(mix) / (time.perf_counter() - t0))
    print(f"messages: {len(mix)}  mean size: {size:.0f} chars  passing prefilter: {passed}")
    print(f"runs: {', '.join(f'{r:.0f}' for r in rates)} msg/s")
    print(f"median: {statistics.median(rates):.0f} messages/second")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
