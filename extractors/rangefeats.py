"""Context features of the good / bad range candidates: cue classes and pairs of versions.

The range rankers (``learned.choose_range``) see the words around each version mention
(``features._context``); the words alone do not generalise well: "upgraded from X", "moving
from X", "bumping from X" are one cue, "downgrading to X" and "going back to X" another.  This
module reduces the clause around a mention to *cue classes* (general English and kernel-mail
phrasing, nothing from any one message), each with its side (left / right of the mention) and
whether it is adjacent, a negation flipping a "works" cue, and the *pair* a mention forms with
its neighbour version ("A -> B", "from A to B", "A vs B", "A, B and C") with their order.
Pure functions over the rule stages' per-message state ``ex`` (``rules.Extractor``).
"""

from __future__ import annotations

import re

I = re.I

# (class, pattern): a cue class found in the clause before / after a version mention
CUE_CLASSES: list[tuple[str, re.Pattern]] = [(n, re.compile(p, I)) for n, p in [
    ("works", r"\b(?:works?|worked|working|fine|ok(?:ay)?|good|correct(?:ly)?|normal(?:ly)?|properly|"
              r"as expected|unaffected|no (?:problems?|issues?|regressions?)|without (?:any )?(?:problems?|issues?)|"
              r"boots?(?= (?:fine|ok|okay|normally|properly|correctly|again|up|and|with))|booted|pass(?:es|ed)?|"
              r"succeed\w*|recogni[sz]ed|detected)\b"),
    ("fails", r"\b(?:fail\w*|broken|breaks?|broke|regress\w*|crash\w*|hangs?|hung|freez\w*|oops\w*|panic\w*|"
              r"bug\w*|problems?|issues?|errors?|warn\w*|splat|slow\w*|worse|degrad\w*|drops?|lockups?|"
              r"unbootable|stuck|misbehav\w*|affected|symptoms?)\b"),
    ("occurs", r"\b(?:shows? up|showed up|shown up|appear(?:s|ed)?|occur\w*|happen\w*|trigger\w*|hits?)\b"),
    ("neg", r"\b(?:not|no longer|never|cannot|can't|won't|doesn't|didn't|isn't|wasn't|don't|stopped|unable)\b"),
    ("from", r"\b(?:upgrad\w*|updat\w*|switch\w*|mov\w*|bump\w*|went|going|migrat\w*|jump\w*|rebas\w*)\s+"
             r"(?:\w+\s+){0,3}?from\b"),
    ("to", r"\b(?:upgrad\w*|updat\w*|switch\w*|mov\w*|bump\w*|migrat\w*|jump\w*|rebas\w*)\s+(?:\w+\s+){0,2}?"
           r"(?:to|onto|into)\b|\binstall\w*\b"),
    ("back", r"\b(?:downgrad\w*|revert\w* back|roll\w* back|rolled back|go(?:ing)? back|went back|back to|"
             r"fall\w* back|boot\w* (?:back )?into (?:the )?(?:old|previous))\b"),
    ("last", r"\blast (?:known[- ])?(?:good|working|ok|pass\w*|correct|fine|stable)\b|\blast (?:one|version|kernel|"
             r"release) (?:that|which|where) (?:works?|worked)\b"),
    ("first", r"\bfirst (?:bad|broken|failing|affected|version|kernel|release|one)\b"),
    ("since", r"\b(?:since|starting (?:with|from|at|in)|as of|beginning (?:with|in)|introduced (?:in|with|by)|"
              r"appear\w* (?:in|with)|present (?:in|since)|(?:came|comes) (?:in|with))\b"),
    ("until", r"\b(?:up to|up until|until|till|through|prior to|before|older than|earlier than|pre-?)\b"),
    ("after", r"\b(?:after|newer than|later than|beyond|post-?|on top of)\b"),
    ("still", r"\b(?:still|also|too|even|persists?|remains?)\b"),
    ("fixed", r"\b(?:fix\w*|resolv\w*|solv\w*|cured|goes away|went away|gone|disappear\w*|revert\w*)\b"),
    ("tested", r"\b(?:tested|test(?:ing)?|tried|trying|reproduc\w*|running|ran|run|built|build(?:ing)?|compil\w*|"
               r"observed|seen|see|noticed|notice|found)\b"),
    ("bisect", r"\bbisect\w*\b"),
    ("compare", r"\b(?:vs\.?|versus|compared?|comparing|comparison|against|relative to|than|baseline|base)\b"),
    ("stable", r"\b(?:stable|lts|longterm|backport\w*|-stable|\d+\.\d+\.y)\b"),
    ("distro", r"\b(?:ubuntu|debian|fedora|centos|rhel|suse|opensuse|arch|gentoo|mint|distro\w*|package\w*)\b"),
    ("tool", r"\b(?:gcc|clang|llvm|binutils|glibc|qemu|firmware|bios|mesa|xorg|systemd|python\d?|perl|rustc|"
             r"version of (?:the )?(?:tool|package)|[\w]*-?(?:progs|utils|tools)|kmod|mdadm|lvm2?|grub\d?|u-boot|"
             r"busybox|openssl|compiler|toolchain)\b"),
    ("head", r"\b(?:mainline|linus'? (?:tree|master)|latest|current|recent|newest|tip|head|git)\b"),
]]

