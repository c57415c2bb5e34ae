"""The shell commands the ssh backend runs on a lab host, built only from validated tokens
(``shlex``): one recipe step in the remote run directory, and the kill of a step's whole tree."""

from __future__ import annotations

import shlex

from bot.lab.backends.base import LabError
from bot.lab.recipes import SAFE_SCRATCH_RE


def remote_step(rundir: str, argv: list[str]) -> str:
    """The shell command for one recipe step: ``argv`` (validated tokens) quoted with
    ``shlex.join``, run in ``rundir`` with its process group id written to ``rundir/cmd.pid``."""
    if not SAFE_SCRATCH_RE.match(rundir) or ".." in rundir:
        raise LabError(f"unsafe remote directory {rundir!r}")
    if not argv or not all(isinstance(a, str) and a and "\0" not in a for a in argv):
        raise LabError("a remote step is a non-empty list of strings")
    d = shlex.quote(rundir)
    return f"cd {d} && echo $$ > {shlex.quote(rundir + '/cmd.pid')} && exec env LC_ALL=C {shlex.join(argv)}"


def measured_step(steps: list[list[str]]) -> int:
    """Index of the step whose output holds the measurement: the last one, except for
    ``prepare``/``run``/``cleanup`` sequences (sysbench), where it is ``run``."""
    if len(steps) > 1 and steps[-1][-1] == "cleanup":
        for i, argv in enumerate(steps):
            if argv[-1] == "run":
                return i
    return len(steps) - 1


def remote_kill(rundir: str) -> str:
    """Kill the step recorded in ``rundir/cmd.pid`` with everything it started: its process group
    and all its descendants (fio's job processes call setsid(), so the group is not enough).
    The pid is only trusted if that process still has ``rundir`` as its working directory (no
    stale pid of an unrelated process).  The tree is stopped first (so nothing escapes by being
    reparented), then sent TERM + CONT, and KILL a second later."""
    if not SAFE_SCRATCH_RE.match(rundir) or ".." in rundir:
        raise LabError(f"unsafe remote directory {rundir!r}")
    d = shlex.quote(rundir)
    pidfile = shlex.quote(rundir + "/cmd.pid")
    awk = ("{par[$1]=$2; grp[$1]=$3} END {keep[r]=1; n=1; while (n) {n=0; for (x in par) "
           "if (!(x in keep) && ((par[x] in keep) || grp[x]==r)) {keep[x]=1; n=1}} "
           "for (x in keep) if (x in par) print x}")
    return (f"p=$(cat {pidfile} 2>/dev/null); case \"$p\" in ''|*[!0-9]*) exit 0;; esac; "
            f"[ \"$p\" -gt 1 ] || exit 0; [ \"$(readlink /proc/$p/cwd 2>/dev/null)\" = {d} ] || exit 0; "
            f"tree() {{ ps -eo pid=,ppid=,pgid= | awk -v r=\"$p\" {shlex.quote(awk)}; }}; "
            "t=$(tree); [ -n \"$t\" ] || exit 0; kill -STOP $t 2>/dev/null; t=$(tree); kill -STOP $t 2>/dev/null; "
            "kill -TERM $t 2>/dev/null; kill -CONT $t 2>/dev/null; sleep 1; kill -KILL $t 2>/dev/null; "
            f"rm -f {pidfile}; exit 0")
