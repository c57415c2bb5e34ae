"""sysbench (Debian ``sysbench`` 1.0): fileio, cpu and memory.

=================  ===============================================  ==================================
recipe             host command                                     metric (higher is better)
=================  ===============================================  ==================================
sysbench-fileio    ``sysbench fileio ... prepare|run|cleanup`` in   sysbench-fileio.reads_per_sec /
                   the scratch directory                            .writes_per_sec / .ops_per_sec
                                                                    (by ``mode``; ops = reads+writes)
sysbench-cpu       ``sysbench cpu --cpu-max-prime=N run``           sysbench-cpu.events_per_sec
sysbench-memory    ``sysbench memory --memory-block-size=...        sysbench-memory.MiB_per_sec
                   --memory-oper=... --memory-access-mode=... run``
=================  ===============================================  ==================================

All run for ``--time`` seconds with ``--threads``.  cpu and memory also run in the qemu guest (the
host's sysbench and its shared libraries copied into the initramfs; awk reads the result line,
the output is echoed for the host to check with the same parser).  Claims: ``sysbench [--test=]TEST
[--opt=value ...] [prepare|run|cleanup]`` (1.0 and the older 0.4/0.5 spellings ``--num-threads``,
``--max-time``).
"""

from __future__ import annotations

import re

from bot.lab.parsers import NUM, ParseError, num, tail
from bot.lab.recipes.base import (BLOCK_SIZES, BS_BY_BYTES, MiB, BoolParam, Decline, EnumParam, IntParam, LkpJob,
                                  Recipe, RecipeError, awk_value, clamp, duration_option, int_option, parse_size, register,
                                  threads_param, time_param, whitelisted, word)

_IGNORED = ("max-requests", "events", "report-interval", "percentile", "histogram", "rand-type")


def sysbench_options(argv: list[str], test: str) -> list[tuple[str, str]] | None:
    """``sysbench [--test=]TEST [--opt=value ...] [prepare|run|cleanup]`` -> ``[(opt, value)]``
    (``opt`` without the dashes), or None if the line is another sysbench test."""
    words = [a for a in argv[1:] if not a.startswith("--")]
    opts = [a for a in argv[1:] if a.startswith("--")]
    named = [o.split("=", 1)[1] for o in opts if o.startswith("--test=")]
    if (named[-1] if named else (words[0] if words else None)) != test:
        return None
    extra = [w for w in words if w not in (test, "prepare", "run", "cleanup")]
    if extra:
        raise Decline(f"unexpected sysbench argument {word(extra[0])!r}")
    out, seen = [], set()
    for o in opts:
        k, sep, v = o[2:].partition("=")
        if k in seen:
            raise Decline(f"sysbench option --{word(k)} given twice")
        seen.add(k)
        if k == "test":
            continue
        if not sep:
            raise Decline(f"sysbench option --{word(k)} needs a value")
        out.append((k, v))
    return out


def _labelled(stdout: str, label: str, what: str) -> float:
    """The number after ``label`` (``events per second:``) in sysbench's report."""
    m = re.search(rf"^\s*{re.escape(label)}\s*({NUM})\s*$", stdout, re.M)
    if m is None:
        raise ParseError(f"sysbench output lacks {what}: {tail(stdout)}")
    v = num(m.group(1))
    if v <= 0:
        raise ParseError(f"sysbench {what} is {v}: nothing was measured")
    return v


