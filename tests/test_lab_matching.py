"""Lab inventory, matching and rerun plans (bot.lab.inventory, bot.lab.matching, bot.lab.plan):
machine declarations, scores and reasons, misfits excluded, no-match recorded on the record
and the job declined, build mapping from [lab.builds], hostile report text declined or
clamped and never executed."""

from __future__ import annotations

import subprocess
from datetime import datetime, timezone

import pytest
from sqlalchemy import insert

import storage.tracker_schema as ts
from bot.lab.inventory import (InventoryError, load_machines, normalize_arch, parse_cores, parse_cpu, parse_memory,
                               storage_type)
from bot.lab.matching import Requirements, match, requirements_from_record
from bot.lab.plan import BuildMap, PlanError, make_plan

GIB = 1 << 30


def machine(name, **kw):
    d = {"name": name, "arch": "x86_64", "backend": "qemu", "settings": {"work_dir": "/tmp/regtriage-test-unused"}}
    d.update(kw)
    return d


XEON = machine("xeon-6238m", cpu="Intel(R) Xeon(R) Gold 6238M CPU @ 2.10GHz (Cascade Lake)", cores=88,
               memory="128G", storage=[{"type": "nvme", "model": "Samsung PM9A3"}], filesystems=["ext4", "xfs"])
XEON_OTHER = machine("xeon-8380", cpu="Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz", cores=80, memory="256G",
                     storage=["ssd"], filesystems=["ext4", "xfs", "btrfs"])
EPYC = machine("epyc-7763", cpu="AMD EPYC 7763 64-Core Processor", cores=128, memory="512G", storage=["nvme"],
               filesystems=["ext4", "xfs"])
SMALL = machine("small-xeon", cpu="Intel(R) Xeon(R) Gold 6238M CPU @ 2.10GHz", cores=8, memory="16G",
                storage=["hdd"], filesystems=["ext4"])
ARM = machine("altra", arch="aarch64", cpu="Ampere Altra Q80-30", cores=80, memory="256G", storage=["nvme"],
              filesystems=["ext4", "xfs"])


def cfg(*machines, **lab):
    return {"lab": {"machines": list(machines), **lab}}


LKP_RECORD = {
    "id": 1, "status": "triaged",
    "hardware": {"cpu": "Intel(R) Xeon(R) Gold 6238M CPU @ 2.10GHz", "arch": "x86_64", "memory": "128G memory",
                 "storage": "NVMe SSD"},
    "config": {"filesystem": "xfs", "benchmark": "fio", "command": None, "kernel_config": []},
    "evidence": {"cpu": "test machine: 88 threads 2 sockets Intel(R) Xeon(R) Gold 6238M CPU @ 2.10GHz with 128G"},
}


# ---------------------------------------------------------------------------------- inventory
def test_parsers():
    x = parse_cpu("Intel(R) Xeon(R) Gold 6238M CPU @ 2.10GHz (Cascade Lake)")
    assert (x.vendor, x.family, x.model, x.codename) == ("intel", "xeon", "6238m", "cascade lake")
    e = parse_cpu("AMD EPYC 7763 64-Core Processor")
    assert (e.vendor, e.family, e.model) == ("amd", "epyc", "7763")
    assert parse_cpu("Intel(R) Core(TM) i7-12700K").model == "12700k"
    assert (parse_cpu("Neoverse-N1").vendor, parse_cpu("Neoverse-N1").model) == ("arm", "n1")
    assert parse_cpu("whatever", vendor="Intel", model="X1").model == "x1"
    assert parse_memory("128G memory") == 128 * GIB and parse_memory("196608 kB") == 192 << 20
    assert parse_memory(512) == 512 << 20 and parse_memory("QEMU_MEM_MB=14336") == 14336 << 20
    assert parse_memory("lots") is None and parse_memory("64") is None
    assert [storage_type(s) for s in ("1BRD_48G", "Samsung 980 PRO NVMe SSD", "1HDD", "4SSD", "tmpfs", "eMMC")] == \
        ["ram", "nvme", "hdd", "ssd", "ram", "mmc"]
    assert parse_cores("test machine: 88 threads 2 sockets Intel") == 88 and parse_cores("64-Core Processor") == 64
    assert [normalize_arch(a) for a in ("amd64", "arm64", "x86", "i686", "ppc64el", "vax")] == \
        ["x86_64", "aarch64", "x86", "i386", "ppc64le", None]


