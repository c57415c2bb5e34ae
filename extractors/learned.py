"""Trained decisions over the rule pipeline's candidates.

The rule stages (``rules.Extractor``) find every candidate with high recall and give their own
opinion; the linear models trained from the labelled corpus (``bench/train_model.py``,
``make model``) decide:

* ``is_regression``  - a message classifier over the words of the subject, of the author's own
  text and of the quoted text (numbers, versions and commit ids reduced to their shape, so the
  model learns contexts rather than values), the mail's structure (patch, pull, robot, reply,
  diff, ``Fixes:``) and the rule scorer's reasons;
* ``kind``           - performance vs functional, same features;
* ``culprit``        - which commit id, if any, the message blames (one candidate per commit);
* ``good`` / ``bad`` - which version, tag or commit is the last good / first bad kernel (one
  candidate per distinct version string, distro and vendor suffixes included);
* a keep-or-drop gate for each remaining field the rules fill (metric, change, hardware,
  config, subsystem), over the words of the sentence the value came from.

Candidate features are the words just left and right of each mention, the words of its
sentence, its quote depth, whether it is in the subject, its shape (rc, stable, distro build,
next-, hex length), its rank among the versions, and the rule's choice.  The models are
logistic regressions (scikit-learn at training time); what ships is their weights as JSON
(``data/model.json``), applied here with dictionary look-ups: no pickle, no scikit-learn at run
time, nothing downloaded.  Pure: no I/O beyond reading the shipped weights once.
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from . import patterns as P
from .boards import arch_from_hardware
from .subsystems import title_near_commit
from .claim import Claim, Fact

MODEL_FILE = Path(__file__).resolve().parent / "data" / "model.json"

GATED_FIELDS = ("metric", "change_percent", "cpu", "arch", "memory", "storage", "filesystem",
                "benchmark", "subsystem")

_TOK = re.compile(r"(?:linux-|v)?\d+\.\d+[\w.+~-]*|[A-Za-z_][\w'-]*|\d[\w.+~-]*%?|[%#:=<>/\[\]()@!?*+-]")
_HEX = re.compile(r"^[0-9a-f]{7,40}$")
_VERSHAPE = re.compile(r"^(?:linux-|v)?\d+\.\d+")
_NUM = re.compile(r"^[+-]?\d[\d.,]*$")


@lru_cache(maxsize=1 << 16)
def shape(tok: str) -> str:
    """A token with its value abstracted away: numbers, versions, ids become their shape."""
    low = tok.lower()
    if _HEX.match(low) and re.search(r"\d", low) and re.search(r"[a-f]", low):
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


def words(text: str, limit: int = 100000) -> list[str]:
    return [shape(t) for t in _TOK.findall(text[:limit])]


def ngrams(prefix: str, toks: list[str], bigrams: bool = True) -> set[str]:
    out = {f"{prefix}:{t}" for t in toks}
    if bigrams:
        out.update(f"{prefix}:{a}_{b}" for a, b in zip(toks, toks[1:]))
    return out


class Linear:
    """A logistic-regression model stored as a bias and a feature -> weight map."""

    def __init__(self, d: dict):
        self.bias = float(d.get("bias", 0.0))
        self.weights: dict[str, float] = d.get("weights", {})
        self.threshold = float(d.get("threshold", 0.5))
        # the good / bad rankers: the keep threshold of an end that comes with the other end of
        # an ordered range (a pair is surer than a lone end)
        self.pair_threshold = float(d.get("pair_threshold", self.threshold))

    def prob(self, feats) -> float:
        w = self.weights
        z = self.bias + sum(map(w.__getitem__, w.keys() & feats))
        if z < -30:
            return 0.0
        return 1.0 / (1.0 + math.exp(-z))


@dataclass
class Model:
    models: dict[str, Linear] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict) -> "Model":
        return cls({k: Linear(v) for k, v in d.get("models", {}).items()})

    def get(self, name: str) -> Linear | None:
        return self.models.get(name)


@lru_cache(maxsize=1)
def shipped_model() -> Model | None:
    if not MODEL_FILE.exists():
        logging.getLogger(__name__).error("%s is missing: the extractor runs on its rule layer alone "
                                          "(make model rebuilds it)", MODEL_FILE)
        return None
    return Model.from_dict(json.loads(MODEL_FILE.read_text(encoding="utf-8")))


# ------------------------------------------------------------------------------ features

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
    return f


def _context(ex, cs: int, ce: int, in_subject: bool, prefix: str = "") -> set[str]:
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
        f.add(f"{prefix}structured={unit.structured}")
        first = words(unit.text.lstrip()[:30])[:1]
        if first:
            f.add(f"{prefix}line0:{first[0]}")
    d = ex.mt.depth_at(cs)
    f.add(f"{prefix}depth={min(d, 2)}")
    return f


def _unit_feats(ex, unit, prefix: str) -> set[str]:
    """The words of a sentence / line as features, computed once per message and unit."""
    cache = ex.__dict__.setdefault("_unit_feats", {})
    key = (unit.index, prefix)
    if key not in cache:
        cache[key] = frozenset(f"{prefix}S:{t}" for t in words(unit.text, 400)[:60])
    return cache[key]


@dataclass
class Candidate:
    value: str
    spans: list[tuple[int, int, bool]]            # (clean start, clean end, in_subject)
    feats: set[str] = field(default_factory=set)
    norm: str = ""


def _norm_version(s: str) -> str:
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
NEXT_CAND = re.compile(r"(?<![\w.-])(next-\d{8})(?![\w])")


def version_candidates(ex) -> list[Candidate]:
    found: dict[str, Candidate] = {}

    def add(value: str, s: int, e: int, subj: bool, tag: str):
        value = value.rstrip(".-~")
        if not value:
            return
        key = _norm_version(value)
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
            else:
                add(base, m.start(1), m.end(1), subj, "shape:base")
        for m in NEXT_CAND.finditer(text):
            add(m.group(1), m.start(1), m.end(1), subj, "shape:next")
    return list(found.values())


def _version_shape(v: str) -> set[str]:
    s = _norm_version(v)
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
    return f


def _vkey(v: str):
    s = _norm_version(v)
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
        if v and _norm_version(v) not in have:
            f = rule_claim.fact(name)
            span = (-1, -1, True)
            if f is not None and f.start >= 0:
                idx = ex.clean.find(v)
                span = (idx, idx + len(v), False) if idx >= 0 else span
            cands.append(Candidate(v, [span], {"rule_only"}, _norm_version(v)))
            have.add(_norm_version(v))


def version_features(ex, cands: list[Candidate], rule_good: str | None, rule_bad: str | None) -> None:
    keys = sorted({_vkey(c.value) for c in cands if not _HEX.match(c.norm)})
    first_body = min((s for c in cands for s, _, subj in c.spans if not subj), default=None)
    vclaims: dict[str, list] = {}
    for vcl in getattr(ex, "vclaims", None) or ():
        vclaims.setdefault(_norm_version(vcl.text), []).append(vcl)
    for c in cands:
        for s, e, subj in c.spans[:6]:
            c.feats |= _context(ex, s, e, subj)
        if _HEX.match(c.norm):
            c.feats.add("vshape:hex")
        else:
            c.feats |= _version_shape(c.value)
        n = len(c.spans)
        c.feats.add(f"count={min(n, 3)}")
        k = _vkey(c.value)
        if len(keys) > 1 and not _HEX.match(c.norm):
            if k == keys[-1]:
                c.feats.add("rank:max")
            if k == keys[0]:
                c.feats.add("rank:min")
        c.feats.add(f"nversions={min(len(cands), 4)}")
        for vcl in vclaims.get(c.norm, ()):
            c.feats.add(f"vclaim:{vcl.role}:t{vcl.tier}")
            c.feats.add(f"vclaim:{vcl.role}:d{min(vcl.depth, 1)}")
        if rule_good and _norm_version(rule_good) == c.norm:
            c.feats.add("rule_good")
        if rule_bad and _norm_version(rule_bad) == c.norm:
            c.feats.add("rule_bad")
        if first_body is not None and any(not subj and s == first_body for s, _, subj in c.spans):
            c.feats.add("first_in_body")
    # a release and its builds ("5.16" / "5.16.18" / "5.16.18-1"): which one is the most specific
    # form the text gives (the labels take a version as written)
    plain = [c for c in cands if not _HEX.match(c.norm)]
    for c in plain:
        longer = any(o is not c and len(o.norm) > len(c.norm) and o.norm.startswith(c.norm)
                     and o.norm[len(c.norm)] in "-.+~_" for o in plain)
        shorter = any(o is not c and len(c.norm) > len(o.norm) and c.norm.startswith(o.norm)
                      and c.norm[len(o.norm)] in "-.+~_" for o in plain)
        c.feats.add(f"vrel:longer={longer}")
        c.feats.add(f"vrel:shorter={shorter}")
        if longer and not shorter:
            c.feats.add("vrel:base_only")


def commit_candidates(ex, groups, rule_culprit) -> list[Candidate]:
    out = []
    for g in groups:
        written = ex.culprit_written(g)
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
    return out


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
    r"Threadripper|Turion|Sempron)(?:\(\w+\))?(?:\s+[\w+-]+){0,4})",
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
]]


def cpu_candidates(ex, rule_cpu: str | None) -> list[Candidate]:
    found: dict[str, Candidate] = {}
    for subj, text in ((True, ex.subject or ""), (False, ex.clean[:20000])):
        low = P.fold(text)
        for i, rx in enumerate(CPU_CANDIDATES):
            if not P.may_match(rx, text, low):
                continue
            for m in rx.finditer(text):
                v = " ".join(m.group(1).split()).strip(" ,.;:()")
                if len(v) < 2 or len(v) > 90:
                    continue
                c = found.setdefault(v.lower(), Candidate(v, [], set(), v.lower()))
                c.spans.append((m.start(1), m.end(1), subj))
                c.feats.add(f"cpat:{i}")
    if rule_cpu and rule_cpu.lower() not in found:
        idx = ex.clean.find(rule_cpu)
        found[rule_cpu.lower()] = Candidate(rule_cpu, [(idx, idx + len(rule_cpu), idx < 0)], {"rule_only"},
                                            rule_cpu.lower())
    out = list(found.values())
    for c in out:
        for s, e, subj in c.spans[:4]:
            if s >= 0:
                c.feats |= _context(ex, s, e, subj)
        c.feats.add(f"count={min(len(c.spans), 3)}")
        c.feats.add(f"ncpus={min(len(out), 4)}")
        c.feats.add(f"cpulen={min(len(c.value.split()), 6)}")
        if rule_cpu and c.norm == rule_cpu.lower():
            c.feats.add("rule_cpu")
        if ex.is_robot:
            c.feats.add("robot")
    return out


def gate_features(ex, field: str, value, fact: Fact | None, msg_kind: str | None) -> set[str]:
    f = {f"g:{field}", f"g:{field}:kind={msg_kind}"}
    if ex.is_robot:
        f.add(f"g:{field}:robot")
    f |= {f"g:{field}:v:{t}" for t in words(str(value), 200)[:8]}
    if field == "subsystem":
        # where the area was read from (a culprit's title prefix, a path, a keyword count ...)
        # and how deep it goes ("mm" vs "drivers/gpu/drm/i915")
        src = getattr(ex, "subsystem_source", None)
        f.add(f"g:subsystem:src={src}")
        f.add(f"g:subsystem:src={src}:kind={msg_kind}")
        f.add(f"g:subsystem:parts={min(str(value).count('/') + 1, 3)}")
        # the area as the text writes it ("fs/xfs" in a path, "xfs:" in a title) or rewritten
        # from another name ("md/raid5:" -> drivers/md, "sched/fair:" -> sched)
        text = (fact.sentence if fact is not None and fact.sentence else ex.subject) or ""
        low, v = text.lower(), str(value).lower()
        f.add(f"g:subsystem:literal={v in low}")
        head = _TITLE_PREFIX.match(low)
        if head is not None:
            f.add(f"g:subsystem:title_prefix_parts={min(head.group(1).count('/') + 1, 3)}")
            f.add(f"g:subsystem:title_prefix_is_value={_prefix_is_value(low, v)}")
    if fact is None or fact.start < 0:
        f.add(f"g:{field}:from_subject")
        f |= {f"g:{field}:S:{t}" for t in words(ex.subject or "", 300)}
    else:
        f.add(f"g:{field}:depth={min(fact.quote_depth, 2)}")
        f |= {f"g:{field}:S:{t}" for t in words(fact.sentence or "", 400)[:60]}
    return f


# ------------------------------------------------------------------------------ decisions

@dataclass
class RuleContext:
    """What the rule stages produced for one message (the candidates and their opinion)."""
    ex: object
    rule_claim: Claim
    groups: list
    rule_culprit: object
    why: list[str]


def decide(ctx: RuleContext, model: Model) -> Claim:
    """The claim with the trained models' decisions applied to the rule candidates."""
    c = ctx.rule_claim
    ex = ctx.ex
    msg = message_features(ctx)
    reg_m, kind_m = model.get("is_regression"), model.get("kind")
    if reg_m is None:
        return c
    p = reg_m.prob(msg)
    out = Claim(is_regression=p >= reg_m.threshold, confidence=round(p, 3))
    out.numbers = c.numbers
    out.mentioned_commits = c.mentioned_commits
    out.hardware = dict(c.hardware)
    out.config = dict(c.config)
    facts = [f for f in c.facts if f.field not in ("is_regression", "kind", "culprit", "good", "bad")]
    old = {f.field: f for f in c.facts}
    if "is_regression" in old:
        facts.append(old["is_regression"])
    if not out.is_regression:
        out.config["kernel_config"] = list(c.config.get("kernel_config") or [])
        out.facts = [f for f in facts if f.field not in ("metric", "change_percent")]
        return out
    # kind
    # the rules' kind when they name one (measured: as good as the learned one, which decides
    # only where the rules have no opinion)
    if c.kind in ("performance", "functional"):
        out.kind = c.kind
    else:
        pk = kind_m.prob(msg) if kind_m is not None else 0.0
        out.kind = "performance" if pk >= (kind_m.threshold if kind_m else 0.5) else "functional"
    if "kind" in old:
        facts.append(Fact("kind", out.kind, old["kind"].sentence, old["kind"].start, old["kind"].end,
                          old["kind"].quote_depth))
    # culprit
    cm = model.get("culprit")
    cands = commit_candidates(ex, ctx.groups, ctx.rule_culprit)
    best = _best(cm, cands)
    if best is not None:
        out.culprit_commit = best.value
        g = next((g for g in ctx.groups if g.hex == best.norm), None)
        out.culprit_subject = g.subject if g is not None and g.subject else (
            c.culprit_subject if c.culprit_commit and c.culprit_commit.lower().startswith(best.norm[:7]) else None)
        facts.append(_fact_for(ex, "culprit", best.value, best))
    # good / bad
    vc = version_candidates(ex)
    # the ends of a range may also be commit ids ("good: <sha>", bisect start lines)
    vc += commit_range_candidates(ctx, cands)
    add_rule_versions(ex, vc, c)
    version_features(ex, vc, c.good, c.bad)
    g_best, b_best = choose_range(model.get("good"), model.get("bad"), vc)
    for name, best in (("good", g_best), ("bad", b_best)):
        if best is not None:
            setattr(out, name, best.value)
            facts.append(_fact_for(ex, name, best.value, best))
    # cpu: a ranker over CPU strings
    cpu_m = model.get("cpu")
    if cpu_m is not None:
        best = _best(cpu_m, cpu_candidates(ex, c.hardware.get("cpu")))
        out.hardware["cpu"] = best.value if best is not None else None
        facts = [f for f in facts if f.field != "cpu"]
        if best is not None:
            facts.append(_fact_for(ex, "cpu", best.value, best))
    # gated fields
    for name in GATED_FIELDS:
        if name == "arch" or (name == "cpu" and cpu_m is not None):
            continue
        value = normalise_value(name, c.field_value(name))
        if value is None:
            _set_field(out, name, None)
            facts = [f for f in facts if f.field != name]
            continue
        g = model.get("gate_" + name)
        fact = old.get(name)
        keep = g is None or g.prob(gate_features(ex, name, value, fact, out.kind)) >= g.threshold
        if name == "subsystem" and (_from_culprit_title(ex, c, out) or _from_own_subject(ex, c)):
            # the area prefix, as written, of the blamed commit's own title ("mm/slub: ...") or
            # of the report's own subject ("[REGRESSION] mm: ..."): the area the mail names
            keep = True
        if not keep:
            _set_field(out, name, None)
            facts = [f for f in facts if f.field != name]
        else:
            _set_field(out, name, value)
    # arch: the rule's word, else the board / SoC / machine named
    arch = normalise_value("arch", c.hardware.get("arch"))
    if arch is None:
        # (the rule stage scanned for these words already: mt.search reuses its scans)
        guess = None if any(ex.mt.search(rx) for rx, _ in P.ARCH_WORDS) else \
            arch_from_hardware(ex.clean, ex.subject, c.hardware.get("cpu"))
        if guess is not None:
            arch, span = guess
            facts.append(_fact_span(ex, "arch", arch, span))
    g = model.get("gate_arch")
    if arch is not None and g is not None and g.prob(gate_features(ex, "arch", arch, old.get("arch"), out.kind)) < g.threshold:
        arch = None
        facts = [f for f in facts if f.field != "arch"]
    out.hardware["arch"] = arch
    out.config["kernel_config"] = list(c.config.get("kernel_config") or [])
    out.facts = facts
    return out


