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
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from . import patterns as P
from .boards import arch_from_hardware
from .claim import Claim, Fact

MODEL_FILE = Path(__file__).resolve().parent / "data" / "model.json"

GATED_FIELDS = ("metric", "change_percent", "cpu", "arch", "memory", "storage", "filesystem",
                "benchmark", "subsystem")

_TOK = re.compile(r"[A-Za-z_][\w'-]*|\d[\w.+~-]*%?|[%#:=<>/\[\]()@!?*+-]")
_HEX = re.compile(r"^[0-9a-f]{7,40}$")
_VERSHAPE = re.compile(r"^v?\d+\.\d+")
_NUM = re.compile(r"^[+-]?\d[\d.,]*$")


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

    def prob(self, feats) -> float:
        w = self.weights
        z = self.bias + sum(w.get(f, 0.0) for f in feats)
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
        f |= {f"{prefix}S:{t}" for t in words(unit.text, 400)[:60]}
        f.add(f"{prefix}structured={unit.structured}")
        first = words(unit.text.lstrip()[:30])[:1]
        if first:
            f.add(f"{prefix}line0:{first[0]}")
    d = ex.mt.depth_at(cs)
    f.add(f"{prefix}depth={min(d, 2)}")
    return f


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


VCAND = re.compile(r"(?<![\w.@/-])((?:linux-|v)?(\d{1,2})\.(\d{1,2})(?:\.\d{1,3}){0,2}(?:-rc\d{1,2})?)"
                   r"((?:[-.+~][\w+~]+)*)", re.I)
NEXT_CAND = re.compile(r"(?<![\w.-])(next-\d{8})(?![\w])")


def version_candidates(ex) -> list[Candidate]:
    found: dict[str, Candidate] = {}

    def add(value: str, s: int, e: int, subj: bool, tag: str):
        value = value.rstrip(".-+~")
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
            add(base, m.start(1), m.end(1), subj, "shape:base")
            if suffix:
                # distro and vendor builds: 6.1.0-56-amd64, 5.14.0-427.el9, 4.14.x-amzn2, 3.18-at91
                add(base + suffix, m.start(1), m.end(4), subj, "shape:suffixed")
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
        if rule_good and _norm_version(rule_good) == c.norm:
            c.feats.add("rule_good")
        if rule_bad and _norm_version(rule_bad) == c.norm:
            c.feats.add("rule_bad")
        if first_body is not None and any(not subj and s == first_body for s, _, subj in c.spans):
            c.feats.add("first_in_body")


def commit_candidates(ex, groups, rule_culprit) -> list[Candidate]:
    out = []
    mentions = {}
    for m in ex.commits + ex.subject_commits:
        mentions.setdefault(m.value, []).append(m)
    for g in groups:
        written = ex.culprit_written(g)
        c = Candidate(written, [], set(), g.hex)
        for m in g.mentions[:6]:
            c.spans.append((m.cstart, m.cend, m.in_subject))
            c.feats |= _context(ex, m.cstart, m.cend, m.in_subject)
        c.feats.add(f"role={g.role}")
        c.feats.add(f"rscore={max(-3, min(6, int(g.score)))}")
        c.feats.add(f"count={min(len(g.mentions), 3)}")
        c.feats.add(f"hexlen={min(len(g.hex), 13) // 4}")
        c.feats.add(f"ncommits={min(len(groups), 4)}")
        if g.subject:
            c.feats.add("has_title")
        if rule_culprit is not None and g is rule_culprit:
            c.feats.add("rule_culprit")
        out.append(c)
    return out


def commit_range_candidates(ctx) -> list[Candidate]:
    """Commit ids as candidates for the ends of a range ("good: <sha>", a robot report's parent
    and commit, bisect start lines); the rule's culprit is marked, since a robot report names
    the culprit itself as the bad end."""
    out = []
    for cc in commit_candidates(ctx.ex, ctx.groups, None):
        c = Candidate(cc.value, cc.spans, set(), cc.norm)
        g = next((g for g in ctx.groups if g.hex == cc.norm), None)
        if g is not None and g is ctx.rule_culprit:
            c.feats.add("is_rule_culprit")
        if g is not None:
            c.feats.add(f"role={g.role}")
        out.append(c)
    return out


