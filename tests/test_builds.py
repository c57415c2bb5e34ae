"""[lab.builds] with kernel trees (bot.lab.plan.BuildMap) and the TuxMake build cache's
bookkeeping (bot.lab.kbuild): which refs build what, the DECLINED reasons, validation of what
mail can reach, the disk budget.  Real git repositories; the real TuxMake builds are in
tests/test_kernel_bisect.py."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from bot.lab import kbuild
from bot.lab.builds import BuildError, BuildSpec
from bot.lab.plan import BuildMap, PlanError, make_plan


def _git(repo, *args):
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x.invalid", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
           "PATH": os.environ["PATH"]}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture
def trees(tmp_path):
    """mainline (v6.9, v6.10, a merge) and next (next-20240603 on top of v6.10)."""
    main = tmp_path / "linux"
    main.mkdir()
    _git(main, "init", "-q", "-b", "master")

    def commit(repo, name):
        (repo / name).write_text(name)
        _git(repo, "add", name)
        _git(repo, "commit", "-q", "-m", name)
        return _git(repo, "rev-parse", "HEAD")

    commit(main, "a")
    _git(main, "tag", "v6.9")
    commit(main, "b")
    _git(main, "checkout", "-q", "-b", "topic", "HEAD~1")
    topic = commit(main, "t")
    _git(main, "checkout", "-q", "master")
    _git(main, "merge", "-q", "--no-ff", "-m", "merge topic", "topic")
    merge = _git(main, "rev-parse", "HEAD")
    _git(main, "tag", "v6.10")
    nxt = tmp_path / "linux-next"
    _git(tmp_path, "clone", "-q", str(main), str(nxt))
    commit(nxt, "n")
    _git(nxt, "tag", "next-20240603")
    return {"main": str(main), "next": str(nxt), "merge": merge, "topic": topic,
            "first_parent": _git(main, "rev-parse", f"{merge}^1")}


def cfg(trees, **builds):
    return {"kernel": {"repos": [{"path": trees["main"], "name": "mainline", "mainline": True}, trees["next"]]},
            "lab": {"builds": {"base_config": {"default": "defconfig", "q": "tinyconfig"},
                               "fragments": ["CONFIG_64BIT=y", "kvm_guest.config"], **builds}}}


def test_refs_resolve_in_the_configured_trees(trees):
    bm = BuildMap.from_config(cfg(trees))
    assert bm.trees == [trees["main"], trees["next"]]  # from [kernel] repos
    spec, how = bm.resolve("v6.9")
    assert spec.kind == "tree" and spec.tree == trees["main"] and len(spec.ref) == 40 and "TuxMake" in how
    assert bm.resolve("6.9")[0].ref == spec.ref  # a bare version is tried as the tag v6.9
    spec, _ = bm.resolve("next-20240603")
    assert spec.tree == trees["next"] and (spec.kconfig, spec.fragments) == ("defconfig", ["CONFIG_64BIT=y",
                                                                                          "kvm_guest.config"])
    assert bm.resolve(trees["topic"][:12])[0].ref == trees["topic"]  # an abbreviated sha
    with pytest.raises(PlanError, match=r"'v7\.0' is in none of the kernel trees"):
        bm.resolve("v7.0")
    for hostile in ("--upload-pack=touch /tmp/x", "v6.9;reboot", "$(reboot)", "v6.9 v6.10", "..", "a" * 300):
        with pytest.raises(PlanError):
            bm.resolve(hostile)
    assert bm.kconfig_for("q") == "tinyconfig" and bm.kconfig_for("other") == "defconfig"


def test_culprit_builds_its_parent_and_a_merge_its_first_parent(trees):
    bm = BuildMap.from_config(cfg(trees))
    g, b, gs, bs = bm.culprit_pair(trees["topic"])
    assert (g.ref, b.ref) == (_git(trees["main"], "rev-parse", f"{trees['topic']}^"), trees["topic"])
    g, b, gs, bs = bm.culprit_pair(trees["merge"][:10])
    assert bs == trees["merge"] and gs == trees["first_parent"] and g.ref == trees["first_parent"]
    with pytest.raises(PlanError, match="in none of the kernel trees"):
        bm.culprit_pair("0123456789ab")


def test_plan_declines_with_the_reason_and_builds_a_range(trees):
    rec = {"id": 1, "culprit_commit": None, "good": "v6.9", "bad": "next-20240603",
           "config": {"command": "perf bench syscall basic --loop 100000"}}
    plan = make_plan(rec, cfg(trees))
    assert plan.ok, plan.declined
    assert plan.good.tree == trees["main"] and plan.bad.tree == trees["next"]
    assert plan.run_spec(machine="q", config=cfg(trees)).good.kconfig == "tinyconfig"
    plan = make_plan({**rec, "bad": "v9.9"}, cfg(trees))
    assert plan.declined == [f"builds: 'v9.9' is in none of the kernel trees ({trees['main']}, {trees['next']}) "
                             "nor in [lab.builds] keys"]
    plan = make_plan({**rec, "culprit_commit": "54a6eb5c4765"}, {"lab": {}})
    assert "no kernel tree is configured" in plan.declined[0]
    with pytest.raises(PlanError, match="TuxMake"):
        BuildMap.from_config(cfg(trees, build_command=["make"]))
    for bad in ({"fragments": ["CONFIG_X=y; reboot"]}, {"base_config": "def config"}, {"toolchain": "rm"},
                {"jobs": 0}, {"cache_dir": "relative"}):
        with pytest.raises(PlanError):
            BuildMap.from_config(cfg(trees, **bad))


def test_config_hash_follows_file_contents(tmp_path):
    frag = tmp_path / "f.config"
    frag.write_text("CONFIG_A=y\n")
    spec = BuildSpec(tree="/src", ref="v1", kconfig="tinyconfig", fragments=[str(frag)])
    h1, kconfig, adds = kbuild.config_inputs(spec, tmp_path)
    assert (kconfig, adds) == ("tinyconfig", [str(frag)])
    frag.write_text("CONFIG_A=n\n")
    assert kbuild.config_inputs(spec, tmp_path)[0] != h1
    other = BuildSpec(tree="/src", ref="v1", kconfig="defconfig", fragments=[str(frag)])
    assert kbuild.config_inputs(other, tmp_path)[0] != kbuild.config_inputs(spec, tmp_path)[0]
    with pytest.raises(BuildError):
        kbuild.config_inputs(BuildSpec(tree="/src", ref="v1", kconfig=str(tmp_path / "missing")), tmp_path)


def test_eviction_removes_the_least_recently_used(tmp_path):
    cache = tmp_path / "kbuild"
    (cache / "locks").mkdir(parents=True)
    now = time.time()
    for i, name in enumerate(["old", "mid", "new"]):
        d = cache / "entries" / name
        d.mkdir(parents=True)
        (d / "bzImage").write_bytes(b"x" * 1000)
        os.utime(d, (now - 100 + i * 10, now - 100 + i * 10))
    objs = cache / "objs" / "tree-cfg-tc"
    objs.mkdir(parents=True)
    (objs / "vmlinux.o").write_bytes(b"x" * 1000)
    os.utime(objs, (now - 1000, now - 1000))
    assert kbuild.evict(cache, 2500, keep={cache / "entries" / "old"}) == ["tree-cfg-tc", "mid"]
    assert sorted(p.name for p in (cache / "entries").iterdir()) == ["new", "old"]
    assert kbuild.evict(cache, 10 ** 6) == []


def test_build_options_defaults_and_limits(tmp_path):
    o = kbuild.build_options({}, home=tmp_path)
    assert o["cache_dir"] == str(tmp_path / "lab" / "builds") and o["jobs"] >= 1
    assert kbuild.build_options({"ccache_dir": str(tmp_path / "cc"), "jobs": 3}, home=tmp_path)["jobs"] == 3
    with pytest.raises(BuildError):
        kbuild.build_options({"timeout_s": 1}, home=tmp_path)
    assert Path(o["cache_dir"]).is_absolute()


def test_bisection_start_and_auto_start(trees, store):
    """The range is read from the tree (both ends in one tree), the plan and the machine are
    stored; [lab] auto_bisect starts one only after a confirmed rerun of a range."""
    from bot.lab import bisect_driver as drv
    from tests.test_lab_matching import make_record

    c = cfg(trees)
    c["lab"]["machines"] = [{"name": "q", "arch": "x86_64", "backend": "qemu", "storage": ["ram"],
                             "filesystems": ["tmpfs"]}]
    c["lab"]["qemu"] = {"work_dir": "/tmp/regtriage-unused"}
    cmd = {"filesystem": None, "benchmark": None, "command": "perf bench syscall basic --loop 50000",
           "kernel_config": []}
    rid = make_record(store, good="v6.9", bad="v6.10", config=cmd, kind="performance")
    job = {"regression_id": rid, "verdict": "confirmed", "machine": "q", "plan": {"refs": {"good": "v6.9",
                                                                                         "bad": "v6.10"}}}
    assert drv.auto_start(store, c, job) is None  # [lab] auto_bisect is off
    b = drv.start(store, c, rid)
    assert (b.state, b.machine, b.tree, b.plan["build"]["kconfig"]) == ("queued", "q", trees["main"], "tinyconfig")
    assert len(b.bisect["commits"]) == 3 and b.bisect["bad"] == trees["merge"]  # b, t and the merge
    assert b.plan["recipe"]["name"] == "syscall-getpid" and b.plan["max_steps"] == 20
    with pytest.raises(drv.BisectionError, match="already has bisection"):
        drv.start(store, c, rid)
    assert drv.cancel(store, c, rid).state == "cancelled"
    c["lab"]["auto_bisect"] = True
    assert drv.auto_start(store, c, {**job, "verdict": "not-reproduced"}) is None
    assert drv.auto_start(store, c, {**job, "plan": {"refs": {"good": "abc^", "bad": "abc"}}}) is None  # a culprit
    assert drv.auto_start(store, c, job).state == "queued"
    with pytest.raises(drv.BisectionError, match="not both in one of the kernel trees"):
        drv.start(store, c, make_record(store, good="v7.0", bad="next-20240603", config=cmd))
    with pytest.raises(drv.BisectionError, match="needs a good and a bad"):
        drv.start(store, c, make_record(store, good=None, bad="v6.10", config=cmd))


def test_cli_lab_build_and_bisect(trees, cli, tmp_path):
    """`lab build` refuses refs that are no commit of a tree (before anything runs); `bisect
    --no-wait` queues, `bisect --json` shows it, `bisect --cancel` ends it."""
    import json

    from tests.test_lab_matching import make_record
    from storage.store import Store

    db = f"sqlite:///{tmp_path / 'cli.sqlite3'}"
    (tmp_path / "regtriage.toml").write_text(f"""
