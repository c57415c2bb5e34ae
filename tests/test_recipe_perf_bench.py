"""perf bench recipes (bot/lab/recipes/perf_bench.py): syscall basic, sched messaging, sched pipe,
mem memcpy/memset.  The parser on outputs captured from Debian's linux-perf 6.1
(tests/data/lab/), claims, and each benchmark run FOR REAL: in the QEMU busybox guest (the host's
perf with its libraries in the initramfs) under two real Debian kernels, and its host argv as a
local process (syscall-getpid runs over SSH in tests/test_ssh_backend.py and in the busybox
guest in tests/test_qemu_backend.py)."""

from __future__ import annotations

import pytest

from bot.lab.parsers import ParseError, parse_perf_bench
from bot.lab.recipes import make_recipe, recipe_from_claim
from tests.recipe_runs import DATA, assert_declined, run_in_qemu, run_local
from tests.test_qemu_backend import kernels, lab, lab_tools  # noqa: F401  (fixtures)


def test_parse_captured_outputs():
    p = parse_perf_bench((DATA / "perf-bench-syscall-basic.stdout").read_text())
    assert p == {"calls": 200000, "syscall": "getppid", "total_time_s": 0.025, "usecs_per_op": 0.12911,
                 "ops_per_sec": 7745333.0}
    assert parse_perf_bench("  7,745,333 ops/sec\n")["ops_per_sec"] == 7745333.0
    assert make_recipe("syscall-getpid").parse_output((DATA / "perf-bench-syscall-basic.stdout").read_text(), "") \
        == 7745333.0
    msg = make_recipe("perf-sched-messaging")
    assert msg.parse_output((DATA / "perf-bench-sched-messaging.stdout").read_text(), "") == pytest.approx(0.579)
    assert msg.parse_output((DATA / "perf-bench-sched-messaging-thread-pipe.stdout").read_text(), "") \
        == pytest.approx(0.022)
    pipe = parse_perf_bench((DATA / "perf-bench-sched-pipe.stdout").read_text())
    assert pipe == {"total_time_s": 0.335, "usecs_per_op": 16.7606, "ops_per_sec": 59663.0}
    assert make_recipe("perf-sched-pipe").parse_output((DATA / "perf-bench-sched-pipe.stdout").read_text(), "") \
        == 59663.0
    mem = make_recipe("perf-mem", {"op": "memcpy"})
    assert mem.parse_output((DATA / "perf-bench-mem-memcpy.stdout").read_text(), "") == pytest.approx(2.722363)
    assert make_recipe("perf-mem", {"op": "memset"}).parse_output(
        (DATA / "perf-bench-mem-memset.stdout").read_text(), "") > 0
    with pytest.raises(ParseError, match="twice"):  # -f all: several functions, no single number
        mem.parse_output((DATA / "perf-bench-mem-memcpy-all.stdout").read_text(), "")
    with pytest.raises(ParseError, match="no 'ops/sec' line"):
        make_recipe("syscall-getpid").parse_output("perf: 'bench' is not a perf-command\n", "")
    with pytest.raises(ParseError, match="'Total time'"):  # pipe output has a total time, messaging needs it too
        msg.parse_output((DATA / "perf-bench-mem-memcpy.stdout").read_text(), "")
    with pytest.raises(ParseError, match="nothing was measured"):
        make_recipe("perf-sched-pipe").parse_output("   0 ops/sec\n", "")


def test_claims():
    spec, reason = recipe_from_claim({}, "perf bench sched messaging -g 20 -l 1000 -t -p", "hackbench")
    assert spec.name == "perf-sched-messaging", reason
    assert spec.params == {"groups": 20, "loops": 1000, "threads": True, "pipe": True}
    assert spec.host_argv("/s") == [["perf", "bench", "sched", "messaging", "-g", "20", "-l", "1000", "-t", "-p"]]
    assert not spec.higher_is_better
    spec, reason = recipe_from_claim({}, "perf bench sched pipe -l 5000000 -T", None)
    assert (spec.name, spec.params) == ("perf-sched-pipe", {"loops": 5_000_000, "threads": True}), reason
    spec, reason = recipe_from_claim({}, "perf bench mem memset --size 64MB --nr_loops 50", None)
    assert (spec.name, spec.params) == ("perf-mem", {"op": "memset", "size": "64MB", "loops": 50}), reason
    assert spec.host_argv("/s")[0][-2:] == ["-f", "default"]
    spec, reason = recipe_from_claim({}, "perf bench mem memcpy -s 1mb -f default", None)
    assert spec.params["size"] == "1MB" and spec.metric == "perf-mem.memcpy_GBps", reason
    spec, _ = recipe_from_claim({}, "perf bench syscall basic -l99999999999", None)
    assert spec.params["iterations"] == 10_000_000  # clamped extent
    assert_declined((("perf bench sched messaging -g 500", "groups=500 exceeds"),
                     ("perf bench sched messaging -g 2 --cpu 0", "unsupported"),
                     ("perf bench mem memcpy -f all", "only glibc's 'default'"),
                     ("perf bench mem memcpy -s 3MB", "not in the whitelist"),
                     ("perf bench mem memcpy -s 2GB", "not in the whitelist"),
                     ("perf bench sched pipe -l 10 -l 20", "given twice"),
                     ("perf bench futex hash", "no vetted perf recipe"),
                     ("perf bench sched all", "no vetted perf recipe"),
                     ("perf bench sched pipe -l", "needs a value")))
    spec, _ = recipe_from_claim({}, None, "memset")
    assert (spec.name, spec.params["op"]) == ("perf-mem", "memset")


@pytest.mark.parametrize("name,params,needle", [
    ("perf-sched-messaging", {"groups": 2, "loops": 200}, "2 groups == 80 processes run"),
    ("perf-sched-messaging", {"groups": 1, "loops": 50, "threads": True, "pipe": True}, "threads per group"),
    ("perf-sched-pipe", {"loops": 20000}, "Executed 20000 pipe operations"),
    ("perf-sched-pipe", {"loops": 5000, "threads": True}, "Executed 5000 pipe operations"),
    ("perf-mem", {"op": "memcpy", "size": "16MB", "loops": 10}, "Copying 16MB bytes"),
    ("perf-mem", {"op": "memset", "size": "1MB", "loops": 20}, "function 'default'"),
])
def test_host_argv_runs_locally(tmp_path, name, params, needle):
    """The host form (what the ssh backend runs, tested end to end in tests/test_ssh_backend.py)
    as a local process: the real perf, parsed by the recipe."""
    value, stdout, _ = run_local(make_recipe(name, params), tmp_path)
    assert needle in stdout and value > 0


@pytest.mark.slow
@pytest.mark.parametrize("name,params", [
    ("perf-sched-messaging", {"groups": 1, "loops": 20}),
    ("perf-sched-pipe", {"loops": 5000}),
    ("perf-mem", {"op": "memset", "size": "4MB", "loops": 5}),
])
def test_real_run_in_qemu_guest(lab, kernels, name, params):  # noqa: F811
    """perf (and its ~25 shared libraries) copied into the busybox initramfs, run under two real
    Debian kernels; the guest's value must equal the recipe's parser on the echoed output."""
    s = run_in_qemu(lab, kernels, make_recipe(name, params))
    print(f"\n{name} in QEMU: {dict(s)}")
