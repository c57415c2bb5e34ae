"""The lkp lab backend: LKP job YAML per recipe, stats.json/matrix.json parsing, and a run over a
real sshd against a STAND-IN ``lkp`` executable.

LKP-tests itself cannot be installed here (a GitHub project, in no package registry), so the ssh
host gets a small stand-in ``lkp`` written by this test: ``lkp run [-o LINK] JOB`` reads the job,
runs the real ``dd`` with the job's parameters, and writes the result root the way LKP-tests
documents it (``<root>/<testcase>/<path_params>/<tbox_group>/<rootfs>/<kconfig>/<compiler>/<commit>/<run>``
with job.yaml, dd.json, stats.json, matrix.json.gz; ``_rt/matrix.json`` with one column per run
and ``stats_source``; ``LINK`` -> the run directory).  The adapter is NOT tested against real
LKP-tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.lab import parsers
from bot.lab.backends import DONE, LabError, RunSpec, get_backend
from bot.lab.backends.lkp import job_yaml, stats_keys
from bot.lab.builds import BuildSpec
from bot.lab.recipes import make_recipe
from bot.lab.recipes.fio import FIO_MBPS_SCALE
from tests.test_ssh_backend import BAD_PKG, BAD_REL, GOOD_PKG, GOOD_REL, SshdServer, _pid_alive, sshd  # noqa: F401

DATA = Path(__file__).parent / "data" / "lab"


def _load_job(text: str) -> dict:
    """The two-level subset of YAML that job_yaml writes (a test-side reader, not a YAML library)."""
    out: dict = {}
    cur = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, _, val = line.strip().partition(":")
        val = val.strip()
        if val.startswith('"'):
            val = json.loads(val)
        elif val in ("true", "false"):
            val = val == "true"
        elif val.isdigit():
            val = int(val)
        if line.startswith("  "):
            out[cur][key] = val
        else:
            cur = key
            out[key] = val if val != "" else {}
    return out


# ================================================================================ job YAML
def test_job_yaml_for_each_recipe():
    j = _load_job(job_yaml(make_recipe("dd-seqwrite", {"bs": "64k", "count": 16, "sync": "fsync"}),
                           "lab1", GOOD_REL, 5))
    assert j == {"suite": "dd", "testcase": "dd", "category": "benchmark", "testbox": "lab1", "commit": GOOD_REL,
                 "repeat_to": 5, "dd": {"rw": "write", "bs": 65536, "count": 16, "conv": "fsync"}}
    j = _load_job(job_yaml(make_recipe("dd-seqread", {"bs": "4k", "count": 8, "direct": True}), "lab1", "abc1234", 3))
    assert j["dd"] == {"rw": "read", "bs": 4096, "count": 8, "iflag": "direct"} and j["commit"] == "abc1234"
    j = _load_job(job_yaml(make_recipe("syscall-getpid", {"iterations": 100000}), "lab1", GOOD_REL, 3))
    assert j["suite"] == "perf-bench-syscall" and j["perf-bench-syscall"] == {"op": "basic", "loop": 100000}
    j = _load_job(job_yaml(make_recipe("sysbench-fileio", {"size_mib": 64, "file_num": 4, "mode": "seqwr",
                                                           "time_s": 10, "threads": 2}), "lab1", GOOD_REL, 3,
                           disk="1HDD", fs="ext4"))
    assert j["disk"] == "1HDD" and j["fs"] == "ext4"
    assert j["sysbench-fileio"] == {"period": "10s", "nr_threads": 2, "size": "64M", "filenum": "4f",
                                    "rwmode": "seqwr", "iomode": "sync", "blocksize": 16384, "fsync_freq": 100}
    j = _load_job(job_yaml(make_recipe("fio", {"rw": "randread", "bs": "4k", "size_mib": 16, "numjobs": 2,
                                               "runtime_s": 30, "direct": True}), "lab1", GOOD_REL, 3))
    assert j["suite"] == j["testcase"] == "fio-basic"
    assert j["fio-setup-basic"] == {"rw": "randread", "bs": 4096, "ioengine": "psync", "iodepth": 1, "nr_task": 2,
                                    "test_size": "32M", "runtime": "30s", "time_based": True, "direct": "direct"}
    assert j["fio"] == {}
    assert _load_job(job_yaml(make_recipe("fio"), "lab1", "6.2", 1))["commit"] == "6.2"  # quoted: not a float
    j = _load_job(job_yaml(make_recipe("stress-ng", {"stressor": "futex", "threads": 4, "time_s": 60}), "lab1",
                           GOOD_REL, 3))
    assert j["suite"] == "stress-ng" and j["stress-ng"] == {"test": "futex", "nr_threads": 4, "testtime": "60s"}
    assert stats_keys(make_recipe("stress-ng", {"stressor": "futex"})) == (["stress-ng.futex.ops_per_sec"], 1.0)
    for bad in (dict(testbox="lab 1"), dict(commit="$(reboot)"), dict(repeat=0)):
        args = {"testbox": "lab1", "commit": GOOD_REL, "repeat": 3, **bad}
        with pytest.raises(LabError):
            job_yaml(make_recipe("fio"), **args)
    with pytest.raises(LabError):
        job_yaml(make_recipe("fio"), "lab1", GOOD_REL, 3, disk="1HDD; rm")


def test_stats_and_matrix_parsing():
    stats = parsers.parse_lkp_stats((DATA / "lkp-stats.json").read_text())
    assert stats["fio.write_iops"] == pytest.approx(7111.111111)
    assert "kmsg.timestamp:last" not in stats  # non-numeric values are left out
    matrix = parsers.parse_lkp_matrix((DATA / "lkp-matrix.json").read_text())
    src = matrix["stats_source"][1]
    assert parsers.lkp_matrix_value(matrix, "fio.write_bw_MBps", src) == 7002.5
    assert parsers.lkp_matrix_value(matrix, "fio.write_bw_MBps", "/elsewhere/stats.json") is None
    assert parsers.lkp_matrix_value(matrix, "no.such", src) is None
    with pytest.raises(parsers.ParseError):
        parsers.parse_lkp_stats("[1, 2]")
    with pytest.raises(parsers.ParseError):
        parsers.parse_lkp_matrix('{"a": 1}')
    keys, scale = stats_keys(make_recipe("fio", {"rw": "write", "bs": "1M"}))
    assert keys == ["fio.write_bw_MBps"] and scale == pytest.approx(1.048576) == FIO_MBPS_SCALE
    assert stats_keys(make_recipe("sysbench-fileio", {"mode": "rndrw"}))[0] == [
        "sysbench-fileio.read_operations/s", "sysbench-fileio.write_operations/s"]


def test_supports_needs_extra_program_for_dd(tmp_path):
    cfg = {"lab": {"ssh": {"host": "127.0.0.1", "user": "root", "key_file": "/k", "known_hosts": "/kh",
                           "work_dir": str(tmp_path / "ssh")}, "lkp": {"work_dir": str(tmp_path / "lkp")}}}
    b = get_backend("lkp", cfg)
    ok, why = b.supports(make_recipe("dd-seqwrite"))
    assert not ok and "extra_programs" in why
    assert b.supports(make_recipe("fio"))[0] and b.supports(make_recipe("syscall-getpid"))[0]
    cfg["lab"]["lkp"]["extra_programs"] = ["dd"]
    assert get_backend("lkp", cfg).supports(make_recipe("dd-seqwrite"))[0]
    with pytest.raises(LabError, match="lkp_command"):
        get_backend("lkp", {**cfg, "lab": {**cfg["lab"], "lkp": {"lkp_command": "lkp; reboot"}}})


# ======================================================================== stand-in over sshd
STAND_IN = r'''#!/usr/bin/python3
# STAND-IN for LKP-tests' `lkp run` -- regtriage tests only, NOT LKP-tests.
# Follows the documented result-root layout and stats.json/matrix.json formats; the value is
# from a real dd run with the job's parameters.
import gzip, json, os, re, socket, subprocess, sys

ROOT = __RESULT_ROOT__
args = sys.argv[1:]
if not args or args[0] != "run":
    sys.exit("stand-in lkp: only 'lkp run [-o LINK] JOB' is implemented")
args = args[1:]
link = "result"
if args[0] == "-o":
    link, args = args[1], args[2:]
jobfile = args[0]
job, cur = {}, None
for line in open(jobfile):
    if not line.strip() or line.lstrip().startswith("#"):
        continue
    k, _, v = line.strip().partition(":")
    v = v.strip().strip('"')
    if line.startswith("  "):
        job[cur][k] = v
    else:
        cur = k
        job[k] = v if v else {}
testcase = job["testcase"]
if testcase != "dd":
    sys.exit("stand-in lkp: only the dd job is implemented")
p = job["dd"]
path_params = "-".join(str(v) for v in p.values())
tbox_group = re.sub(r"-[0-9]+$", "", socket.gethostname())
rt = os.path.join(ROOT, testcase, path_params, tbox_group, "debian", "defconfig", "gcc-12", job["commit"])
for i in range(100):
    rr = os.path.join(rt, str(i))
    if not os.path.exists(rr):
        os.makedirs(rr)
        break
data = os.path.join(os.getcwd(), "dd.dat")
if p["rw"] == "write":
    argv = ["dd", "if=/dev/zero", "of=" + data, "bs=" + p["bs"], "count=" + p["count"]]
    argv += ["conv=fsync"] if p.get("conv") == "fsync" else []
else:
    subprocess.run(["dd", "if=/dev/zero", "of=" + data, "bs=" + p["bs"], "count=" + p["count"]],
                   check=True, capture_output=True)
    argv = ["dd", "if=" + data, "of=/dev/null", "bs=" + p["bs"], "count=" + p["count"]]
r = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
os.unlink(data)
m = re.search(r"^([0-9]+) bytes?.* copied, ([0-9.e+-]+) s,", r.stderr, re.M)
if r.returncode or not m:
    sys.exit("dd failed: " + r.stderr)
mbps = int(m.group(1)) / float(m.group(2)) / 1e6
metric = "dd.%s_MBps" % p["rw"]
with open(os.path.join(rr, "job.yaml"), "w") as f:
    f.write(open(jobfile).read())
with open(os.path.join(rr, "dd.json"), "w") as f:
    json.dump({metric: [mbps]}, f)
stats = {metric: mbps, "dd.bytes": int(m.group(1)), "dd.seconds": float(m.group(2))}
with open(os.path.join(rr, "stats.json"), "w") as f:
    json.dump(stats, f, indent=2)
with gzip.open(os.path.join(rr, "matrix.json.gz"), "wt") as f:
    json.dump({k: [v] for k, v in stats.items()}, f)
mfile = os.path.join(rt, "matrix.json")
matrix = json.load(open(mfile)) if os.path.exists(mfile) else {}
for k, v in stats.items():
    matrix.setdefault(k, []).append(v)
matrix.setdefault("stats_source", []).append(os.path.join(rr, "stats.json"))
with open(mfile, "w") as f:
    json.dump(matrix, f, indent=2)
if os.path.lexists(link):
    os.unlink(link)
os.symlink(rr, link)
print("RESULT_ROOT=" + rr)
'''


def test_run_through_stand_in_lkp_over_real_sshd(sshd, tmp_path):
    result_root = tmp_path / "lkp-result"
    stand_in = sshd.root / "lkp-stand-in"
    stand_in.write_text(STAND_IN.replace("__RESULT_ROOT__", repr(str(result_root))))
    stand_in.chmod(0o755)
    config = sshd.ssh_config(tmp_path / "ssh")
    config["lab"]["lkp"] = {"work_dir": str(tmp_path / "lkp"), "lkp_command": str(stand_in),
                            "extra_programs": ["dd"], "testbox": "lab-test-1"}
    backend = get_backend("lkp", config)
    recipe = make_recipe("dd-seqwrite", {"bs": "64k", "count": 16})
    job = RunSpec(recipe=recipe, good=BuildSpec(debian=GOOD_PKG), bad=BuildSpec(debian=BAD_PKG), runs=2,
                  samples_per_batch=1, warmup=1, order="abab")
    handle = backend.submit(job)
    assert handle.startswith("lkp:")
    backend2 = get_backend("lkp", config)  # restart: a new instance finishes the polling
    st = backend2.wait(handle, timeout=45, interval=0.2)
    assert st.state == DONE, st.message
    samples = backend2.fetch_samples(handle)
    assert samples.metric == "dd.write_MBps" and len(samples["good"]) == 2 and len(samples["bad"]) == 2
    assert samples.order == ["good", "bad", "good", "bad"]
    d = backend2.describe(handle)
    assert [b["kernel_release"] for b in d["batches"]] == [GOOD_REL, BAD_REL, GOOD_REL, BAD_REL]
    assert "repeat_to: 2" in d["lkp"]["jobs"]["good"] and f"commit: {BAD_REL}" in d["lkp"]["jobs"]["bad"]
    # the documented layout: one _rt per commit, run dirs 0..3 (warm-up + sample, two batches)
    rts = {p.parent.parent for p in result_root.glob("dd/*/*/debian/defconfig/gcc-12/*/*/stats.json")}
    assert {rt.name for rt in rts} == {GOOD_REL, BAD_REL}
    for rt in rts:
        m = json.loads((rt / "matrix.json").read_text())
        assert len(m["stats_source"]) == 4 and sorted(p.name for p in rt.iterdir() if p.is_dir()) == ["0", "1", "2", "3"]
    # samples are the stats.json values of the measured (non-warm-up) runs, in order
    good_rt = next(rt for rt in rts if rt.name == GOOD_REL)
    vals = [json.loads((good_rt / str(i) / "stats.json").read_text())["dd.write_MBps"] for i in range(4)]
    assert samples["good"] == pytest.approx([vals[1], vals[3]])
    assert samples.warmups["good"] == pytest.approx([vals[0], vals[2]])
    log = Path(samples.log_path).read_text()
    assert "lkp-stand-in run -o" in log and "stats.json" in log
    assert not any(sshd.scratch.iterdir())