def test_machines_are_validated():
    ms = load_machines(cfg(XEON, EPYC, ARM))
    assert [m.name for m in ms] == ["xeon-6238m", "epyc-7763", "altra"]
    x = ms[0]
    assert x.cpu.vendor == "intel" and x.cores == 88 and x.memory == 128 * GIB and x.storage_types == ("nvme",)
    assert ms[2].arch == "aarch64" and ms[2].cpu.vendor == "ampere"
    assert x.to_dict()["memory"] == "128G"
    bc = x.backend_config({"lab": {"max_size": "64M", "qemu": {"smp": 2, "work_dir": "/a"}, "machines": []}})
    assert bc["max_size"] == "64M" and bc["qemu"] == {"smp": 2, "work_dir": "/tmp/regtriage-test-unused"}
    assert "machines" not in bc
    for bad, msg in ((machine("a b"), "name"), (machine("x", arch="x86"), "specific"),
                     (machine("x", arch="vax"), "arch"), (machine("x", backend="rm -rf"), "backend"),
                     (machine("x", cores=0), "cores"), (machine("x", memory="lots"), "memory"),
                     (machine("x", storage=["floppy"]), "storage"), (machine("x", filesystems=["ext4;x"]), "filesystems"),
                     (machine("x", scratch="/tmp/../etc"), "scratch"), (machine("x", shell="sh"), "unknown keys"),
                     (machine("x", tags=["a b"]), "tags"), (machine("x", settings="x"), "settings")):
        with pytest.raises(InventoryError, match=msg):
            load_machines(cfg(bad))
    with pytest.raises(InventoryError, match="twice"):
        load_machines(cfg(XEON, XEON))
    assert load_machines({}) == [] and load_machines({"lab": {}}) == []


# ---------------------------------------------------------------------------------- matching
def scores(res):
    return {c.machine: (c.eligible, c.score) for c in res.candidates}


def reasons(res, name):
    c = next(c for c in res.candidates if c.machine == name)
    return {r["factor"]: r for r in c.reasons}


def test_arch_mismatch_excludes():
    req = requirements_from_record(LKP_RECORD)
    res = match(req, load_machines(cfg(XEON, ARM)), config=cfg(XEON, ARM))
    assert scores(res)["altra"][0] is False
    assert "arch aarch64 is not the report's x86_64" in reasons(res, "altra")["arch"]["text"]
    assert res.best.machine == "xeon-6238m"
    # "x86" in a report accepts x86_64; the builds' arch is a hard requirement too
    res = match(Requirements(arch="x86", build_arch="aarch64"), load_machines(cfg(XEON, ARM)))
    assert scores(res) == {"xeon-6238m": (False, 0), "altra": (False, 0)}
    assert "the builds are aarch64 kernels" in reasons(res, "xeon-6238m")["arch"]["text"]
    res = match(Requirements(build_arch="aarch64"), load_machines(cfg(XEON, ARM)))
    assert res.best.machine == "altra"