[kernel]
repos = ["{trees['main']}"]
[lab.builds]
base_config = "tinyconfig"
[lab.qemu]
work_dir = "{tmp_path / 'q'}"
[[lab.machines]]
name = "q"
arch = "x86_64"
backend = "qemu"
storage = ["ram"]
""")
    r = cli("lab", "build", "v7.0", db=db)
    assert r.exit_code == 1 and "'v7.0' is in none of the kernel trees" in r.output
    r = cli("lab", "build", "v6.9;reboot", db=db)
    assert r.exit_code == 2 and "not a version, tag or commit id" in r.output
    s = Store(db)
    rid = make_record(s, good="v6.9", bad="v6.10", kind="performance",
                      config={"filesystem": None, "benchmark": None, "kernel_config": [],
                              "command": "perf bench syscall basic --loop 50000"})
    s.close()
    r = cli("bisect", str(rid), "--no-wait", db=db)
    assert r.exit_code == 0, r.output
    assert "queued: 3 commits in v6.9..v6.10 on q" in r.output
    r = cli("bisect", str(rid), "--no-wait", "--json", db=db)
    out = json.loads(r.output)
    assert (out["state"], out["commits"], out["candidates_left"]) == ("queued", 3, 3)
    assert out["log"].startswith("git bisect start")
    r = cli("bisect", str(rid), "--cancel", db=db)
    assert r.exit_code == 0 and "cancelled" in r.output
    assert "no active bisection" in cli("bisect", str(rid), "--cancel", db=db).output


def test_scheduler_pass_advances_a_bisection_and_a_failed_end_fails_it(trees, store, tmp_path):
    """The service's lab loop (Scheduler.tick) drives bisections: here the good end of a toy tree
    cannot be built by the real TuxMake (no kernel Makefile), so the bisection fails with the
    build's reason on the record, and the failure is cached."""
    from bot.lab import bisect_driver as drv
    from bot.lab.scheduler import Scheduler
    from bot.tracker.records import get_record
    from tests.test_lab_matching import make_record

    c = cfg(trees, cache_dir=str(tmp_path / "builds"), timeout_s=120)
    c["lab"]["machines"] = [{"name": "q", "arch": "x86_64", "backend": "qemu", "storage": ["ram"]}]
    c["lab"]["qemu"] = {"work_dir": str(tmp_path / "q")}
    rid = make_record(store, good="v6.9", bad="v6.10", kind="performance",
                      config={"filesystem": None, "benchmark": None, "kernel_config": [],
                              "command": "perf bench syscall basic --loop 50000"})
    b = drv.start(store, c, rid)
    stats = Scheduler(store, c).tick()
    assert stats.get("bisect_final") == 1, stats
    import storage.bisections as bdb

    b = bdb.get(store, b.id)
    assert b.state == "failed" and "the good end does not build" in b.message and "tuxmake exit" in b.message
    assert b.steps[0].build["good"]["status"] == "failed" and b.steps[0].build["good"]["tail"]
    h = [x for x in get_record(store, rid)["history"] if x["field"] == "bisection"]
    assert [x["new"] for x in h] == ["queued", "failed"] and h[-1]["source"] == "lab-bisect"
    assert get_record(store, rid)["culprit_commit"] is None
