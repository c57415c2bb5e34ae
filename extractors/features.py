"""What the trained decisions see: candidates (versions, commits, CPU strings) and features.

Every feature is a word, with numbers, versions and commit ids reduced to their shape
(``shape``: ``<ver>``, ``<hex>``, ``<pct>``), so the models learn contexts, not values:
``message_features`` for the message models (is_regression, kind), the words around each
candidate and of its sentence for the rankers (culprit, good / bad, cpu), the words of a
value's sentence for the keep-or-drop gates (``gate_features``).  Pure functions over the
rule stages' output (``learned.RuleContext``, ``rules.Extractor``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from . import patterns as P
from . import scan
from .claim import Claim, Fact
from .classify import CLAIMS
from .culprits import culprit_written
from .rangefeats import order_relations, range_context

_TOK = re.compile(r"(?:linux-|v)?\d+\.\d+[\w.+~-]*|[A-Za-z_][\w'-]*|\d[\w.+~-]*%?|[%#:=<>/\[\]()@!?*+-]")
HEX_FULL = re.compile(r"^[0-9a-f]{7,40}$")
_VERSHAPE = re.compile(r"^(?:linux-|v)?\d+\.\d+")
_NUM = re.compile(r"^[+-]?\d[\d.,]*$")


@lru_cache(maxsize=1 << 16)
def shape(tok: str) -> str:
    """A token with its value abstracted away: numbers, versions, ids become their shape."""
    low = tok.lower()
    if HEX_FULL.match(low) and re.search(r"\d", low) and re.search(r"[a-f]", low):
        return "<hex>"
    if low.endswith("%"):
        return "<pct>"
    if _VERSHAPE.match(low):
        return "<ver-rc>" if "-rc" in low else "<ver>"
    if low.startswith("next-") and low[5:].isdigit():
        return "<next>"
    if _NUM.match(low):
        return "<num>"
    if low[:1].isdigit():
        return "<numx>"
    return low[:24]


class _Shapes(dict):
    """token -> ``shape(token)``, filled on first use (looked up by ``words`` at C speed)."""

    def __missing__(self, tok: str) -> str:
        if len(self) >= 1 << 16:
            self.clear()
        v = self[tok] = shape(tok)
        return v


_SHAPES = _Shapes()


def words(text: str, limit: int = 100000) -> list[str]:
    return list(map(_SHAPES.__getitem__, _TOK.findall(text[:limit])))


def ngrams(prefix: str, toks: list[str], bigrams: bool = True) -> set[str]:
    out = {f"{prefix}:{t}" for t in toks}
    if bigrams:
        out.update(f"{prefix}:{a}_{b}" for a, b in zip(toks, toks[1:]))
    return out



def message_features(ctx) -> set[str]:
    """Features of the whole message (for is_regression and kind)."""
    ex, claim = ctx.ex, ctx.rule_claim
    subj = ex.subject or ""
    f = {"bias_msg"}
    f |= ngrams("s", words(subj))
    own = [u.text for u in ex.mt.units if u.depth == 0]
    quoted = [u.text for u in ex.mt.units if u.depth > 0]
    f |= ngrams("u", words("\n".join(own), 12000))
    f |= ngrams("q", words("\n".join(quoted), 6000), bigrams=False)
    f.add(f"rule_reg={claim.is_regression}")
    f.add(f"rule_conf={min(9, int(claim.confidence * 10))}")
    f.add(f"rule_kind={claim.kind}")
    for name in ("culprit_commit", "good", "bad", "metric", "change_percent"):
        if getattr(claim, name) is not None:
            f.add(f"rule_has_{name}")
    for reason in ctx.why:
        f.add("why:" + re.sub(r"[-+]?\d+(?:\.\d+)?|x\d+", "", reason).strip())
    if ex.is_robot:
        f.add("robot")
    if P.PATCH_SUBJECT.search(subj):
        f.add("patch_subject")
    if P.PULL_SUBJECT.search(subj):
        f.add("pull_subject")
    if P.REPLY_SUBJECT.search(subj):
        f.add("reply_subject")
    own_text = "\n".join(own)
    if re.search(r"^(?:diff --git|--- a/|\+\+\+ b/)", own_text, re.M):
        f.add("own_diff")
    if re.search(r"^Fixes:\s*[0-9a-f]{7,}", own_text, re.M):
        f.add("own_fixes_tag")
    if re.search(r"^Signed-off-by:", own_text, re.M):
        f.add("own_signoff")
    if not own_text.strip():
        f.add("no_own_text")
    f |= change_evidence(ex, ctx.why)
    return f


# a change between an older and a newer kernel, said in any of the ways reports say it: the
# regression / bisect vocabulary, a worked-before or broke-after phrase, an upgrade, a revert, a
# blamed change, a version said to be the start of it or to work ("since v6.1", "works with 4.19"); a
# range written "A -> B" is found by the rule stages (their good / bad pair, a reason below)
_V = r"(?:v?\d+\.\d+[\w.-]*|next-\d{8}|[0-9a-f]{7,40})"
CHANGE_EVIDENCE = re.compile(
    r"\bregress(?:ion|ions|ed|es)?\b|\bbisect|\bfirst bad\b|\bno longer\b|\bany ?more\b|"
    r"\bstopped (?:work|boot|\w+ing)|\bused to\b|\b(?:after|since|when) (?:upgrad|updat|switch|mov|bump|go)\w*|"
    r"\bupgrad\w*|\brevert|\b(?:introduced|caused|broken|triggered) by\b|\bbroke\b|"
    r"\b(?:change|commit|patch|series)\w* (?:that|which) (?:first )?(?:caus|introduc|trigger|broke)\w*|"
    r"\b(?:caused|introduced) (?:the|this|these|a|an) |"
    r"\b(?:older|previous|earlier|last good|working) (?:kernel|version|release)s?\b|"
    r"\bwork(?:s|ed)? (?:\w+ )?(?:fine|ok|okay|well|correctly)?\s*(?:with|on|in|under|until|before) " + _V + r"|"
    r"\b(?:since|after|from|starting (?:with|from)|between) " + _V + r"|"
    r"\bnow\b[^.\n]{0,40}\b(?:fail|crash|hang|slow|broken|doesn't|does not|won't)", re.I)
CHANGE_EVIDENCE = scan.word_led(CHANGE_EVIDENCE)  # (every alternative starts with a word: faster scans)
# a development tree (linux-next, -mm, a robot's "[tree:branch]" tag, a merge): a failure there is
# new by construction, even when no older kernel is named
DEV_TREE = re.compile(r"\blinux-next\b|\bnext-\d{8}\b|-mm\d\b|\bafter merg\w+ (?:of )?the\b|\bmerge window\b", re.I)
ROBOT_TREE_TAG = re.compile(r"\[[\w.-]+:[\w./-]+(?: \d+/\d+)?\]")  # "[linux-next:master 12/34]" (subjects)
_EVIDENCE_REASONS = ("culprit", "good/bad", "robot")
BUILD_FAILURE = re.compile(r"\b(?:build|compile|link|modpost)\w* (?:error|failure|fail|break)\w*|\berror: |"
                           r"\bundefined (?:reference|symbol)\b|\bimplicit declaration\b", re.I)


def change_evidence(ex, why=()) -> set[str]:
    """Message features: does the text (subject, own or quoted words) say that something changed
    between kernels (``evid=True``)?  A bug told with no such word is most often one that exists
    in every version (never worked), a comparison of machines, filesystems or settings, or a
    question; ``evid:devtree`` / ``evid:devtree_build``: the text is about a development tree
    (and a build failure in it).  Where the claim words of the rule scorer stand (own text,
    quoted text, subject) is ``claim_own`` / ``claim_quoted`` / ``claim_subject``."""
    mt, subj = ex.mt, ex.subject or ""
    f = set()
    # (or the rule scorer found a culprit, a good / bad pair or a robot's verdict)
    ev = bool(CHANGE_EVIDENCE.search(subj) or any(k in w for w in why for k in _EVIDENCE_REASONS)
              or mt.search(CHANGE_EVIDENCE))
    f.add(f"evid={ev}")
    if any("retracts" in w for w in why):
        f.add("evid:retracted")  # the rule scorer read a retraction ("false alarm", "a noise")
    if DEV_TREE.search(subj) or ROBOT_TREE_TAG.search(subj) or mt.search(DEV_TREE):
        f.add("evid:devtree")
        if BUILD_FAILURE.search(subj) or mt.search(BUILD_FAILURE):
            f.add("evid:devtree_build")
    for m in mt.finditer(CLAIMS):
        f.add("claim_quoted" if mt.depth_at(m.start()) else "claim_own")
    if CLAIMS.search(subj):
        f.add("claim_subject")
    if not f & {"claim_own", "claim_quoted", "claim_subject"}:
        f.add("claim_none")
    return f


def _context(ex, cs: int, ce: int, in_subject: bool, prefix: str = "") -> frozenset[str]:
    """The words around a mention, of its sentence / line, and its quote depth (computed once
    per message and mention: the same mention is a candidate of several rankers)."""
    cache = ex.__dict__.setdefault("_contexts", {})
    key = (cs, ce, in_subject, prefix)
    r = cache.get(key)
    if r is None:
        r = cache[key] = frozenset(_context_feats(ex, cs, ce, in_subject, prefix))
    return r


def _context_feats(ex, cs: int, ce: int, in_subject: bool, prefix: str) -> set[str]:
    text = ex.subject if in_subject else ex.clean
    left = words(text[max(0, cs - 80):cs])[-6:]
    right = words(text[ce:ce + 80])[:6]
    f = set()
    for i, t in enumerate(reversed(left)):
        f.add(f"{prefix}L:{t}")
        if i < 2:
            f.add(f"{prefix}L{i + 1}:{t}")
    for i, t in enumerate(right):
        f.add(f"{prefix}R:{t}")
        if i < 2:
            f.add(f"{prefix}R{i + 1}:{t}")
    if in_subject:
        f.add(f"{prefix}in_subject")
        return f
    unit = ex.mt.unit_at(cs)
    if unit is not None:
        f |= _unit_feats(ex, unit, prefix)
    d = ex.mt.depth_at(cs)
    f.add(f"{prefix}depth={min(d, 2)}")
    return f


def _unit_feats(ex, unit, prefix: str) -> frozenset[str]:
    """The words of a sentence / line as features, whether it is structured and its first word,
    computed once per message and unit."""
    cache = ex.__dict__.setdefault("_unit_feats", {})
    key = (unit.index, prefix)
    r = cache.get(key)
    if r is None:
        f = {f"{prefix}S:{t}" for t in words(unit.text, 400)[:60]}
        f.add(f"{prefix}structured={unit.structured}")
        first = words(unit.text.lstrip()[:30])[:1]
        if first:
            f.add(f"{prefix}line0:{first[0]}")
        r = cache[key] = frozenset(f)
    return r


@dataclass
class Candidate:
    value: str
    spans: list[tuple[int, int, bool]]            # (clean start, clean end, in_subject)
    feats: set[str] = field(default_factory=set)
    norm: str = ""


def norm_version(s: str) -> str:
    s = s.strip().lower()
    if s.startswith("linux-"):
        s = s[6:]
    if len(s) > 1 and s[0] == "v" and s[1].isdigit():
        s = s[1:]
    return s


VCAND = re.compile(r"(?<![\w.@/-])((?:linux-|v)?(\d{1,2})\.(\d{1,2})(?:\.\d{1,3}){0,2}(?:-?rc\d{1,2})?)"
                   r"((?:[-.+~][\w+~]+)*)", re.I)
# what follows a version but is not part of it: a file name ("5.1.2.dtb", "4.19.config")
_NOT_VERSION_SUFFIX = re.compile(r"^\.(?:dtb|dts|c|h|S|o|ko|patch|diff|config|txt|log|tar|gz|xz|bz2|img|deb|rpm)\b", re.I)
_LOCAL_MARK = re.compile(r"(?:-dirty)?\+?", re.I)
NEXT_CAND = re.compile(r"(?<![\w.-])(next-\d{8})(?![\w])")
# a dated tag of a subsystem tree: "drm-next-2024-09-19", "net-next-2025-01-07", "drm-fixes-2024-10-04"
TREE_TAG = re.compile(r"(?<![\w.-])([a-z][a-z0-9]*(?:-[a-z0-9]+)*-(?:next|fixes)-20\d\d-[01]\d-[0-3]\d)(?![\w-])")


def version_candidates(ex) -> list[Candidate]:
    found: dict[str, Candidate] = {}

    def add(value: str, s: int, e: int, subj: bool, tag: str):
        value = value.rstrip(".-~")
        if not value:
            return
        key = norm_version(value)
        c = found.setdefault(key, Candidate(value, [], set(), key))
        c.spans.append((s, e, subj))
        c.feats.add(tag)

    for subj, text in ((True, ex.subject or ""), (False, ex.clean)):
        for m in VCAND.finditer(text):
            major = int(m.group(2))
            if not 2 <= major <= 9:
                continue
            base, suffix = m.group(1), m.group(4) or ""
            tail = text[m.end():m.end() + 1]
            if tail.isdigit():
                continue
            end = m.end(4) if suffix else m.end(1)
            if text[end:end + 1] == "+" and not text[end + 1:end + 2].isalnum():
                suffix, end = suffix + "+", end + 1  # "3.7.0-rc8+": a tree with local changes
            if suffix and not _NOT_VERSION_SUFFIX.match(suffix):
                # distro and vendor builds as written: 6.1.0-56-amd64, 5.14.0-427.el9, 2.6.28-rc2-git1
                add(base + suffix, m.start(1), end, subj, "shape:suffixed")
                if _LOCAL_MARK.fullmatch(suffix):
                    # a local build of a release ("5.4-rc1+", "2.6.17-rc1-dirty"): the release too
                    add(base, m.start(1), m.end(1), subj, "shape:local_base")
            else:
                add(base, m.start(1), m.end(1), subj, "shape:base")
        for m in NEXT_CAND.finditer(text):
            add(m.group(1), m.start(1), m.end(1), subj, "shape:next")
        if "-20" in text:
            for m in TREE_TAG.finditer(text):
                add(m.group(1), m.start(1), m.end(1), subj, "shape:tree_tag")
    return list(found.values())


def _version_shape(v: str) -> set[str]:
    s = norm_version(v)
    f = set()
    if "-rc" in s:
        f.add("vshape:rc")
    if s.startswith("next-"):
        f.add("vshape:next")
    m = re.match(r"(\d+)\.(\d+)((?:\.\d+)*)(.*)$", s)
    if m:
        f.add(f"vshape:parts={1 + len(m.group(3).split('.')) if m.group(3) else 2}")
        rest = m.group(4)
        if rest and not rest.startswith("-rc"):
            f.add("vshape:distro")
            if re.search(r"el\d|fc\d|amzn|generic|amd64|arm64|x86_64|aws|azure|oracle", rest):
                f.add("vshape:distro_known")
        f.add(f"vshape:major={m.group(1)}")
        if m.group(1) == "2" and not m.group(3) and not rest:
            f.add("vshape:series")  # "2.4", "2.6": a release series of the 2.x era, not a release
    return f


def version_order(v: str):
    s = norm_version(v)
    if s.startswith("next-"):
        return (99, int(s[5:]) if s[5:].isdigit() else 0)
    nums = re.findall(r"\d+", s.split("-")[0])
    base = tuple(int(x) for x in nums[:4])
    rc = re.search(r"-rc(\d+)", s)
    return base + ((-100 + int(rc.group(1))),) if rc else base + (0,)


def add_rule_versions(ex, cands: list[Candidate], rule_claim: Claim) -> None:
    """The rule's own good/bad as candidates when the generator did not see them."""
    have = {c.norm for c in cands}
    for name in ("good", "bad"):
        v = getattr(rule_claim, name)
        if v and norm_version(v) not in have:
            f = rule_claim.fact(name)
            span = (-1, -1, True)
            if f is not None and f.start >= 0:
                idx = ex.clean.find(v)
                span = (idx, idx + len(v), False) if idx >= 0 else span
            cands.append(Candidate(v, [span], {"rule_only"}, norm_version(v)))
            have.add(norm_version(v))