def test_cpu_cores_memory_storage_filesystem_affect_the_score():
    c = cfg(XEON, XEON_OTHER, EPYC, SMALL)
    res = match(requirements_from_record(LKP_RECORD), load_machines(c), config=c)
    s = scores(res)
    # same model, 88 threads, 128G, NVMe, xfs: everything matches
    assert s["xeon-6238m"] == (True, 20 + 10 + 15 + 10 + 10 + 15 + 15)
    r = reasons(res, "xeon-6238m")
    assert r["cpu_model"]["points"] == 15 and r["cores"]["text"] == "88 cores >= the report's 88"
    assert r["filesystem"]["text"] == "can test xfs"
    # same vendor and family, other model: lower; SSD counts as flash like NVMe
    r = reasons(res, "xeon-8380")
    assert r["cpu_model"]["points"] == -5 and r["storage"]["points"] == 7
    assert s["xeon-8380"][1] < s["xeon-6238m"][1]
    # another vendor: CPU vendor and family count against it -> below min_score 0: a misfit
    r = reasons(res, "epyc-7763")
    assert r["cpu_vendor"]["points"] == -20 and r["cpu_family"]["points"] == -5
    # the same CPU model with fewer cores, less memory, a disk and no xfs: a misfit
    r = reasons(res, "small-xeon")
    assert r["cores"]["points"] < 0 and r["memory"]["points"] < 0 and r["storage"]["points"] == -15
    assert r["filesystem"]["points"] == -25 and "cannot test xfs" in r["filesystem"]["text"]
    assert s["small-xeon"][0] is False and "below min_score" in reasons(res, "small-xeon")["score"]["text"]
    assert [x.machine for x in res.candidates][:2] == ["xeon-6238m", "xeon-8380"]
    # min_score is configurable: with a low bar the misfits become (low-ranked) candidates
    low = cfg(XEON, XEON_OTHER, EPYC, SMALL, min_score=-100)
    res = match(requirements_from_record(LKP_RECORD), load_machines(low), config=low)
    assert all(c.eligible for c in res.candidates) and res.best.machine == "xeon-6238m"
    # unknown facts count 0, with a reason
    res = match(Requirements(build_arch="x86_64"), load_machines(c), config=c)
    assert all(c.score == 0 and c.eligible for c in res.candidates)
    assert reasons(res, "epyc-7763")["cpu_vendor"]["text"] == "report names no CPU vendor"


def test_disabled_manual_and_named_machines():
    c = cfg(machine("off", enabled=False), machine("lab-manual", tags=["manual"]), machine("plain"))
    res = match(Requirements(build_arch="x86_64"), load_machines(c), config=c)
    assert scores(res) == {"plain": (True, 0), "off": (False, 0), "lab-manual": (False, 0)}
    res = match(Requirements(build_arch="x86_64"), load_machines(c), config=c, machine="lab-manual")
    assert res.best.machine == "lab-manual"
    with pytest.raises(InventoryError, match="no lab machine named"):
        match(Requirements(), load_machines(c), config=c, machine="nope")


def test_backend_that_cannot_run_the_recipe_excludes():
    from bot.lab.recipes import make_recipe

    c = cfg(machine("q"), machine("s", backend="nosuch"))
    res = match(Requirements(build_arch="x86_64"), load_machines(c), config=c, recipe=make_recipe("fio"))
    assert not res.eligible
    assert "busybox" in reasons(res, "q")["backend"]["text"]
    assert "unknown lab backend" in reasons(res, "s")["backend"]["text"]
    assert "no machine fits" in res.why_none()


