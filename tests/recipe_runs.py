"""Helpers for the per-recipe tests (tests/test_recipe_*.py): run a recipe FOR REAL.

* :func:`run_over_ssh` submits a one-sample-per-build run to the ssh backend against the local
  OpenSSH server of tests/test_ssh_backend.py (its ``sshd`` fixture), the way a lab runs it, and
  returns the samples: the real tool ran on this machine over SSH and the recipe's parser read
  its real output.
* :func:`run_local` runs the recipe's host argv steps as local processes (``LC_ALL=C``, no
  shell, in a scratch directory) and returns ``(value, stdout, stderr)`` of the measured step:
  the cheap way to exercise more parameter shapes of a tool the ssh test already ran.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bot.lab.backends import DONE, RunSpec, get_backend
from bot.lab.backends.ssh import measured_step
from bot.lab.builds import BuildSpec

DATA = Path(__file__).parent / "data" / "lab"
PACKAGES = (Path(__file__).parent / "system-packages.txt").read_text().split()


def need_tool(spec) -> None:
    """The recipe's host tool must be installed (tests/system-packages.txt): fail, never skip."""
    tool = spec.recipe.host_tool
    if shutil.which(tool) is None:
        pytest.fail(f"{tool} (for {spec.name}) is not installed: apt-get install the package listed in "
                    f"tests/system-packages.txt")


def run_local(spec, scratch: Path, timeout: float = 60) -> tuple[float, str, str]:
    need_tool(spec)
    scratch.mkdir(parents=True, exist_ok=True)
    steps = spec.host_argv(str(scratch))
    measured = measured_step(steps)
    out = None
    for i, argv in enumerate(steps):
        r = subprocess.run(argv, cwd=scratch, env={**os.environ, "LC_ALL": "C"}, capture_output=True, text=True,
                           timeout=timeout)
        assert r.returncode == 0, (argv, r.stdout[-2000:], r.stderr[-2000:])
        if i == measured:
            out = r
    return spec.parse_output(out.stdout, out.stderr), out.stdout, out.stderr


def run_over_ssh(sshd, work: Path, spec, timeout: float = 60):
    """One warm-up-free sample per build through the ssh backend; returns the Samples."""
    from tests.test_ssh_backend import BAD_PKG, GOOD_PKG

    need_tool(spec)
    backend = get_backend("ssh", sshd.ssh_config(work))
    job = RunSpec(recipe=spec, good=BuildSpec(debian=GOOD_PKG), bad=BuildSpec(debian=BAD_PKG), runs=1,
                  samples_per_batch=1, warmup=0, order="abab")
    handle = backend.submit(job)
    st = backend.wait(handle, timeout=timeout, interval=0.1)
    assert st.state == DONE, st.message
    s = backend.fetch_samples(handle)
    assert s.metric == spec.metric and s.higher_is_better == spec.higher_is_better
    assert len(s["good"]) == 1 and len(s["bad"]) == 1
    assert all(isinstance(v, float) and v > 0 for v in s["good"] + s["bad"])
    log = Path(s.log_path).read_text(errors="replace")
    assert spec.host_argv("/x")[measured_step(spec.host_argv("/x"))][0] in log  # the real command ran
    return s


def assert_declined(cases) -> None:
    """Every ``(command line, needle)``: no recipe, and the reason contains the needle."""
    from bot.lab.recipes import recipe_from_claim

    for cmd, needle in cases:
        spec, reason = recipe_from_claim({}, cmd, None)
        assert spec is None and reason.startswith("declined:") and needle in reason, (cmd, reason)


def run_in_qemu(lab, kernels, spec, timeout: float = 240):
    """One sample per build in the busybox guest of the qemu backend (tests/test_qemu_backend.py's
    ``lab`` and ``kernels`` fixtures: two real Debian kernels under QEMU).  For a tool that
    measures itself the guest echoes its output (``OUT`` lines): each boot's output is parsed
    again here with the recipe's own parser and must give the sample the guest reported."""
    import re

    from tests.test_qemu_backend import _logs

    job = RunSpec(spec, BuildSpec(image=kernels["good_image"]), BuildSpec(image=kernels["bad_image"]), runs=1,
                  samples_per_batch=1, warmup=0)
    handle = lab.submit(job)
    st = lab.wait(handle, timeout=timeout)
    desc = lab.describe(handle)
    assert st.state == DONE, (st, _logs(desc))
    s = lab.fetch_samples(handle)
    assert s.metric == spec.metric and len(s["good"]) == 1 and len(s["bad"]) == 1
    assert all(v > 0 for v in s["good"] + s["bad"])
    log = Path(s.log_path).read_text(errors="replace")
    boots = log.split("REGTRIAGE-START ")[1:]
    assert len(boots) == 2
    for boot, label in zip(boots, s.order):
        out = "\n".join(line[4:] for line in re.findall(r"^OUT .*$|^OUT$", boot.replace("\r", ""), re.M))
        if spec.recipe.guest_tools:
            assert out, boot[-2000:]
            assert spec.parse_output(out, out) == pytest.approx(s[label][0], rel=1e-6)
    return s


def run_guest_script_locally(spec, scratch: Path, samples: int = 1) -> tuple[list[float], str]:
    """The recipe's guest script (extract mode: the tool measures itself) run by the host's static
    busybox ``sh`` against the host's tool, as the guest's init would run it: the BENCH values and
    the tool output it echoed (``OUT`` lines).  A quick check of the guest's awk reading between
    the QEMU runs; the QEMU tests run the same script in the real guest."""
    import re

    scratch.mkdir(parents=True, exist_ok=True)
    script = 'fail() { echo "RESULT fail $*"; exit 1; }\n' + spec.render_guest_script(
        scratch=str(scratch), samples=samples, warmup=0)
    r = subprocess.run(["/bin/busybox", "sh", "-c", script], capture_output=True, text=True, timeout=120,
                       env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"})
    assert r.returncode == 0 and "RESULT fail" not in r.stdout, (r.stdout[-2000:], r.stderr[-2000:])
    bench = [float(v) for v in re.findall(rf"^BENCH {re.escape(spec.metric)}=([0-9.]+)$", r.stdout, re.M)]
    out = "\n".join(line[4:] for line in r.stdout.splitlines() if line.startswith("OUT "))
    return bench, out
