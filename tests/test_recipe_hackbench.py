"""hackbench recipe (bot/lab/recipes/hackbench.py, Debian rt-tests): the parser on outputs
captured from hackbench 2.4, claims, and real runs: over SSH to the local sshd, and in the QEMU
busybox guest (the host's hackbench and its libraries in the initramfs) under real kernels."""

from __future__ import annotations

import pytest

from bot.lab.backends import RunSpec
from bot.lab.builds import BuildSpec
from bot.lab.parsers import ParseError
from bot.lab.recipes import make_recipe, recipe_from_claim
from bot.lab.recipes.hackbench import parse_hackbench
from tests.recipe_runs import DATA, assert_declined, run_in_qemu, run_local, run_over_ssh
from tests.test_qemu_backend import kernels, lab, lab_tools  # noqa: F401  (fixtures)
from tests.test_ssh_backend import sshd  # noqa: F401  (fixture)


def test_parse_captured_outputs():
    assert parse_hackbench((DATA / "hackbench-process.stdout").read_text()) > 0
    text = (DATA / "hackbench-thread-pipe.stdout").read_text()
    assert "threaded mode" in text and parse_hackbench(text) == pytest.approx(0.575)
    for bad in ("", "Running in process mode with 2 groups\n", "Time: 0.000\n", text + text):
        with pytest.raises(ParseError):
            parse_hackbench(bad)


def test_claims():
    spec, reason = recipe_from_claim({}, "hackbench -g 16 -l 20000 -T -p", "hackbench.throughput")
    assert spec.name == "hackbench", reason
    assert spec.params == {"groups": 16, "fds": 20, "loops": 20000, "datasize": 100, "mode": "thread", "pipe": True}
    assert spec.host_argv("/s") == [["hackbench", "-g", "16", "-f", "20", "-l", "20000", "-s", "100", "-T", "-p"]]
    assert spec.metric == "hackbench.time_s" and not spec.higher_is_better
    spec, reason = recipe_from_claim({}, "hackbench --groups=4 --loops 100 --process -s 512", None)
    assert spec.params["groups"] == 4 and spec.params["datasize"] == 512 and spec.params["mode"] == "process", reason
    spec, reason = recipe_from_claim({}, "hackbench -g4 -l 9999999", None)
    assert spec.params["groups"] == 4 and spec.params["loops"] == 1_000_000 and "clamped" in spec.notes[0]
    assert_declined((("hackbench -g 100", "groups=100 exceeds"), ("hackbench -T -P", "conflicting options for mode"),
                     ("hackbench -F", "unsupported hackbench option"), ("hackbench 10 process 1000", "unexpected"),
                     ("hackbench -g 2 -g 3", "given twice"), ("hackbench -i", "unsupported")))
    spec, _ = recipe_from_claim({}, None, "hackbench.throughput")
    assert spec.name == "hackbench" and "default" in spec.notes[0]


@pytest.mark.slow
def test_real_run_over_ssh(sshd, tmp_path):  # noqa: F811
    s = run_over_ssh(sshd, tmp_path / "lab", make_recipe("hackbench", {"groups": 2, "loops": 200}))
    print(f"\nhackbench: {dict(s)}")


def test_thread_pipe_shape_runs_locally(tmp_path):
    value, stdout, _ = run_local(make_recipe("hackbench", {"groups": 1, "fds": 10, "loops": 100, "mode": "thread",
                                                           "pipe": True}), tmp_path)
    assert "threaded mode with 1 groups using 20 file descriptors each (== 20 tasks)" in stdout and value > 0


@pytest.mark.slow
def test_real_run_in_qemu_guest(lab, kernels):  # noqa: F811
    """hackbench (and libc) copied into the busybox initramfs, run under two real Debian kernels."""
    s = run_in_qemu(lab, kernels, make_recipe("hackbench", {"groups": 1, "fds": 10, "loops": 100}))
    print(f"\nhackbench in QEMU: {dict(s)}")


def test_guest_initramfs_carries_hackbench_and_its_libraries(tmp_path, lab_tools):  # noqa: F811
    import gzip
    import subprocess

    from bot.lab import initramfs
    from bot.lab.recipes import make_recipe as mk

    spec = mk("hackbench", {"groups": 1})
    assert spec.supports("qemu") == (True, "ok") and not spec.supports("lava")[0]
    path = initramfs.initramfs_for(spec, samples=1, warmup=0, scratch_mib=64, cache_dir=tmp_path)
    listing = subprocess.run(["cpio", "-it"], input=gzip.decompress(path.read_bytes()), capture_output=True,
                             check=True).stdout.decode().split()
    assert "usr/bin/hackbench" in listing and "lib64/ld-linux-x86-64.so.2" in listing
    assert any(x.endswith("/libc.so.6") for x in listing)
    init = (tmp_path / path.name.replace(".cpio.gz", ".init")).read_text()
    assert "hackbench -g 1 -f 20 -l 100 -s 100 -P >" in init and "export PATH=/bin:/usr/bin" in init


def test_guest_tools_need_the_host_arch(tmp_path, lab_tools):  # noqa: F811
    from bot.lab.backends import LabError
    from bot.lab.backends.qemu import QemuBackend

    b = QemuBackend.from_config({"lab": {"qemu": {"work_dir": str(tmp_path)}}})
    job = RunSpec(make_recipe("hackbench"), BuildSpec(image="/k/a", arch="aarch64"),
                  BuildSpec(image="/k/b", arch="aarch64"), runs=1)
    with pytest.raises(LabError, match="must be the host's"):
        b.submit(job)