_MEM_SIZE = re.compile(r"^(\d+(?:\.\d+)?\s?(?:[KMGT]i?B|[KMGT]))\s*(?:of\s+)?(?:RAM|memory|mem|DRAM|DDR\w*)\b",
                       re.I)


def _from_culprit_title(ex, rule: Claim, out: Claim) -> bool:
    """The rule's subsystem was read from the title of the commit the decided culprit is."""
    if getattr(ex, "subsystem_source", None) not in ("culprit_title", "title_near_commit"):
        return False
    a, b = (rule.culprit_commit or "").lower(), (out.culprit_commit or "").lower()
    if not (a and b and (a.startswith(b[:12]) or b.startswith(a[:12]))):
        return False
    # only where the area is the title's prefix as written ("xfs:" -> fs/xfs, "drm/xe:" ->
    # drivers/gpu/drm/xe); an area translated from another name ("shmem:" -> mm) or coarser
    # than the prefix ("sched/fair:" -> sched, which reports name either way) is left to the gate
    title = rule.culprit_subject
    if not title and ex.subsystem_source == "title_near_commit":  # 'commit <sha>\n    mm: foo' (a git log block)
        title = title_near_commit(ex.clean, rule.culprit_commit)
    return _prefix_is_value(title or "", str(rule.subsystem or ""))