def version_features(ex, cands: list[Candidate], rule_good: str | None, rule_bad: str | None) -> None:
    keys = sorted({version_order(c.value) for c in cands if not HEX_FULL.match(c.norm)})
    first_body = min((s for c in cands for s, _, subj in c.spans if not subj), default=None)
    vclaims: dict[str, list] = {}
    for vcl in getattr(ex, "vclaims", None) or ():
        vclaims.setdefault(norm_version(vcl.text), []).append(vcl)
    for c in cands:
        for s, e, subj in c.spans[:6]:
            c.feats |= _context(ex, s, e, subj)
        if HEX_FULL.match(c.norm):
            c.feats.add("vshape:hex")
        else:
            c.feats |= _version_shape(c.value)
        n = len(c.spans)
        c.feats.add(f"count={min(n, 3)}")
        k = version_order(c.value)
        if len(keys) > 1 and not HEX_FULL.match(c.norm):
            if k == keys[-1]:
                c.feats.add("rank:max")
            if k == keys[0]:
                c.feats.add("rank:min")
        c.feats.add(f"nversions={min(len(cands), 4)}")
        for vcl in vclaims.get(c.norm, ()):
            c.feats.add(f"vclaim:{vcl.role}:t{vcl.tier}")
            c.feats.add(f"vclaim:{vcl.role}:d{min(vcl.depth, 1)}")
        if rule_good and norm_version(rule_good) == c.norm:
            c.feats.add("rule_good")
        if rule_bad and norm_version(rule_bad) == c.norm:
            c.feats.add("rule_bad")
        if first_body is not None and any(not subj and s == first_body for s, _, subj in c.spans):
            c.feats.add("first_in_body")
    # a release and its builds ("5.16" / "5.16.18" / "5.16.18-1"): which one is the most specific
    # form the text gives (the labels take a version as written)
    plain = [c for c in cands if not HEX_FULL.match(c.norm)]
    for c in plain:
        longer = any(o is not c and len(o.norm) > len(c.norm) and o.norm.startswith(c.norm)
                     and o.norm[len(c.norm)] in "-.+~_" for o in plain)
        shorter = any(o is not c and len(c.norm) > len(o.norm) and c.norm.startswith(o.norm)
                      and c.norm[len(o.norm)] in "-.+~_" for o in plain)
        c.feats.add(f"vrel:longer={longer}")
        c.feats.add(f"vrel:shorter={shorter}")
        if longer and not shorter:
            c.feats.add("vrel:base_only")
    range_context(ex, cands, range_order)
    order_relations(cands, range_order, rule_good and norm_version(rule_good), rule_bad and norm_version(rule_bad))


