#!/usr/bin/env python3
"""Verdicts of real reruns on the QEMU backend: an A/B pair of two real kernels with a known
slowdown, and A/A pairs (the same kernel on both sides) that must never be "confirmed".

Everything is the real pipeline: a regression record in a SQLite database, ``schedule_rerun``
(plan, match), the scheduler (``Scheduler.run``: submit, poll, collect, ``bot.lab.stats.decide``
at every look, extend, verdict), the QEMU backend booting real Debian kernel builds under TCG
with the busybox initramfs running the dd recipe.  The machine is emulated, so with the default
``[lab]`` the noise gate never lets it say "not-reproduced": the possible verdicts are
confirmed, improved and inconclusive.

* **A/B**: good = the generic build, bad = the PREEMPT_RT build of the same Debian ABI
  (6.1.0-N): under TCG the RT build's dd of 512-byte blocks (two syscalls per block) has lower
  throughput (measured here on a quiet host: medians ~62 vs ~44 MB/s, about -29%; the RT
  build's samples are also bimodal), a real kernel difference; the record claims -30%, the
  expected verdict is "confirmed".
* **A/A**: the generic build's vmlinuz copied to two paths, good = one copy, bad = the other
  (two builds for the planner, byte-identical kernels); ``--aa`` reruns, each a fresh record
  claiming a 10% throughput drop.  Target: none "confirmed" (nor "improved").

    .venv/bin/python bench/qemu_verdicts.py [--aa 10] [--ab 1] [--load PROCS] [--json] [--cache DIR]

``--load 1``: one busy process switched on and off at random (10-90 s each) during the reruns,
so the host's speed changes in the middle of a rerun (as when CI or other lab jobs share it).

Needs qemu-system-x86, busybox-static, cpio and apt (Debian kernels are downloaded once into
the cache, ~70 MB each).  About 1-3 minutes per rerun on a 2-core machine under TCG.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.lab import builds  # noqa: E402

DEFAULT_CACHE = Path.home() / ".cache" / "regtriage-test" / "builds"  # shared with the QEMU tests
DD = "dd if=/dev/zero of=/mnt/scratch/ddtest bs=512 count=100000"


def pick_pair() -> tuple[str, str]:
    """(generic, rt) Debian 6.1 kernel packages of the newest ABI apt offers both of."""
    flavours: dict[int, set[str]] = {}
    for n in builds.available_debian_kernels(r"-unsigned$"):
        m = re.fullmatch(r"linux-image-6\.1\.0-(\d+)-(amd64|rt-amd64)-unsigned", n)
        if m:
            flavours.setdefault(int(m.group(1)), set()).add(m.group(2))
    abis = [abi for abi, f in flavours.items() if f == {"amd64", "rt-amd64"}]
    if not abis:
        raise SystemExit("apt offers no linux-image-6.1.0-N-amd64-unsigned + -rt- pair (apt-get update?)")
    abi = max(abis)
    return f"linux-image-6.1.0-{abi}-amd64-unsigned", f"linux-image-6.1.0-{abi}-rt-amd64-unsigned"


def lab_config(work: Path, cache: Path, build_map: dict[str, str], **lab) -> dict:
    return {"lab": {"runs": 5, "extend_step": 5, "max_runs": 20, "samples_per_batch": 1, "warmup": 1,
                    "timeouts": {"boot_s": 180, "batch_s": 600, "total_s": 1800},
                    "qemu": {"build_cache": str(cache), "accel": "tcg"},
                    "builds": build_map,
                    "machines": [{"name": "qemu-tcg", "arch": "x86_64", "cpu": "QEMU TCG (emulated)", "cores": 1,
                                  "memory": "512M", "storage": ["ram"], "filesystems": ["tmpfs"],
                                  "backend": "qemu", "tags": ["emulated"],
                                  "settings": {"work_dir": str(work / "qemu-lab")}}], **lab}}


def make_record(store, good: str, bad: str, claim: float) -> int:
    from sqlalchemy import insert

    import storage.tracker_schema as ts

    now = datetime.now(timezone.utc)
    with store.engine.begin() as conn:
        return conn.execute(insert(ts.regressions).values(
            title=f"dd throughput {good} -> {bad}", title_source="report", status="triaged", kind="performance",
            good=good, bad=bad, metric="dd.write_MBps", change_percent=claim,
            hardware={"cpu": None, "arch": "x86_64", "memory": None, "storage": None},
            config={"filesystem": None, "benchmark": "dd", "command": DD, "kernel_config": []},
            numbers=[], evidence={}, overrides={}, ignore_activity=False, created_at=now, updated_at=now,
        )).inserted_primary_key[0]


def rerun(store, config: dict, good: str, bad: str, claim: float, timeout: float = 3600) -> dict:
    """One rerun through schedule_rerun and the scheduler; the finished job's figures."""
    from bot.lab.scheduler import Scheduler
    from bot.lab.scheduling import schedule_rerun
    from storage.lab_jobs import get as get_job

    rid = make_record(store, good, bad, claim)
    job = schedule_rerun(store, config, rid)
    if job["state"] != "queued":
        raise SystemExit(f"rerun of #{rid} not queued: {job['state']}: {job.get('message')}")
    t0 = time.monotonic()
    Scheduler(store, config, log=lambda msg: print(f"  {msg}", file=sys.stderr)).run(until_job=job["id"],
                                                                                     timeout=timeout)
    job = get_job(store, job["id"])
    r = job.get("result") or {}
    s = job.get("samples") or {}
    return {"record": rid, "job": job["id"], "state": job["state"], "verdict": job.get("verdict"),
            "message": job.get("message"), "change_percent": r.get("change_percent"), "ci": r.get("ci"),
            "n_good": r.get("n_good"), "n_bad": r.get("n_bad"), "cv_percent": r.get("cv_percent"),
            "median_good": statistics.median(s["good"]) if s.get("good") else None,
            "median_bad": statistics.median(s["bad"]) if s.get("bad") else None,
            "reason": (r.get("reasons") or [None])[0], "seconds": round(time.monotonic() - t0, 1),
            "analysis": r.get("analysis"), "welch_verdict": _welch_verdict(s, job.get("plan") or {}),
            "samples": {"good": s.get("good"), "bad": s.get("bad"), "order": s.get("order")}}