def _from_own_subject(ex, rule: Claim) -> bool:
    """The rule's subsystem is the area prefix of the report's own subject, as written."""
    return (getattr(ex, "subsystem_source", None) == "subject_title"
            and _prefix_is_value(ex.subject or "", str(rule.subsystem or "")))


def _prefix_is_value(title: str, value: str) -> bool:
    head = _TITLE_PREFIX.match(title.lower())
    v = value.lower()
    return head is not None and (head.group(1) == v or v.endswith("/" + head.group(1)))


# the area prefix of a title: "mm/slub: ...", "[REGRESSION] ext4: ...", "Re: [PATCH] drm/i915: ..."
_TITLE_PREFIX = re.compile(r"^(?:subject:\s*)?(?:(?:re|fwd?|aw)\s*:\s*)*(?:\[[^\]]*\]\s*)*([\w.-]+(?:/[\w.-]+)*)\s*:")


def normalise_value(name: str, value):
    """The rule's value in the form the labels use."""
    if value is None:
        return None
    if name == "arch" and value == "x86":
        # the family alone does not say i386 or x86_64: not an architecture to report
        return None
    if name == "memory":
        # the size as written, without the noun after it ("128G memory" -> "128G")
        mm = _MEM_SIZE.match(value)
        if mm:
            return mm.group(1)
    return value


