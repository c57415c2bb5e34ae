"""sysbench recipes (bot/lab/recipes/sysbench.py): fileio, cpu and memory parsed from outputs
captured from Debian's sysbench 1.0.20 (tests/data/lab/), claims, and cpu/memory run FOR REAL in
the QEMU busybox guest under two real Debian kernels and as local processes (fileio runs over SSH
in tests/test_ssh_backend.py)."""

from __future__ import annotations

import pytest

from bot.lab.parsers import ParseError
from bot.lab.recipes import make_recipe, recipe_from_claim
from bot.lab.recipes.sysbench import parse_sysbench_fileio
from tests.recipe_runs import DATA, assert_declined, run_in_qemu, run_local
from tests.test_qemu_backend import kernels, lab, lab_tools  # noqa: F401  (fixtures)


def test_parse_fileio_captured_outputs():
    s = parse_sysbench_fileio((DATA / "sysbench-fileio-rndrw.stdout").read_text())
    assert s["reads_per_sec"] == pytest.approx(51301.98) and s["writes_per_sec"] == pytest.approx(34201.32)
    assert s["fsyncs_per_sec"] == pytest.approx(3421.13) and s["written_MiBps"] == pytest.approx(534.40)
    assert s["ops_per_sec"] == pytest.approx(51301.98 + 34201.32)
    seqwr = make_recipe("sysbench-fileio", {"mode": "seqwr"})
    assert seqwr.parse_output((DATA / "sysbench-fileio-seqwr.stdout").read_text(), "") == pytest.approx(83888.05)
    rndrd = make_recipe("sysbench-fileio", {"mode": "rndrd"})
    assert rndrd.parse_output((DATA / "sysbench-fileio-rndrd.stdout").read_text(), "") == pytest.approx(843551.69)
    with pytest.raises(ParseError):
        parse_sysbench_fileio("FATAL: Cannot open file 'test_file.0' errno = 2\n")


def test_parse_cpu_and_memory_captured_outputs():
    cpu = make_recipe("sysbench-cpu")
    assert cpu.parse_output((DATA / "sysbench-cpu.stdout").read_text(), "") == pytest.approx(1165.21)
    mem = make_recipe("sysbench-memory")
    assert mem.parse_output((DATA / "sysbench-memory-write.stdout").read_text(), "") == pytest.approx(1680.57)
    assert mem.parse_output((DATA / "sysbench-memory-rnd-read.stdout").read_text(), "") > 0
    for bad in ("", (DATA / "sysbench-cpu.stdout").read_text().replace("events per second:", "events:"),
                "FATAL: invalid option\n"):
        with pytest.raises(ParseError):
            cpu.parse_output(bad, "")
    with pytest.raises(ParseError, match="MiB transferred"):
        mem.parse_output((DATA / "sysbench-cpu.stdout").read_text(), "")


def test_claims():
    spec, reason = recipe_from_claim({}, "sysbench cpu --cpu-max-prime=20000 --threads=2 --time=30 run", None)
    assert (spec.name, spec.params) == ("sysbench-cpu", {"max_prime": 20000, "threads": 2, "time_s": 30}), reason
    assert spec.host_argv("/s") == [["sysbench", "cpu", "--cpu-max-prime=20000", "--threads=2", "--time=30", "run"]]
    spec, reason = recipe_from_claim(
        {}, "sysbench --test=memory --memory-block-size=1M --memory-total-size=100G --memory-oper=read "
            "--num-threads=4 --max-time=3600 run", None)
    assert spec.name == "sysbench-memory", reason
    assert spec.params == {"block_size": "1M", "oper": "read", "access_mode": "seq", "scope": "global",
                           "threads": 4, "time_s": 600}
    assert any("clamped from 3600 to 600" in n for n in spec.notes)
    assert any("--memory-total-size ignored" in n for n in spec.notes)
    assert_declined((("sysbench memory --memory-block-size=3k run", "not in the whitelist"),
                     ("sysbench memory --memory-oper=exec run", "not in the whitelist"),
                     ("sysbench cpu --cpu-max-prime=1e9 run", "cannot parse"),
                     ("sysbench cpu --threads=65 run", "threads=65 exceeds"),
                     ("sysbench cpu --lua=/tmp/x.lua run", "unsupported sysbench option"),
                     ("sysbench cpu run extra", "unexpected sysbench argument")))
    spec, _ = recipe_from_claim({}, None, "sysbench-cpu")
    assert spec.name == "sysbench-cpu" and spec.params["max_prime"] == 10000


@pytest.mark.parametrize("name,params,needle", [
    ("sysbench-cpu", {"max_prime": 5000, "time_s": 1}, "Prime numbers limit: 5000"),
    ("sysbench-memory", {"block_size": "64k", "oper": "read", "access_mode": "rnd", "time_s": 1}, "operation: read"),
    ("sysbench-memory", {"block_size": "1M", "threads": 2, "time_s": 1}, "block size: 1024KiB"),
])
def test_host_argv_runs_locally(tmp_path, name, params, needle):
    """The host form (what the ssh backend runs) as a local process: real sysbench, parsed."""
    value, stdout, _ = run_local(make_recipe(name, params), tmp_path)
    assert needle in stdout and value > 0


@pytest.mark.slow
@pytest.mark.parametrize("name,params", [
    ("sysbench-cpu", {"max_prime": 2000, "time_s": 1}),
    ("sysbench-memory", {"block_size": "4k", "time_s": 1}),
])
def test_real_run_in_qemu_guest(lab, kernels, name, params):  # noqa: F811
    """sysbench (and its shared libraries, LuaJIT among them) copied into the busybox initramfs,
    run under two real Debian kernels; the guest's value must equal the recipe's parser."""
    s = run_in_qemu(lab, kernels, make_recipe(name, params))
    print(f"\n{name} in QEMU: {dict(s)}")
