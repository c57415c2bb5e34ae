"""``fio``: the common job shapes (sequential/random read/write/mixed, block size, queue depth,
jobs, engine) on a scratch file, ``--output-format=json --group_reporting``.

Metric: ``fio.<dir>_bw_MBps`` (10^6 bytes/s) for sequential shapes, ``fio.<dir>_iops`` for
random ones, as LKP's fio-basic names them; ``<dir>`` is ``read`` for read and mixed shapes.
Size x numjobs is bounded by ``max_size``.
"""

from __future__ import annotations

import json
import math

from bot.lab.parsers import ParseError, tail
from bot.lab.recipes.base import (BLOCK_SIZES, BS_BY_BYTES, MiB, BoolParam, Decline, EnumParam, IntParam, LkpJob,
                                  Recipe, RecipeError, clamp, duration_option, int_option, parse_size, register,
                                  whitelisted, word)

FIO_MBPS_SCALE = 1024 * 1024 / 1e6  # LKP fio.*_bw_MBps is bw(KiB/s)/1024 = MiB/s -> MB/s


def parse_fio_json(stdout: str) -> dict:
    """fio ``--output-format=json --group_reporting`` -> ``{"read": {"bw_bytes", "iops",
    "io_bytes"}, "write": {...}, "error": 0}``.  Text before the JSON object (fio sometimes
    prints notes there) is skipped; a job with a non-zero ``error`` raises ParseError."""
    if not isinstance(stdout, str):
        raise ParseError("fio output must be text")
    idx = stdout.find("{")
    if idx < 0:
        raise ParseError(f"no JSON in fio output: {tail(stdout)}")
    try:
        data, _ = json.JSONDecoder().raw_decode(stdout[idx:])
    except ValueError as exc:
        raise ParseError(f"fio output is not valid JSON: {exc}") from None
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(jobs, list) or not jobs or not isinstance(jobs[0], dict):
        raise ParseError("fio JSON has no jobs")
    job = jobs[0]
    if job.get("error"):
        raise ParseError(f"fio job reported error {job.get('error')!r}")
    out: dict = {"error": 0, "jobs": len(jobs)}
    for d in ("read", "write"):
        sect = job.get(d)
        if not isinstance(sect, dict):
            raise ParseError(f"fio JSON job has no {d} section")
        try:
            bw_bytes = float(sect["bw_bytes"]) if "bw_bytes" in sect else float(sect["bw"]) * 1024
            out[d] = {"bw_bytes": bw_bytes, "iops": float(sect["iops"]), "io_bytes": int(sect.get("io_bytes", 0))}
        except (KeyError, TypeError, ValueError):
            raise ParseError(f"fio JSON {d} section lacks bw/iops") from None
        if not all(math.isfinite(v) and v >= 0 for v in (out[d]["bw_bytes"], out[d]["iops"])):
            raise ParseError(f"fio JSON {d} section has invalid numbers")
    return out


_IGNORED = {"name", "group_reporting", "output-format", "eta", "randrepeat", "norandommap", "gtod_reduce",
            "thread", "filename", "directory", "minimal", "output", "eta-newline", "end_fsync", "invalidate",
            "refill_buffers", "allow_mounted_write", "time_based", "ramp_time", "create_on_open", "overwrite"}
_ALIASES = {"readwrite": "rw", "blocksize": "bs", "filesize": "size"}