# all classes in one scan (a word in two classes counts for the first)
# (every class opens with \b and a word character: the \b(?=\w) guard skips the other positions)
_CUE_ANY = re.compile(r"\b(?=\w)(?:" + "|".join(f"(?P<{n}>{rx.pattern})" for n, rx in CUE_CLASSES) + ")", I)
# where a clause ends: a sentence stop, a semicolon, a contrast
_CLAUSE_END = re.compile(r"[.;!?](?:\s|$)|\bbut\b|\bwhile\b|\bwhereas\b|\bhowever\b", I)
_WORD = re.compile(r"\S+")
# what joins two version mentions next to each other
_SEPS = [("range", re.compile(r"\s*(?:\.\.\.?|->|-->|→|=>|⇒|to|till|until|up to|through)\s*", I)),
         ("vs", re.compile(r"\s*(?:vs\.?|versus|against|compared (?:to|with)|and|or)\s*", I)),
         ("list", re.compile(r"\s*(?:[,/|]|,?\s*and|,?\s*or)\s*", I)),
         ("columns", re.compile(r"[ \t]+"))]  # table columns: "threads v5.15 v6.1"
_FROM_BETWEEN = re.compile(r"\b(from|between)\s+(?:(?:the|kernels?|linux|versions?|v)\s+){0,2}$", I)


def _windows(ex, cs: int, ce: int, prev_end: int, next_start: int) -> tuple[str, str]:
    """The clause text left and right of a mention, cut at the clause ends and at the
    neighbouring version mentions."""
    clean = ex.clean
    unit = ex.mt.unit_at(cs)
    us, ue = (unit.cstart, unit.cend) if unit is not None else (max(0, cs - 100), ce + 100)
    left = clean[max(us, cs - 100, prev_end):cs]
    right = clean[ce:min(ue, ce + 100, next_start if next_start > ce else ce + 100)]
    ends = list(_CLAUSE_END.finditer(left))
    if ends:
        left = left[ends[-1].end():]
    m = _CLAUSE_END.search(right)
    if m:
        right = right[:m.start()]
    return left, right


def _cue_feats(left: str, right: str, prefix: str) -> set[str]:
    """The cue classes of the clause left and right of a mention (one scan of each side; a
    class adjacent to the mention, within three words, also as ``cL1`` / ``cR1``)."""
    f = set()
    starts = [m.start() for m in _WORD.finditer(left)]
    near_left = starts[-3] if len(starts) >= 3 else 0
    for m in _CUE_ANY.finditer(left):
        f.add(f"{prefix}cL:{m.lastgroup}")
        if m.start() >= near_left:
            f.add(f"{prefix}cL1:{m.lastgroup}")
    ends = [m.end() for m in _WORD.finditer(right, 0, 120)][:3]
    near_right = ends[-1] if len(ends) >= 3 else len(right)
    for m in _CUE_ANY.finditer(right):
        f.add(f"{prefix}cR:{m.lastgroup}")
        if m.end() <= near_right:
            f.add(f"{prefix}cR1:{m.lastgroup}")
    # "works" under a negation ("does not work with X", "X is not OK") reads as a failure
    for side in ("L", "R"):
        if f"{prefix}c{side}:works" in f and f"{prefix}c{side}:neg" in f:
            f.add(f"{prefix}c{side}:works_neg")
        elif f"{prefix}c{side}:works" in f:
            f.add(f"{prefix}c{side}:works_pos")
    if not left.strip():
        f.add(f"{prefix}cL:empty")
    if not right.strip():
        f.add(f"{prefix}cR:empty")
    return f


def _sep_kind(between: str) -> str | None:
    if len(between) > 24 or "\n\n" in between:
        return None
    for name, rx in _SEPS:
        if rx.fullmatch(between):
            return name
    return None