class _Sysbench(Recipe):
    tools = ("sysbench",)
    host_tool = "sysbench"
    test = ""

    def claim(self, argv: list[str], limits):
        opts = sysbench_options(argv, self.test)
        if opts is None:
            return None
        notes: list[str] = []
        params: dict = {}
        for k, v in opts:
            if k in ("threads", "num-threads"):
                params["threads"] = int_option(self, "threads", v, f"--{k}", limits, notes)
            elif k in ("time", "max-time"):
                params["time_s"] = duration_option(self, "time_s", v, f"--{k}", limits, notes)
            elif k in _IGNORED:
                notes.append(f"--{k} ignored")
            else:
                self.claim_option(k, v, params, limits, notes)
        self.claim_done(params, limits, notes)
        return self.name, params, notes

    def claim_option(self, k: str, v: str, params: dict, limits, notes: list[str]) -> None:
        raise Decline(f"unsupported sysbench option --{word(k)}")

    def claim_done(self, params: dict, limits, notes: list[str]) -> None:
        pass

    def common(self, p: dict) -> list[str]:
        return [f"--threads={p['threads']}", f"--time={p['time_s']}"]


_FILEIO_MODES = ("seqwr", "seqrewr", "seqrd", "rndrd", "rndwr", "rndrw")
_SB_LINES = {"reads/s": "reads_per_sec", "writes/s": "writes_per_sec", "fsyncs/s": "fsyncs_per_sec",
             "read, MiB/s": "read_MiBps", "written, MiB/s": "written_MiBps"}


def parse_sysbench_fileio(stdout: str) -> dict:
    """``sysbench fileio ... run`` -> ``{"reads_per_sec", "writes_per_sec", "fsyncs_per_sec",
    "read_MiBps", "written_MiBps", "ops_per_sec"}``; ``ops_per_sec`` = reads/s + writes/s
    (fsyncs are not counted)."""
    if not isinstance(stdout, str):
        raise ParseError("sysbench output must be text")
    out: dict = {}
    section = None
    for raw in stdout.splitlines():
        line = raw.strip()
        if line in ("File operations:", "Throughput:"):
            section = line
            continue
        if not line:
            continue
        if section:
            m = re.match(rf"^([a-z, /A-Z]+):\s+({NUM})$", line)
            if m and m.group(1) in _SB_LINES:
                out[_SB_LINES[m.group(1)]] = num(m.group(2))
                continue
            section = None if not m else section
    if "FATAL" in stdout and len(out) < 5:
        raise ParseError(f"sysbench failed: {tail(stdout)}")
    missing = [k for k in ("reads_per_sec", "writes_per_sec") if k not in out]
    if missing:
        raise ParseError(f"sysbench fileio output lacks {', '.join(missing)}: {tail(stdout)}")
    out["ops_per_sec"] = out["reads_per_sec"] + out["writes_per_sec"]
    return out


