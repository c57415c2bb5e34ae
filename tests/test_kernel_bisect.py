"""Real kernels, end to end: Debian's linux-source-6.1 committed into a git tree with a small
series on top (tests/linux_tree.py: one commit does not build, one makes write(2) to /dev/null
spin), built with the real TuxMake + gcc (tinyconfig + the QEMU guest's fragment, ccache under
the test cache), booted under QEMU with the busybox initramfs, measured with the project's
``syscall-getpid`` recipe (``dd if=/dev/zero of=/dev/null bs=1``: read + write syscalls).

* the build cache: image, config, metadata.json and build log kept; a second request is a cache
  hit; the broken commit fails with its log tail, and the failure is cached;
* a rerun of culprit^ vs culprit from the tree, through the scheduler and the qemu backend,
  confirms the slowdown;
* a bisection of v6.1-base..test-c8 (8 commits) meets the broken commit (a ``skip``), finds the
  slow commit, and survives a worker that dies in the middle: the next worker continues without
  redoing a finished step.

The timings (cold/warm first build, incremental build, bisection) are printed and written to
``<test cache>/kernel-timings.json``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.linux_tree import CACHE, TARBALL, commits, fragment_file, linux_tree
from tests.test_qemu_backend import lab_tools  # noqa: F401 - fixture

pytestmark = pytest.mark.slow
TIMINGS = CACHE / "kernel-timings.json"


def _timing(key: str, seconds: float) -> None:
    data = {}
    try:
        data = json.loads(TIMINGS.read_text())
    except (OSError, ValueError):
        pass
    data[key] = round(seconds, 1)
    TIMINGS.parent.mkdir(parents=True, exist_ok=True)
    TIMINGS.write_text(json.dumps(data, indent=1, sort_keys=True))
    print(f"\n[timing] {key}: {seconds:.1f}s")


@pytest.fixture(scope="session")
def linux():
    if not TARBALL.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{TARBALL} missing: apt-get install linux-source-6.1 (tests/system-packages.txt)")
        pytest.skip(f"{TARBALL} missing (apt-get install linux-source-6.1)")
    t0 = time.monotonic()
    tree = linux_tree()
    took = time.monotonic() - t0
    if took > 5:
        _timing("tree_prepare_s", took)
    return {"tree": str(tree), **commits(tree)}


def build_options() -> dict:
    return {"cache_dir": str(CACHE / "kernel-builds"), "ccache_dir": str(CACHE / "ccache"), "jobs": os.cpu_count() or 2,
            "timeout_s": 3600, "max_cache_mib": 4096}


def config(linux, tmp_path: Path, **lab) -> dict:
    return {"lab": {
        "runs": 5, "samples_per_batch": 1, "warmup": 1, "max_runs": 10, "extend_step": 5, "alpha": 0.01,
        "lease_s": 30, "poll_interval_s": 1, "daily_budget_minutes": 0,
        "timeouts": {"boot_s": 120, "batch_s": 300, "total_s": 3600},
        "qemu": {"accel": "tcg", "work_dir": str(tmp_path / "qemu-lab")},
        "builds": {"trees": [linux["tree"]], "base_config": "tinyconfig", "fragments": [str(fragment_file())],
                   **build_options()},
        "bisect": {"max_steps": 8, "max_lab_minutes": 120},
        "machines": [{"name": "qemu-tcg", "arch": "x86_64", "cpu": "QEMU TCG (emulated)", "cores": 1,
                      "memory": "512M", "storage": ["ram"], "filesystems": ["tmpfs"], "backend": "qemu",
                      "tags": ["emulated", "ci"]}],
        **lab}}


@pytest.fixture
def store(tmp_path):
    from storage.store import Store

    s = Store(f"sqlite:///{tmp_path / 'regtriage.sqlite3'}")
    yield s
    s.close()


def syscall_record(store, **kw) -> int:
    from tests.test_lab_matching import make_record

    return make_record(store, **{"title": "getpid/syscall throughput regression", "kind": "performance",
                                 "hardware": {"cpu": None, "arch": "x86_64", "memory": None, "storage": None},
                                 "config": {"filesystem": None, "benchmark": "perf bench syscall",
                                            "command": "perf bench syscall basic --loop 50000",
                                            "kernel_config": []}, **kw})


def spec_for(linux, label: str):
    from bot.lab.builds import BuildSpec

    return BuildSpec(tree=linux["tree"], ref=linux[label], kconfig="tinyconfig", fragments=[str(fragment_file())])


# ---------------------------------------------------------------------------------- builds
def test_tuxmake_builds_are_kept_cached_and_failures_remembered(linux):
    from bot.lab.kbuild import BuildFailed, cached_result, tree_kernel

    opts = build_options()
    t0 = time.time()
    rb = tree_kernel(spec_for(linux, "base"), opts=opts)
    entry = Path(rb.info["entry"])
    if rb.info["built_at"] >= t0:  # built now, not a cache hit: TuxMake's time (without the checkout)
        _timing("first_build_s", rb.info["duration_s"])
    assert rb.version == linux["base"] and Path(rb.kernel).name == "bzImage" and Path(rb.kernel).stat().st_size > 1e5
    config_text = (entry / "config").read_text()
    for opt in ("CONFIG_64BIT=y", "CONFIG_SERIAL_8250_CONSOLE=y", "CONFIG_BLK_DEV_INITRD=y", "CONFIG_DEVTMPFS=y"):
        assert opt in config_text.splitlines(), opt
    meta = json.loads((entry / "metadata.json").read_text())
    assert meta["build"]["kconfig"] == "tinyconfig" and meta["results"]["status"] == "PASS"
    assert (entry / "build.log").stat().st_size > 0
    assert cached_result(entry)["status"] == "ok"
    t0 = time.monotonic()
    again = tree_kernel(spec_for(linux, "base"), opts=opts)
    assert again.kernel == rb.kernel and time.monotonic() - t0 < 10  # the cache, not a build
    # one commit on top: the object directory is reused (an incremental build)
    t0 = time.time()
    c1 = tree_kernel(spec_for(linux, "c1"), opts=opts)
    if c1.info["built_at"] >= t0:
        _timing("incremental_build_s", c1.info["duration_s"])
    assert c1.kernel != rb.kernel and c1.version == linux["c1"]
    # the broken commit: a failure with the compiler's error, remembered
    with pytest.raises(BuildFailed) as exc:
        tree_kernel(spec_for(linux, "broken"), opts=opts)
    assert "this commit does not build" in exc.value.tail and "failed" in str(exc.value)
    t0 = time.monotonic()
    with pytest.raises(BuildFailed) as again_exc:
        tree_kernel(spec_for(linux, "broken"), opts=opts)
    assert str(again_exc.value) == str(exc.value) and time.monotonic() - t0 < 10


# ---------------------------------------------------------------------------------- rerun
def test_rerun_of_culprit_vs_parent_confirms_the_slowdown(linux, store, tmp_path, lab_tools):  # noqa: F811
    from bot.lab.scheduler import Scheduler
    from bot.lab.scheduling import schedule_rerun
    from storage.lab_jobs import get as get_job
    from bot.tracker.records import get_record

    cfg = config(linux, tmp_path)
    rid = syscall_record(store, culprit_commit=linux["slow"][:12])
    t0 = time.monotonic()
    job = schedule_rerun(store, cfg, rid)
    assert job["state"] == "queued", job["message"]
    assert job["plan"]["refs"] == {"good": f"{linux['slow'][:12]}^", "bad": linux["slow"][:12]}
    assert job["spec"]["builds"]["good"]["ref"] == linux["c5"] and job["spec"]["builds"]["bad"]["ref"] == linux["slow"]
    assert job["spec"]["recipe"]["name"] == "syscall-getpid"
    job = Scheduler(store, cfg, sleep=time.sleep).run(until_job=job["id"], timeout=3000, interval=2)
    job = get_job(store, job["id"])
    _timing("rerun_culprit_vs_parent_s", time.monotonic() - t0)
    assert job["state"] == "done", job["message"]
    r = job["result"]
    print(f"\nrerun: {r['verdict']} {r['change_percent']:+.1f}% good {job['samples']['good']} "
          f"bad {job['samples']['bad']}")
    assert job["verdict"] == "confirmed" and r["change_percent"] < -10
    assert get_record(store, rid)["status"] == "confirmed"


# ---------------------------------------------------------------------------------- bisection
def test_bisection_skips_the_broken_commit_finds_the_slow_one_and_resumes(linux, store, tmp_path,
                                                                          lab_tools):  # noqa: F811
    import storage.bisections as bdb
    from bot.lab import bisect_driver as drv
    from bot.tracker.records import get_record

    cfg = config(linux, tmp_path)
    rid = syscall_record(store, good="v6.1-base", bad="test-c8")
    t0 = time.monotonic()
    b = drv.start(store, cfg, rid)
    assert b.state == "queued" and len(b.bisect["commits"]) == 8 and b.machine == "qemu-tcg"
    with pytest.raises(drv.BisectionError, match="already has bisection"):
        drv.start(store, cfg, rid)
    # worker 1 measures the ends, does two steps and submits the third step's run, then "dies"
    # (it never releases its lease, and never polls that run)
    w1 = drv.Driver(store, cfg, owner="worker-1", lease_s=2, log=print)

    def w1_done():
        steps = bdb.get(store, b.id).steps
        return len([s for s in steps if s.verdict]) >= 3 and any(s.n == 3 and s.handle for s in steps)

    while not w1_done():
        if w1.advance(b.id) in ("waiting", "final"):
            assert bdb.get(store, b.id).active, bdb.get(store, b.id).message
            time.sleep(2)
    steps = bdb.get(store, b.id).steps
    before = {s.n: (s.commit, s.verdict, s.finished_at) for s in steps if s.verdict}
    in_flight = next(s for s in steps if s.n == 3)
    assert in_flight.verdict is None and in_flight.state == "running"
    assert before[0][1] == "bad"  # the ends differ
    assert before[1] == (linux["broken"], "skip", before[1][2])  # the middle of 8 does not build: skipped
    time.sleep(3)  # worker 1's lease runs out
    w2 = drv.Driver(store, cfg, owner="worker-2", lease_s=30, log=print)
    b = w2.run(b.id, interval=2, timeout=3000)
    _timing("bisection_s", time.monotonic() - t0)
    assert b.state == "done", b.message
    assert b.result["kind"] == "done" and b.result["culprit"] == linux["slow"], b.result
    steps = {s.n: s for s in b.steps}
    for n, (commit, verdict, finished) in before.items():  # nothing finished was redone
        assert (steps[n].commit, steps[n].verdict, steps[n].finished_at) == (commit, verdict, finished)
    assert len({s.commit for s in b.steps if s.n > 0}) == len([s for s in b.steps if s.n > 0])
    # the run worker 1 submitted was polled by worker 2, not submitted again
    assert steps[3].id == in_flight.id and steps[3].samples["attempts"] == 1
    assert len(steps[3].samples["step"]) >= 5
    assert "does not build" in steps[1].judgement["reason"]
    log = b.result["log"]
    print("\n" + log)
    assert f"git bisect skip {linux['broken']}" in log
    assert f"# first bad commit: [{linux['slow']}] char/mem: spin in write_null()" in log
    assert f"git bisect bad {linux['slow']}" in log and "% vs good" in log
    rec = get_record(store, rid)
    assert rec["culprit_commit"] == linux["slow"] and rec["culprit_subject"] == "char/mem: spin in write_null()"
    assert rec["evidence"]["bisection"]["log"] == log
    h = [x for x in rec["history"] if x["field"] in ("culprit_commit", "bisection")]
    assert {x["source"] for x in h} == {"lab-bisect"} and h[-1]["new"] == "found"
    text = drv.report_text(b)
    assert "first bad commit" in text and linux["slow"][:12] in text
    # show / the reply draft / chat render the tracker entry: the bisection and its log are in it
    from bot.tracker.entry import entry, render

    e = entry(store, rid)
    assert e["bisections"][0]["state"] == "done" and e["bisections"][0]["result"]["culprit"] == linux["slow"]
    shown = render(e, "txt")
    assert f"first bad commit {linux['slow'][:12]}" in shown and "git bisect skip" in shown
