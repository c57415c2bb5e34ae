"""Parsers for the output of the real benchmark tools run by the host backends (ssh, lkp).

Pure functions: text in, numbers out, :class:`ParseError` (a ``ValueError``) with the reason when
the output is not what the tool prints on success.  Tested on outputs captured on Debian 12
(coreutils 9.1, fio 3.33, sysbench 1.0.20, perf 6.1) in ``tests/data/lab/``.  The remote
commands run under ``LC_ALL=C`` so numbers use a decimal point; thousands separators (``,``) that
other locales add are accepted anyway.

==================  ==============================================  ===============================
tool                what is read                                    function
==================  ==============================================  ===============================
GNU dd (stderr)     ``N bytes (...) copied, S s, R unit/s``:        :func:`parse_dd` -> bytes/s
                    N / S (the exact counts, not the rounded rate)
fio JSON            ``jobs[0].read|write.bw_bytes`` / ``.iops``     :func:`parse_fio_json`
                    (``--group_reporting``: one job entry)
sysbench fileio     ``File operations:`` reads/s, writes/s,         :func:`parse_sysbench_fileio`
                    fsyncs/s and ``Throughput:`` MiB/s lines
perf bench syscall  ``N ops/sec`` (and usecs/op, total time)        :func:`parse_perf_bench_syscall`
==================  ==============================================  ===============================

:func:`metric_value` maps a recipe's metric (see :mod:`bot.lab.recipes`) to the number from the
measured command's output; units: MB = 10^6 bytes.
"""

from __future__ import annotations

import json
import math
import re

NUM = r"[0-9][0-9,]*(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"


class ParseError(ValueError):
    """The output does not contain the expected result; the message says why."""


def _num(text: str) -> float:
    v = float(text.replace(",", ""))
    if not math.isfinite(v):
        raise ParseError(f"not a finite number: {text!r}")
    return v


def _tail(text: str, n: int = 160) -> str:
    t = " | ".join(line.strip() for line in text.strip().splitlines()[-2:])
    t = "".join(c if c.isprintable() else "?" for c in t)
    return t[:n] or "no output"


# ------------------------------------------------------------------------------------------ dd
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
        raise ParseError(f"no dd summary line: {_tail(stderr)}")
    nbytes = int(summary.group(1))
    secs = _num(summary.group(2))
    if secs <= 0:
        raise ParseError("dd reported zero elapsed time")
    if nbytes <= 0:
        raise ParseError("dd copied no data")
    return {"bytes": nbytes, "seconds": secs, "bytes_per_sec": nbytes / secs, **rec}


# ----------------------------------------------------------------------------------------- fio
def parse_fio_json(stdout: str) -> dict:
    """fio ``--output-format=json --group_reporting`` -> ``{"read": {"bw_bytes", "iops",
    "io_bytes"}, "write": {...}, "error": 0}``.  Text before the JSON object (fio sometimes
    prints notes there) is skipped; a job with a non-zero ``error`` raises ParseError."""
    if not isinstance(stdout, str):
        raise ParseError("fio output must be text")
    idx = stdout.find("{")
    if idx < 0:
        raise ParseError(f"no JSON in fio output: {_tail(stdout)}")
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


# ------------------------------------------------------------------------------------ sysbench
_SB_LINES = {
    "reads/s": "reads_per_sec", "writes/s": "writes_per_sec", "fsyncs/s": "fsyncs_per_sec",
    "read, MiB/s": "read_MiBps", "written, MiB/s": "written_MiBps",
}


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
                out[_SB_LINES[m.group(1)]] = _num(m.group(2))
                continue
            section = None if not m else section
    if "FATAL" in stdout and len(out) < 5:
        raise ParseError(f"sysbench failed: {_tail(stdout)}")
    missing = [k for k in ("reads_per_sec", "writes_per_sec") if k not in out]
    if missing:
        raise ParseError(f"sysbench fileio output lacks {', '.join(missing)}: {_tail(stdout)}")
    out["ops_per_sec"] = out["reads_per_sec"] + out["writes_per_sec"]
    return out


# ---------------------------------------------------------------------------------------- perf
def parse_perf_bench_syscall(stdout: str) -> dict:
    """``perf bench syscall basic`` -> ``{"ops_per_sec", "usecs_per_op", "total_time_s",
    "calls", "syscall"}``."""
    if not isinstance(stdout, str):
        raise ParseError("perf output must be text")
    out: dict = {}
    for raw in stdout.splitlines():
        line = raw.strip()
        m = re.match(r"^# Executed ([0-9,]+) ([a-z_0-9]+)\(\) calls$", line)
        if m:
            out["calls"] = int(m.group(1).replace(",", ""))
            out["syscall"] = m.group(2)
            continue
        m = re.match(rf"^Total time: ({NUM}) \[sec\]$", line)
        if m:
            out["total_time_s"] = _num(m.group(1))
            continue
        m = re.match(rf"^({NUM}) usecs/op$", line)
        if m:
            out["usecs_per_op"] = _num(m.group(1))
            continue
        m = re.match(rf"^({NUM}) ops/sec$", line)
        if m:
            out["ops_per_sec"] = _num(m.group(1))
    if "ops_per_sec" not in out:
        raise ParseError(f"no 'ops/sec' line in perf bench output: {_tail(stdout)}")
    if out["ops_per_sec"] <= 0:
        raise ParseError("perf bench reported 0 ops/sec")
    return out


# ----------------------------------------------------------------------------------- by metric
def metric_value(metric: str, stdout: str, stderr: str) -> float:
    """The value of ``metric`` (a recipe metric name) from the measured command's output."""
    if metric in ("dd.write_MBps", "dd.read_MBps"):
        return parse_dd(stderr)["bytes_per_sec"] / 1e6
    if metric == "syscall.calls_per_sec":
        return parse_perf_bench_syscall(stdout)["ops_per_sec"]
    m = re.fullmatch(r"sysbench-fileio\.(reads|writes|ops)_per_sec", metric)
    if m:
        return parse_sysbench_fileio(stdout)[f"{m.group(1)}_per_sec"]
    m = re.fullmatch(r"fio\.(read|write)_(bw_MBps|iops)", metric)
    if m:
        sect = parse_fio_json(stdout)[m.group(1)]
        return sect["bw_bytes"] / 1e6 if m.group(2) == "bw_MBps" else sect["iops"]
    raise ParseError(f"no parser for metric {metric!r}")


# --------------------------------------------------------------------------------- LKP results
def parse_lkp_stats(text: str) -> dict[str, float]:
    """An LKP ``stats.json`` (one value per metric) -> ``{metric: float}``; non-numeric values
    (LKP stores a few strings and lists) are left out."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ParseError(f"stats.json is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ParseError("stats.json is not an object")
    out = {}
    for k, v in data.items():
        if isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out[k] = float(v)
    return out


def parse_lkp_matrix(text: str) -> dict[str, list]:
    """An LKP ``matrix.json`` (``{metric: [value per run], "stats_source": [paths]}``) ->
    the same dict, checked: every value is a list."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ParseError(f"matrix.json is not JSON: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise ParseError("matrix.json is not an object of lists")
    return data


def lkp_matrix_value(matrix: dict[str, list], metric: str, stats_source: str) -> float | None:
    """The value of ``metric`` in the matrix column whose ``stats_source`` is ``stats_source``
    (None if that run or metric is not in the matrix)."""
    sources = matrix.get("stats_source") or []
    if stats_source not in sources or metric not in matrix:
        return None
    col = sources.index(stats_source)
    vals = matrix[metric]
    if col >= len(vals):
        return None
    v = vals[col]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)