def range_order(v: str):
    """A version's place in history; ValueError for what has none of its own (a commit id, a
    tree's dated tag)."""
    n = norm_version(v)
    if HEX_FULL.match(n) or not (n[:1].isdigit() or n.startswith("next-")):
        raise ValueError(v)
    return version_order(v)


def commit_candidates(ex, groups, rule_culprit) -> list[Candidate]:
    out = []
    for g in groups:
        written = culprit_written(ex, g)
        c = Candidate(written, [], set(), g.hex)
        for m in g.mentions[:6]:
            c.spans.append((m.cstart, m.cend, m.in_subject))
            c.feats |= _context(ex, m.cstart, m.cend, m.in_subject)
        c.feats.add(f"role={g.role}")
        c.feats.add(f"rscore={max(-3, min(8, int(g.score)))}")
        c.feats |= {f"cue:{q}" for q in getattr(g, "cues", ())}
        c.feats.add(f"count={min(len(g.mentions), 3)}")
        c.feats.add(f"hexlen={min(len(g.hex), 13) // 4}")
        c.feats.add(f"ncommits={min(len(groups), 4)}")
        if g.subject:
            c.feats.add("has_title")
        if rule_culprit is not None and g is rule_culprit:
            c.feats.add("rule_culprit")
        out.append(c)
    # order in the author's text: a later verdict ("... is the real bad commit") often revises
    # an earlier one
    last = {c.norm: max((s for s, _, subj in c.spans if not subj), default=-1) for c in out}
    if len([v for v in last.values() if v >= 0]) > 1:
        latest = max(last, key=lambda k: last[k])
        earliest = min((k for k in last if last[k] >= 0), key=lambda k: last[k])
        for c in out:
            if c.norm == latest:
                c.feats.add("pos:latest")
            if c.norm == earliest:
                c.feats.add("pos:earliest")
    _later_verdicts(out)
    return out


