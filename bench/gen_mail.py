"""Generate realistic kernel-list traffic for benchmarks: patch series, reviews quoting the
patch, regression reports with numbers, robot reports, replies in threads.  Deterministic for
a given seed, so runs are comparable."""

from __future__ import annotations

import random
from email.utils import format_datetime
from datetime import datetime, timedelta, timezone

SUBSYS = ["mm", "xfs", "ext4", "btrfs", "sched/fair", "net", "block", "drm/i915", "nvme", "x86/mm"]
PATHS = {"mm": "mm/page_alloc.c", "xfs": "fs/xfs/xfs_iomap.c", "ext4": "fs/ext4/inode.c",
         "btrfs": "fs/btrfs/extent_io.c", "sched/fair": "kernel/sched/fair.c", "net": "net/core/dev.c",
         "block": "block/blk-mq.c", "drm/i915": "drivers/gpu/drm/i915/i915_gem.c",
         "nvme": "drivers/nvme/host/core.c", "x86/mm": "arch/x86/mm/init.c"}
NAMES = ["Alice Reporter", "Bob Maintainer", "Carol Dev", "Dave Reviewer", "Erin Tester",
         "kernel test robot", "Frank Hacker", "Grace Perf"]
WORDS = ("the a of to and in is for that with on this we it be as are by not can when from page "
         "folio lock memory write read cache inode buffer queue request device driver return error "
         "value pointer struct function call path patch series change commit regression test").split()


def _sentence(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def _para(rng: random.Random, lines: int = 4) -> str:
    text = " ".join(_sentence(rng, rng.randint(8, 16)) for _ in range(lines))
    out, line = [], ""
    for w in text.split():
        if len(line) + len(w) + 1 > 72:
            out.append(line)
            line = w
        else:
            line = f"{line} {w}" if line else w
    out.append(line)
    return "\n".join(out)


def _diff(rng: random.Random, path: str) -> str:
    hunks = []
    for _ in range(rng.randint(1, 6)):
        start = rng.randint(10, 4000)
        body = []
        for _ in range(rng.randint(8, 60)):
            kind = rng.choice(" +- ")
            body.append(f"{kind}\t{rng.choice(WORDS)}_{rng.choice(WORDS)}({rng.choice(WORDS)}, {rng.randint(0, 99)});")
        hunks.append(f"@@ -{start},{len(body)} +{start},{len(body)} @@ static int {rng.choice(WORDS)}_{rng.choice(WORDS)}(void)\n"
                     + "\n".join(body))
    return (f"diff --git a/{path} b/{path}\nindex {rng.getrandbits(28):07x}..{rng.getrandbits(28):07x} 100644\n"
            f"--- a/{path}\n+++ b/{path}\n" + "\n".join(hunks) + "\n")


def _quote(text: str, depth: int = 1) -> str:
    return "\n".join((">" * depth + " " + line).rstrip() for line in text.splitlines()[:120])


def _headers(mid: str, frm: str, subject: str, date: datetime, refs: list[str]) -> str:
    email = frm.lower().replace(" ", ".") + "@example.org"
    h = [f"From: {frm} <{email}>", "To: linux-kernel@vger.kernel.org", f"Subject: {subject}",
         f"Date: {format_datetime(date)}", f"Message-ID: <{mid}>", "MIME-Version: 1.0",
         "Content-Type: text/plain; charset=utf-8", "Content-Transfer-Encoding: 8bit"]
    if refs:
        h.append(f"In-Reply-To: <{refs[-1]}>")
        h.append("References: " + "\n ".join(f"<{r}>" for r in refs[-8:]))
    return "\n".join(h) + "\n\n"


def generate(n: int, seed: int = 1) -> list[bytes]:
    """n messages, in arrival order, grouped in threads of 1..12 messages."""
    rng = random.Random(seed)
    t = datetime(2025, 1, 6, 8, 0, tzinfo=timezone.utc)
    out: list[bytes] = []
    tid = 0
    while len(out) < n:
        tid += 1
        sub = rng.choice(SUBSYS)
        kind = rng.choices(["patch", "report", "robot", "discussion"], [60, 10, 10, 20])[0]
        if kind == "patch":
            subject = f"[PATCH v{rng.randint(1, 5)} {rng.randint(1, 9)}/{rng.randint(9, 12)}] {sub}: {_sentence(rng, 6)[:-1].lower()}"
            body = (_para(rng, rng.randint(2, 6)) + "\n\nSigned-off-by: Carol Dev <carol.dev@example.org>\n---\n"
                    + _diff(rng, PATHS[sub]) + "--\n2.43.0\n")
        elif kind == "report":
            good, bad = rng.randint(1, 8), rng.randint(9, 14)
            a = rng.uniform(100, 900)
            b = a * rng.uniform(0.7, 0.97)
            subject = f"[REGRESSION] {sub}: {rng.choice(['dd', 'fio', 'sysbench'])} throughput drop since v6.{bad}"
            body = (f"Hi,\n\nAfter upgrading from v6.{good} to v6.{bad} write throughput dropped from "
                    f"{a:.1f} MB/s to {b:.1f} MB/s on ext4.\n\n" + _para(rng, 4)
                    + f"\n\nI bisected it to commit {rng.getrandbits(48):012x} (\"{sub}: {_sentence(rng, 5)[:-1].lower()}\").\n"
                    + "\nCPU: Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz, 64G memory, NVMe SSD\n")
        elif kind == "robot":
            pct = rng.uniform(-30, 30)
            word = "regression" if pct < 0 else "improvement"
            subject = f"[{sub.split('/')[0]}] {rng.getrandbits(40):010x}: will-it-scale.per_process_ops {pct:+.1f}% {word}"
            body = ("Hello,\n\nkernel test robot noticed a " + f"{pct:+.1f}% {word} of will-it-scale.per_process_ops on:\n\n"
                    + f"commit: {rng.getrandbits(160):040x} (\"{sub}: {_sentence(rng, 5)[:-1].lower()}\")\n"
                    + "\n".join(f"{rng.uniform(1e3, 1e6):12.0f} {rng.uniform(-40, 40):+8.1f}% {rng.uniform(1e3, 1e6):12.0f}  will-it-scale.metric{i}" for i in range(30))
                    + "\n")
        else:
            subject = f"{sub}: {_sentence(rng, 7)[:-1].lower()}?"
            body = _para(rng, rng.randint(3, 10)) + "\n"
        root = f"{tid}.{rng.getrandbits(32):08x}@example.org"
        t += timedelta(minutes=rng.randint(1, 20))
        out.append((_headers(root, rng.choice(NAMES), subject, t, []) + body).encode())
        chain = [root]
        prev_body = body
        for r in range(rng.choice([0, 0, 1, 2, 3, 5, 11])):
            if len(out) >= n:
                break
            mid = f"{tid}.{r}.{rng.getrandbits(32):08x}@example.org"
            parent_idx = rng.randrange(len(chain))
            refs = chain[: parent_idx + 1]
            t += timedelta(minutes=rng.randint(1, 90))
            reply = ("On Mon, someone wrote:\n" + _quote(prev_body) + "\n\n" + _para(rng, rng.randint(1, 4))
                     + "\n\nReviewed-by: Dave Reviewer <dave.reviewer@example.org>\n")
            out.append((_headers(mid, rng.choice(NAMES), "Re: " + subject, t, refs) + reply).encode())
            chain.append(mid)
            prev_body = reply
    return out[:n]
