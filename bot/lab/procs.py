"""Local process checks shared by the lab backends (Linux /proc).

A backend records the pid of each worker it starts and must later tell "still running" from
"died" without trusting a pid blindly (pids are reused).  A process counts as ours when its
command line contains a marker (the run directory, or a ``-name`` given to qemu).

One subtlety: right after ``execve`` the new program's argument pages are not yet set up, and
``/proc/PID/cmdline`` reads empty for a moment.  ``subprocess.Popen`` returns as soon as the
close-on-exec pipe closes, which is inside that window, so a check made immediately after
starting a worker can see an empty command line.  An empty command line is therefore re-read
for a short while before the process is judged not ours."""

from __future__ import annotations

import time
from pathlib import Path

EXEC_SETTLE_S = 2.0


def _state_and_cmdline(pid: int) -> tuple[str, str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    state = stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else "?"
    return state, cmdline


def proc_alive_and_ours(pid, marker: str, settle_s: float = EXEC_SETTLE_S) -> bool:
    """True if ``pid`` is a live (not zombie) process whose command line contains ``marker``.

    An empty command line (a process in the middle of exec) is re-read for up to ``settle_s``
    seconds; one that stays empty (a kernel thread that reused the pid) is not ours."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    end = time.monotonic() + settle_s
    while True:
        got = _state_and_cmdline(pid)
        if got is None:
            return False
        state, cmdline = got
        if state in ("Z", "X"):
            return False
        if cmdline.strip():
            return marker in cmdline
        if time.monotonic() >= end:
            return False
        time.sleep(0.01)
