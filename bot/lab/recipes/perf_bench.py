"""``perf bench`` (Debian ``linux-perf``): syscall, sched messaging/pipe, mem memcpy/memset.

==========================  =======================================  ================================
recipe                      host command                             metric (direction)
==========================  =======================================  ================================
syscall-getpid              ``perf bench syscall basic --loop N``    syscall.calls_per_sec (higher)
perf-sched-messaging        ``perf bench sched messaging -g G -l L   perf-sched-messaging.time_s
                            [-t] [-p]``                              (lower)
perf-sched-pipe             ``perf bench sched pipe -l L [-T]``      perf-sched-pipe.ops_per_sec
                                                                     (higher)
perf-mem                    ``perf bench mem memcpy|memset -s SIZE   perf-mem.<op>_GBps (higher;
                            -l L -f default``                        10^9 bytes/s)
==========================  =======================================  ================================

The sched and mem recipes also run in the qemu guest: the host's perf binary and the ~25 shared
libraries ``ldd`` lists for it are copied into the initramfs (``guest_tools``), the same argv
runs there, awk reads the one result line and the output is echoed to the console (``OUT``) for
the host to check with the same parser.

``syscall-getpid`` runs in busybox guests without perf (so LAVA's busybox guest can run it too):
busybox cannot call getpid(2) in a loop, so there the workload is ``dd if=/dev/zero
of=/dev/null bs=1 count=N`` (N one-byte read(2) + N write(2): 2N cheap syscalls dominated by
syscall entry/exit like getpid, timed by the guest's monotonic clock).  Both builds of one comparison always run on the same backend, so the two are never mixed.

The output is perf's default format, parsed by :func:`bot.lab.parsers.parse_perf_bench`.
"""

from __future__ import annotations

from bot.lab.parsers import need, parse_perf_bench
from bot.lab.recipes.base import (MiB, BoolParam, Decline, EnumParam, GuestSteps, IntParam, LkpJob, Recipe,
                                  RecipeError, awk_value, claim_table, int_option, register, split_options, whitelisted, word)


def perf_bench_words(argv: list[str], collection: str, benches: tuple[str, ...]) -> list[str] | None:
    """The option words after ``perf bench <collection> <bench>``, or None if the line is another
    perf command (``perf record``, another benchmark)."""
    rest = argv[1:]
    if rest[:2] != ["bench", collection] or len(rest) < 3 or rest[2] not in benches:
        return None
    return rest[3:]


class _PerfBench(Recipe):
    tools = ("perf",)
    host_tool = "perf"
    bench: tuple[str, ...] = ()  # "perf bench <collection> <bench>" words it claims (collection first)
    flags: dict = {}  # option -> (param, value)
    ints: dict = {}  # option -> int param

    def claim(self, argv: list[str], limits):
        words = perf_bench_words(argv, self.bench[0], self.bench[1:])
        if words is None:
            return None
        params, notes = claim_table(self, words, limits, flags=self.flags, ints=self.ints,
                                    tool=f"perf bench {self.bench[0]}")
        return self.name, params, notes


@register
class SyscallGetpid(_PerfBench):
    name = "syscall-getpid"
    doc = "cheap-syscall loop (getpid via perf bench; 1-byte read/write via busybox dd in guests)"
    aliases = ("getpid", "perf-bench-syscall", "syscall")
    claim_doc = "perf bench syscall basic [--loop N]"
    bench = ("syscall", "basic", "getpid")
    ints = {"-l": "iterations", "--loop": "iterations"}
    params = (IntParam("iterations", 1000, 10_000_000, 200_000, extent=True, doc="loop iterations per sample"),)

    def metric(self, p: dict) -> str:
        return "syscall.calls_per_sec"

    def guest_steps(self, p: dict, f: str) -> GuestSteps:
        n = p["iterations"]
        return GuestSteps(":", f'dd if=/dev/zero of=/dev/null bs=1 count={n} 2>/dev/null || fail "dd loop failed"',
                          ":", f"{2 * n} * 1000000000 / ns")

    def host_argv(self, p: dict, scratch: str, f: str) -> list[list[str]]:
        return [["perf", "bench", "syscall", "basic", "--loop", str(p["iterations"])]]

    def parse(self, p: dict, stdout: str, stderr: str) -> float:
        return need(parse_perf_bench(stdout), "ops_per_sec", "'ops/sec' line", stdout)

    def lkp_job(self, p: dict) -> LkpJob:
        return LkpJob("perf-bench-syscall", True, [("perf-bench-syscall", {"op": "basic", "loop": p["iterations"]})],
                      ["perf-bench-syscall.getppid.ops_per_sec"])