def range_context(ex, cands, order) -> None:
    """Add the cue-class and pair features to every version candidate (``features.Candidate``,
    ``order``: a version -> sortable key function that may raise ValueError)."""
    spans = sorted(((s, e, c) for c in cands for s, e, subj in c.spans[:6] if not subj and s >= 0),
                   key=lambda t: t[0])
    # overlapping spans (a release inside its build string) are one mention, of every candidate
    flat: list[tuple[int, int, list]] = []
    for s, e, c in spans:
        if flat and s < flat[-1][1]:
            ps, pe, cs = flat[-1]
            flat[-1] = (ps, max(pe, e), cs + [c])
            continue
        flat.append((s, e, [c]))
    clean = ex.clean
    for i, (s, e, group) in enumerate(flat):
        prev_end = flat[i - 1][1] if i > 0 else 0
        next_start = flat[i + 1][0] if i + 1 < len(flat) else len(clean)
        left, right = _windows(ex, s, e, prev_end, next_start)
        cues = _cue_feats(left, right, "")
        for c in group:
            c.feats |= cues
            _pair_feats(clean, flat, i, c, order)


def _pair_feats(clean: str, flat: list, i: int, c, order) -> None:
    """The pair mention ``i`` (of candidate ``c``) forms with its neighbours: side "left" when
    it is the left one of the pair ("A" of "A -> B"), the joint, the order of the two."""
    s, e, _ = flat[i]
    for side, j in (("left", i + 1), ("right", i - 1)):
        if not 0 <= j < len(flat):
            continue
        o = flat[j]
        between = clean[e:o[0]] if side == "left" else clean[o[1]:s]
        kind = _sep_kind(between)
        if kind is None or c in o[2]:
            continue
        f = f"pair:{side}:{kind}"
        c.feats.add(f)
        try:
            a, b = order(c.value), order(o[2][0].value)
            rel = "older" if a < b else "newer" if a > b else "same"
        except (ValueError, TypeError):
            rel = "unordered"
        c.feats.add(f"{f}:{rel}")
        first = s if side == "left" else o[0]
        kw = _FROM_BETWEEN.search(clean[max(0, first - 30):first])
        if kw:
            c.feats.add(f"{f}:{kw.group(1).lower()}")


def order_relations(cands, order, rule_good: str | None, rule_bad: str | None) -> None:
    """Where a version stands among the versions the text calls working / failing: the newest
    of the working ones is the likely last good, the oldest failing one newer than it the likely
    first bad; a version older than a failing one (or newer than a working one) is a candidate
    for the other end."""
    keyed = []
    for c in cands:
        try:
            keyed.append((order(c.value), c))
        except (ValueError, TypeError):
            continue
    works = [k for k, c in keyed if {"cL:works_pos", "cR:works_pos", "cL:last", "cL:back"} & c.feats]
    fails = [k for k, c in keyed if {"cL:works_neg", "cR:works_neg", "cL:fails", "cR:fails", "cL:since", "cL:first"}
             & c.feats]
    rg = rb = None
    for k, c in keyed:
        if rule_good and c.norm == rule_good:
            rg = k
        if rule_bad and c.norm == rule_bad:
            rb = k
    for k, c in keyed:
        if works:
            c.feats.add(f"ord:works:{_cmp(k, max(works))}")
        if fails:
            c.feats.add(f"ord:fails:{_cmp(k, min(fails))}")
        if works and fails:
            c.feats.add("ord:between" if max(works) < k <= min(fails) or max(works) <= k < min(fails) else "ord:outside")
        if rg is not None:
            c.feats.add(f"ord:rule_good:{_cmp(k, rg)}")
        if rb is not None:
            c.feats.add(f"ord:rule_bad:{_cmp(k, rb)}")


def _cmp(a, b) -> str:
    return "older" if a < b else "newer" if a > b else "same"



# ------------------------------------------------------------------ the range as one decision
# The good and bad rankers score each end alone; a range is read as a whole: how sure each end
# is, where each stands in its ranking, how the two versions relate (two builds of one release,
# consecutive releases, far apart), whether a version the text also calls working / failing
# lies between them (a narrower range), and how close the two are written.

PAIR_TOP = 5  # the ends considered: the top candidates of each ranker
_SPECIFIC = frozenset({"vrel:base_only", "vrel:longer=True", "vrel:shorter=True"})  # features.version_features
_PROB_STEPS = (0.9, 0.75, 0.6, 0.45, 0.3, 0.15)


def _step(p: float) -> str:
    return next((f"{s}" for s in _PROB_STEPS if p >= s), "0")


def _kind(c) -> str:
    n = c.norm
    if re.fullmatch(r"[0-9a-f]{7,40}", n):
        return "hex"
    if n.startswith("next-") or "-next-" in n:
        return "next"
    if re.fullmatch(r"2\.\d", n):
        return "series"  # "2.4", "2.6": a release series of the 2.x era, not a release
    return "rel" if re.fullmatch(r"\d+\.\d+(?:\.\d+)*(?:-rc\d+)?", n) else "build"