def _set_field(out: Claim, name: str, value) -> None:
    if name in ("cpu", "arch", "memory", "storage"):
        out.hardware[name] = value
    elif name in ("filesystem", "benchmark"):
        out.config[name] = value
    else:
        setattr(out, name, value)


def choose_range(gm: Linear | None, bm: Linear | None, cands: list[Candidate]):
    """The last good and first bad ends, decided together: two different candidates, and
    when both are release versions the good one is the older (a range is never backwards)."""
    if gm is None or bm is None or not cands:
        return None, None
    pg = [gm.prob(c.feats) for c in cands]
    pb = [bm.prob(c.feats) for c in cands]
    top_g = sorted(range(len(cands)), key=lambda i: -pg[i])[:6]
    top_b = sorted(range(len(cands)), key=lambda i: -pb[i])[:6]
    options = [(pg[i] * pb[j], i, j) for i in top_g for j in top_b
               if i != j and cands[i].norm != cands[j].norm and pg[i] >= gm.pair_threshold and pb[j] >= bm.pair_threshold
               and _ordered(cands[i], cands[j])]
    if options:
        _, i, j = max(options, key=lambda t: (t[0], -t[1], -t[2]))
        return cands[i], cands[j]
    # no consistent pair: the single end the model is surest of
    i, j = top_g[0], top_b[0]
    if pb[j] >= bm.threshold and pb[j] >= pg[i]:
        return None, cands[j]
    if pg[i] >= gm.threshold:
        return cands[i], None
    return None, (cands[j] if pb[j] >= bm.threshold else None)


