"""dd: sequential write (``dd-seqwrite``) and read (``dd-seqread``) of a scratch file.

Guest (busybox dd, which prints no rate): the host times each ``dd`` with the monotonic clock,
so the metric includes fork+exec (negligible for samples of ~0.1 s and more).  Hosts (GNU dd):
``N bytes (...) copied, S s, R unit/s`` on stderr under ``LC_ALL=C``; the value is N / S (the
exact counts, not the rounded rate).  Units: MB = 10^6 bytes.
"""

from __future__ import annotations

import re

from bot.lab.parsers import NUM, ParseError, num, tail
from bot.lab.recipes.base import (BLOCK_SIZES, REGISTRY, BS_BY_BYTES, BS_PARAM, MiB, BoolParam, Decline, EnumParam, GuestSteps,
                                  IntParam, LkpJob, Recipe, RecipeError, clamp, parse_int, parse_size, register, word)

# 67108864 bytes (67 MB, 64 MiB) copied, 0.0352342 s, 1.9 GB/s
# 512 bytes copied, 6.9744e-05 s, 7.3 MB/s
# 1 byte copied, 0.000103 s, 9.7 kB/s
_DD_RE = re.compile(rf"^([0-9]+) bytes?(?: \([^)]*\))? copied, ({NUM}) s, ({NUM}) ?([kKMGTPE]?i?B)/s\s*$")


def parse_dd(stderr: str) -> dict:
    """GNU dd's summary (stderr, ``LC_ALL=C``) -> ``{"bytes", "seconds", "bytes_per_sec",
    "records_in", "records_out"}``.  Raises ParseError on a dd error message or a missing or
    zero-time summary."""
    if not isinstance(stderr, str):
        raise ParseError("dd output must be text")
    summary = None
    rec = {}
    for line in stderr.splitlines():
        line = line.strip()
        m = _DD_RE.match(line)
        if m:
            summary = m
            continue
        m = re.match(r"^([0-9]+)\+([0-9]+) records (in|out)$", line)
        if m:
            rec[f"records_{m.group(3)}"] = (int(m.group(1)), int(m.group(2)))
    if summary is None:
        raise ParseError(f"no dd summary line: {tail(stderr)}")
    nbytes = int(summary.group(1))
    secs = num(summary.group(2))
    if secs <= 0:
        raise ParseError("dd reported zero elapsed time")
    if nbytes <= 0:
        raise ParseError("dd copied no data")
    return {"bytes": nbytes, "seconds": secs, "bytes_per_sec": nbytes / secs, **rec}


_COUNT = IntParam("count", 1, 1 << 24, 256, extent=True, doc="blocks per sample; bs*count <= max_size")
_OPERANDS = ("if", "of", "bs", "ibs", "obs", "count", "conv", "oflag", "iflag", "status")