def _later_verdicts(cands: list[Candidate]) -> None:
    """A verdict that moves the blame ("so X is most likely the real bad commit", cue after1)
    revises the commits blamed before it in the text (a bisect result, "caused by"): the
    revising candidate gets ``verdict:revises``, the blamed earlier ones ``verdict:revised``."""
    firsts = {c.norm: min((s for s, _, subj in c.spans if not subj), default=-1) for c in cands}
    for v in cands:
        if "cue:after1" not in v.feats or firsts[v.norm] < 0:
            continue
        for c in cands:
            blamed = any(f in c.feats for f in ("rscore=5", "rscore=6", "rscore=7", "rscore=8"))
            if c is not v and blamed and "cue:after1" not in c.feats and firsts[c.norm] < firsts[v.norm]:
                c.feats.add("verdict:revised")
                v.feats.add("verdict:revises")


def commit_range_candidates(ctx, commits: list[Candidate]) -> list[Candidate]:
    """Commit ids as candidates for the ends of a range ("good: <sha>", a robot report's parent
    and commit, bisect start lines), made from the culprit ranker's ``commits`` (same ids and
    mentions, features of their own); the rule's culprit is marked, since a robot report names
    the culprit itself as the bad end."""
    out = []
    for cc in commits:
        c = Candidate(cc.value, cc.spans, set(), cc.norm)
        g = next((g for g in ctx.groups if g.hex == cc.norm), None)
        if g is not None and g is ctx.rule_culprit:
            c.feats.add("is_rule_culprit")
        if g is not None:
            c.feats.add(f"role={g.role}")
        out.append(c)
    return out