@register
class Fio(Recipe):
    name = "fio"
    doc = "fio on a scratch file (one job shape), JSON output"
    tools = ("fio",)
    aliases = ("fio-basic",)
    needs_command = True
    host_tool = "fio"
    claim_doc = "fio --rw=... --bs=... [--size --numjobs --iodepth --ioengine --runtime --direct]"
    params = (
        EnumParam("rw", ("read", "write", "randread", "randwrite", "rw", "randrw"), "randwrite", "--rw"),
        EnumParam("bs", tuple(BLOCK_SIZES), "4k", "--bs (whitelist: powers of two 512..16M)"),
        IntParam("size_mib", 1, 1 << 20, 1024, extent=True, doc="--size in MiB (per job)"),
        IntParam("numjobs", 1, "max_threads", 1, doc="--numjobs"),
        IntParam("iodepth", 1, 256, 1, doc="--iodepth"),
        EnumParam("ioengine", ("sync", "psync", "libaio", "io_uring", "posixaio", "mmap"), "psync", "--ioengine"),
        IntParam("runtime_s", 0, "max_duration_s", 0, extent=True, doc="--runtime (0: until size is done)"),
        BoolParam("direct", False, "--direct=1"),
    )

    def bytes(self, p: dict) -> int:
        if type(p.get("size_mib")) is not int or type(p.get("numjobs")) is not int:
            raise RecipeError("size_mib and numjobs must be integers")
        return p["size_mib"] * MiB * p["numjobs"]

    def metric(self, p: dict) -> str:
        rw = p["rw"]
        direction = "read" if rw in ("read", "randread", "rw", "randrw") else "write"
        return f"fio.{direction}_iops" if rw.startswith("rand") else f"fio.{direction}_bw_MBps"

    def parse(self, p: dict, stdout: str, stderr: str) -> float:
        metric = self.metric(p)
        sect = parse_fio_json(stdout)[metric.split(".")[1].split("_")[0]]
        return sect["iops"] if metric.endswith("_iops") else sect["bw_bytes"] / 1e6

    def host_argv(self, p: dict, scratch: str, f: str) -> list[list[str]]:
        a = ["fio", "--name=regtriage", f"--filename={f}", f"--rw={p['rw']}", f"--bs={BLOCK_SIZES[p['bs']]}",
             f"--size={p['size_mib']}M", f"--numjobs={p['numjobs']}", f"--iodepth={p['iodepth']}",
             f"--ioengine={p['ioengine']}", f"--direct={int(p['direct'])}", "--group_reporting",
             "--output-format=json"]
        if p["runtime_s"]:
            a += [f"--runtime={p['runtime_s']}", "--time_based"]
        return [a]

    def lkp_job(self, p: dict) -> LkpJob:
        d = {"rw": p["rw"], "bs": BLOCK_SIZES[p["bs"]], "ioengine": p["ioengine"], "iodepth": p["iodepth"],
             "nr_task": p["numjobs"], "test_size": f"{p['size_mib'] * p['numjobs']}M", "runtime": f"{p['runtime_s']}s"}
        if p["runtime_s"]:
            d["time_based"] = True
        if p["direct"]:
            d["direct"] = "direct"
        metric = self.metric(p)
        return LkpJob("fio-basic", True, [("fio-setup-basic", d), ("fio", None)], [metric],
                      FIO_MBPS_SCALE if metric.endswith("_bw_MBps") else 1.0)

    def claim(self, argv: list[str], limits):
        notes: list[str] = []
        params: dict = {}
        opts: dict[str, str | None] = {}
        for a in argv[1:]:
            if not a.startswith("--"):
                raise Decline("fio job files and positional arguments are not supported; use --options")
            k, sep, v = a[2:].partition("=")
            if k in opts:
                raise Decline(f"fio option --{word(k)} given twice")
            opts[k] = v if sep else None
        for k, v in opts.items():
            k = _ALIASES.get(k, k)
            if k in _IGNORED:
                if k in ("filename", "directory"):
                    notes.append(f"--{k} from the report replaced by the scratch area")
                elif k == "ramp_time":
                    notes.append("--ramp_time ignored (warm-up runs are separate)")
                continue
            if v is None:
                raise Decline(f"fio option --{word(k)} needs a value")
            if k in ("rw", "ioengine"):
                params[k] = whitelisted(self, k, v)
            elif k == "bs":
                b = parse_size(v)
                if b is None or b not in BS_BY_BYTES:
                    raise Decline(f"fio --bs={word(v)} is not in the whitelist ({', '.join(BLOCK_SIZES)})")
                params["bs"] = BS_BY_BYTES[b]
            elif k == "size":
                b = parse_size(v, default_unit=1)
                if b is None:
                    raise Decline(f"cannot parse fio --size={word(v)}")
                params["size_mib"] = max(1, -(-b // MiB))
            elif k in ("numjobs", "iodepth"):
                params[k] = int_option(self, k, v, f"--{k}", limits, notes)
            elif k == "runtime":
                params["runtime_s"] = duration_option(self, "runtime_s", v, "--runtime", limits, notes)
            elif k == "direct":
                if v not in ("0", "1"):
                    raise Decline(f"--direct={word(v)} must be 0 or 1")
                params["direct"] = v == "1"
            else:
                raise Decline(f"unsupported fio option --{word(k)}")
        if "rw" not in params:
            raise Decline("fio command without --rw: the workload is unknown")
        if "size_mib" not in params:
            if not limits.clamp:
                raise Decline("fio command without --size")
            notes.append(f"no --size in the report: using {self.param('size_mib').default} MiB")
        jobs = params.get("numjobs", 1)
        size = params.get("size_mib", min(self.param("size_mib").default, limits.max_size // MiB))
        cap_mib = max(1, limits.max_size // MiB // jobs)
        params["size_mib"] = clamp(self, "size_mib", size, limits, notes, cap_mib,
                                   f" MiB (size x numjobs <= {limits.max_size // MiB} MiB)")
        return self.name, params, notes