class _Dd(Recipe):
    tools = ("dd",)
    host_tool = "dd"
    claim_doc = "dd from /dev/zero to a file or device, dd from a file or device to /dev/null"

    def bytes(self, p: dict) -> int:
        if p.get("bs") not in BLOCK_SIZES:
            raise RecipeError("bs is not whitelisted")
        if type(p.get("count")) is not int:
            raise RecipeError("count must be an integer")
        return BLOCK_SIZES[p["bs"]] * p["count"]

    def parse(self, p: dict, stdout: str, stderr: str) -> float:
        return parse_dd(stderr)["bytes_per_sec"] / 1e6

    def unsupported(self, p: dict, backend: str) -> str | None:
        if backend == "qemu" and p.get("direct"):
            return "O_DIRECT is not supported on the qemu guest's tmpfs scratch area"
        return None

    def claim(self, argv: list[str], limits) -> tuple[str, dict, list[str]]:
        """Every dd line is decided here: a write from /dev/zero, a read to /dev/null, or declined."""
        ops: dict[str, str] = {}
        for a in argv[1:]:
            if "=" not in a:
                raise Decline(f"unexpected dd argument {word(a)!r}")
            k, v = a.split("=", 1)
            if k not in _OPERANDS:
                raise Decline(f"unsupported dd operand {word(k)!r}")
            if k in ops:
                raise Decline(f"dd operand {k} given twice")
            ops[k] = v
        notes: list[str] = []
        src, dst = ops.get("if", "-"), ops.get("of", "-")
        zero_src = src in ("/dev/zero", "/dev/urandom", "/dev/random")
        null_dst = dst == "/dev/null"
        if zero_src and null_dst:
            raise Decline("dd from /dev/zero to /dev/null is not a storage workload")
        if zero_src:
            rec = REGISTRY["dd-seqwrite"]
            notes.append(f"output {word(dst)!r} from the report replaced by the scratch area")
        elif null_dst:
            rec = REGISTRY["dd-seqread"]
            notes.append(f"input {word(src)!r} from the report replaced by a scratch file")
        else:
            raise Decline("dd is neither a write from /dev/zero nor a read to /dev/null")
        write = zero_src
        if src in ("/dev/urandom", "/dev/random"):
            notes.append("random input replaced by /dev/zero")
        bs_text = ops.get("bs") or ops.get("obs" if write else "ibs")
        bs_bytes = 512 if bs_text is None else parse_size(bs_text, dd=True)
        if bs_bytes is None:
            raise Decline(f"cannot parse block size {word(bs_text)!r}")
        if bs_bytes not in BS_BY_BYTES:
            raise Decline(f"block size {bs_bytes} bytes is not in the whitelist ({', '.join(BLOCK_SIZES)})")
        bs = BS_BY_BYTES[bs_bytes]
        max_count = max(1, limits.max_size // bs_bytes)
        if "count" in ops:
            count = parse_int(ops["count"])
            if count is None:
                raise Decline(f"cannot parse count {word(ops['count'])!r}")
            count = clamp(rec, "count", count, limits, notes, max_count,
                          f" (bs={bs} x count <= {limits.max_size} bytes)")
        else:
            if not limits.clamp:
                raise Decline("no count=: the size of the transfer is unknown")
            count = min(_COUNT.default * MiB // bs_bytes or 1, max_count)
            notes.append(f"no count= in the report: using count={count}")
        params: dict = {"bs": bs, "count": count}
        flags = {(k, f) for k in ("conv", "oflag", "iflag") for f in filter(None, ops.get(k, "").split(","))}
        for k, f in sorted(flags):
            if (k, f) in (("conv", "fsync"), ("conv", "fdatasync")) and write:
                params["sync"] = "fsync"
                if f == "fdatasync":
                    notes.append("conv=fdatasync run as conv=fsync (busybox dd)")
            elif (k, f) == ("oflag", "direct") and write or (k, f) == ("iflag", "direct") and not write:
                params["direct"] = True
            elif (k, f) in (("conv", "notrunc"), ("iflag", "fullblock"), ("oflag", "sync"), ("oflag", "dsync")):
                notes.append(f"{k}={f} ignored")
            else:
                raise Decline(f"unsupported dd flag {k}={word(f)}")
        return rec.name, params, notes


@register
class DdSeqWrite(_Dd):
    name = "dd-seqwrite"
    doc = "sequential write of bs*count bytes from /dev/zero to a scratch file"
    aliases = ("dd", "dd-write")
    params = (BS_PARAM, _COUNT,
              EnumParam("sync", ("none", "fsync"), "none", "conv=fsync: flush before dd exits"),
              BoolParam("direct", False, "oflag=direct (O_DIRECT; not on the qemu tmpfs scratch)"))

    def metric(self, p: dict) -> str:
        return "dd.write_MBps"

    def guest_steps(self, p: dict, f: str) -> GuestSteps:
        bs, count = BLOCK_SIZES[p["bs"]], p["count"]
        conv = " conv=fsync" if p["sync"] == "fsync" else ""
        return GuestSteps(f"rm -f {f}; sync",
                          f'dd if=/dev/zero of={f} bs={bs} count={count}{conv} 2>/dev/null || fail "dd write failed"',
                          f"rm -f {f}", f"{bs * count} * 1000 / ns")

    def host_argv(self, p: dict, scratch: str, f: str) -> list[list[str]]:
        a = ["dd", "if=/dev/zero", f"of={f}", f"bs={BLOCK_SIZES[p['bs']]}", f"count={p['count']}"]
        a += ["conv=fsync"] if p["sync"] == "fsync" else []
        a += ["oflag=direct"] if p["direct"] else []
        return [a]

    def lkp_job(self, p: dict) -> LkpJob:
        d = {"rw": "write", "bs": BLOCK_SIZES[p["bs"]], "count": p["count"]}
        if p["sync"] == "fsync":
            d["conv"] = "fsync"
        if p["direct"]:
            d["oflag"] = "direct"
        return LkpJob("dd", False, [("dd", d)], [self.metric(p)])


@register
class DdSeqRead(_Dd):
    name = "dd-seqread"
    doc = "sequential read of a bs*count scratch file (written untimed first)"
    aliases = ("dd-read",)
    params = (BS_PARAM, _COUNT, BoolParam("direct", False, "iflag=direct (O_DIRECT; not on the qemu tmpfs scratch)"))

    def metric(self, p: dict) -> str:
        return "dd.read_MBps"

    def guest_steps(self, p: dict, f: str) -> GuestSteps:
        bs, count = BLOCK_SIZES[p["bs"]], p["count"]
        return GuestSteps(f'[ -f {f} ] || dd if=/dev/zero of={f} bs={bs} count={count} 2>/dev/null '
                          f'|| fail "dd prepare failed"; sync',
                          f'dd if={f} of=/dev/null bs={bs} count={count} 2>/dev/null || fail "dd read failed"',
                          ":", f"{bs * count} * 1000 / ns")

    def host_argv(self, p: dict, scratch: str, f: str) -> list[list[str]]:
        bs, count = BLOCK_SIZES[p["bs"]], p["count"]
        return [["dd", "if=/dev/zero", f"of={f}", f"bs={bs}", f"count={count}", "conv=fsync"],
                ["dd", f"if={f}", "of=/dev/null", f"bs={bs}", f"count={count}"] + (["iflag=direct"] if p["direct"] else [])]

    def lkp_job(self, p: dict) -> LkpJob:
        d = {"rw": "read", "bs": BLOCK_SIZES[p["bs"]], "count": p["count"]}
        if p["direct"]:
            d["iflag"] = "direct"
        return LkpJob("dd", False, [("dd", d)], [self.metric(p)])