# CPU strings as written: brand models, bare models, microarchitecture code names, cores, SoCs
CPU_CANDIDATES = [re.compile(p) for p in [
    r"model name\s*:\s*([^\n]{4,80})",
    r"((?:Genuine)?Intel\(R\)[^\n,;]{0,60}?(?:CPU|Processor)?\s*@\s*\d+(?:\.\d+)?\s*GHz)",
    r"\b((?:Intel|AMD)(?:\(R\))?\s+(?:Core|Xeon|Pentium|Celeron|Atom|EPYC|Ryzen|Opteron|Athlon|Phenom|"
    r"Threadripper|Turion|Sempron)(?:\(\w+\))?(?:\s+[\w+-]+(?:\.\d+\s?[GM]Hz)?){0,4})",
    r"(?i)\b(genuine\s+intel\(r\)\s+xeon\(r\)(?:\s+(?:cpu|processor))?)",
    r"\b((?:Xeon|Pentium|Celeron|Atom|EPYC|Ryzen|Opteron|Athlon|Phenom|Threadripper|Core\s+2)(?:\s+[\w+-]*\d[\w+-]*){1,3})",
    r"\b(i[3579]-\d{3,5}[A-Z]{0,3}\d?)\b",
    r"\b((?:Sandy|Ivy)\s+Bridge(?:-\w+)?|Haswell(?:-\w+)?|Broadwell(?:-\w+)?|Skylake(?:-\w+)?|Kaby\s+Lake|"
    r"Coffee\s+Lake|Comet\s+Lake|Cascade\s*Lake(?:-\w+)?|Cooper\s+Lake|Ice\s*Lake(?:-\w+)?|Tiger\s+Lake|"
    r"Alder\s+Lake|Raptor\s+Lake|Meteor\s+Lake|Lunar\s+Lake|Arrow\s+Lake|Sapphire\s+Rapids|Emerald\s+Rapids|"
    r"Granite\s+Rapids|Sierra\s+Forest|Nehalem(?:-\w+)?|Westmere(?:-\w+)?|Clearwater\s+Forest|"
    r"Zen\s?[1-5]\+?|Naples|Rome|Milan(?:-X)?|Genoa(?:-X)?|Bergamo|Turin|Siena)\b",
    r"\b((?:IVB|HSW|BDW|SKL|CLX|ICX|SPR|EMR|GNR|SRF)-(?:EP|EX|SP|D|H|AP)\w*)\b",
    r"\b(Cortex-[AMRX]\d{1,3}\w*|Neoverse[- ][NVE]\d\w*|Graviton\s?\d?|Ampere\s+(?:Altra(?:\s+Max)?|One)|"
    r"ThunderX\d?|Kunpeng\s?\d+|Apple\s+M[1-4](?:\s+(?:Pro|Max|Ultra))?|Snapdragon\s+\w+|"
    r"POWER\s?(?:[4-9]|10|11)\w*|PPC ?970\w*|[Pp]ower[Pp][Cc]\s+\w*\d\w*|(?:MPC|PPC)\d{3,4}\w*|"
    r"e(?:300|500|5500|6500)(?:mc|v2)?|G[345]\b)",
    r"\b((?:BCM|RK|MT|SM|SDM|MSM|APQ|Exynos\s?|Tegra\s?|i\.MX\s?|AM|OMAP\s?|JH|SG|A|H)\d{1,4}[\w+-]*)",
    r"\b(Pentium\s+(?:\d{2,3}|[IVX]+|Pro|M|D|4)(?:\s+\d+\s?MHz)?|386|486(?:DX\d?|SX)?|K6(?:-\w+)?)\b",
    # older and less common forms: "Pentium120", "600-MHz Pentium", "2-way PIII", "P4 3GHz", "Mobile Athlon
    # 1.2 GHz", "AMD X2 4600+", "Intel E5-2680 v3", "Intel T4500", a bare "i7" (with its generation)
    r"\b((?:\d{2,4}[- ]?(?i:MHz)\s+)?Pentium\s?\d{2,3}\b|\d{2,4}[- ]?(?i:MHz)\s+Pentium(?:\s+(?:II|III|Pro|MMX))?|"
    r"(?:\d-way\s+)?P-?(?:II|III|IV)\b|P4\s+\d(?:\.\d+)?\s?(?i:GHz)(?:\s+HT)?)",
    r"(?i)\b((?:Mobile\s+)?(?:AMD\s+)?Athlon(?:\s?(?:XP|MP|64|II))?(?:\s+X[234])?(?:\s+\d+(?:\.\d+)?\s?[GM]Hz|\s+\d{3,4}\+?)?(?:(?<=\+)|\b)|"
    r"AMD\s+X[234]\s+\d{3,4}\+?|Duron|Sempron|Turion)(?:(?<=\+)|\b)",
    r"\b((?:Intel\s+)?(?:Xeon\s+)?E[357]-\d{4}\w*(?:\s+v\d)?|Intel\s+[TPUNQ]\d{4}\w?|"
    r"i[3579](?:\s+(?i:Haswell|Skylake|Broadwell|Ivy\s+Bridge|Sandy\s+Bridge|Kaby\s+Lake|Coffee\s+Lake))?)\b",
    # SoCs and cores written in lower case or by family: "rk3399", "imx6q", Marvell, Amlogic, NXP QorIQ, ...
    r"\b((?:rk|bcm|mt|imx|sdm|msm|apq|exynos|tegra|omap|sun\d+i|meson)[\w-]*\d{2,4}\w*)\b",
    r"\b((?:Marvell\s+)?(?:[Kk]irkwood|Armada\s?\w+|Dove)|(?:Intel\s+)?IXP4\d\d(?:\s+XScale)?|XScale|"
    r"(?:Amlogic\s+)?(?:S9\d\d\w*|A311\w*|Meson\w*)|(?:Ampere\s+)?eMAG|ZHAOXIN(?:\s+[\w-]+){1,2}|KX-\d{4}|"
    r"(?:FSL|Freescale|NXP|QorIQ)\s+[PT]\d{4}\w*|(?i:UltraSPARC)(?:[\s-]?[IVX]+\w*)?|Alpha\s+21[0-2]64\w*|21[0-2]64\w*|"
    r"(?:PowerBook|PowerMac|Power\s+Mac|iBook)\s*(?:G[345]|\([\w\s]+\))|G[345]\s+(?:PowerMac|Power\s+Mac|iBook|PowerBook))",
]]