@register
class SysbenchFileio(_Sysbench):
    name = "sysbench-fileio"
    test = "fileio"
    doc = "sysbench fileio prepare/run/cleanup in the scratch directory"
    needs_command = True
    claim_doc = "sysbench fileio --file-test-mode=... [--file-total-size --file-num --file-block-size ...]"
    params = (
        IntParam("size_mib", 1, 1 << 20, 1024, extent=True, doc="--file-total-size in MiB"),
        IntParam("file_num", 1, 1024, 128, doc="--file-num"),
        EnumParam("mode", _FILEIO_MODES, "rndrw", "--file-test-mode"),
        EnumParam("block_size", tuple(k for k, v in BLOCK_SIZES.items() if v <= 1 * MiB), "16k", "--file-block-size"),
        EnumParam("io_mode", ("sync", "async", "mmap"), "sync", "--file-io-mode"),
        threads_param("--threads"),
        time_param("--time", 60),
        IntParam("fsync_freq", 0, 1_000_000, 100, doc="--file-fsync-freq"),
        BoolParam("direct", False, "--file-extra-flags=direct"),
    )

    def bytes(self, p: dict) -> int:
        if type(p.get("size_mib")) is not int:
            raise RecipeError("size_mib must be an integer")
        return p["size_mib"] * MiB

    def metric(self, p: dict) -> str:
        m = p["mode"]
        return ("sysbench-fileio.reads_per_sec" if m in ("seqrd", "rndrd") else
                "sysbench-fileio.writes_per_sec" if m in ("seqwr", "seqrewr", "rndwr") else
                "sysbench-fileio.ops_per_sec")

    def claim_option(self, k, v, params, limits, notes):
        if k == "file-total-size":
            b = parse_size(v)
            if b is None:
                raise Decline(f"cannot parse --file-total-size={word(v)}")
            params["size_mib"] = clamp(self, "size_mib", max(1, -(-b // MiB)), limits, notes,
                                       limits.max_size // MiB, " MiB")
        elif k in ("file-num", "file-fsync-freq"):
            params[{"file-num": "file_num"}.get(k, "fsync_freq")] = int_option(
                self, {"file-num": "file_num"}.get(k, "fsync_freq"), v, f"--{k}", limits, notes)
        elif k == "file-test-mode":
            params["mode"] = whitelisted(self, "mode", v, k)
        elif k == "file-io-mode":
            params["io_mode"] = whitelisted(self, "io_mode", v, k)
        elif k == "file-block-size":
            b = parse_size(v)
            if b is None or BS_BY_BYTES.get(b) not in self.param("block_size").choices:
                raise Decline(f"--file-block-size={word(v)} is not in the whitelist")
            params["block_size"] = BS_BY_BYTES[b]
        elif k == "file-extra-flags":
            if v not in ("direct", ""):
                raise Decline(f"--file-extra-flags={word(v)} is not supported")
            params["direct"] = v == "direct"
        else:
            super().claim_option(k, v, params, limits, notes)

    def claim_done(self, params, limits, notes):
        if "mode" not in params:
            raise Decline("sysbench fileio without --file-test-mode: the workload is unknown")

    def host_argv(self, p: dict, scratch: str, f: str) -> list[list[str]]:
        common = ["sysbench", "fileio", f"--file-total-size={p['size_mib']}M", f"--file-num={p['file_num']}",
                  f"--file-test-mode={p['mode']}", f"--file-block-size={BLOCK_SIZES[p['block_size']]}",
                  f"--file-io-mode={p['io_mode']}", *self.common(p), f"--file-fsync-freq={p['fsync_freq']}"]
        common += ["--file-extra-flags=direct"] if p["direct"] else []
        return [common + ["prepare"], common + ["run"], common + ["cleanup"]]

    def parse(self, p: dict, stdout: str, stderr: str) -> float:
        return parse_sysbench_fileio(stdout)[self.metric(p).split(".", 1)[1]]

    def lkp_job(self, p: dict) -> LkpJob:
        d = {"period": f"{p['time_s']}s", "nr_threads": p["threads"], "size": f"{p['size_mib']}M",
             "filenum": f"{p['file_num']}f", "rwmode": p["mode"], "iomode": p["io_mode"],
             "blocksize": BLOCK_SIZES[p["block_size"]], "fsync_freq": p["fsync_freq"]}
        if p["direct"]:
            d["file_extra_flags"] = "direct"
        keys = {"sysbench-fileio.reads_per_sec": ["sysbench-fileio.read_operations/s"],
                "sysbench-fileio.writes_per_sec": ["sysbench-fileio.write_operations/s"]}.get(
            self.metric(p), ["sysbench-fileio.read_operations/s", "sysbench-fileio.write_operations/s"])
        return LkpJob("sysbench-fileio", True, [("sysbench-fileio", d)], keys)


@register
class SysbenchCpu(_Sysbench):
    name = "sysbench-cpu"
    test = "cpu"
    doc = "sysbench cpu: prime-number search, events per second"
    claim_doc = "sysbench cpu [--cpu-max-prime=N] [--threads=N] [--time=S] run"
    guest_tools = ("sysbench",)
    guest_extract = awk_value('$1 == "events" && $2 == "per" && $3 == "second:"', "$4")
    params = (IntParam("max_prime", 100, 1_000_000, 10_000, doc="--cpu-max-prime"),
              threads_param("--threads"), time_param("--time", 10))

    def metric(self, p: dict) -> str:
        return "sysbench-cpu.events_per_sec"

    def claim_option(self, k, v, params, limits, notes):
        if k == "cpu-max-prime":
            params["max_prime"] = int_option(self, "max_prime", v, f"--{k}", limits, notes)
        else:
            super().claim_option(k, v, params, limits, notes)

    def host_argv(self, p: dict, scratch: str, f: str) -> list[list[str]]:
        return [["sysbench", "cpu", f"--cpu-max-prime={p['max_prime']}", *self.common(p), "run"]]

    def parse(self, p: dict, stdout: str, stderr: str) -> float:
        return _labelled(stdout, "events per second:", "'events per second'")


_MEM_BLOCKS = tuple(k for k, v in BLOCK_SIZES.items() if 1024 <= v <= 16 * MiB)


@register
class SysbenchMemory(_Sysbench):
    name = "sysbench-memory"
    test = "memory"
    doc = "sysbench memory: block reads/writes of a buffer, MiB per second"
    claim_doc = "sysbench memory [--memory-block-size --memory-oper --memory-access-mode --threads --time] run"
    guest_tools = ("sysbench",)
    guest_extract = awk_value('$2 == "MiB" && $3 == "transferred"', "substr($4, 2)")
    params = (
        EnumParam("block_size", _MEM_BLOCKS, "1k", "--memory-block-size"),
        EnumParam("oper", ("read", "write", "none"), "write", "--memory-oper"),
        EnumParam("access_mode", ("seq", "rnd"), "seq", "--memory-access-mode"),
        EnumParam("scope", ("global", "local"), "global", "--memory-scope"),
        threads_param("--threads"), time_param("--time", 10),
    )

    def bytes(self, p: dict) -> int:
        if p.get("block_size") not in BLOCK_SIZES or type(p.get("threads")) is not int:
            raise RecipeError("block_size/threads are not valid")
        return BLOCK_SIZES[p["block_size"]] * (p["threads"] if p.get("scope") == "local" else 1)

    def metric(self, p: dict) -> str:
        return "sysbench-memory.MiB_per_sec"

    def claim_option(self, k, v, params, limits, notes):
        if k == "memory-block-size":
            b = parse_size(v)
            if b is None or BS_BY_BYTES.get(b) not in _MEM_BLOCKS:
                raise Decline(f"--memory-block-size={word(v)} is not in the whitelist")
            params["block_size"] = BS_BY_BYTES[b]
        elif k == "memory-total-size":
            notes.append("--memory-total-size ignored: each sample runs for --time")
        elif k in ("memory-oper", "memory-access-mode", "memory-scope"):
            key = {"memory-oper": "oper", "memory-access-mode": "access_mode", "memory-scope": "scope"}[k]
            params[key] = whitelisted(self, key, v, f"--{k}")
        else:
            super().claim_option(k, v, params, limits, notes)

    def host_argv(self, p: dict, scratch: str, f: str) -> list[list[str]]:
        # the total size only stops a sample early: 16 TiB keeps every sample time-bound
        return [["sysbench", "memory", f"--memory-block-size={BLOCK_SIZES[p['block_size']]}",
                 "--memory-total-size=16T", f"--memory-oper={p['oper']}", f"--memory-access-mode={p['access_mode']}",
                 f"--memory-scope={p['scope']}", *self.common(p), "run"]]

    def parse(self, p: dict, stdout: str, stderr: str) -> float:
        m = re.search(rf"^\s*{NUM} MiB transferred \(({NUM}) MiB/sec\)\s*$", stdout, re.M)
        if m is None:
            raise ParseError(f"sysbench memory output lacks 'MiB transferred (N MiB/sec)': {tail(stdout)}")
        v = num(m.group(1))
        if v <= 0:
            raise ParseError("sysbench memory moved 0 MiB/sec: nothing was measured")
        return v
