"""Measurement tables: the numbers a mail gives per kernel version / commit / column.

Each parser returns ``Table`` objects: labelled values (``label`` = the version, commit id or column
the value belongs to) plus, when the table is a two-sided comparison, which label is the baseline.
Conventions of the ``numbers`` contract (see ``Claim``):

* ``value``: the measurement (a mean when the text gives several runs of one kernel);
* ``stdev``: RELATIVE spread, as a fraction of ``value`` (``± 2%`` -> 0.02; an absolute
  ``stdev=2.8`` on a mean of 140 -> 0.02); ``None`` when the text gives none;
* ``n``: number of runs when stated (``testcnt=5``, ``5 runs``, ``repetitions: 9``, rows averaged).

Only measurement values are taken: table cells in rows/columns labelled by a version, commit id
or a unit, LKP comparison rows of the reported metric, "from X to Y <unit>" pairs.  Integers in
prose, dates, ids and log timestamps are never numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import patterns as P
from . import scan

I = re.I
NUM = r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"
NUM_RE = re.compile(r"^[-+]?\d+(?:[.,]\d+)*(?:\.\d+)?(?:e[-+]?\d+)?$", I)
HEX_TOK = re.compile(r"^[0-9a-f]{7,40}$")
UNIT_TOK = re.compile(r"^(?:" + P.UNIT_WORDS + r")$")
BETTER = re.compile(r"([A-Za-z][\w./-]*)\s*(?:,|\(|:)?\s*(?:lower|higher|smaller|bigger|larger) (?:is|=) better", I)
COLS_HINT = re.compile(r"(?:\d\.\d+|[0-9a-f]{7}|-rc\d)\S*\s+\S*(?:\d\.\d+|[0-9a-f]{7}|-rc\d)")
UNITROW_HINT = re.compile(r"^\s*\(?(?:" + P.UNIT_WORDS + r")\)?[\s(:]")
RUNS_HINT = re.compile(r"runs\b|repetitions|iterations|samples|loops", re.I)
WORD_N = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
          "twenty": 20, "fifty": 50, "hundred": 100}
RUNS = re.compile(r"\b(?:repetitions|iterations|runs|samples|loops)\s*[:=]\s*(\d+)\b|"
                  r"\b(?:average|mean|median)\s+(?:\w+\s+){0,2}of\s+(\d+|" + "|".join(WORD_N) + r")\s+(?:\w+\s+){0,2}"
                  r"(?:runs|iterations|samples|tries|measurements)\b|"
                  r"\b(\d+|" + "|".join(WORD_N) + r")[- ](?:runs?|iterations?|samples?)\s+(?:average|mean)s?\b", I)


@dataclass
class Cell:
    label: str | None
    value: float
    unit: str | None = None
    stdev: float | None = None  # relative
    n: int | None = None


@dataclass
class Table:
    cells: list[Cell] = field(default_factory=list)
    span: tuple[int, int] = (0, 0)      # clean offsets of the table
    metric: str | None = None
    pair: tuple[int, int] | None = None  # indexes (good, bad) into cells for a two-sided comparison


def num(tok: str) -> float | None:
    t = tok.strip("()[]*,;")
    if not NUM_RE.match(t):
        return None
    if re.match(r"^\d{1,3}(?:,\d{3})+(?:\.\d+)?$", t):
        t = t.replace(",", "")
    elif "," in t:
        return None
    try:
        return float(t)
    except ValueError:
        return None


def is_label(tok: str) -> bool:
    return bool(P.VERSION.fullmatch(tok) or HEX_TOK.match(tok) or P.BARE_RC.fullmatch(tok))


def runs_stated(clean: str, mt=None) -> int | None:
    """A single run count stated for the whole mail ("repetitions: 9", "average of five runs").

    ``mt``: the ``MailText`` whose clean text this is (its scans are reused)."""
    found = set()
    if mt is not None and mt.clean is clean:
        if not mt.search(RUNS_HINT):
            return None
        matches = mt.finditer(RUNS)
    else:
        if not RUNS_HINT.search(clean):
            return None
        matches = RUNS.finditer(clean)
    for m in matches:
        g = next(x for x in m.groups() if x)
        found.add(int(g) if g.isdigit() else WORD_N[g.lower()])
    return found.pop() if len(found) == 1 else None


def metric_near(lines: list[str]) -> str | None:
    for ln in reversed(lines):
        m = BETTER.search(ln)
        if m:
            return m.group(1).rstrip(".,:")
    return None


def _rel(sd: float | None, value: float) -> float | None:
    if sd is None or value == 0:
        return None
    return round(abs(sd / value), 4)


# ------------------------------------------------------------------------ parsers

def block_rows(units, clean: str) -> list[Table]:
    """``@ linux 2.6.38.8`` / ``v6.6:`` header lines followed by rows that start with a value."""
    out: list[Table] = []
    hdr = re.compile(r"^\s*[@#*=\->]*\s*(?:(?:linux|kernel|version|with|on)\s+)*(?P<v>\S+?)\s*:?\s*[@#*=\-<]*\s*$", I)
    row = re.compile(r"^\s*(?P<n>" + NUM + r")\s*(?P<u>" + P.UNIT_WORDS + r")?(?![\w/])")
    i = 0
    groups = []
    while i < len(units):
        u = units[i]
        m = hdr.match(u.text) if len(u.text) <= 60 and "\n" not in u.text else None
        if m and is_label(m.group("v")):
            vals, unit, j = [], None, i + 1
            while j < len(units) and j <= i + 12:
                rm = row.match(units[j].text)
                hm2 = hdr.match(units[j].text) if len(units[j].text) <= 60 else None
                if not rm or (hm2 and is_label(hm2.group("v"))):
                    break
                vals.append(float(rm.group("n")))
                unit = unit or rm.group("u")
                j += 1
            if vals and unit:
                groups.append((m.group("v"), vals, unit, u.cstart, units[j - 1].cend))
                i = j
                continue
        i += 1
    if len(groups) >= 2:
        t = Table(span=(groups[0][3], groups[-1][4]), metric=groups[0][2])
        for lab, vals, unit, _, _ in groups:
            mean = sum(vals) / len(vals)
            sd = None
            if len(vals) >= 2:
                sd = (sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) ** 0.5
            t.cells.append(Cell(lab, round(mean, 4), unit, _rel(sd, mean), len(vals)))
        t.pair = (0, 1)
        out.append(t)
    return out


def version_columns(units, clean: str) -> list[Table]:
    """Header row naming versions/commits as columns, data rows of numbers below it."""
    out: list[Table] = []
    for u in units:
        if "\n" in u.text or not COLS_HINT.search(u.text):
            continue
        toks = u.text.split()
        idx = [k for k, t in enumerate(toks) if is_label(t)]
        if len(idx) < 2 or len(toks) > 12:
            continue
        rows = []
        for v in units[u.index + 1:u.index + 12]:
            if re.fullmatch(r"[-=+|\s]+", v.text):
                continue
            vt = v.text.split()
            vals = [num(x) for x in vt]
            if len(vt) < max(idx) + 1 or sum(x is not None for x in vals) < len(idx) or "\n" in v.text:
                break
            if any(vals[k] is None for k in idx):
                break
            rows.append((v, vt, vals))
        if not rows:
            continue
        prev = [x.text for x in units[max(0, u.index - 2):u.index]]
        t = Table(span=(u.cstart, rows[-1][0].cend), metric=metric_near(prev))
        unit = None
        mu = re.search(r"\((" + P.UNIT_WORDS + r")\)|\bin (" + P.UNIT_WORDS + r")\b", " ".join(prev) + " " + u.text)
        if mu:
            unit = mu.group(1) or mu.group(2)
        v, vt, vals = rows[0]
        for k in idx:
            t.cells.append(Cell(toks[k], vals[k], unit))
        t.pair = (0, 1)
        out.append(t)
    return out


def unit_rows(units, clean: str) -> list[Table]:
    """``MB/s (avg)  141 167 171 168 138`` under a header naming the columns (versions, commits, ...)."""
    out: list[Table] = []
    for u in units:
        if "\n" in u.text or not UNITROW_HINT.match(u.text):
            continue
        toks = u.text.split()
        first_num = next((k for k, t in enumerate(toks) if num(t) is not None), None)
        if first_num is None or first_num == 0:
            continue
        head = " ".join(toks[:first_num])
        mu = re.match(r"^\(?(" + P.UNIT_WORDS + r")\)?(?:\s*\((?:avg|average|mean|median|min|max)\))?\s*:?$", head)
        vals = [num(t) for t in toks[first_num:]]
        if not mu or len(vals) < 2 or any(v is None for v in vals):
            continue
        labels = None
        for h in reversed(units[max(0, u.index - 3):u.index]):
            ht = h.text.split()
            if len(ht) >= len(vals) and not any(num(x) is not None and not is_label(x) for x in ht[-len(vals):]):
                labels = ht[-len(vals):]
                break
        if labels is None:
            continue
        t = Table(span=(u.cstart, u.cend), metric=mu.group(1))
        for lab, v in zip(labels, vals):
            t.cells.append(Cell(lab, v, mu.group(1)))
        if len(vals) == 2:
            t.pair = (0, 1)
        out.append(t)
    return out


LKP_HDR = re.compile(r"^\s*([0-9a-f]{7,40})\s+([0-9a-f]{7,40})\s*$")
LKP_ROW = re.compile(r"^\s*(?P<a>" + NUM + r")\s*(?:±\s*(?P<sa>\d+(?:\.\d+)?)%)?\s+(?P<pct>[-+]?\d+(?:\.\d+)?%?)\s+"
                     r"(?P<b>" + NUM + r")\s*(?:±\s*(?P<sb>\d+(?:\.\d+)?)%)?\s+(?P<name>\S+)\s*$", I)


def lkp_rows(units, clean: str, metric: str | None) -> list[Table]:
    """LKP comparison table: ``  12345 ±  2%   -13.6%   10667 ± 3%  aim7.jobs-per-min``."""
    if not metric:
        return []
    out: list[Table] = []
    for u in units:
        hm = LKP_HDR.match(u.text)
        if not hm:
            continue
        labels = (hm.group(1), hm.group(2))
        for v in units[u.index + 1:u.index + 400]:
            if LKP_HDR.match(v.text):
                break
            rm = LKP_ROW.match(v.text)
            if rm and rm.group("name") == metric:
                a, b = float(rm.group("a")), float(rm.group("b"))
                sa = float(rm.group("sa")) / 100 if rm.group("sa") else None
                sb = float(rm.group("sb")) / 100 if rm.group("sb") else None
                t = Table(cells=[Cell(labels[0], a, None, sa), Cell(labels[1], b, None, sb)],
                          span=(v.cstart, v.cend), metric=metric, pair=(0, 1))
                out.append(t)
                break
        if out:
            break
    return out


# cue patterns with a \b(?=\w) check in front (scan.word_led: same matches, faster scans)
RUNS = scan.word_led(RUNS)