_CPU_TAIL = re.compile(r"(?:\s+[a-z]+)+$")
# an LKP report's machine line: "test machine: 96 threads 2 sockets Intel(R) Xeon(R) Platinum 8260L
# CPU @ 2.40GHz (Cascade Lake) with 512G memory" (the CPU as the robot writes it, code name included)
LKP_MACHINE_CPU = re.compile(r"test machine:[ \t]*\d+[ \t]+threads(?:[ \t]+\d+[ \t]+sockets?)?[ \t]+"
                             r"([^\n]{3,100}?)[ \t]+with[ \t]+\d+(?:\.\d+)?[KMGT]i?B?[ \t]+memory")


def lkp_machine_cpu(ex) -> Candidate | None:
    """The CPU of an LKP report's "test machine:" line, as a candidate (decisive: the robot's own
    description of the machine it measured on)."""
    if "test machine:" not in ex.mt.low:
        return None
    m = ex.mt.search(LKP_MACHINE_CPU)
    if m is None:
        return None
    v = " ".join(m.group(1).split())
    return Candidate(v, [(m.start(1), m.end(1), False)], {"lkp_machine"}, v.lower())


def cpu_candidates(ex, rule_cpu: str | None) -> list[Candidate]:
    found: dict[str, Candidate] = {}
    for subj, text in ((True, ex.subject or ""), (False, ex.clean[:20000])):
        whole = not subj and len(text) == len(ex.clean)  # the body's scans, cached per message
        low = None if whole else scan.fold(text)
        for i, rx in enumerate(CPU_CANDIDATES):
            if whole:
                found_at = ex.mt.finditer(rx)
            elif scan.may_match(rx, text, low):
                found_at = rx.finditer(text)
            else:
                continue
            for m in found_at:
                v = " ".join(m.group(1).split()).strip(" ,.;:()")
                v = _CPU_TAIL.sub("", v) if v.count(" ") >= 2 else v  # "... 9800X3D bits", "... 2.0GHz machine"
                if len(v) < 2 or len(v) > 90:
                    continue
                c = found.setdefault(v.lower(), Candidate(v, [], set(), v.lower()))
                c.spans.append((m.start(1), m.end(1), subj))
                c.feats.add(f"cpat:{i}")
    from .hwcands import cpu_value_feats

    out = with_rule_candidate(ex, found, rule_cpu)
    norms = [c.norm for c in out]
    for c in out:
        c.feats |= phrase_feats(ex, c, len(out), rule_cpu, "ncpus", "rule_cpu")
        c.feats.add(f"cpulen={min(len(c.value.split()), 6)}")
        c.feats |= cpu_value_feats(c.value, norms)
    return out


def with_rule_candidate(ex, found: dict[str, Candidate], rule_value: str | None) -> list[Candidate]:
    """The candidates of a hardware phrase (cpu, storage), with the rule stage's value added
    when no pattern found it (``rule_only``; its span where the text has it)."""
    if rule_value and rule_value.lower() not in found:
        idx = ex.clean.find(rule_value)
        found[rule_value.lower()] = Candidate(rule_value, [(idx, idx + len(rule_value), idx < 0)], {"rule_only"},
                                              rule_value.lower())
    return list(found.values())