# ---------------------------------------------------------------------------------- builds
def test_build_map_patterns_and_builds_dir(tmp_path):
    (tmp_path / "v6.9-rc1").mkdir()
    (tmp_path / "v6.9-rc1" / "vmlinuz").write_bytes(b"k")
    bm = BuildMap.from_config({"lab": {"builds": {
        "builds_dir": str(tmp_path),
        "6.1.0-47": "debian:linux-image-6.1.0-47-amd64-unsigned",
        "6.1.0-*-amd64": "debian:linux-image-6.1.0-{1}-amd64-unsigned",
        "6.1.0-*-rt-amd64": "debian:linux-image-6.1.0-{1}-rt-amd64-unsigned",
        "6.1.0-*-arm64": "debian:linux-image-6.1.0-{1}-arm64-unsigned",
        "v6.8**": "image:/srv/kernels/{ref}/bzImage",
    }}})
    spec, how = bm.resolve("6.1.0-47")
    assert spec.debian == "linux-image-6.1.0-47-amd64-unsigned" and "exact" not in how
    assert bm.resolve("6.1.0-56-amd64")[0].debian == "linux-image-6.1.0-56-amd64-unsigned"
    assert bm.resolve("6.1.0-56-rt-amd64")[0].debian == "linux-image-6.1.0-56-rt-amd64-unsigned"
    assert bm.resolve("6.1.0-56-arm64")[0].arch == "aarch64"
    assert bm.resolve("6.8.2")[0].image == "/srv/kernels/v6.8.2/bzImage"  # "v" added to match
    assert bm.resolve("v6.8-rc3")[0].image == "/srv/kernels/v6.8-rc3/bzImage"
    assert bm.resolve("6.9-rc1")[0].image == str(tmp_path / "v6.9-rc1" / "vmlinuz")
    with pytest.raises(PlanError, match="no build"):
        bm.resolve("6.10")
    # text from mail can select a configured build but never name anything else
    for hostile in ("6.1.0-47;reboot", "../../etc/passwd", "$(reboot)", "6.1.0-`id`-amd64", "-oProxyCommand=x",
                    "6.1.0-56 -amd64", "a" * 200, None, 5):
        with pytest.raises(PlanError):
            bm.resolve(hostile)
    # a wildcard capture is still checked against the Debian package name rules
    with pytest.raises(PlanError, match="invalid build"):
        bm.resolve("6.1.0-x.y+z-amd64")
    with pytest.raises(PlanError, match="build spec string"):
        BuildMap.from_config({"lab": {"builds": {"6.1": ["debian:x"]}}})
    with pytest.raises(PlanError, match="made with TuxMake now"):  # the settings of the make driver are gone
        BuildMap.from_config({"lab": {"builds": {"build_command": "make; reboot"}}})


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@example.org", "-c", "user.name=t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def test_plan_culprit_parent_vs_culprit(tmp_path):
    repo = tmp_path / "linux"
    repo.mkdir()
    _git(repo, "init", "-q")
    for i in range(2):
        (repo / "f").write_text(str(i))
        _git(repo, "add", "f")
        _git(repo, "commit", "-q", "-m", f"c{i}")
    head, parent = _git(repo, "rev-parse", "HEAD"), _git(repo, "rev-parse", "HEAD^")
    c = {"lab": {"builds": {"tree": str(repo), "base_config": "tinyconfig"}}}
    rec = {"id": 3, "culprit_commit": head[:12], "config": {"command": "perf bench syscall basic --loop 100000"}}
    plan = make_plan(rec, c)
    assert plan.ok, plan.declined
    assert (plan.good.tree, plan.good.ref, plan.bad.ref) == (str(repo), parent, head)
    assert plan.good.kconfig == "tinyconfig" and plan.bad.kind == "tree"
    assert plan.refs == {"good": f"{head[:12]}^", "bad": head[:12]}
    assert plan.recipe.name == "syscall-getpid" and plan.recipe.params == {"iterations": 100000}
    # an unknown culprit falls back to good/bad versions, and says why
    rec = {"id": 3, "culprit_commit": "deadbeef1234", "good": "v1", "bad": "v2",
           "config": {"benchmark": "getpid"}}
    plan = make_plan(rec, {"lab": {"builds": {"tree": str(repo), "v*": "/k/{ref}"}}})
    assert plan.ok and plan.good.image == "/k/v1"
    assert "culprit deadbeef1234 is in none of the kernel trees" in plan.notes[-1]
    plan = make_plan({"id": 3, "culprit_commit": "deadbeef1234", "config": {"benchmark": "getpid"}}, {})
    assert not plan.ok and "no kernel tree is configured" in plan.declined[0]


# ---------------------------------------------------------------------------------- hostile text
@pytest.fixture
def no_exec(monkeypatch):
    """Anything that would run a program fails the test (git rev-parse excepted: no culprit here)."""
    import os

    def boom(*a, **kw):
        raise AssertionError(f"tried to execute {a[:1]!r}")

    for name in ("Popen", "run", "call", "check_call", "check_output"):
        monkeypatch.setattr(subprocess, name, boom)
    monkeypatch.setattr(os, "system", boom)
    monkeypatch.setattr(os, "popen", boom)