@register
class PerfSchedMessaging(_PerfBench):
    name = "perf-sched-messaging"
    doc = "perf bench sched messaging: groups of senders/receivers over sockets or pipes (hackbench-like)"
    aliases = ("perf-bench-sched-messaging", "sched-messaging")
    claim_doc = "perf bench sched messaging [-g N] [-l N] [-t] [-p]"
    bench = ("sched", "messaging")
    flags = {"-t": ("threads", True), "--thread": ("threads", True), "-p": ("pipe", True), "--pipe": ("pipe", True)}
    ints = {"-g": "groups", "--group": "groups", "-l": "loops", "--nr_loops": "loops"}
    guest_tools = ("perf",)
    guest_extract = awk_value('$1 == "Total" && $2 == "time:"', "$3")
    higher_is_better = False
    params = (
        IntParam("groups", 1, 32, 10, doc="-g: groups of 20 senders + 20 receivers"),
        IntParam("loops", 1, 100_000, 100, extent=True, doc="-l: messages each sender sends"),
        BoolParam("threads", False, "-t: threads instead of processes"),
        BoolParam("pipe", False, "-p: pipes instead of socketpairs"),
    )

    def metric(self, p: dict) -> str:
        return "perf-sched-messaging.time_s"

    def host_argv(self, p: dict, scratch: str, f: str) -> list[list[str]]:
        return [["perf", "bench", "sched", "messaging", "-g", str(p["groups"]), "-l", str(p["loops"])]
                + (["-t"] if p["threads"] else []) + (["-p"] if p["pipe"] else [])]

    def parse(self, p: dict, stdout: str, stderr: str) -> float:
        return need(parse_perf_bench(stdout), "total_time_s", "'Total time' line", stdout)


@register
class PerfSchedPipe(_PerfBench):
    name = "perf-sched-pipe"
    doc = "perf bench sched pipe: two tasks ping-pong over a pipe (context-switch cost)"
    aliases = ("perf-bench-sched-pipe", "sched-pipe")
    claim_doc = "perf bench sched pipe [-l N] [-T]"
    bench = ("sched", "pipe")
    flags = {"-T": ("threads", True), "--threaded": ("threads", True)}
    ints = {"-l": "loops", "--loop": "loops"}
    guest_tools = ("perf",)
    guest_extract = awk_value('NF == 2 && $2 == "ops/sec"', "$1")
    params = (
        IntParam("loops", 1000, 10_000_000, 100_000, extent=True, doc="-l: round trips"),
        BoolParam("threads", False, "-T: threads instead of processes"),
    )

    def metric(self, p: dict) -> str:
        return "perf-sched-pipe.ops_per_sec"

    def host_argv(self, p: dict, scratch: str, f: str) -> list[list[str]]:
        return [["perf", "bench", "sched", "pipe", "-l", str(p["loops"])] + (["-T"] if p["threads"] else [])]

    def parse(self, p: dict, stdout: str, stderr: str) -> float:
        return need(parse_perf_bench(stdout), "ops_per_sec", "'ops/sec' line", stdout)


_MEM_SIZES = {f"{n}MB": n * MiB for n in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)}
_MEM_SIZES.update({f"{n}KB": n * 1024 for n in (4, 16, 64, 256)})


@register
class PerfMem(_PerfBench):
    name = "perf-mem"
    doc = "perf bench mem memcpy/memset of one buffer size with glibc's function"
    aliases = ("perf-bench-mem", "memcpy", "memset")
    claim_doc = "perf bench mem memcpy|memset [-s SIZE] [-l N] [-f default]"
    guest_tools = ("perf",)
    guest_extract = awk_value('NF == 2 && $2 == "GB/sec"', "$1")
    params = (
        EnumParam("op", ("memcpy", "memset"), "memcpy", "which benchmark"),
        EnumParam("size", tuple(_MEM_SIZES), "1MB", "-s: buffer size (perf's units: MB = MiB)"),
        IntParam("loops", 1, 10_000, 100, extent=True, doc="-l: passes over the buffer"),
    )

    def bytes(self, p: dict) -> int:
        if p.get("size") not in _MEM_SIZES:
            raise RecipeError("size is not whitelisted")
        return _MEM_SIZES[p["size"]] * (2 if p.get("op") == "memcpy" else 1)

    def metric(self, p: dict) -> str:
        return f"perf-mem.{p['op']}_GBps"

    def from_benchmark(self, benchmark: str) -> dict | None:
        return {"op": benchmark} if benchmark in ("memcpy", "memset") else {}

    def claim(self, argv: list[str], limits):
        words = perf_bench_words(argv, "mem", ("memcpy", "memset"))
        if words is None:
            return None
        notes: list[str] = []
        params: dict = {"op": argv[3]}
        for opt, val in split_options(words, valued={"-s", "--size", "-l", "--nr_loops", "-f", "--function"},
                                      tool=f"perf bench mem {argv[3]}"):
            if opt in ("-s", "--size"):
                size = val.upper().replace("B", "") + "B" if val.upper().endswith(("KB", "MB", "K", "M")) else val
                params["size"] = whitelisted(self, "size", size, opt)
            elif opt in ("-l", "--nr_loops"):
                params["loops"] = int_option(self, "loops", val, opt, limits, notes)
            elif val != "default":
                raise Decline(f"{opt} {word(val)!r}: only glibc's 'default' function is vetted")
        return self.name, params, notes

    def host_argv(self, p: dict, scratch: str, f: str) -> list[list[str]]:
        return [["perf", "bench", "mem", p["op"], "-s", p["size"], "-l", str(p["loops"]), "-f", "default"]]

    def parse(self, p: dict, stdout: str, stderr: str) -> float:
        return need(parse_perf_bench(stdout), "GB_per_sec", "'GB/sec' line", stdout)