def phrase_feats(ex, c: Candidate, n: int, rule_value: str | None, count_name: str, rule_name: str) -> set[str]:
    """What every hardware phrase candidate is ranked on: the words around its first spans, how
    often it is written, how many candidates there are (``count_name``), whether it is the rule
    stage's value (``rule_name``) and whether a robot wrote the mail."""
    f: set[str] = set()
    for s, e, subj in c.spans[:4]:
        if s >= 0:
            f |= _context(ex, s, e, subj)
    f.add(f"count={min(len(c.spans), 3)}")
    f.add(f"{count_name}={min(n, 4)}")
    if rule_value and c.norm == rule_value.lower():
        f.add(rule_name)
    if ex.is_robot:
        f.add("robot")
    return f


def gate_features(ex, field: str, value, fact: Fact | None, msg_kind: str | None) -> set[str]:
    f = {f"g:{field}", f"g:{field}:kind={msg_kind}"}
    if ex.is_robot:
        f.add(f"g:{field}:robot")
    f |= {f"g:{field}:v:{t}" for t in words(str(value), 200)[:8]}
    if field in ("metric", "change_percent") and getattr(ex, "held_measure", None):
        f.add(f"g:{field}:rule_not_report")  # the rules' scorer judged the message no report
    if field in ("metric", "change_percent"):
        # where the measure came from (robot line, table, "from A to B", stated %, unit pair ...)
        f.add(f"g:{field}:src={getattr(ex, 'measure_source', None)}")
    if field == "metric":
        f |= _metric_shape(ex, str(value), getattr(ex, "measure_source", None))
    if field == "change_percent":
        # the size of the change: a drop of exactly 100% or a change of thousands of percent is
        # seldom the reported figure; a few to some tens of percent usually is
        v = abs(float(value))
        f.add(f"g:change_percent:mag={next(i for i, b in enumerate((1, 5, 20, 50, 99.5, 1000, 1e18)) if v < b)}")
        f.add(f"g:change_percent:sign={'+' if float(value) > 0 else '-'}")
    if field == "subsystem":
        # where the area was read from (a culprit's title prefix, a path, a keyword count ...)
        # and how deep it goes ("mm" vs "drivers/gpu/drm/i915")
        src = getattr(ex, "subsystem_source", None)
        base, _, how = (src or "None").partition("+")
        f.add(f"g:subsystem:src={base}")
        f.add(f"g:subsystem:src={base}:kind={msg_kind}")
        # made finer than the title's table entry by the kernel tree's names ("+tree": a driver's
        # directory, a core file "mm/vmscan") or by the filesystem measured on ("+fs")
        f.add(f"g:subsystem:finer={how or 'no'}")
        f.add(f"g:subsystem:finer={how or 'no'}:src={base}")
        f.add(f"g:subsystem:parts={min(str(value).count('/') + 1, 3)}")
        f.add(f"g:subsystem:top={str(value).split('/')[0]}")
        # the area's own name written in the subject ("XFS", "rtw89_8852ae", "nvme-5.3")
        last = str(value).rsplit("/", 1)[-1].lower()
        named = re.search(r"(?<![a-z0-9])" + re.escape(last) + r"(?![a-z])", (ex.subject or "").lower())
        f.add(f"g:subsystem:name_in_subject={named is not None}")
        f.add(f"g:subsystem:name_in_subject={named is not None}:src={base}")
        # the area as the text writes it ("fs/xfs" in a path, "xfs:" in a title) or rewritten
        # from another name ("md/raid5:" -> drivers/md, "sched/fair:" -> sched)
        text = (fact.sentence if fact is not None and fact.sentence else ex.subject) or ""
        low, v = text.lower(), str(value).lower()
        f.add(f"g:subsystem:literal={v in low}")
        head = TITLE_PREFIX.match(low)
        if head is not None:
            f.add(f"g:subsystem:title_prefix_parts={min(head.group(1).count('/') + 1, 3)}")
            f.add(f"g:subsystem:title_prefix_is_value={prefix_is_value(low, v)}")
    if fact is None or fact.start < 0:
        f.add(f"g:{field}:from_subject")
        f |= {f"g:{field}:S:{t}" for t in words(ex.subject or "", 300)}
    else:
        f.add(f"g:{field}:depth={min(fact.quote_depth, 2)}")
        f |= {f"g:{field}:S:{t}" for t in words(fact.sentence or "", 400)[:60]}
    return f


_RATE_UNIT_ONLY = re.compile(r"(?:" + P.RATE_UNITS + r")$", re.I)
_METRIC_NAME = re.compile(r"^[\w-]+(?:[._][\w-]+)+$")  # "aim7.jobs-per-min", "write_clat_ns_p99"


def _metric_shape(ex, value: str, src) -> set[str]:
    """What the metric looks like: a bare rate unit, a benchmark's own metric name, a phrase of
    a few words; and whether the subject writes it (the quantity a report is about)."""
    if _RATE_UNIT_ONLY.match(value):
        shape = "unit"
    elif _METRIC_NAME.match(value):
        shape = "name"
    else:
        shape = f"words{min(len(value.split()), 3)}"
    in_subj = value.lower() in (ex.subject or "").lower()
    return {f"g:metric:shape={shape}", f"g:metric:shape={shape}:src={src}", f"g:metric:in_subject={in_subj}",
            f"g:metric:in_subject={in_subj}:src={src}"}


def prefix_is_value(title: str, value: str) -> bool:
    head = TITLE_PREFIX.match(title.lower())
    v = value.lower()
    return head is not None and (head.group(1) == v or v.endswith("/" + head.group(1)))


