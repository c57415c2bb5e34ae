"""``stress-ng`` (Debian ``stress-ng``): one stressor from a whitelist of kernel-path stressors,
``N`` instances for ``T`` seconds, bogo-ops per second (real time) as LKP's
``stress-ng.<stressor>.ops_per_sec`` reports it.

Host command: ``stress-ng --<stressor> N --timeout Ts --metrics-brief --temp-path <scratch>``; the
``metrc:`` table on stderr gives ``bogo ops``, real/usr/sys time and bogo ops/s (real time,
usr+sys time); the real-time rate is the metric (higher is better).  A stressor that did no bogo
op in the time given is a failed sample, not a zero.  In the qemu guest the host's stress-ng and its
shared libraries are copied into the initramfs and run the same argv (temp files on the guest's
tmpfs scratch); awk reads the stressor's row and the output is echoed for the host to check.
"""

from __future__ import annotations

import re

from bot.lab.parsers import NUM, ParseError, num, tail
from bot.lab.recipes.base import (Decline, EnumParam, IntParam, LkpJob, Recipe, awk_value, duration_option, int_option, register,
                                  split_options, threads_param, time_param, word)

# syscall/scheduler/IPC/VFS stressors that finish plenty of bogo ops in ~1 s and need no devices
STRESSORS = ("cpu", "switch", "pipe", "fork", "futex", "sem", "msg", "context", "getdent", "poll", "sock",
             "matrix")


def parse_stress_ng(stderr: str, stressor: str) -> dict:
    """``--metrics-brief`` (stress-ng 0.15: ``stress-ng: metrc: [pid] NAME ops real usr sys
    ops/s ops/s``; later versions add two columns, CPU % per instance and max RSS, and older ones
    say ``info:``: accepted, as LKP's parser does) -> ``{"bogo_ops", "real_s", "usr_s", "sys_s", "ops_per_sec",
    "ops_per_sec_cpu"}`` for ``stressor``."""
    if not isinstance(stderr, str):
        raise ParseError("stress-ng output must be text")
    rx = re.compile(rf"^stress-ng: (?:metrc|info): +\[[0-9]+\] {re.escape(stressor)} +([0-9]+) +({NUM}) +({NUM}) "
                    rf"+({NUM}) +({NUM}) +({NUM})(?: +{NUM} +{NUM})?\s*$", re.M)
    rows = rx.findall(stderr)
    if len(rows) != 1:
        raise ParseError(f"expected one metrics row for stressor {stressor!r}, found {len(rows)}: {tail(stderr)}")
    ops, real, usr, sys_, rate, cpu_rate = rows[0]
    out = {"bogo_ops": int(ops), "real_s": num(real), "usr_s": num(usr), "sys_s": num(sys_),
           "ops_per_sec": num(rate), "ops_per_sec_cpu": num(cpu_rate)}
    if out["bogo_ops"] <= 0 or out["ops_per_sec"] <= 0:
        raise ParseError(f"stress-ng {stressor} did no bogo ops: raise time_s")
    return out


@register
class StressNg(Recipe):
    name = "stress-ng"
    doc = "stress-ng: one whitelisted stressor, bogo-ops per second"
    tools = ("stress-ng",)
    aliases = ("stress-ng",)
    needs_command = True
    host_tool = "stress-ng"
    guest_tools = ("stress-ng",)
    # the one stressor's row of the metrics table (header/units/misc rows differ in shape): ops/s real
    guest_extract = awk_value('$2 == "metrc:" && (NF == 10 || NF == 12) && $5 ~ /^[0-9]+$/', "$9")
    claim_doc = f"stress-ng --STRESSOR N [--timeout T] (STRESSOR: {', '.join(STRESSORS)})"
    params = (
        EnumParam("stressor", STRESSORS, "switch", "the stressor"),
        threads_param("--<stressor> N: instances (0, one per CPU, is not accepted)"),
        time_param("--timeout", 10),
    )

    def metric(self, p: dict) -> str:
        return f"stress-ng.{p['stressor']}.ops_per_sec"

    def from_benchmark(self, benchmark: str) -> dict | None:
        """LKP metric names carry the stressor: ``stress-ng.switch.ops_per_sec``."""
        parts = benchmark.split(".")
        return {"stressor": parts[1]} if len(parts) > 1 and parts[1] in STRESSORS else None

    def claim(self, argv: list[str], limits):
        notes: list[str] = []
        params: dict = {}
        stressors = {f"--{s}" for s in STRESSORS}
        opts = split_options(argv[1:], flags={"--metrics-brief", "--metrics", "--times", "-v", "--verbose"},
                             valued=stressors | {"--timeout", "-t", "--temp-path", "--log-file", "--yaml", "-Y"},
                             tool="stress-ng")
        for opt, val in opts:
            if opt in stressors:
                if "stressor" in params:
                    raise Decline("stress-ng with more than one stressor: one metric per recipe")
                params["stressor"] = opt[2:]
                n = int_option(self, "threads", val, opt, limits, notes) if val != "0" else None
                if n is None:
                    raise Decline(f"{opt} 0 (one instance per CPU) depends on the machine; give a count")
                params["threads"] = n
            elif opt in ("--timeout", "-t"):
                params["time_s"] = duration_option(self, "time_s", val, opt, limits, notes)
            elif opt in ("--temp-path", "--log-file", "--yaml", "-Y"):
                notes.append(f"{opt} {word(val)!r} from the report not used (the scratch area is)")
        if "stressor" not in params:
            raise Decline(f"stress-ng without a vetted stressor (vetted: {', '.join(STRESSORS)})")
        return self.name, params, notes

    def lkp_job(self, p: dict) -> LkpJob:
        """intel/lkp-tests programs/stress-ng: ``run`` reads ``test``, ``nr_threads``, ``testtime``
        (``stress-ng --timeout $testtime --times --verify --metrics --no-rand-seed --$test
        $nr_threads``); ``parse`` prints ``<stressor>.ops_per_sec`` = bogo ops/s (real time)."""
        return LkpJob("stress-ng", True, [("stress-ng", {"test": p["stressor"], "nr_threads": p["threads"],
                                                         "testtime": f"{p['time_s']}s"})],
                      [self.metric(p)])

    def host_argv(self, p: dict, scratch: str, f: str) -> list[list[str]]:
        return [["stress-ng", f"--{p['stressor']}", str(p["threads"]), "--timeout", f"{p['time_s']}s",
                 "--metrics-brief", "--temp-path", scratch]]

    def parse(self, p: dict, stdout: str, stderr: str) -> float:
        return parse_stress_ng(stderr, p["stressor"])["ops_per_sec"]