def _ordered(good: Candidate, bad: Candidate) -> bool:
    if _HEX.match(good.norm) or _HEX.match(bad.norm):
        return True
    try:
        return _vkey(good.value) <= _vkey(bad.value)  # equal: two builds of one release (-amd64, -rt-amd64)
    except ValueError:
        return True


def _best(m: Linear | None, cands: list[Candidate]) -> Candidate | None:
    if m is None or not cands:
        return None
    p, _, c = max(((m.prob(c.feats), i, c) for i, c in enumerate(cands)), key=lambda t: (t[0], -t[1]))
    return c if p >= m.threshold else None


def _fact_for(ex, name: str, value, cand: Candidate) -> Fact:
    body_spans = [s for s in cand.spans if not s[2]]
    if not body_spans:
        return Fact(name, value, "Subject: " + (ex.subject or ""), -1, -1, 0)
    # the mention written as the value (a short id may stand for the full one elsewhere), in
    # the least quoted text, first
    low = str(value).lower()
    s, e, _ = min(body_spans, key=lambda t: (ex.clean[t[0]:t[1]].lower() != low, ex.mt.depth_at(t[0]), t[0]))
    return _fact_span(ex, name, value, (s, e))


def _fact_span(ex, name: str, value, span) -> Fact:
    if span is None:
        return Fact(name, value, "Subject: " + (ex.subject or ""), -1, -1, 0)
    s, e = span
    if s < 0:
        return Fact(name, value, "Subject: " + (ex.subject or ""), -1, -1, 0)
    bs, be = ex.mt.to_body(s), ex.mt.to_body(max(s, e - 1)) + 1
    sentence = ex.mt.sentence_of(s)
    last = ex.mt.sentence_of(max(s, e - 1))
    if last != sentence:  # a value wrapped across two lines or sentences: both
        sentence = sentence + "\n" + last
    return Fact(name, value, sentence, bs, be, ex.mt.depth_at(s))