def _welch_verdict(s: dict, plan: dict) -> str | None:
    """What the two-sample analysis would have said at the look where the paired one stopped
    (the same samples; for comparison only)."""
    from bot.lab.stats import Design, decide

    if not s.get("good") or not s.get("bad"):
        return None
    design = Design.from_settings({**plan, "analysis": "welch"})
    return decide(s["good"], s["bad"], design, higher_is_better=bool(s.get("higher_is_better", True)),
                  claimed_change_percent=plan.get("claimed_change_percent"), emulated=True).verdict


def aa_images(cache: Path, generic: str, work: Path) -> tuple[str, str]:
    """The generic build's vmlinuz copied to two paths: two builds, the same kernel."""
    image = builds.debian_kernel(generic, cache).kernel
    out = []
    for side in ("a", "b"):
        d = work / "aa" / side
        d.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(image, d / "vmlinuz")
        out.append(str(d / "vmlinuz"))
    return out[0], out[1]


def _burn(stop_at: float) -> None:  # one busy CPU until stop_at (a child process)
    while time.time() < stop_at:
        pass


class SwitchingLoad:
    """Other jobs coming and going on the host during the reruns: ``procs`` busy processes,
    switched on and off at seeded random intervals (busy 10-90 s, idle 10-90 s), so the speed
    of the machine changes in the middle of a rerun, as when other lab or CI jobs share it."""

    def __init__(self, procs: int, seed: int = 0):
        import multiprocessing
        import random
        import threading

        self.procs, self.rng, self.mp = procs, random.Random(seed), multiprocessing.get_context("spawn")
        self.stop = threading.Event()
        self.switches = 0
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stop.is_set():
            busy = self.rng.uniform(10, 90)
            workers = [self.mp.Process(target=_burn, args=(time.time() + busy,)) for _ in range(self.procs)]
            for w in workers:
                w.start()
            self.switches += 1
            for w in workers:
                while w.is_alive() and not self.stop.is_set():
                    w.join(0.5)
                if w.is_alive():
                    w.terminate()
            self.stop.wait(self.rng.uniform(10, 90))

    def __enter__(self):
        if self.procs:
            self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        if self.procs:
            self.thread.join()


