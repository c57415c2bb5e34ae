"""``hackbench`` (Debian ``rt-tests``): groups of senders and receivers passing messages over
socketpairs or pipes, processes or threads; the scheduler and IPC paths LKP's hackbench reports.

Host command: ``hackbench -g G -f F -l L -s BYTES [-T|-P] [-p]``; it prints ``Time: S`` (seconds
for the whole exchange).  Metric ``hackbench.time_s``, **lower is better**.  In the qemu guest the
host's hackbench (and libc) is copied into the initramfs and runs the same argv; the guest reads
the ``Time:`` line with awk and echoes the output for the host to check with :func:`parse_hackbench`.
"""

from __future__ import annotations

import re

from bot.lab.parsers import NUM, ParseError, num, tail
from bot.lab.recipes.base import (BoolParam, EnumParam, IntParam, Recipe, awk_value, claim_table,
                                  register)

_TIME_RE = re.compile(rf"^Time: ({NUM})\s*$", re.M)


def parse_hackbench(stdout: str) -> float:
    """rt-tests hackbench's ``Time: S`` line -> seconds (> 0)."""
    if not isinstance(stdout, str):
        raise ParseError("hackbench output must be text")
    found = _TIME_RE.findall(stdout)
    if len(found) != 1:
        raise ParseError(f"expected one 'Time:' line in hackbench output, found {len(found)}: {tail(stdout)}")
    v = num(found[0])
    if v <= 0:
        raise ParseError("hackbench reported zero time")
    return v


_FLAGS = {"-T": ("mode", "thread"), "--threads": ("mode", "thread"), "-P": ("mode", "process"),
          "--process": ("mode", "process"), "-p": ("pipe", True), "--pipe": ("pipe", True)}
_VALUED = {"-g": "groups", "--groups": "groups", "-f": "fds", "--fds": "fds", "-l": "loops", "--loops": "loops",
           "-s": "datasize", "--datasize": "datasize"}


@register
class Hackbench(Recipe):
    name = "hackbench"
    doc = "rt-tests hackbench: message passing between groups of tasks (scheduler/IPC)"
    tools = ("hackbench",)
    aliases = ("hackbench",)
    host_tool = "hackbench"
    guest_tools = ("hackbench",)
    guest_extract = awk_value('$1 == "Time:"', "$2")
    higher_is_better = False
    claim_doc = "hackbench [-g N] [-f N] [-l N] [-s BYTES] [-T|-P] [-p]"
    params = (
        IntParam("groups", 1, 32, 10, doc="-g: groups (each 2 x fds tasks)"),
        IntParam("fds", 1, 40, 20, doc="-f: senders (and receivers) per group"),
        IntParam("loops", 10, 1_000_000, 100, extent=True, doc="-l: messages per sender"),
        IntParam("datasize", 1, 65536, 100, doc="-s: message size in bytes"),
        EnumParam("mode", ("process", "thread"), "process", "-P (fork) or -T (threads)"),
        BoolParam("pipe", False, "-p: pipes instead of socketpairs"),
    )

    def metric(self, p: dict) -> str:
        return "hackbench.time_s"

    def claim(self, argv: list[str], limits):
        params, notes = claim_table(self, argv[1:], limits, flags=_FLAGS, ints=_VALUED, tool="hackbench")
        return self.name, params, notes

    def host_argv(self, p: dict, scratch: str, f: str) -> list[list[str]]:
        return [["hackbench", "-g", str(p["groups"]), "-f", str(p["fds"]), "-l", str(p["loops"]),
                 "-s", str(p["datasize"]), "-T" if p["mode"] == "thread" else "-P"] + (["-p"] if p["pipe"] else [])]

    def parse(self, p: dict, stdout: str, stderr: str) -> float:
        return parse_hackbench(stdout)