def _release(key: tuple) -> tuple:
    """The release a version order key belongs to: 2.6.30 for the 2.x era, 5.15 after."""
    return key[:3] if key[0] == 2 else key[:2]


_BASE = re.compile(r"(?:linux-|v)?\d+(?:\.\d+)*(?:-?rc\d+)?")
_DESCRIBE_ID = re.compile(r"-g[0-9a-f]{6,}$")  # the commit id of a git describe string


def _build_numbers(norm: str) -> tuple:
    """The numbers of a build string after its release ("6.8.0-31" -> 31, "2.6.18-git7" -> 7):
    two builds of one release are ordered by them (distro build numbers, -git snapshots)."""
    m = _BASE.match(norm)
    rest = _DESCRIBE_ID.sub("", norm[m.end():] if m else "")
    return tuple(int(x) for x in re.findall(r"\d+", rest))


def _relation(ka: tuple, kb: tuple) -> str:
    ra, rb = _release(ka), _release(kb)
    if ra == rb:
        return "same_release"
    if len(ra) == len(rb) and ra[:-1] == rb[:-1] and rb[-1] == ra[-1] + 1:
        return "next_release"
    if ra[0] + 1 == rb[0] and len(rb) >= 2 and rb[1] <= 1 and ra[0] >= 3:
        return "next_release"  # 4.20 -> 5.0
    return "older" if ka < kb else "newer" if ka > kb else "equal"


def _gap(c1, c2) -> str:
    """How close the nearest mentions of the two are in the text."""
    best = None
    for s1, e1, sub1 in c1.spans[:6]:
        for s2, e2, sub2 in c2.spans[:6]:
            if sub1 != sub2 or s1 < 0 or s2 < 0:
                continue
            d = s2 - e1 if s2 >= e1 else s1 - e2
            best = d if best is None else min(best, d)
    if best is None:
        return "none"
    return "adjacent" if best <= 12 else "near" if best <= 80 else "para" if best <= 400 else "far"


def pair_options(cands, pg: list[float], pb: list[float], order) -> list[tuple[int, int, set[str]]]:
    """The (good, bad) pairs among the top candidates of each ranker, each with its features:
    two different versions, never a backwards range."""
    top_g = sorted(range(len(cands)), key=lambda i: -pg[i])[:PAIR_TOP]
    top_b = sorted(range(len(cands)), key=lambda i: -pb[i])[:PAIR_TOP]
    keys = []
    for c in cands:
        try:
            keys.append((order(c.value), _build_numbers(c.norm)))
        except (ValueError, TypeError):
            keys.append(None)
    out = []
    for rg, i in enumerate(top_g):
        for rb, j in enumerate(top_b):
            gi, bj = cands[i], cands[j]
            if i == j or gi.norm == bj.norm or (_kind(gi) == _kind(bj) == "hex" and (
                    gi.norm.startswith(bj.norm) or bj.norm.startswith(gi.norm))):
                continue  # one version, or one commit id written short and long
            ki, kj = keys[i], keys[j]
            if ki is not None and kj is not None and ki > kj:
                continue
            f = {f"pg:{_step(pg[i])}", f"pb:{_step(pb[j])}", f"rg:{min(rg, 2)}", f"rb:{min(rb, 2)}",
                 f"pgb:{_step(pg[i])}|{_step(pb[j])}", f"kinds:{_kind(gi)}-{_kind(bj)}", f"gap:{_gap(gi, bj)}"}
            if ki is not None and kj is not None:
                f.add(f"rel:{_relation(ki[0], kj[0])}")
                # a version between the two that the text also calls working (failing): a
                # narrower range is written
                if any(k is not None and ki < k <= kj and pg[n] >= 0.3 and n not in (i, j) for n, k in enumerate(keys)):
                    f.add("narrower_good")
                if any(k is not None and ki <= k < kj and pb[n] >= 0.3 and n not in (i, j) for n, k in enumerate(keys)):
                    f.add("narrower_bad")
            else:
                f.add("rel:unordered")
            # how specific each end is among the forms the text gives of one release ("5.16" /
            # "5.16.18" / "5.16.18-1"): the labels take a version as written, the most specific one
            f.update("g:" + x for x in _SPECIFIC & gi.feats)
            f.update("b:" + x for x in _SPECIFIC & bj.feats)
            if pb[i] > pg[i]:
                f.add("good_reads_bad")
            if pg[j] > pb[j]:
                f.add("bad_reads_good")
            out.append((i, j, f))
    return out
