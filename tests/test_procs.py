"""bot.lab.procs: telling a live worker of ours from a dead one or a reused pid."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bot.lab import procs
from bot.lab.procs import proc_alive_and_ours


def test_live_process_with_the_marker_is_ours():
    marker = f"regtriage-marker-{os.getpid()}"
    p = subprocess.Popen([sys.executable, "-c", "import time, sys; time.sleep(30)", marker])
    try:
        assert proc_alive_and_ours(p.pid, marker)  # right after Popen: no false "dead"
        assert not proc_alive_and_ours(p.pid, "some-other-run")
    finally:
        p.kill()
        p.wait()


def test_zombie_and_missing_and_bogus_pids_are_not_ours():
    marker = f"regtriage-zombie-{os.getpid()}"
    p = subprocess.Popen([sys.executable, "-c", "pass", marker])
    end = time.monotonic() + 10
    while time.monotonic() < end and "Z" not in Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]:
        time.sleep(0.02)
    assert not proc_alive_and_ours(p.pid, marker)  # exited, not yet reaped
    p.wait()
    assert not proc_alive_and_ours(p.pid, marker)  # gone
    for bogus in (None, 0, -1, True, "123"):
        assert not proc_alive_and_ours(bogus, marker)


def test_an_empty_cmdline_mid_exec_is_re_read(monkeypatch):
    """Right after execve the command line reads empty for a moment: that is not a dead worker."""
    reads = iter([("R", ""), ("R", ""), ("S", "python -m bot.lab.backends.qemu worker /runs/x")])
    monkeypatch.setattr(procs, "_state_and_cmdline", lambda pid: next(reads))
    assert proc_alive_and_ours(4242, "/runs/x", settle_s=5)


def test_a_cmdline_that_stays_empty_is_not_ours(monkeypatch):
    """A kernel thread that reused the pid has an empty command line for good."""
    calls = []
    monkeypatch.setattr(procs, "_state_and_cmdline", lambda pid: calls.append(pid) or ("S", ""))
    t0 = time.monotonic()
    assert not proc_alive_and_ours(4242, "/runs/x", settle_s=0.1)
    assert len(calls) > 1 and time.monotonic() - t0 < 2