def run(aa: int, ab: int, cache: Path, work: Path, log=print, load_procs: int = 0) -> dict:
    from storage.store import Store

    generic, rt = pick_pair()
    for pkg in (generic, rt):
        builds.debian_kernel(pkg, cache)
    a, b = aa_images(cache, generic, work)
    gv, rv = generic.removeprefix("linux-image-").removesuffix("-unsigned"), rt.removeprefix(
        "linux-image-").removesuffix("-unsigned")
    build_map = {rv: f"debian:{rt}", gv: f"debian:{generic}", "aa-good": f"image:{a}", "aa-bad": f"image:{b}"}
    config = lab_config(work, cache, build_map)
    store = Store(f"sqlite:///{work / 'bench.db'}")
    out = {"kernels": {"generic": generic, "rt": rt}, "ab": [], "aa": [], "load_procs": load_procs}
    load = SwitchingLoad(load_procs)
    try:
        with load:
            for i in range(ab):
                r = rerun(store, config, gv, rv, -30.0)
                log(f"A/B {i + 1}/{ab} (good {gv}, bad {rv}): {_line(r)}")
                out["ab"].append(r)
            for i in range(aa):
                r = rerun(store, config, "aa-good", "aa-bad", -10.0)
                log(f"A/A {i + 1}/{aa} ({gv} twice): {_line(r)}")
                out["aa"].append(r)
    finally:
        store.close()
        out["load_switches"] = load.switches
    out["counts"] = {k: _counts(out[k]) for k in ("ab", "aa")}
    return out


def _counts(rows: list[dict]) -> dict:
    c: dict[str, int] = {}
    for r in rows:
        c[r["verdict"] or r["state"]] = c.get(r["verdict"] or r["state"], 0) + 1
    return c


def _line(r: dict) -> str:
    if r["verdict"] is None:
        return f"{r['state']}: {r['message']}"
    ci = r["ci"] or [float("nan")] * 2
    return (f"{r['verdict']}: {r['change_percent']:+.2f}% (99% CI {ci[0]:+.2f}..{ci[1]:+.2f}), "
            f"n={r['n_good']}+{r['n_bad']}, medians {r['median_good']:.4g} -> {r['median_bad']:.4g} MB/s, "
            f"CV {r['cv_percent']:.1f}%, {r['seconds']:.0f} s, {r.get('analysis')} analysis "
            f"(Welch on the same samples: {r.get('welch_verdict')}); {r['reason']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--aa", type=int, default=10, help="A/A reruns (same kernel twice)")
    ap.add_argument("--ab", type=int, default=1, help="A/B reruns (generic good, rt bad)")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="Debian kernel build cache")
    ap.add_argument("--load", type=int, default=0, metavar="PROCS",
                    help="busy processes switched on and off at random during the reruns (a shared host)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="regtriage-qemu-bench-") as tmp:
        out = run(args.aa, args.ab, args.cache, Path(tmp), log=lambda s: print(s, file=sys.stderr, flush=True),
                  load_procs=args.load)
    if args.json:
        print(json.dumps(out, indent=2, default=str))
        return
    print(f"kernels: {out['kernels']['generic']} (good) vs {out['kernels']['rt']} (bad); A/A: "
          f"{out['kernels']['generic']} twice")
    for k, label in (("ab", "A/B (known slowdown)"), ("aa", "A/A (same kernel)")):
        print(f"{label}: {len(out[k])} reruns: " + ", ".join(f"{v} {n}" for v, n in sorted(out["counts"][k].items())))
        for r in out[k]:
            print(f"  {_line(r)}")
    print("targets: A/B confirmed; A/A never confirmed (nor improved)")


if __name__ == "__main__":
    main()