BUILDS = {"good-1": "image:/k/good", "bad-1": "image:/k/bad"}


def test_hostile_commands_are_declined_or_clamped_never_executed(no_exec, tmp_path):
    marker = tmp_path / "pwned"
    c = {"lab": {"builds": dict(BUILDS), "max_size": "256M"}}
    base = {"id": 9, "good": "good-1", "bad": "bad-1"}
    declined = [
        f"dd if=/dev/zero of=/tmp/x bs=1M count=10; touch {marker}",
        f"dd if=/dev/zero of=/tmp/x bs=1M count=$(touch {marker})",
        f"dd if=/dev/zero of=/tmp/x bs=`touch {marker}` count=1",
        f"touch {marker}",
        "dd if=/dev/zero of=/dev/sda bs=3M count=10",  # block size outside the whitelist
        "fio --name=x --rw=randwrite --ioengine=../../../tmp/evil.so --size=1G",
    ]
    for cmd in declined:
        plan = make_plan({**base, "config": {"command": cmd}}, c)
        assert not plan.ok and plan.recipe is None, cmd
        assert plan.declined[0].startswith("workload: declined"), plan.declined
    # an oversized extent is clamped to the lab's cap, with a note; the path from mail is replaced
    plan = make_plan({**base, "config": {"command": "dd if=/dev/zero of=/dev/sda bs=1M count=100000000"}}, c)
    assert plan.ok and plan.recipe.params["count"] == 256
    assert any("clamped" in n or "capped" in n or "256" in n for n in plan.notes), plan.notes
    assert any("/dev/sda" in n and "scratch" in n for n in plan.notes)
    script = plan.recipe.render_guest_script(scratch="/scratch", samples=1, warmup=0)
    assert "/dev/sda" not in script and "count=256" in script
    assert not marker.exists()


def test_plan_declines_without_builds_or_workload():
    plan = make_plan({"id": 1, "good": "v1", "bad": "v2", "config": {}}, {})
    assert not plan.ok
    assert plan.declined[0].startswith("workload:") and "no build for 'v1'" in plan.declined[1]
    plan = make_plan({"id": 1, "bad": "v2", "config": {"benchmark": "getpid"}}, {"lab": {"builds": {"v*": "/k/{ref}"}}})
    assert plan.declined == ["builds: the record has no good version and no culprit"]
    plan = make_plan({"id": 1, "good": "v2", "bad": "v2", "config": {"benchmark": "getpid"}},
                     {"lab": {"builds": {"v*": "/k/{ref}"}}})
    assert "same build" in plan.declined[0]
    with pytest.raises(PlanError, match="runs"):
        make_plan({"id": 1}, {}, runs=1)
    with pytest.raises(PlanError, match="order"):
        make_plan({"id": 1}, {"lab": {"order": "random"}})


# ---------------------------------------------------------------------------------- with a store
def make_record(store, **kw) -> int:
    now = datetime.now(timezone.utc)
    vals = {"title": "dd throughput regression", "title_source": "report", "status": "triaged",
            "hardware": {"cpu": None, "arch": None, "memory": None, "storage": None},
            "config": {"filesystem": None, "benchmark": None, "command": None, "kernel_config": []},
            "numbers": [], "evidence": {}, "overrides": {}, "ignore_activity": False, "created_at": now,
            "updated_at": now}
    vals.update(kw)
    with store.engine.begin() as conn:
        return conn.execute(insert(ts.regressions).values(**vals)).inserted_primary_key[0]


