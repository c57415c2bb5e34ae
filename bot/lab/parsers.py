"""Shared pieces for parsing benchmark output, and the LKP-tests result files.

Each recipe's own output parser lives with its recipe (``bot/lab/recipes/<benchmark>.py``); this
module holds what several share: :class:`ParseError` (a ``ValueError`` with the reason when the
output is not what the tool prints on success), number helpers (:func:`num` accepts the ``,``
thousands separators some locales add; remote commands run under ``LC_ALL=C``), the ``perf
bench`` output parser used by the perf recipes, and the LKP ``stats.json``/``matrix.json``
readers used by the lkp backend.  Pure functions: text in, numbers out.
"""

from __future__ import annotations

import json
import math
import re

NUM = r"[0-9][0-9,]*(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"


class ParseError(ValueError):
    """The output does not contain the expected result; the message says why."""


def num(text: str) -> float:
    v = float(text.replace(",", ""))
    if not math.isfinite(v):
        raise ParseError(f"not a finite number: {text!r}")
    return v


def tail(text: str, n: int = 160) -> str:
    t = " | ".join(line.strip() for line in text.strip().splitlines()[-2:])
    t = "".join(c if c.isprintable() else "?" for c in t)
    return t[:n] or "no output"


# ---------------------------------------------------------------------------------- perf bench
_PERF_LINES = (
    (re.compile(r"^# Executed ([0-9,]+) ([a-z_0-9]+)\(\) calls$"), None),
    (re.compile(rf"^Total time: ({NUM}) \[sec\]$"), "total_time_s"),
    (re.compile(rf"^({NUM}) usecs/op$"), "usecs_per_op"),
    (re.compile(rf"^({NUM}) ops/sec$"), "ops_per_sec"),
    (re.compile(rf"^({NUM}) GB/sec$"), "GB_per_sec"),
)


def parse_perf_bench(stdout: str) -> dict:
    """``perf bench`` default-format output (syscall, sched, mem collections) -> the numbers it
    printed: ``total_time_s``, ``usecs_per_op``, ``ops_per_sec``, ``GB_per_sec`` (mem; 10^9
    bytes per second), ``calls``/``syscall`` (syscall basic).  Only the keys present are
    returned; the recipe checks for the one it needs (:func:`need`).  Several results (``mem
    -f all``) are refused: one invocation measures one function."""
    if not isinstance(stdout, str):
        raise ParseError("perf output must be text")
    out: dict = {}
    for raw in stdout.splitlines():
        line = raw.strip()
        for rx, key in _PERF_LINES:
            m = rx.match(line)
            if not m:
                continue
            if key is None:
                out["calls"] = int(m.group(1).replace(",", ""))
                out["syscall"] = m.group(2)
            elif key in out:
                raise ParseError(f"perf bench printed {key} twice (more than one benchmark ran)")
            else:
                out[key] = num(m.group(1))
    return out


def need(values: dict, key: str, what: str, text: str) -> float:
    """``values[key]`` if present and > 0, else ParseError naming ``what`` and the output's tail."""
    v = values.get(key)
    if v is None:
        raise ParseError(f"no {what} in the output: {tail(text)}")
    if v <= 0:
        raise ParseError(f"{what} is {v}: nothing was measured")
    return float(v)


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