def gate_features(ex, field: str, value, fact: Fact | None, msg_kind: str | None) -> set[str]:
    f = {f"g:{field}", f"g:{field}:kind={msg_kind}"}
    if ex.is_robot:
        f.add(f"g:{field}:robot")
    f |= {f"g:{field}:v:{t}" for t in words(str(value), 200)[:8]}
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
    pk = kind_m.prob(msg) if kind_m is not None else (1.0 if c.kind == "performance" else 0.0)
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
    vc += commit_range_candidates(ctx)
    add_rule_versions(ex, vc, c)
    version_features(ex, vc, c.good, c.bad)
    for name in ("good", "bad"):
        m = model.get(name)
        best = _best(m, vc, exclude={_norm_version(out.good)} if name == "bad" and out.good else None)
        if best is not None:
            setattr(out, name, best.value)
            facts.append(_fact_for(ex, name, best.value, best))
    # gated fields
    for name in GATED_FIELDS:
        if name == "arch":
            continue
        value = normalise_value(name, c.field_value(name))
        if value is None:
            _set_field(out, name, None)
            facts = [f for f in facts if f.field != name]
            continue
        g = model.get("gate_" + name)
        fact = old.get(name)
        keep = g is None or g.prob(gate_features(ex, name, value, fact, out.kind)) >= g.threshold
        if not keep:
            _set_field(out, name, None)
            facts = [f for f in facts if f.field != name]
        else:
            _set_field(out, name, value)
    # arch: the rule's word, else the board / SoC / machine named
    arch = normalise_value("arch", c.hardware.get("arch"))
    if arch is None:
        guess = arch_from_hardware(ex.clean, ex.subject, c.hardware.get("cpu"))
        if guess is not None:
            arch, span = guess
            facts.append(_fact_span(ex, "arch", arch, span))
    g = model.get("gate_arch")
    if arch is not None and g is not None and g.prob(gate_features(ex, "arch", arch, old.get("arch"), out.kind)) < g.threshold:
        arch = None
        facts = [f for f in facts if f.field != "arch"]
    out.hardware["arch"] = arch
    out.config["kernel_config"] = list(c.config.get("kernel_config") or [])
    if out.subsystem is None and c.subsystem is not None and model.get("gate_subsystem") is None:
        out.subsystem = c.subsystem
    out.facts = facts
    return out


_MEM_SIZE = re.compile(r"^(\d+(?:\.\d+)?\s?(?:[KMGT]i?B|[KMGT]))\s*(?:of\s+)?(?:RAM|memory|mem|DRAM|DDR\w*)\b",
                       re.I)


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


def _best(m: Linear | None, cands: list[Candidate], exclude: set[str] | None = None) -> Candidate | None:
    if m is None or not cands:
        return None
    scored = [(m.prob(c.feats), i, c) for i, c in enumerate(cands) if not exclude or c.norm not in exclude]
    if not scored:
        return None
    p, _, c = max(scored, key=lambda t: (t[0], -t[1]))
    return c if p >= m.threshold else None


def _fact_for(ex, name: str, value, cand: Candidate) -> Fact:
    body_spans = [s for s in cand.spans if not s[2]]
    if not body_spans:
        return Fact(name, value, "Subject: " + (ex.subject or ""), -1, -1, 0)
    s, e, _ = min(body_spans, key=lambda t: (ex.mt.depth_at(t[0]), t[0]))
    return _fact_span(ex, name, value, (s, e))


def _fact_span(ex, name: str, value, span) -> Fact:
    if span is None:
        return Fact(name, value, "Subject: " + (ex.subject or ""), -1, -1, 0)
    s, e = span
    if s < 0:
        return Fact(name, value, "Subject: " + (ex.subject or ""), -1, -1, 0)
    bs, be = ex.mt.to_body(s), ex.mt.to_body(max(s, e - 1)) + 1
    return Fact(name, value, ex.mt.sentence_of(s), bs, be, ex.mt.depth_at(s))


# ------------------------------------------------------------------------------ training view

def training_examples(ctx: RuleContext, label: dict) -> dict[str, list[tuple[set[str], int]]]:
    """Feature sets with their 0/1 targets, per model, for one labelled message
    (used by ``bench/train_model.py``; the same feature code as ``decide``)."""
    ex, c = ctx.ex, ctx.rule_claim
    out: dict[str, list] = {k: [] for k in ["is_regression", "kind", "culprit", "good", "bad"] +
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
    vc += commit_range_candidates(ctx)
    add_rule_versions(ex, vc, c)
    version_features(ex, vc, c.good, c.bad)
    for name in ("good", "bad"):
        gold = _norm_version(label.get(name) or "")
        for cand in vc:
            hit = bool(gold) and (cand.norm == gold or (_HEX.match(gold) is not None and len(cand.norm) >= 7 and (
                cand.norm.startswith(gold) or gold.startswith(cand.norm))))
            out[name].append((cand.feats, int(hit)))
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
