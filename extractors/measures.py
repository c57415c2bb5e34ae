"""The measurement stage: the change a message reports, the metric and the measured numbers.

A robot's subject or body, measured comparisons (version-labelled rows, the tables of
``numbers``, a header with a %-diff column, "A vs B unit"), a percentage or "twice as long"
stated in prose, and the metric named when no figure could be computed.  Functions over the
rule stages' per-message state ``ex`` (``rules.Extractor``).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from . import numbers as NUM_T
from . import patterns as P
from . import scan
from .mentions import find_versions, vcmp, version_key

if TYPE_CHECKING:
    from .rules import Extractor

I = re.I

THOUSANDS = re.compile(r"(?<![\d.])(\d{1,3}(?:[ ,\u202f]\d{3})+|\d+(?:\.\d+)?)(?![\d])")
STAT_KV = re.compile(r"\b(avg|average|mean|median|stdev|stddev|sd|cv|n|testcnt|valcnt|runs|samples|min|max)=\s*"
                     r"([-+]?\d+(?:\.\d+)?)%?", I)


def parse_num(s: str) -> float:
    return float(re.sub(r"[ ,\u202f]", "", s))


def pct_change(good: float, bad: float) -> float | None:
    if good == 0:
        return None
    return round((bad - good) / abs(good) * 100.0, 1)


_REPLY_MARKS = re.compile(r"^\s*(?:(?:Re|Fwd?|AW|SV)\s*:\s*)+", re.I)


def robot_facts(ex: Extractor):
    """(metric, percent, kind-word) from a robot subject or body, and the robot commit pair."""
    metric = pct = None
    span = None
    m = ex.robot_subject
    # a reply to a robot report keeps its subject after the reply marker ("Re: <sha>: <metric> -8% regression")
    sm = m or P.ROBOT_SUBJECT.search(_REPLY_MARKS.sub("", ex.subject or "", count=1))
    if sm:
        metric, pct = sm.group(2), float(sm.group(3))
        if not re.match(r"[+-]", sm.group(3)) and pct > 0:
            # newer robot subjects drop the sign: a "regression" is a drop of a throughput-like metric
            # and a rise of a time-like one; an "improvement" the reverse
            down = (sm.group(4).lower() == "regression") != bool(P.TIME_METRIC.search(metric))
            pct = -pct if down else pct
    mb = ex.mt.search(P.ROBOT_BODY)
    if mb:
        if metric is None:
            metric, pct = mb.group(3), float(mb.group(1))
            if not re.match(r"[+-]", mb.group(1)) and pct > 0:
                down = (mb.group(2).lower() == "regression") != bool(P.TIME_METRIC.search(metric))
                pct = -pct if down else pct
        span = (mb.start(), mb.end())
    pair = None
    # comparison block: "commit:\n  <parent> (...)\n  <culprit> (...)"
    for cm in ex.mt.finditer(_COMMIT_BLOCK):
        ids = _BLOCK_IDS.findall(cm.group(1))
        if len(ids) >= 2:
            pair = (ids[0], ids[1], cm.start(1), cm.start(1) + cm.group(1).find(ids[1]))
            break
    if pair is None and m and ex.mt.search(P.ROBOT_COMMIT_LINE):
        cl = ex.mt.search(P.ROBOT_COMMIT_LINE)
        pair = (None, m.group(1), -1, cl.start(1))
    return metric, pct, span, pair


def measured(ex: Extractor):
    """Find a measured comparison: returns dict(good_label, bad_label, good, bad, unit, metric, pct, span)."""
    units = ex.mt.units
    results = []
    rows = _version_rows(units)
    ex.numbers = []
    for lab, val, u, _, sd, n in rows:
        rel = None if sd is None or val == 0 else round(abs(sd / val), 4)
        ex.numbers.append({"label": lab, "value": val, "unit": None, "stdev": rel, "n": n, "_u": u})
    if len(rows) >= 2:
        results.append(_version_rows_pair(rows, units))
    results += _table_results(ex, rows)
    results += _pct_header_results(units)
    results += _role_column_results(units)
    results += _pair_results(ex)
    runs = NUM_T.runs_stated(ex.clean, ex.mt)
    if runs:
        for n in ex.numbers:
            if n.get("n") is None:
                n["n"] = runs
    return results


def _version_row(u):
    """(a) one unit that is a row labelled with a version ("6.6.78 2 487 746 100%",
    "v3.19-rc1: ... average=135.677"): (label, value, unit, stated pct, stdev, n) or None."""
    t = u.text.strip()
    vm = P.VERSION.match(t)
    if not vm or "\n" in t:
        return None
    rest = t[vm.end():]
    rest = re.sub(r"^[^\s:]*", "", rest)  # version suffix like -v8-16k+
    rest = rest.lstrip(" :")
    kv = dict((k.lower(), v) for k, v in STAT_KV.findall(rest))
    val = None
    stdev = n = None
    pct_stated = None
    if kv:
        for k in ("avg", "average", "mean", "median"):
            if k in kv:
                val = float(kv[k])
                break
        stdev = float(kv.get("stdev") or kv.get("stddev") or kv.get("sd") or "nan")
        stdev = None if math.isnan(stdev) else stdev
        nn = kv.get("testcnt") or kv.get("valcnt") or kv.get("n") or kv.get("runs") or kv.get("samples")
        n = int(float(nn)) if nn else None
    else:
        nm = THOUSANDS.match(rest)
        if nm and not re.match(r"\s*[a-zA-Z]", rest):
            val = parse_num(nm.group(1))
            pm = re.search(r"([+-]?\d+(?:\.\d+)?)\s?%", rest[nm.end():])
            if pm:
                pct_stated = float(pm.group(1))
    if val is None:
        return None
    return (vm.group(0), val, u, pct_stated, stdev, n)


def _version_rows(units) -> list:
    """(a) the rows labelled with versions, in order."""
    rows = []
    for u in units:
        row = _version_row(u)
        if row is not None:
            rows.append(row)
    return rows


def _version_rows_pair(rows, units) -> dict:
    """(a) the comparison of version rows: baseline = first row, bad = next row."""
    g, b = rows[0], rows[1]
    kg, kb = version_key(g[0]), version_key(b[0])
    if vcmp(kg, kb) == 1:
        g, b = b, g
    pct = b[3] if b[3] is not None and abs(b[3]) < 100 and b[3] != 0 else pct_change(g[1], b[1])
    header = units[g[2].index - 1].text if g[2].index > 0 else ""
    metric = _header_metric(header)
    return {"good": g[0], "bad": b[0], "pct": pct, "metric": metric, "unit": None,
            "span": (g[2].cstart, b[2].cend), "gpos": g[2].cstart, "bpos": b[2].cstart}


def _table_results(ex: Extractor, rows) -> list:
    """(a2) tables: version/commit blocks and columns, unit rows, LKP comparison rows.  Their
    cells go to ``ex.numbers``; their pairs are comparisons when no version rows were found."""
    clean = ex.clean
    units = ex.mt.units
    results = []
    r_metric = ex.robot_subject.group(2) if ex.robot_subject else None
    if r_metric is None:
        mb = ex.mt.search(P.ROBOT_BODY)
        r_metric = mb.group(3) if mb else None
    tables = (NUM_T.lkp_rows(units, clean, r_metric) + NUM_T.block_rows(units, clean)
              + NUM_T.version_columns(units, clean) + NUM_T.unit_rows(units, clean))
    seen_cells = {(n["label"], n["value"]) for n in ex.numbers}
    for t in tables:
        for c in t.cells:
            if (c.label, c.value) not in seen_cells:
                seen_cells.add((c.label, c.value))
                ex.numbers.append({"label": c.label, "value": c.value, "unit": c.unit, "stdev": c.stdev,
                                     "n": c.n})
        if t.pair is None or rows:
            continue
        g, b = t.cells[t.pair[0]], t.cells[t.pair[1]]
        is_lkp = r_metric is not None and t.metric == r_metric
        if not is_lkp and vcmp(version_key(g.label), version_key(b.label)) == 1:
            g, b = b, g
        pct = pct_change(g.value, b.value)
        if pct is None:
            continue
        results.append({"good": None if is_lkp else g.label, "bad": None if is_lkp else b.label, "pct": pct,
                        "metric": t.metric, "unit": g.unit, "span": t.span, "gpos": t.span[0],
                        "bpos": t.span[0], "lkp": is_lkp})
    return results


def _pct_header_results(units) -> list:
    """(b) a header with two labels and a %-diff column: the first such, as a comparison."""
    for u in units:
        hm = _PCT_HEADER.match(u.text)
        if not hm or u.index + 1 >= len(units):
            continue
        nxt = [x for x in units[u.index + 1:u.index + 3] if not _RULE_LINE.fullmatch(x.text)]
        if not nxt:
            continue
        rm = _PCT_ROW.match(nxt[0].text)
        if not rm:
            continue
        ga, ba = hm.group(2), hm.group(3)
        if not (find_versions(ga) or find_versions(ba)):
            continue
        pct = float(rm.group(3))
        return [{"good": ga, "bad": ba, "pct": pct, "metric": None, "unit": None,
                 "span": (u.cstart, nxt[0].cend), "gpos": u.cstart, "bpos": u.cstart}]
    return []


def _role_column_results(units) -> list:
    """(c) a column table with a good/bad result row under a row of numbers."""
    results = []
    for u in units:
        toks = u.text.split()
        roles = [t.strip("[]*").lower() for t in toks[1:]]
        if len(roles) >= 3 and all(r in ("good", "bad", "base", "ok", "fail", "pass") for r in roles):
            for back in range(1, 4):
                if u.index - back < 0:
                    break
                row = units[u.index - back]
                nums = _ROW_NUMS.findall(row.text)
                if len(nums) == len(roles) and not re.search(r"%", row.text):
                    gi = max((i for i, r in enumerate(roles) if r in ("good", "ok", "pass")), default=None)
                    bi = next((i for i, r in enumerate(roles) if r in ("bad", "fail")), None)
                    if gi is not None and bi is not None:
                        pct = pct_change(float(nums[gi]), float(nums[bi]))
                        unit = None
                        um = re.search(r"(" + P.UNIT_WORDS + r")", row.text)
                        if um:
                            unit = um.group(1)
                        results.append({"good": None, "bad": None, "pct": pct, "metric": unit, "unit": unit,
                                        "span": (row.cstart, u.cend), "gpos": row.cstart, "bpos": row.cstart})
                    break
    return results


def _pair_results(ex: Extractor) -> list:
    """(d) "A vs B unit" and (e) "from A to B unit": the first of each form, its values to
    ``ex.numbers``."""
    clean = ex.clean
    results = []
    for rx in (P.PAIR_FROM_TO, P.PAIR_VS):
        for m in ex.mt.finditer(rx):
            a, b = float(m.group(1)), float(m.group(3))
            unit = m.group(4) or m.group(2)
            if not unit:
                continue
            ctx = clean[max(0, m.start() - 80):m.end() + 20]
            if rx is P.PAIR_VS and re.search(r"\b(?:CPUs?|cores?|threads?)\b", ctx, I):
                continue
            results.append({"good": None, "bad": None, "pct": pct_change(a, b), "metric": unit, "unit": unit,
                            "span": (m.start(), m.end()), "gpos": m.start(), "bpos": m.start(),
                            "vals": (a, b)})
            ex.numbers.append({"label": None, "value": a, "unit": unit, "stdev": None, "n": None})
            ex.numbers.append({"label": None, "value": b, "unit": unit, "stdev": None, "n": None})
            break
    return results


def _header_metric(header: str) -> str | None:
    h = " ".join(header.split())
    m = re.match(r"^\s*(?:kernel|version|revision|tree|commit)\w*\s+(.+?(?:" + P.UNIT_WORDS + r"))(?:\s|$)", h, I)
    if m:
        return m.group(1)
    return None


def stated_percent(ex: Extractor):
    """A regression percentage stated in prose: returns (value, cspan, hedged, in_subject)."""
    for text, subj in ((ex.clean, False), (ex.subject, True)):
        for r in (_STATED_PCT, _STATED_PCT_OF):
            if subj:
                m = r.search(text) if "%" in text else None
            elif r is _STATED_PCT:
                m = _search_stated_pct(text, ex.mt.low)
            else:
                m = ex.mt.search(r)
            if m:
                hedge = (m.group("hedge") or "").lower()
                hedged = hedge in ("more than", "over", "at least", "up to", ">")
                pre = text[max(0, m.start("num") - 6):m.start("num")]
                if re.search(r"\d\s?%?\s?(?:[-–—~]|to)\s?$", pre) or \
                        (m.group("num")[0] == "-" and re.search(r"\d\s?%?$", pre)):
                    hedged = True  # a range "1-3.5%": no single figure
                return float(m.group("num")), (m.start(), m.end()), hedged, subj
    return None


def times_phrase(ex: Extractor):
    rx = _TIMES
    for text, subj in ((ex.clean, False), (ex.subject, True)):
        m = rx.search(text) if subj else ex.mt.search(rx)
        if m:
            n = m.group("n").lower()
            factor = {"twice": 2.0, "two times": 2.0, "2x": 2.0, "three times": 3.0, "3x": 3.0}.get(n)
            if factor is None:
                factor = float(re.sub(r"[^\d.]", "", n))
            hedged = bool(m.group("hedge")) and m.group("hedge").strip().lower() in ("more than", "over")
            return (factor - 1) * 100.0, (m.start(), m.end()), hedged, subj
    return None


_PCT_HEADER = re.compile(r"^\s*(\S+)\s+(\S+)\s+(\S+)\s+(%[-\w]*|[-\w]*%|%?\s?change|%?diff\w*)\s*$")
_RULE_LINE = re.compile(r"[-=\s]+")
_PCT_ROW = re.compile(r"^\s*\S+\s+(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)\s+([-+]?\d+(?:\.\d+)?)%?\s*$")
_ROW_NUMS = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?![\w.%])")
_COMMIT_BLOCK = re.compile(r"^commit:\s*\n((?:[ \t]*[0-9a-f]{7,40}\b[^\n]*\n?){2,})", re.M)
_BLOCK_IDS = re.compile(r"^[ \t]*([0-9a-f]{7,40})\b", re.M)
_STATED_PCT = re.compile(r"(?P<hedge>more than|over|at least|up to|>|almost|nearly|about|around|roughly|approx\w*|~)?"
                         r"\s*(?P<num>[-+]?\d+(?:\.\d+)?)\s?%\s+(?:\w+\s+){0,3}?(?P<w>regression|drop|decrease|"
                         r"degradation|slowdown|loss|lower|slower|worse|reduction|less|performance (?:drop|loss|"
                         r"decrease|regression))", I)
_STATED_PCT_OF = re.compile(r"(?:regression|drop|decrease|degradation|slowdown|loss|reduction)\s+of\s+"
                            r"(?P<hedge>more than|over|at least|up to|about|around|roughly|~)?\s*"
                            r"(?P<num>[-+]?\d+(?:\.\d+)?)\s?%", I)
_PCT_HEDGES = ("more than", "over", "at least", "up to", ">", "almost", "nearly", "about", "around", "roughly",
               "approx", "~")
_NUM_OR_SPACE = re.compile(r"[\s\d.+\-]")


def _search_stated_pct(text: str, low: str):
    """``_STATED_PCT.search(text)`` (``low`` = ``fold(text)``), trying only where a match can start.

    A match holds exactly one "%" and, before it, ``hedge? \\s* number \\s?``.  So for the i-th "%"
    a match ending there starts after the previous "%", either where a hedge word is written or
    inside the run of spaces, digits, dots and signs right before the "%".  Those places are
    tried in text order, "%" by "%", as ``search`` tries every place from the left."""
    rx = _STATED_PCT
    q = text.find("%")
    if q < 0:
        return None
    hedges = sorted({i for h in _PCT_HEDGES for i in _all_find(low, h)})
    hi = 0
    prev = -1
    num_or_space = _NUM_OR_SPACE.match
    while q >= 0:
        cands = set()
        while hi < len(hedges) and hedges[hi] < q:
            if hedges[hi] > prev:
                cands.add(hedges[hi])
            hi += 1
        s0 = q
        while s0 > prev + 1 and num_or_space(text, s0 - 1):
            s0 -= 1
        cands.update(range(s0, q))
        for p in sorted(cands):
            m = rx.match(text, p)
            if m is not None:
                return m
        prev = q
        q = text.find("%", q + 1)
    return None


def _all_find(t: str, s: str) -> list[int]:
    out = []
    i = t.find(s)
    while i >= 0:
        out.append(i)
        i = t.find(s, i + 1)
    return out


_TIMES = re.compile(r"(?P<hedge>more than |over |almost |nearly |about |~)?\b(?P<n>twice|two times|2x|three times|"
                    r"3x|\d+(?:\.\d+)? ?times|\d+(?:\.\d+)?x)\s+(?:as\s+)?(?P<w>long|slow(?:er)?|longer)", I)


# "~3% IOPS regression", "a 10% MB/s drop"
UNIT_OF_PCT = re.compile(r"\d\s?%\s+(?:lower\s+|less\s+|fewer\s+)?(" + P.RATE_UNITS + r")(?![\w/])\s*(?:regression|drop|"
                         r"decrease|loss|degradation|reduction|lower|less)?", re.I)
# "I get 97-110MB/sec ... now only 66-70MB/sec": the same rate unit on two measured values (or ranges)
UNIT_MEASURED = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:\s?[-–]\s?\d+(?:\.\d+)?)?\s?(" + P.RATE_UNITS + r")(?![\w/])",
                           re.I)


# words of a comparison that got worse, around two measured values ("went from 170MB/s to 11MB/s",
# "falls to 2500 MB/sec", "only 66MB/s")
_WORSE_CUE = re.compile(r"\b(?:only|down to|drops?|dropped|slower|lower|decreas\w*|regress\w*|worse|"
                        r"falls?|fell|reduced|degrad\w*|(?:went|goes|going|gone) (?:down )?from)\b", re.I)


def _norm_unit(u: str) -> str:
    u = re.sub(r"/sec$", "/s", u)
    return "IOPS" if u.lower() == "iops" else u


_LINK_AFTER_UNIT = re.compile(r"\s*(?:link|port|NIC|interface|card|ethernet|connection|line|uplink|network|adapter)s?\b",
                              re.I)


def unit_of_stated_drop(ex: Extractor) -> tuple[str | None, tuple | None]:
    """The unit of a performance claim when no single change figure could be computed.

    A percentage written against a unit ("~1-3% IOPS regression") or one rate unit used for both
    measurements of a comparison ("97-110MB/sec ... only 66-70MB/sec") names the metric.
    """
    for text, subj in ((ex.subject, True), (ex.clean, False)):
        m = UNIT_OF_PCT.search(text)
        if m and (m.group(0).split()[-1].lower() in ("regression", "drop", "decrease", "loss", "degradation",
                                                     "reduction", "lower", "less")
                  or re.search(r"%\s+(?:lower|less|fewer)\b", m.group(0), re.I)):
            return _norm_unit(m.group(1)), (None if subj else (m.start(1), m.end(1)))
    by_unit: dict[str, list] = {}
    # the subject first ("speed drops from 18429 MB/s to 6155 MB/s"), then the text's units
    texts = ([(ex.subject, None)] if ex.subject else []) + [(u.text, u) for u in ex.mt.units[:400]]
    for text, u in texts:
        for m in UNIT_MEASURED.finditer(text):
            if _LINK_AFTER_UNIT.match(text, m.end()):
                continue  # a link or device capacity, not a measurement
            by_unit.setdefault(_norm_unit(m.group(1)).lower(), []).append((m, u, text))
    for key, hits in by_unit.items():
        values = {re.sub(r"\s", "", h[0].group(0)[:h[0].start(1) - h[0].start()]) for h in hits}
        cue = any(_WORSE_CUE.search(h[2]) for h in hits)
        if len(values) >= 2 and cue:
            m, u, _ = hits[0]
            return _norm_unit(m.group(1)), (None if u is None else (u.cstart + m.start(1), u.cstart + m.end(1)))
    return None, None


# the metric named in prose: "The main metric is `iteration_ns_per_page`", "Metric: IOPS",
# 'look for the "Write clat ns p99" metric', "the transactions per second (tps)"
_METRIC_NAMED = re.compile(
    r"\b(?:(?:main|primary|key|relevant|reported|measured|performance)\s+)?metrics?\s*(?:is|was|:|=)\s*[`'\"]?"
    r"(?P<a>[A-Za-z][\w./()%-]*(?:[ \t][\w./()%-]+){0,3}?)[`'\"]?(?=\s*(?:[,.;(\n]|$|,?\s+(?:lower|higher|which|where|and)\b))"
    r"|[`'\"](?P<b>[A-Za-z][\w./ %-]{1,40})[`'\"]\s+metric\b", re.I | re.M)


def performance_measure(ex: Extractor, change, change_span, metric, metric_span) -> tuple:
    """In a performance report (two speeds in a functional one are seldom its claim), the
    candidates tried after the robot line, tables, stated figures: a rate measured at a few
    values, a metric named as such, the measured quantity the text names.  ``ex.measure_source``
    says which.  Returns (change, change_span, metric, metric_span)."""
    if change is None or metric is None:
        up = unit_pair_change(ex)
        if up is not None and change is None:
            change, change_span, ex.measure_source = up[0], up[1], up[3]
        if up is not None and metric is None:
            metric, metric_span = up[2], up[1]
    if metric is None or metric == "time":
        named, named_span = named_metric(ex)
        if named is not None:  # named as the metric: before a bare unit or "time" from "N times as long"
            metric, metric_span = named, named_span
            ex.measure_source = ex.measure_source or "named_metric"
    if metric is None:
        metric, metric_span = metric_noun(ex)
        if metric is not None:
            ex.measure_source = ex.measure_source or "metric_noun"
    return change, change_span, metric, metric_span


# a rate spelled out with its abbreviation: "the transactions per second (tps)", "operations per
# second (ops/s)": the abbreviation is the metric the figures are given in
_PER_SECOND_ABBR = re.compile(
    r"\b(?:transactions?|operations?|requests?|quer(?:y|ies)|frames?|packets?|messages?|iterations?|jobs?|"
    r"records?|I/Os?|IOs?|ops)\s+per\s+(?:second|sec|minute|min)\s*\(\s*([A-Za-z][\w/.-]{0,14})\s*\)", re.I)


def named_metric(ex: Extractor) -> tuple[str | None, tuple | None]:
    """A metric the text names as such ("the primary metric is cycle_ns_per_page", "the
    transactions per second (tps)")."""
    m = ex.mt.search(_METRIC_NAMED) if "metric" in ex.mt.low else None
    if not m:
        m = ex.mt.search(_PER_SECOND_ABBR) if " per " in ex.mt.low else None
        return (m.group(1), (m.start(1), m.end(1))) if m else (None, None)
    g = "a" if m.group("a") else "b"
    v = m.group(g).strip()
    if v.lower() in ("the", "a", "an", "that", "this", "not", "very", "also", "still"):
        return None, None
    return v, (m.start(g), m.end(g))


# what a performance report measures, named in its subject or text: "writeback throughput",
# "wifi throughput halved", "rename() latency", "network speed"
_METRIC_NOUN = re.compile(r"(?:\b([A-Za-z][\w()/-]{1,20})\s+)?\b(throughput|bandwidth|latency|latencies|IOPS|iops|"
                          r"(?:download|upload|network|transfer|write|read|copy|boot|suspend|resume)\s+(?:speed|time)s?|"
                          r"(?:run|exec|execution|wall[- ]clock|elapsed|completion)\s+time)\b")
_NOUN_STOP = {"the", "a", "an", "of", "in", "and", "or", "to", "for", "with", "on", "at", "by", "its", "our", "my",
              "your", "their", "this", "that", "same", "lower", "higher", "better", "worse", "less", "more", "low",
              "high", "good", "bad", "poor", "reduced", "increased", "is", "was", "are", "were", "be", "has", "have",
              "overall", "total", "average", "max", "min", "significant", "huge", "big", "small", "some", "much",
              "performance", "regression", "drop", "slow", "slower", "faster", "no", "not", "any", "i", "we", "it"}


def metric_noun(ex: Extractor) -> tuple[str | None, tuple | None]:
    """The measured quantity a performance report names ("throughput", "writeback throughput"):
    in the subject, else in the first sentence of the author's own text that names one."""
    cands = [(ex.subject, None)] + [(u.text, u) for u in ex.mt.units[:200] if u.depth == 0] + \
        [(u.text, u) for u in ex.mt.units[:200] if u.depth > 0]
    for text, u in cands:
        m = _METRIC_NOUN.search(text) if text else None
        if m is None:
            continue
        mod = m.group(1)
        start = m.start(1) if mod and mod.lower() not in _NOUN_STOP and not mod[0].isdigit() else m.start(2)
        value = " ".join(text[start:m.end(2)].split())
        return value, (None if u is None else (u.cstart + start, u.cstart + m.end(2)))
    return None, None


_LINK_AFTER = re.compile(r"\s*(?:link|port|NIC|interface|card|ethernet|connection|line|uplink|network|adapter|"
                         r"max(?:imum)?|limit|cap|peak|theoretical)s?\b", re.I)


def unit_pair_change(ex: Extractor):
    """A change computed from one rate unit measured at a few distinct values ("313.20MB/s"
    before, "68.61MB/s" after): the lowest against the highest, as a regression of a rate reads.
    (Durations were tried the same way: too many unrelated times in reports.)  Returns (pct,
    cspan, unit as written, source) or None."""
    by_unit: dict[str, list] = {}
    for u in ex.mt.units[:400]:
        for m in UNIT_MEASURED.finditer(u.text):
            num = m.group(0)[:m.start(1) - m.start()].strip()
            if re.search(r"\d\s?[-–]\s?\d", num) or _LINK_AFTER.match(u.text, m.end()):
                continue  # a range, or a capacity rather than a measurement
            by_unit.setdefault(_norm_unit(m.group(1)).lower(), []).append(
                (float(num), m.group(1), u.cstart + m.start(), u.cstart + m.end()))
    if not by_unit:
        return None
    hits = by_unit[max(by_unit, key=lambda k: len(by_unit[k]))]
    vals = sorted({h[0] for h in hits})
    if not 2 <= len(vals) <= 4 or vals[0] <= 0:
        return None
    first, last = min(hits, key=lambda h: h[2]), max(hits, key=lambda h: h[2])
    unit = first[1]
    km = _KEYED_VALUE.search(ex.clean, max(0, first[2] - 40), first[2])
    if km:  # fio's "WRITE: bw=1512MiB/s", "read: IOPS=203k, BW=49.6GiB/s": the quantity as named
        unit = " ".join(x for x in (km.group(1), km.group(2)) if x) + f" ({unit})"
    return round((vals[0] - vals[-1]) / vals[-1] * 100.0, 1), (first[2], last[3]), unit, "rate_pair"


_KEYED_VALUE = re.compile(r"(?:\b(READ|WRITE|read|write|TRIM|trim|MIXED|mixed)\s*:\s*(?:[A-Za-z]+=\S+,?\s*)*?)?"
                          r"\b(bw|BW|bandwidth|iops|IOPS|aggrb|throughput)\s*[=:]\s*$")


def fallback_metric(ex: Extractor, times) -> tuple[str | None, tuple | None]:
    if times is not None:
        text = ex.subject if times[3] else ex.clean
        ctx = text[max(0, times[1][0] - 80):times[1][1] + 30] if not times[3] else text
        mm = re.search(r"\b(build|compil|boot|load|start|run)\w*", ctx, re.I)
        if mm:
            stem = mm.group(1).lower()
            stem = {"compil": "build"}.get(stem, stem)
            return f"{stem} time", None
        return "time", None
    m = re.search(r"(?:^|:\s*)([a-z][a-z_.]*[a-z])\s*:\s*(?:\w+=\S+\s+)*?(?:avg|average|mean)=", ex.clean,
                  re.M | re.I)
    if m:
        return m.group(1), (m.start(1), m.end(1))
    m = P.UNIT_LONG_RE.search(ex.clean)
    if m:
        return P.UNIT_LONG[m.group(1).lower()], (m.start(), m.end())
    return None, None


# cue patterns with a \b(?=\w) check in front (scan.word_led: same matches, faster scans)
STAT_KV = scan.word_led(STAT_KV)
