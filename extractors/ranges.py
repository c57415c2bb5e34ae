"""The range stage: which kernel version is the last good one and which the first bad one.

Every version mention gets a role from its context (an explicit range "5.10 -> 5.11", a regzbot
range, "works with" / "broken since" cues, "compared to" forms, the subject line), and
``choose_good_bad`` picks the pair, with a bisect or measured range and a robot's commit pair
first.  Functions over the rule stages' per-message state ``ex`` (``rules.Extractor``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import patterns as P
from . import scan
from .mentions import Mention, find_versions, vcmp, version_key
from .scan import may_match

if TYPE_CHECKING:
    from .culprits import CommitGroup
    from .rules import Extractor

I = re.I

GOOD_CUE = re.compile(r"\b(?:ok(?:ay)?|fine|good|works?|worked|boots?(?=\s*(?:[.,;)]|$|and\b|but\b))|last pass|unaffected|not affected|no problems?|(?:the )?problem "
                      r"(?:went|goes|is gone|disappear\w*)(?: away)?|went away|goes away|(?:does|did)(?:n't| not) "
                      r"(?:happen|occur|reproduce|show)|boots? (?:fine|ok|normally|properly)|correct(?:ly)?|"
                      r"last good|baseline|base|stable|as expected|normal(?:ly)?|no issues?)\b", I)
GOOD_LEFT = re.compile(r"\b(?:(?:boots?\s+|runs?\s+)?(?:fine|ok|okay|good|works?|worked|working|normally)\s+(?:with|on|under|in)|"
                       r"working|last good|last pass:?|good|fine|compar\w+ (?:with|to|against)|than(?: on| with| in)?|"
                       r"relative to|baseline|versus|vs\.?|as under|as on|as with|as in)\s+"
                       r"(?:the\s+|a\s+|kernel\s+|linux\s+)*$", I)
BAD_CUE = re.compile(r"\b(?:regress\w*|broken|breaks?|broke|fail\w*|crash\w*|hangs?|hung|hanging|problems?|issues?|"
                     r"bad|slow\w*|oops\w*|panic\w*|errors?|splat\w*|unbootable|(?:does|did)(?:n't| not) boot|not boot|"
                     r"worse|drops?|dropped|decreas\w*|loss|lost|degrad\w*|first present|introduced|symptoms?|"
                     r"bugs?|WARN\w*|no longer|stopped|trouble|takes? \w+ as long|twice as long|"
                     r"(?:took|takes?|taking)\s+(?:\w+\s+){0,2}(?:times\s+)?longer|slower|new failure|"
                     r"unable to boot|(?:lower|higher) (?:iops|throughput|bandwidth|latency)|badly|poorly|"
                     r"(?:compared (?:with|to)|than|relative to) (?:the |all |any )?(?:earlier|older|previous|prior) "
                     r"(?:kernels?|versions?|releases?))\b", I)
BAD_LEFT = re.compile(r"(?:\b(?:regress\w*|broken|fails?|failed|crash\w*|hang\w*|freez\w*|reboots?|problem\w*|issue\w*|slow\w*|error\w*|"
                      r"bug\w*)[^.\n]{0,40}?\b(?:in|on|with|for|since|from|of|by|up to)|\b(?:since|starting (?:with|from)|"
                      r"first present in|present in|introduced in|upgrad\w+ to|moving to|move to|switch\w* to|"
                      r"breaks? (?:in|on|with)|up to))\s+(?:the\s+|a\s+|kernel\s+|linux\s+|version\s+|current\s+)*$", I)
RANGE = re.compile(r"(?:\b(?P<kw>between|from)\s+)?(?P<a>\S+?)\s*(?P<sep>\.\.\.?|->|-->|→|=>|\s+to\s+|\s+and\s+|"
                   r"\s+until\s+|\s+till\s+)\s*(?P<b>\S+)")
# a last good version named by going back to it: "downgrading to X", "going back to X fixes it"
BACK_LEFT = re.compile(r"\b(?:downgrad\w*|(?:go|goes|going|went|revert\w*|roll\w*|fall\w*|boot\w*)\s+back)\s+"
                       r"(?:to|into)\s+(?:the\s+|kernel\s+|linux\s+|version\s+)*$|\blast\s+(?:known[- ])?(?:good|working|ok)"
                       r"(?:\s+(?:kernel|version|release|build))?(?:\s+(?:is|was))?\s*:?\s*(?:the\s+|kernel\s+|linux\s+)*$", I)
# a version the text says is not working: "X is not", "X doesn't boot"
NEG_RIGHT = re.compile(r"\s*(?:is|was|does|did)(?:n't|\s+not)\b|\s*(?:won't|can't|cannot|no longer)\b", I)
NEG_BEFORE = re.compile(r"\b(?:not|no longer|never|stopped|stops|cannot|can't|won't|unable to)\s+(?:\w+\s+)?$|n't\s+$", I)
_CLAUSE_BREAK = re.compile(r"[,;]|\bbut\b|\bwhile\b|\bwhereas\b", I)
HYPOTHETICAL = re.compile(r"\b(?:never|hope|would|will|if i|in case|should i|could)\b", I)
COMPARED = re.compile(r"(?P<bad>\S+)\s+(?:kernel\s+)?(?:compared (?:to|with|against)|against|relative to|versus|than(?: on| with| in)?)"
                      r"\s+(?:the\s+)?(?:kernel\s+)?(?P<good>\S+)", I)


@dataclass
class VersionClaim:
    text: str
    role: str       # good | bad
    tier: int       # 1 bisect/measured range, 2 explicit range, 3 cue, 4 subject
    pos: int
    depth: int
    span: tuple[int, int] | None = None
    weight: float = 1.0


_REGZBOT_RANGE = re.compile(r"#?regzbot\s+\^?introduced:?\s+(\S+?)\.\.\.?(\S+)", I)
_LOG_LINE = re.compile(r"\s*(?:\[\s*\d+\.\d+\]|#|git |CPU:|Hardware name)")
_RANGE_SEP = re.compile(r"\s*(?:\.\.\.?|->|-->|→|=>|to|and|until|till|-)\s*")
_BETWEEN_FROM = re.compile(r"\b(between|from)\s+(?:the\s+)?(?:kernels?\s+)?$", I)
_ARROW = re.compile(r"\.\.|->|→|=>")
_WENT_AWAY = re.compile(r"[^.]{0,20}\b(?:where|when)\b[^.]{0,20}(?:went away|disappear|was fine|worked|ok)", I)
_AFTER_BEFORE = re.compile(r"\bafter\s+(?:v(?=\d))?(\S+?),?\s+(?:but\s+|and\s+)?before\s+(?:v(?=\d))?(\S+?)"
                           r"[.,;:)]?(?:\s|$)", I)
_MARKED_GOOD_BAD = re.compile(r"(?<![\w/])([0-9a-f]{7,40})\s*\((?:[^()\n]{0,20},\s*)?(good|bad)\)")


def version_claims(ex: Extractor) -> list[VersionClaim]:
    out: list[VersionClaim] = []
    out += _regzbot_range_claims(ex)
    by_unit: dict[int, list[Mention]] = {}
    for v in ex.versions:
        by_unit.setdefault(v.unit, []).append(v)
    for ui, vs in by_unit.items():
        if ui < 0:
            continue
        u = ex.mt.units[ui]
        is_log = u.structured and _LOG_LINE.match(u.text)
        used = _unit_range_claims(ex, u, vs, out)
        if is_log:
            continue
        for i, v in enumerate(vs):
            if id(v) in used:
                continue
            vc = _cue_claim(ex, u, v, vs[i - 1].cend if i > 0 else -1, vs[i + 1].cstart if i + 1 < len(vs) else -1)
            if vc is not None:
                out.append(vc)
    out += _after_before_claims(ex)
    # commit ids marked "(good)" / "(merge, bad)"
    for m in ex.mt.finditer(_MARKED_GOOD_BAD):
        out.append(VersionClaim(m.group(1), m.group(2), 2, m.start(1), ex.mt.depth_at(m.start())))
    out += _compared_claims(ex)
    return out


def _regzbot_range_claims(ex: Extractor) -> list[VersionClaim]:
    """A regzbot range "introduced A..B" (A good, B first bad; either may be a commit id)."""
    out: list[VersionClaim] = []
    for m in ex.mt.finditer(_REGZBOT_RANGE):
        d = ex.mt.depth_at(m.start())
        out.append(VersionClaim(m.group(1), "good", 1, m.start(1), d, (m.start(1), m.end(2))))
        out.append(VersionClaim(m.group(2).rstrip(".,;"), "bad", 1, m.start(2), d, (m.start(1), m.end(2))))
    return out


def _unit_range_claims(ex: Extractor, u, vs: list[Mention], out: list[VersionClaim]) -> set[int]:
    """Ranges of two adjacent versions in one unit ("from A to B", "A -> B", "between A and
    B") appended to ``out``; returns the ids of the versions they used."""
    clean = ex.clean
    used: set[int] = set()
    for a, b in zip(vs, vs[1:]):
        between = clean[a.cend:b.cstart]
        pre = clean[max(u.cstart, a.cstart - 30):a.cstart]
        sep = _RANGE_SEP.fullmatch(between)
        if not sep:
            continue
        kw = _BETWEEN_FROM.search(pre)
        arrow = _ARROW.search(between)
        if not (kw or arrow):
            continue
        if kw and kw.group(1).lower() == "between" and "and" not in between:
            continue
        if "and" in between and not kw:
            continue
        after_txt = clean[b.cend:b.cend + 45]
        bisect_ctx = P.BISECT.search(u.text) and not HYPOTHETICAL.search(u.text)
        if _WENT_AWAY.match(after_txt):
            out.append(VersionClaim(a.text, "good", 3, a.cstart, a.depth))
            out.append(VersionClaim(b.text, "good", 3, b.cstart, b.depth))
        elif HYPOTHETICAL.search(u.text) and not kw:
            pass
        else:
            tier = 1 if bisect_ctx else 2
            if kw and kw.group(1).lower() == "between" and vcmp(version_key(a.text), version_key(b.text)) == 1:
                a, b = b, a  # "between 5.8 and 5.7": the older one is the good end
            out.append(VersionClaim(a.text, "good", tier, a.cstart, a.depth, (a.cstart, b.cend)))
            out.append(VersionClaim(b.text, "bad", tier, b.cstart, b.depth, (a.cstart, b.cend)))
        used.add(id(a))
        used.add(id(b))
    return used


def _cue_claim(ex: Extractor, u, v: Mention, prev_end: int = -1, next_start: int = -1) -> VersionClaim | None:
    """A single version's role from the good / bad cues around it in its unit, or None.  A cue
    beyond a neighbouring version across a clause break ("4.9.1 is OK, 4.9.2 is not") belongs
    to that version, not to this one."""
    clean = ex.clean
    lo = max(u.cstart, v.cstart - 70)
    if prev_end > lo and _CLAUSE_BREAK.search(clean[prev_end:v.cstart]):
        lo = prev_end
    hi = min(u.cend, v.cend + 70)
    if v.cend <= next_start < hi and _CLAUSE_BREAK.search(clean[v.cend:next_start]):
        hi = next_start
    left = clean[lo:v.cstart]
    right = clean[v.cend:hi]
    role = None
    weight = 1.0
    gl = GOOD_LEFT.search(left)
    if gl is not None and NEG_BEFORE.search(left, 0, gl.start()):
        role, weight = "bad", 2.0  # "stopped working in X", "does not work with X"
    elif gl is not None or BACK_LEFT.search(left):
        role, weight = "good", 2.0
    elif BAD_LEFT.search(left):
        role, weight = "bad", 2.0
    elif NEG_RIGHT.match(right):
        role = "bad"
    else:
        gd = _nearest(GOOD_CUE, left, right)
        bd = _nearest(BAD_CUE, left, right)
        if gd is not None and (bd is None or gd <= bd):
            role = "good"
        elif bd is not None:
            role = "bad"
        elif not u.structured and len(u.text) < 400:
            has_b, has_g = BAD_CUE.search(u.text), GOOD_CUE.search(u.text)
            if has_b and not has_g:
                role, weight = "bad", 0.5
    if role:
        return VersionClaim(v.text, role, 3, v.cstart, v.depth, None, weight)
    return None


def _after_before_claims(ex: Extractor) -> list[VersionClaim]:
    """A window: "after <A>, but before <B>" (A last good, B first bad)."""
    out: list[VersionClaim] = []
    for m in ex.mt.finditer(_AFTER_BEFORE):
        av, bv = find_versions(m.group(1), allow_weak=True), find_versions(m.group(2), allow_weak=True)
        if av and bv and vcmp(version_key(av[0].text), version_key(bv[0].text)) == -1:
            d = ex.mt.depth_at(m.start())
            out.append(VersionClaim(av[0].text, "good", 2, m.start(1), d, (m.start(1), m.end(2))))
            out.append(VersionClaim(bv[0].text, "bad", 2, m.start(2), d, (m.start(1), m.end(2))))
    return out


def _compared_claims(ex: Extractor) -> list[VersionClaim]:
    """Compared-to forms: "on 6.6 compared to 6.5"."""
    out: list[VersionClaim] = []
    mt_low = ex.mt.low
    for u in ex.mt.units:
        if not may_match(COMPARED, u.text, mt_low[u.cstart:u.cend]):  # the slice is fold(u.text)
            continue
        for m in COMPARED.finditer(u.text):
            bv = find_versions(m.group("bad"))
            gv = find_versions(m.group("good"))
            if bv and gv and vcmp(version_key(gv[0].text), version_key(bv[0].text)) == -1:
                out.append(VersionClaim(gv[0].text, "good", 2, u.cstart + m.start("good"), u.depth))
                out.append(VersionClaim(bv[0].text, "bad", 2, u.cstart + m.start("bad"), u.depth))
    return out


def _nearest(rx: re.Pattern, left: str, right: str) -> int | None:
    best = None
    for m in rx.finditer(left):
        d = len(left) - m.end()
        if d <= 60:
            best = d if best is None else min(best, d)
    m = rx.search(right)
    if m and m.start() <= 60:
        d = m.start()
        best = d if best is None else min(best, d)
    return best


def subject_version_claims(ex: Extractor) -> list[VersionClaim]:
    out: list[VersionClaim] = []
    vs = ex.subject_versions
    s = ex.subject
    used = set()
    for a, b in zip(vs, vs[1:]):
        between = s[a.cend:b.cstart]
        if re.fullmatch(r"\s*(?:\.\.\.?|->|-->|→|=>)\s*", between) or (
                re.fullmatch(r"\s+to\s+", between) and re.search(r"\bfrom\s+$", s[:a.cstart])):
            out.append(VersionClaim(a.text, "good", 1, -1, 0))
            out.append(VersionClaim(b.text, "bad", 1, -1, 0))
            used |= {id(a), id(b)}
        elif re.fullmatch(r"\s+and\s+", between) and re.search(r"\bbetween\s+$", s[:a.cstart]):
            if vcmp(version_key(a.text), version_key(b.text)) == 1:
                a, b = b, a  # "between 6.8 and 6.7": the older one is the good end
            out.append(VersionClaim(a.text, "good", 1, -1, 0))
            out.append(VersionClaim(b.text, "bad", 1, -1, 0))
            used |= {id(a), id(b)}
    for v in vs:
        if id(v) in used:
            continue
        left = s[max(0, v.cstart - 40):v.cstart]
        role = "good" if GOOD_LEFT.search(left) or re.search(r"\bas\s+(?:under|on|with|in)?\s*$", left) else "bad"
        out.append(VersionClaim(v.text, role, 4, -1, 0))
    return out


def choose_good_bad(ex: Extractor, measured: tuple | None, robot_pair: tuple | None, culprit: CommitGroup | None):
    claims = version_claims(ex)
    ex.vclaims = claims  # kept for the trained decisions (extractors.learned)
    subj = subject_version_claims(ex)
    base = _rc_base(claims + subj)

    def key(t):
        return version_key(t, base)

    good, bad = _stated_pair(claims, subj, measured, robot_pair)
    if good is None and bad is None:
        good, bad = _voted_pair(claims, subj, key)
    good, bad = _expand_rc(ex, good, base), _expand_rc(ex, bad, base)
    if bad is None or bad.tier >= 3:
        head = _tested_head(ex)
        if head is not None:
            bad = head
    # describe string for the first bad commit
    if culprit is not None:
        for m in culprit.mentions:
            d = getattr(m, "describe", None)
            if d and (bad is None or bad.tier >= 3):
                bad = VersionClaim(d, "bad", 1, m.cstart, m.depth)
    if bad is None:
        bad = _tested_head(ex)
    if good is not None and bad is not None and good.text == bad.text:
        good = None
    return good, bad


def _rc_base(claims: list[VersionClaim]):
    """The base release for a bare "-rcN": that of the first release version claimed."""
    bases = [version_key(c.text) for c in claims if not c.text.startswith("-")]
    base = None
    for k in bases:
        if k and k[0] == "rel" and k[2] != 999:
            base = k[1]
            break
    return base


def _stated_pair(claims: list[VersionClaim], subj: list[VersionClaim], measured: tuple | None,
                 robot_pair: tuple | None) -> tuple:
    """A good / bad pair stated outright: a tier-1 range, the measured comparison's labels,
    the robot report's, or a range in the subject."""
    good = bad = None
    tier1 = [c for c in claims if c.tier == 1]
    if tier1:
        g = [c for c in tier1 if c.role == "good"]
        b = [c for c in tier1 if c.role == "bad"]
        if g and b:
            good, bad = g[0], b[0]
    if good is None and measured and measured[0] and measured[1]:
        good = VersionClaim(measured[0], "good", 1, measured[2], 0)
        bad = VersionClaim(measured[1], "bad", 1, measured[3], 0)
    if good is None and robot_pair:
        if robot_pair[0]:
            good = VersionClaim(robot_pair[0], "good", 1, robot_pair[2], 0)
        bad = VersionClaim(robot_pair[1], "bad", 1, robot_pair[3], 0)
    if good is None and bad is None:
        srange = [c for c in subj if c.tier == 1]
        if srange:
            good, bad = srange[0], srange[1]
    return good, bad


def _voted_candidates(claims: list[VersionClaim], key) -> list[VersionClaim]:
    """The tier-2 and tier-3 claims, one role per version: the majority of its mentions (ties
    go to "bad"); explicit ranges (tier 2) all kept."""
    cands = [c for c in claims if c.tier in (2, 3)]
    votes: dict = {}
    for c in cands:
        k = key(c.text)
        votes.setdefault(k, [0.0, 0.0])[0 if c.role == "good" else 1] += c.weight
    return [c for c in cands if c.tier == 2 or
            (c.role == "good") == (votes[key(c.text)][0] > votes[key(c.text)][1])]


def _explicit_range(t2: list[VersionClaim], key) -> tuple:
    """The good / bad of the explicit ranges (tier 2): the first of each role; of several
    ranges ending at the same bad version, the narrowest one."""
    good = next((c for c in t2 if c.role == "good"), None)
    bad = next((c for c in t2 if c.role == "bad"), None)
    # several explicit ranges ending at the same bad version: the narrowest one wins
    # ("from 5.10 to 5.15 ... narrowed it down to 5.14 -> 5.15")
    if good is not None and bad is not None:
        for g2 in t2:
            if g2.role != "good" or g2.span is None:
                continue
            b2 = next((c for c in t2 if c.role == "bad" and c.span == g2.span), None)
            if b2 is not None and key(b2.text) == key(bad.text) and \
                    vcmp(key(g2.text), key(good.text)) == 1:
                good = g2
    return good, bad


def _voted_pair(claims: list[VersionClaim], subj: list[VersionClaim], key) -> tuple:
    """The good / bad pair from cue-voted claims: explicit ranges first, then the newest good
    (older than any bad the subject names) and the oldest bad after it, then the subject's."""
    subj_bad = [c for c in subj if c.role == "bad"]
    min_subj_bad = None
    for c in subj_bad:
        k = key(c.text)
        if min_subj_bad is None or (vcmp(k, min_subj_bad) or 0) < 0:
            min_subj_bad = k
    cands = _voted_candidates(claims, key)
    goods = [c for c in cands if c.role == "good"]
    if min_subj_bad is not None:
        goods = [c for c in goods if vcmp(key(c.text), min_subj_bad) == -1]
    bads = [c for c in cands if c.role == "bad"]
    good = bad = None
    t2 = [c for c in cands if c.tier == 2]
    if t2:
        good, bad = _explicit_range(t2, key)
    if good is None and goods:
        good = max(goods, key=lambda c: (key(c.text) or ("", ()), -c.pos) if key(c.text) else ("", (), 0, 0))
        good = _max_version(goods, key)
    if bad is None:
        bb = [c for c in bads if good is None or vcmp(key(c.text), key(good.text)) in (1, None)]
        bb = [c for c in bb if good is None or vcmp(key(c.text), key(good.text)) == 1
              or key(c.text) is None or key(good.text) is None or key(c.text)[0] != key(good.text)[0]]
        if bb:
            bad = _min_version(bb, key)
    if bad is None and subj_bad:
        sb = [c for c in subj_bad if good is None or vcmp(key(c.text), key(good.text)) != -1]
        if sb:
            bad = _min_version(sb, key)
    if good is None:
        sg = [c for c in subj if c.role == "good"]
        if sg:
            good = sg[0]
    return good, bad


def _expand_rc(ex: Extractor, c: VersionClaim | None, base) -> VersionClaim | None:
    """A bare "-rcN" expanded to a full form written elsewhere ("-rc5" -> "v4.7-rc5")."""
    if c is None or not c.text.startswith("-rc") or c.pos < 0:
        return c
    rc = c.text.rstrip("+")
    for v in ex.versions + ex.subject_versions:
        if v.text.endswith(rc) and not v.text.startswith("-"):
            return VersionClaim(v.text, c.role, c.tier, v.cstart, v.depth)
    return None if base is None else c


def _tested_head(ex: Extractor) -> VersionClaim | None:
    """The tested head "current -git (sha X)": the first commit id so introduced, as a bad claim."""
    for m in ex.commits:
        before = ex.clean[max(0, m.cstart - 40):m.cstart]
        if re.search(r"(?:-git|HEAD|tip|head)\s*\(?\s*(?:sha1?|commit)?\s*:?\s*$", before, I):
            return VersionClaim(m.text, "bad", 3, m.cstart, m.depth)
    return None


def _max_version(cs: list[VersionClaim], key):
    best = cs[0]
    for c in cs[1:]:
        if vcmp(key(c.text), key(best.text)) == 1:
            best = c
    return best


def _min_version(cs: list[VersionClaim], key):
    best = cs[0]
    for c in cs[1:]:
        if vcmp(key(c.text), key(best.text)) == -1:
            best = c
    return best


# cue patterns with a \b(?=\w) check in front (scan.word_led: same matches, faster scans)
GOOD_CUE = scan.word_led(GOOD_CUE)
GOOD_LEFT = scan.word_led(GOOD_LEFT)
BAD_CUE = scan.word_led(BAD_CUE)
BAD_LEFT = scan.word_led(BAD_LEFT)
BACK_LEFT = scan.word_led(BACK_LEFT)