# the area prefix of a title: "mm/slub: ...", "[REGRESSION] ext4: ...", "Re: [PATCH] drm/i915: ..."
TITLE_PREFIX = re.compile(r"^(?:subject:\s*)?(?:(?:re|fwd?|aw)\s*:\s*)*(?:\[[^\]]*\]\s*)*([\w.-]+(?:/[\w.-]+)*)\s*:")


_SECOND_PART = re.compile(r"^[^:]{1,40}:\s*[\w.-]+(?:/[\w.-]+)*\s*:")


def one_part_prefix(title: str | None) -> bool:
    """A title with one area prefix ("mm: change ..."), not several ("mm: vmscan: ...")."""
    return bool(title) and _SECOND_PART.match(title) is None


_TITLE_SOURCES = ("culprit_title", "title_near_commit", "robot_tag", "quoted_title", "subject_title")


def subsystem_candidates(ex, claim: Claim, kind: str | None) -> list[Candidate]:
    """The areas the message points to (``subsystems.candidates``), one candidate per area,
    with what the subsystem ranker weighs: every source it came from, how often, its depth and
    top directory, whether a coarser or finer area is also named, whether the area's name is
    written in the subject, and whether the rule cascade chose it."""
    from . import kernel_paths
    from .subsystems import candidates

    own = "\n".join(u.text for u in ex.mt.units if u.depth == 0)
    pairs = candidates(ex.subject, claim.culprit_subject, ex.clean, claim.config.get("filesystem"), kind,
                       ex.robot_subject, claim.culprit_commit, own)
    found: dict[str, Candidate] = {}
    order: dict[str, int] = {}
    for area, src in pairs:
        c = found.setdefault(area.lower(), Candidate(area, [], set(), area.lower()))
        order.setdefault(c.norm, len(order))
        c.spans.append((-1, -1, True))
        c.feats.add(f"src:{src}")
        c.feats.add(f"srcbase:{src.split(':')[0].rstrip('23')}")
    titled = {c.norm for c in found.values() if any(x.split(":")[1] in _TITLE_SOURCES for x in c.feats)}
    rule = (claim.subsystem or "").lower()
    rule_src = (getattr(ex, "subsystem_source", None) or "None").split("+")[0]
    subj = (ex.subject or "").lower()
    n = len(found)
    subj_words = {f"s:{t}" for t in words(ex.subject or "", 300)}
    one_part = one_part_prefix(claim.culprit_subject)
    for c in found.values():
        f = c.feats
        f.add("bias_sub")
        f |= subj_words
        bases = {x for x in f if x.startswith("srcbase:")}
        f.add(f"nsrc={min(len(bases), 3)}")
        f.add(f"count={min(len(c.spans), 4)}")
        f.add(f"ncands={min(n, 5)}")
        f.add(f"first={order[c.norm] == 0}")
        parts = c.norm.count("/") + 1
        f.add(f"parts={min(parts, 4)}")
        f.add(f"top={c.norm.split('/')[0]}")
        f.add(f"kind={kind}")
        if ex.is_robot:
            f.add("robot")
        finer = any(o != c.norm and o.startswith(c.norm + "/") for o in found)
        coarser = any(o != c.norm and c.norm.startswith(o + "/") for o in found)
        f.add(f"finer={finer}")
        f.add(f"coarser={coarser}")
        # the same relations among the areas of commit titles and robot tags only
        if c.norm in titled:
            f.add(f"tfiner={any(o != c.norm and o.startswith(c.norm + '/') for o in titled)}")
            f.add(f"tcoarser={any(o != c.norm and c.norm.startswith(o + '/') for o in titled)}")
            f.add(f"tfiner={any(o != c.norm and o.startswith(c.norm + '/') for o in titled)}:robot={ex.is_robot}")
        f.add(f"top={c.norm.split('/')[0]}:parts={min(parts, 4)}")
        # the area itself: how consistently reports name it at this depth is learnt per area
        f.add(f"val={c.norm}")
        f.add(f"last={c.norm.rsplit('/', 1)[-1]}")
        full = c.norm if "/" in c.norm and c.norm.split("/")[0] in ("arch", "drivers", "fs", "net", "mm", "block",
                                                                     "lib", "sound", "kernel", "security",
                                                                     "crypto", "virt", "io_uring", "tools") \
            else "kernel/" + c.norm
        f.add(f"isdir={kernel_paths.tree().is_dir(full) or kernel_paths.tree().is_dir(c.norm)}")
        last = c.norm.rsplit("/", 1)[-1]
        named = re.search(r"(?<![a-z0-9])" + re.escape(last) + r"(?![a-z])", subj) is not None
        f.add(f"name_in_subject={named}")
        f.add(f"prefix_literal={prefix_is_value(claim.culprit_subject or '', c.norm)}:"
              f"{prefix_is_value(ex.subject or '', c.norm)}")
        if one_part and prefix_is_value(claim.culprit_subject, c.norm):
            f.add("culprit_one_part_as_written")  # "mm: change ..." -> mm; "drm/xe: ..." -> drivers/gpu/drm/xe
        if c.norm == rule:
            f.add("rule")
            f.add(f"rule_src={rule_src}")
        for x in list(bases):
            f.add(f"{x}:parts={min(parts, 4)}")
            f.add(f"{x}:kind={kind}")
            f.add(f"{x}:robot={ex.is_robot}")
    return list(found.values())
