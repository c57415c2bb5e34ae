"""Where a claim is stated: the sentence that states the regression and the mention of a good
or bad version in the sentence that calls it so (the spans of the claim's facts).
Functions over the rule stages' per-message state ``ex`` (``rules.Extractor``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from . import patterns as P
from . import scan

if TYPE_CHECKING:
    from .rules import Extractor

STATE_STRONG = re.compile(r"\bregress(?:ion|ions|ed|es)?\b|first bad commit|\b(?:caused|introduced) by\b",
                          re.I)
STATE_PERF = re.compile(r"\b(?:slow(?:er|down|s)?|drop(?:s|ped)?|decrease[sd]?|lower|degrad\w*|longer|loss|"
                        r"performance|throughput|latency)\b|\d\s?%", re.I)
STATE_FUNC = re.compile(r"\b(?:fail\w*|broken|breaks?|broke|crash\w*|hang\w*|hung|oops|panic|(?:does|did)n'?t boot|"
                        r"not boot|unable to|no longer|stopped working|error)\b", re.I)
VER_OR_ID = re.compile(r"(?<![\w.])v?[2-9]\.\d|\b[0-9a-f]{7,40}\b|\bnext-\d{8}")
_BISECTED_TO = re.compile(r"\bbisect\w*\b[^.\n]{0,40}\b(?:to|down)\b|\bis the first bad\b", re.I)
CLAIM_HINT = re.compile(r"regress|bisect|first bad|caused|introduced|slow|drop|decreas|lower|degrad|longer|loss|perf|"
                        r"throughput|latency|%|fail|broke|crash|hang|hung|oops|panic|boot|unable|no longer|stopped|error",
                        re.I)
_CLAIM_HINT_WORDS = tuple(w.lower() for w in CLAIM_HINT.pattern.split("|"))
assert all(re.escape(w) == w.replace(" ", "\\ ") and w.isascii() for w in _CLAIM_HINT_WORDS)
GOOD_NEAR = re.compile(r"\b(?:works?|worked|working|fine|ok(?:ay)?|good|boots?|unaffected|last good|baseline|base|"
                       r"last pass|correct(?:ly)?|normal(?:ly)?|no problems?)\b", re.I)
BAD_NEAR = re.compile(r"\b(?:regress\w*|broken|breaks?|broke|fail\w*|crash\w*|hangs?|hung|bad|slow\w*|worse|"
                      r"drops?|dropped|unable|no longer|first bad|longer|lower|panic\w*|oops\w*|new failure)\b", re.I)


def claim_sentence(ex: Extractor, kind: str | None) -> tuple[tuple[int, int] | None, bool]:
    """The sentence (or the subject line) that best states the regression: (clean span, in_subject)."""
    side = STATE_PERF if kind == "performance" else STATE_FUNC if kind == "functional" else None

    may = scan.may_match

    def has(rx: re.Pattern, text: str, low: str) -> bool:
        return may(rx, text, low) and rx.search(text) is not None

    def score(text: str, depth: int, low: str) -> float:
        sc = 3.0 * has(STATE_STRONG, text, low)
        if has(_BISECTED_TO, text, low):
            sc += 2.0
        sc += 1.0 * bool(has(STATE_PERF, text, low) or has(STATE_FUNC, text, low))
        if side is not None and has(side, text, low):
            sc += 1.5
        if has(P.REGRESSION_OTHER_SENSE, text, low):
            sc -= 3
        if has(VER_OR_ID, text, low):
            sc += 0.5
        return sc - 0.75 * depth
    best = (score(ex.subject, 0, scan.fold(ex.subject)) + (1.5 if STATE_STRONG.search(ex.subject) or
                                                        P.ROBOT_SUBJECT.search(ex.subject) else 0.0), None)
    mt_low = ex.mt.low
    for u in ex.mt.units[:250]:
        if len(u.text) > (200 if u.structured else 600):
            continue
        low = mt_low[u.cstart:u.cend]  # == fold(u.text): fold keeps lengths
        # CLAIM_HINT.search(u.text): it is a plain list of words, found case-insensitively
        for w in _CLAIM_HINT_WORDS:
            if w in low:
                break
        else:
            continue
        sc = score(u.text, u.depth, low)
        if sc > best[0]:
            best = (sc, (u.cstart, u.cend))
    if best[1] is None:
        return None, True
    return best[1], False


_RANGE_WORDS = re.compile(r"\.\.|->|→|\bbetween\b|\bfrom\b")


def version_span(ex: Extractor, vc, role: str) -> tuple[int, int] | None:
    """Span of the mention of ``vc`` in the sentence that says it is good / bad."""
    default = _span_at(vc.pos, vc.text, ex)
    near = GOOD_NEAR if role == "good" else BAD_NEAR
    best = None
    for ms, me in _written(ex.clean, vc.text):
        u = ex.mt.unit_at(ms)
        if u is None:
            continue
        ctx = ex.clean[max(u.cstart, ms - 80):min(u.cend, me + 80)]
        sc = 2.0 * bool(near.search(ctx))
        if _RANGE_WORDS.search(ctx):
            sc += 1.0
        if P.BISECT.search(ctx):
            sc += 0.5
        if default is not None and default[0] == ms:
            sc += 0.75
        sc -= 0.5 * u.depth
        if best is None or sc > best[0]:
            best = (sc, (ms, me))
    if best is None:
        return default
    return best[1]


_EMPTY_WRITTEN = re.compile(r"(?<![\w.])(?![\w])")


def _written(clean: str, text: str) -> list[tuple[int, int]]:
    """The spans of ``re.finditer(r"(?<![\\w.])" + re.escape(text) + r"(?![\\w])", clean)``, found
    with ``str.find`` (no pattern compiled per version string)."""
    if not text:
        return [m.span() for m in _EMPTY_WRITTEN.finditer(clean)]
    out = []
    n = len(text)
    i = clean.find(text)
    while i >= 0:
        j = i + n
        if not (i and (scan.is_word_char(clean[i - 1]) or clean[i - 1] == ".")) \
                and not (j < len(clean) and scan.is_word_char(clean[j])):
            out.append((i, j))
            i = clean.find(text, j)  # (finditer resumes after a match)
        else:
            i = clean.find(text, i + 1)
    return out


def _span_at(pos: int, text: str, ex: Extractor):
    if pos is None or pos < 0:
        return None
    i = ex.clean.find(text, pos)
    if i < 0 or i - pos > 400:
        return (pos, pos + len(text))
    return (i, i + len(text))


# cue patterns with a \b(?=\w) check in front (scan.word_led: same matches, faster scans)
STATE_FUNC = scan.word_led(STATE_FUNC)
GOOD_NEAR = scan.word_led(GOOD_NEAR)
BAD_NEAR = scan.word_led(BAD_NEAR)