def test_no_match_is_recorded_and_the_job_declined(store):
    from bot.lab.scheduling import schedule_rerun
    from storage.lab_jobs import list_jobs
    from bot.tracker.records import get_record

    c = cfg(ARM, machine("q-misfit", filesystems=["tmpfs"], storage=["ram"]), builds=dict(BUILDS))
    rid = make_record(store, good="good-1", bad="bad-1",
                      hardware={"cpu": None, "arch": "x86_64", "memory": None, "storage": "1HDD"},
                      config={"filesystem": "xfs", "benchmark": "dd", "command": "dd if=/dev/zero of=/x bs=1M count=8",
                              "kernel_config": []})
    job = schedule_rerun(store, c, rid)
    assert job["state"] == "declined" and job["machine"] is None
    assert "altra: arch aarch64 is not the report's x86_64" in job["message"]
    assert "q-misfit: score -40 is below min_score 0" in job["message"]
    rec = get_record(store, rid)
    assert rec["status"] == "triaged"  # never rerun-scheduled
    h = [x for x in rec["history"] if x["field"] == "rerun"]
    assert h and h[-1]["new"] == "declined" and h[-1]["actor"] == "regtriage-lab"
    assert "no machine fits" in h[-1]["note"] and "cannot test xfs" in h[-1]["note"]
    # naming the misfit does not make it run
    job2 = schedule_rerun(store, c, rid, machine="q-misfit")
    assert job2["state"] == "declined"
    # "wait": the job waits (and runs once a machine fits, see test_scheduler)
    job3 = schedule_rerun(store, {**c, "lab": {**c["lab"], "on_no_match": "wait"}}, rid)
    assert job3["state"] == "waiting"
    assert [j["state"] for j in list_jobs(store, regression_id=rid)] == ["waiting", "declined", "declined"]
    assert "waits for a machine" in get_record(store, rid)["history"][-1]["note"]


def test_declined_plan_is_recorded(store, no_exec):
    from bot.lab.scheduling import schedule_rerun
    from bot.tracker.records import get_record

    c = cfg(machine("q"), builds=dict(BUILDS))
    rid = make_record(store, good="good-1", bad="bad-1",
                      config={"command": "dd if=/dev/zero of=/x bs=1M count=1 && reboot", "benchmark": "dd",
                              "filesystem": None, "kernel_config": []})
    job = schedule_rerun(store, c, rid)
    assert job["state"] == "declined" and job["message"].startswith("workload: declined")
    rec = get_record(store, rid)
    assert rec["status"] == "triaged" and "rerun declined" in rec["history"][-1]["note"]


def test_example_lab_config_is_valid():
    import tomllib
    from pathlib import Path

    from bot.lab.plan import lab_settings
    from bot.lab.settings import sched_settings

    d = tomllib.loads((Path(__file__).parent.parent / "deploy" / "lab-example.toml").read_text())
    ms = load_machines(d)
    assert [m.name for m in ms] == ["qemu-tcg-1", "xeon-6238m", "altra"]
    assert ms[1].cpu.model == "6238m" and ms[1].storage_types == ("nvme", "hdd") and ms[2].manual
    assert BuildMap.from_config(d).resolve("6.1.0-56-rt-amd64")[0].debian == "linux-image-6.1.0-56-rt-amd64-unsigned"
    assert lab_settings(d)["runs"] == 5 and sched_settings(d)["on_no_match"] == "decline"


def test_plan_says_when_boots_are_the_unit_and_too_few_to_decide():
    """samples_per_batch > 1: the plan says the boot is the unit, and warns when the design
    can never reach the 5 boots per build a verdict needs."""
    from bot.lab.plan import make_plan

    rec = {"id": 4, "good": "v1", "bad": "v2", "config": {"benchmark": "getpid"}}
    few = make_plan(rec, {"lab": {"builds": {"v*": "/k/{ref}"}, "samples_per_batch": 5, "max_runs": 20}})
    assert any("looks at [1, 2, 3, 4] boots" in n for n in few.notes), few.notes
    assert any("no rerun can end confirmed" in n for n in few.notes)
    enough = make_plan(rec, {"lab": {"builds": {"v*": "/k/{ref}"}, "samples_per_batch": 2, "max_runs": 20}})
    assert any("the boot is the unit" in n for n in enough.notes)
    assert not any("no rerun can end confirmed" in n for n in enough.notes)
    one = make_plan(rec, {"lab": {"builds": {"v*": "/k/{ref}"}}})
    assert not any(n.startswith("design:") for n in one.notes)