# ------------------------------------------------------------------------------ training view

def training_examples(ctx: RuleContext, label: dict) -> dict[str, list[tuple[set[str], int]]]:
    """Feature sets with their 0/1 targets, per model, for one labelled message
    (used by ``bench/train_model.py``; the same feature code as ``decide``)."""
    ex, c = ctx.ex, ctx.rule_claim
    out: dict[str, list] = {k: [] for k in ["is_regression", "kind", "culprit", "good", "bad", "cpu"] +
                            ["gate_" + f for f in GATED_FIELDS]}
    msg = message_features(ctx)
    pos = bool(label.get("is_regression"))
    out["is_regression"].append((msg, int(pos)))
    if not pos:
        return out
    if label.get("kind") in ("performance", "functional"):
        out["kind"].append((msg, int(label["kind"] == "performance")))
    gold_c = (label.get("culprit_commit") or "").lower()
    cands = commit_candidates(ex, ctx.groups, ctx.rule_culprit)
    for cc in cands:
        hit = bool(gold_c) and (cc.norm.startswith(gold_c[:40]) or gold_c.startswith(cc.norm)) and len(gold_c) >= 6
        out["culprit"].append((cc.feats, int(hit)))
    vc = version_candidates(ex)
    vc += commit_range_candidates(ctx, cands)
    add_rule_versions(ex, vc, c)
    version_features(ex, vc, c.good, c.bad)
    for name in ("good", "bad"):
        gold = _norm_version(label.get(name) or "")
        for cand in vc:
            hit = bool(gold) and (cand.norm == gold or (_HEX.match(gold) is not None and len(cand.norm) >= 7 and (
                cand.norm.startswith(gold) or gold.startswith(cand.norm))))
            out[name].append((cand.feats, int(hit)))
    gold_cpu = label.get("cpu")
    out["cpu"] = [(cc.feats, int(gold_cpu is not None and _gate_match("cpu", cc.value, gold_cpu)))
                  for cc in cpu_candidates(ex, c.hardware.get("cpu"))]
    for name in GATED_FIELDS:
        value = normalise_value(name, c.field_value(name))
        if name == "arch" and value is None:
            guess = arch_from_hardware(ex.clean, ex.subject, c.hardware.get("cpu"))
            value = guess[0] if guess else None
        if value is None:
            continue
        fact = next((f for f in c.facts if f.field == name), None)
        out["gate_" + name].append((gate_features(ex, name, value, fact, label.get("kind")),
                                    int(_gate_match(name, value, label.get(name)))))
    return out


def _gate_match(name: str, pred, gold) -> bool:
    if gold is None:
        return False
    if name == "change_percent":
        g = float(gold)
        return abs(float(pred) - g) <= max(0.6, 0.05 * abs(g))
    p, g = " ".join(str(pred).lower().split()), " ".join(str(gold).lower().split())
    if name in ("cpu", "memory", "storage", "metric"):
        return p == g or ((p in g or g in p) and 2 * min(len(p), len(g)) >= max(len(p), len(g)))
    if name == "subsystem":
        alias = {"sched": "kernel/sched", "locking": "kernel/locking", "rcu": "kernel/rcu"}
        return alias.get(p.strip("/"), p.strip("/")) == alias.get(g.strip("/"), g.strip("/"))
    return p == g
