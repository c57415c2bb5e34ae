"""Trained decisions over the rule pipeline's candidates.

The rule stages (``rules.rule_context``) find every candidate with high recall and give their own
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
* ``range_pair``     - the (good, bad) pair as one decision over the top ends of both rankers:
  their scores, how the two relate (builds of one release, consecutive releases, a narrower
  range written between them) and how close they are written (``rangefeats.pair_options``);
* a keep-or-drop gate for each remaining field the rules fill (metric, change, hardware,
  config, subsystem), over the words of the sentence the value came from.

Candidate features (``features``) are the words just left and right of each mention, the words
of its sentence, its quote depth, whether it is in the subject, its shape (rc, stable, distro
build, next-, hex length), its rank among the versions, and the rule's choice.  The models are
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
from .boards import arch_guess
from .claim import Claim, Fact
from .features import (HEX_FULL, Candidate, add_rule_versions, commit_candidates, commit_range_candidates,
                       cpu_candidates, gate_features, lkp_machine_cpu, message_features, norm_version,
                       one_part_prefix, prefix_is_value, range_order, subsystem_candidates, version_candidates,
                       version_features, version_order)
from .hwcands import fs_candidates, lkp_disk, storage_candidates
from .rangefeats import pair_options
from .subsystems import canonical, title_near_commit

MODEL_FILE = Path(__file__).resolve().parent / "data" / "model.json"

CPUINFO_THRESHOLD = 0.5  # the cpu ranker's keep threshold for a cpuinfo "model name" line
GATED_FIELDS = ("metric", "change_percent", "cpu", "arch", "memory", "storage", "filesystem",
                "benchmark", "subsystem")


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
    out.kind = _decide_kind(c, kind_m, msg)
    if "kind" in old:
        facts.append(Fact("kind", out.kind, old["kind"].sentence, old["kind"].start, old["kind"].end,
                          old["kind"].quote_depth))
    cands = _decide_culprit(ctx, model, out, facts)
    _decide_range(ctx, model, out, facts, cands)
    cpu_m = model.get("cpu")
    _decide_cpu(ctx, cpu_m, out, facts)
    _decide_storage(ctx, model.get("storage"), out, facts)
    _decide_filesystem(ctx, model.get("filesystem"), out, facts)
    _decide_gated(ctx, model, out, facts, old, cpu_m, model.get("storage"), model.get("filesystem"))
    _decide_subsystem(ctx, model.get("subsystem"), out, facts)
    _decide_arch(ctx, model, out, facts, old)
    out.config["kernel_config"] = list(c.config.get("kernel_config") or [])
    out.facts = facts
    return out


def _decide_kind(c: Claim, kind_m, msg) -> str:
    """The kind: the rules' kind when they name one (measured: as good as the learned one,
    which decides only where the rules have no opinion), else the kind model's."""
    if c.kind in ("performance", "functional"):
        return c.kind
    pk = kind_m.prob(msg) if kind_m is not None else 0.0
    return "performance" if pk >= (kind_m.threshold if kind_m else 0.5) else "functional"


def _decide_culprit(ctx: RuleContext, model: Model, out: Claim, facts: list[Fact]) -> list:
    """The culprit: the culprit ranker's best commit candidate (with its fact).  Returns the
    commit candidates."""
    c = ctx.rule_claim
    ex = ctx.ex
    cm = model.get("culprit")
    cands = commit_candidates(ex, ctx.groups, ctx.rule_culprit)
    best = _best(cm, [c for c in cands if not _named_in_another_role(c)])
    if best is not None and "verdict:revised" in best.feats:
        # a later sentence names another commit the real bad one: the author's own revision
        # (too rare in the corpus for the ranker to learn) outranks the earlier blame
        best = next((c for c in cands if "verdict:revises" in c.feats), best)
    if best is not None:
        out.culprit_commit = best.value
        g = next((g for g in ctx.groups if g.hex == best.norm), None)
        out.culprit_subject = g.subject if g is not None and g.subject else (
            c.culprit_subject if c.culprit_commit and c.culprit_commit.lower().startswith(best.norm[:7]) else None)
        facts.append(_fact_for(ex, "culprit", best.value, best))
    return cands


def _named_in_another_role(c) -> bool:
    """A commit the rules read as something else than the culprit, with nothing that blames it
    (rule score -2 or lower: a tested head, a fix, a good end, a CI report's "Git Commit:", a
    build id); an "upstream commit" id is left to the ranker (the mainline id of a backported
    culprit is named so too).  The ranker, which sees the rule score as one feature among the
    words around the id, kept too many of these when they were the message's only id."""
    return bool({"rscore=-3", "rscore=-2"} & c.feats) and "role=upstream" not in c.feats


def _decide_range(ctx: RuleContext, model: Model, out: Claim, facts: list[Fact], cands: list) -> None:
    """The good / bad: the range rankers' choice among version (and commit id) candidates."""
    c = ctx.rule_claim
    ex = ctx.ex
    vc = version_candidates(ex)
    # the ends of a range may also be commit ids ("good: <sha>", bisect start lines)
    vc += commit_range_candidates(ctx, cands)
    add_rule_versions(ex, vc, c)
    version_features(ex, vc, c.good, c.bad)
    g_best, b_best = choose_range(model.get("good"), model.get("bad"), vc, model.get("range_pair"))
    for name, best in (("good", g_best), ("bad", b_best)):
        if best is not None:
            setattr(out, name, best.value)
            facts.append(_fact_for(ex, name, best.value, best))


def _decide_cpu(ctx: RuleContext, cpu_m, out: Claim, facts: list[Fact]) -> None:
    """The cpu: a ranker over CPU strings (when the model has one)."""
    if cpu_m is not None:
        ex = ctx.ex
        best = lkp_machine_cpu(ex)
        cands = cpu_candidates(ex, ctx.rule_claim.hardware.get("cpu")) if best is None else []
        best = best or _best(cpu_m, cands)
        if best is None:
            # a /proc/cpuinfo "model name" line is the machine's CPU string by definition: it
            # needs less support from the context than a CPU named in prose
            named = [c for c in cands if "cpat:0" in c.feats]
            best = _best(Linear({"bias": cpu_m.bias, "weights": cpu_m.weights, "threshold": CPUINFO_THRESHOLD}), named)
        _keep_ranked(ex, out, "cpu", best, facts)


def _decide_storage(ctx: RuleContext, st_m, out: Claim, facts: list[Fact]) -> None:
    """The storage: a ranker over storage phrases (when the model has one)."""
    if st_m is not None:
        ex = ctx.ex
        best = lkp_disk(ex) or _best(st_m, storage_candidates(ex, ctx.rule_claim.hardware.get("storage")))
        _keep_ranked(ex, out, "storage", best, facts)


def _keep_ranked(ex, out: Claim, name: str, best: Candidate | None, facts: list[Fact]) -> None:
    """A ranked field's decision: the chosen candidate's value (or None) and its fact in place of
    the rules' one."""
    _set_field(out, name, best.value if best is not None else None)
    facts[:] = [f for f in facts if f.field != name]
    if best is not None:
        facts.append(_fact_for(ex, name, best.value, best))


def _decide_filesystem(ctx: RuleContext, fs_m, out: Claim, facts: list[Fact]) -> None:
    """The filesystem under test: a ranker over the filesystems named (when the model has one)."""
    if fs_m is not None:
        ex = ctx.ex
        cands = fs_candidates(ex, ctx.rule_claim.config.get("filesystem"), out.kind)
        # an LKP job's filesystem parameter is decisive
        best = next((c for c in cands if "fs_lkp_pick" in c.feats), None) or _best(fs_m, cands)
        _keep_ranked(ex, out, "filesystem", best, facts)


def _decide_subsystem(ctx: RuleContext, sub_m, out: Claim, facts: list[Fact]) -> None:
    """The subsystem: a ranker over every area the message points to, at every depth its
    evidence supports (when the model has one; else the gate in ``_decide_gated``)."""
    if sub_m is None:
        return
    ex = ctx.ex
    c = ctx.rule_claim
    best = _best(sub_m, subsystem_candidates(ex, c, out.kind))
    out.subsystem = best.value if best is not None else None
    if best is None and c.subsystem and (_from_own_subject(ex, c) and one_part_prefix(ex.subject)
                                         or _from_culprit_title(ex, c, out) and one_part_prefix(_culprit_title(ex, c))):
        # the one-word area prefix, as written, of the report's own subject ("[REGRESSION] mm:
        # ...") or of the blamed commit's own title ("mm: ...", "drm/xe: ..."; not "mm: vmscan:
        # ...", which reports name at either depth)
        out.subsystem = c.subsystem
    facts[:] = [f for f in facts if f.field != "subsystem"]
    if out.subsystem is not None:
        facts.append(Fact("subsystem", out.subsystem, "Subject: " + (ex.subject or ""), -1, -1, 0))


def _decide_gated(ctx: RuleContext, model: Model, out: Claim, facts: list[Fact], old: dict, cpu_m,
                  st_m=None, fs_m=None) -> None:
    """The gated fields: the rules' value, kept where its gate model accepts it."""
    c = ctx.rule_claim
    ex = ctx.ex
    held = getattr(ex, "held_measure", None) or {}
    for name in GATED_FIELDS:
        if name == "arch" or (name == "cpu" and cpu_m is not None) or (name == "storage" and st_m is not None) \
                or (name == "filesystem" and fs_m is not None) \
                or (name == "subsystem" and model.get("subsystem") is not None):
            continue
        value = normalise_value(name, c.field_value(name))
        if value is None and held.get(name) is not None:
            # the rules judged the message no report and set its measure aside: the model did
            value = held[name]
            old = {**old, name: next((f for f in held["facts"] if f.field == name), None)}
            if old[name] is not None:
                facts.append(old[name])
        if value is None:
            _set_field(out, name, None)
            facts[:] = [f for f in facts if f.field != name]
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
            facts[:] = [f for f in facts if f.field != name]
        else:
            _set_field(out, name, value)


def _decide_arch(ctx: RuleContext, model: Model, out: Claim, facts: list[Fact], old: dict) -> None:
    """The arch: the rule's word, else the board / SoC / machine named; kept where its gate
    model accepts it."""
    c = ctx.rule_claim
    ex = ctx.ex
    arch, fact, src = _arch_value(ex, c)
    if fact is not None:
        facts.append(fact)
    g = model.get("gate_arch")
    if arch is not None and src != "lkp" and g is not None \
            and g.prob(_arch_features(ex, arch, fact or old.get("arch"), out.kind, src)) < g.threshold:
        arch = None
        facts[:] = [f for f in facts if f.field != "arch"]
    out.hardware["arch"] = arch


def _arch_value(ex, c: Claim, lkp_lines: bool = True):
    """The rule's arch word, else the architecture of the hardware, package, toolchain or oops
    the text names: ``(arch, new fact or None, source)``."""
    lkp = lkp_arch(ex) if lkp_lines else None
    if lkp is not None:
        return lkp[0], _fact_span(ex, "arch", lkp[0], lkp[1]), "lkp"
    arch = normalise_value("arch", c.hardware.get("arch"))
    if arch is not None:
        return arch, None, "word"
    if getattr(ex, "arch_compared", False):
        return None, None, None  # two architectures compared: neither is the machine's
    guess = arch_guess(ex.clean, ex.subject, c.hardware.get("cpu"))
    if guess is None:
        return None, None, None
    return guess[0], _fact_span(ex, "arch", guess[0], guess[1]), guess[2]


# an LKP report's kernel config line names the architecture the kernel was built for:
# "config: x86_64-rhel-8.3", "kernel config: i386-randconfig-062-20250913", "config: arm64-defconfig"
_LKP_CONFIG = re.compile(r"^[ \t]*(?:kernel[ \t]+)?config:[ \t]*(x86_64|i386|arm64|arm|powerpc64|powerpc|riscv|s390|mips|"
                         r"loongarch|sparc64|sparc|parisc|m68k|openrisc|xtensa|sh|csky|alpha|microblaze|nios2|arc|"
                         r"hexagon|um)-[\w.+-]*[ \t]*$", re.M)
# its machine line: "test machine: 96 threads 2 sockets Intel(R) Xeon(R) ...", "test machine:
# qemu-system-i386 -enable-kvm -cpu SandyBridge -smp 2 -m 8G"
_LKP_MACHINE = re.compile(r"^[ \t]*(?:on[ \t]+)?test machine:[ \t]*([^\n]+)", re.M)
_QEMU_SYSTEM = re.compile(r"\bqemu-system-(x86_64|i386|aarch64|arm|ppc64\w*|ppc|riscv64|riscv32|s390x|mips\w*|loongarch64)\b")
_QEMU_ARCH = {"aarch64": "arm64", "riscv32": "riscv", "riscv64": "riscv", "s390x": "s390", "loongarch64": "loongarch"}
_X86_CPU = re.compile(r"\b(?:Intel|AMD|Xeon|EPYC|Ryzen|Opteron|Atom|Core\(TM\)|Pentium)\b|\b\w+\s(?:Lake|Rapids|Forest|Bridge|well)\b",
                      re.I)


def lkp_arch(ex) -> tuple[str, tuple[int, int]] | None:
    """The architecture an LKP report states: the arch prefix of its kernel config line (quoted
    or not: what the kernel was built for), else its own (unquoted) test machine line: a QEMU
    system of one architecture, or an x86 CPU (the robot's x86 kernels are x86_64 unless the
    config line says i386).  ``(arch, clean span)`` or None."""
    low = ex.mt.low
    if "config:" in low:
        m = ex.mt.search(_LKP_CONFIG)
        if m is not None:
            a = m.group(1)
            return {"powerpc64": "powerpc"}.get(a, a), (m.start(1), m.end(1))
    if "test machine:" in low:
        m = ex.mt.search(_LKP_MACHINE)
        if m is not None and ex.mt.depth_at(m.start()) == 0:
            q = _QEMU_SYSTEM.search(m.group(1))
            if q is not None:
                a = q.group(1)
                a = _QEMU_ARCH.get(a, "powerpc" if a.startswith("ppc") else "mips" if a.startswith("mips") else a)
                return a, (m.start(1) + q.start(1), m.start(1) + q.end(1))
            if _X86_CPU.search(m.group(1)):
                return "x86_64", (m.start(1), m.end(1))
    return None


def _arch_features(ex, arch: str, fact, kind, src) -> set[str]:
    f = gate_features(ex, "arch", arch, fact, kind)
    f.add(f"g:arch:src={src}")
    f.add(f"g:arch:src={src}:{arch}")
    if src != "word" and any(ex.mt.search(rx) for rx, _ in P.ARCH_WORDS):
        f.add("g:arch:words_unresolved")  # architecture words the rule stage left undecided
    if src == "word":
        # the word written only as part of a compound name ("x86_64-rhel-8.3", "will-it-scale-
        # x86_64-a34a85c", "buildd@lgw01-amd64-059"): a build artefact or a host, not a statement
        ms = [m for rx, n in P.ARCH_WORDS if n == arch for m in ex.mt.finditer(rx)]
        if ms and all(_COMPOUND_TAIL.match(ex.clean, m.end()) for m in ms):
            f.add("g:arch:word_in_names")
    return f


_COMPOUND_TAIL = re.compile(r"[-_][A-Za-z0-9]")


_MEM_SIZE = re.compile(r"^(\d+(?:\.\d+)?\s?(?:[KMGT]i?B|[KMGT]))\s*(?:of\s+)?(?:RAM|memory|mem|DRAM|DDR\w*)\b",
                       re.I)


def _from_culprit_title(ex, rule: Claim, out: Claim) -> bool:
    """The rule's subsystem was read from the title of the commit the decided culprit is."""
    src = (getattr(ex, "subsystem_source", None) or "").split("+")[0]
    if src not in ("culprit_title", "title_near_commit"):
        return False
    a, b = (rule.culprit_commit or "").lower(), (out.culprit_commit or "").lower()
    if not (a and b and (a.startswith(b[:12]) or b.startswith(a[:12]))):
        return False
    # only where the area is the title's prefix as written ("xfs:" -> fs/xfs, "drm/xe:" ->
    # drivers/gpu/drm/xe); an area translated from another name ("shmem:" -> mm) or coarser
    # than the prefix ("sched/fair:" -> sched, which reports name either way) is left to the gate
    return prefix_is_value(_culprit_title(ex, rule), str(rule.subsystem or ""))


def _culprit_title(ex, rule: Claim) -> str:
    """The blamed commit's title: as the rules read it, else the line under its id in a git
    log block ('commit <sha>\n    mm: foo')."""
    title = rule.culprit_subject
    if not title and rule.culprit_commit and (getattr(ex, "subsystem_source", None) or "").startswith("title_near_commit"):
        title = title_near_commit(ex.clean, rule.culprit_commit)
    return title or ""


def _from_own_subject(ex, rule: Claim) -> bool:
    """The rule's subsystem is the area prefix of the report's own subject, as written."""
    return ((getattr(ex, "subsystem_source", None) or "").split("+")[0] == "subject_title"
            and prefix_is_value(ex.subject or "", str(rule.subsystem or "")))


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


def choose_range(gm: Linear | None, bm: Linear | None, cands: list[Candidate], pm: Linear | None = None):
    """The last good and first bad ends, decided together: two different candidates, and
    when both are release versions the good one is the older (a range is never backwards).
    With a range model (``pm``) the pair is one decision over both ends' scores and how the
    two relate (``rangefeats.pair_options``); else the ends' own scores, a pair with the lower
    pair thresholds."""
    if gm is None or bm is None or not cands:
        return None, None
    pg = [gm.prob(c.feats) for c in cands]
    pb = [bm.prob(c.feats) for c in cands]
    top_g = sorted(range(len(cands)), key=lambda i: -pg[i])[:6]
    top_b = sorted(range(len(cands)), key=lambda i: -pb[i])[:6]
    if pm is not None:
        scored = [(pm.prob(f), -i, -j, i, j) for i, j, f in pair_options(cands, pg, pb, range_order)]
        if scored:
            p, _, _, i, j = max(scored)
            if p >= pm.threshold:
                return cands[i], cands[j]
    else:
        options = [(pg[i] * pb[j], i, j) for i in top_g for j in top_b
                   if i != j and cands[i].norm != cands[j].norm and pg[i] >= gm.pair_threshold
                   and pb[j] >= bm.pair_threshold and _ordered(cands[i], cands[j])]
        if options:
            _, i, j = max(options, key=lambda t: (t[0], -t[1], -t[2]))
            return cands[i], cands[j]
    # no pair the range model keeps: the two top ends when each reaches its pair threshold and
    # they agree, else the single end the model is surest of
    i, j = top_g[0], top_b[0]
    if pm is not None and pg[i] >= gm.pair_threshold and pb[j] >= bm.pair_threshold and \
            cands[i].norm != cands[j].norm and _ordered(cands[i], cands[j]):
        return cands[i], cands[j]
    if pb[j] >= bm.threshold and pb[j] >= pg[i]:
        return None, cands[j]
    if pg[i] >= gm.threshold:
        return cands[i], None
    return None, (cands[j] if pb[j] >= bm.threshold else None)


def _ordered(good: Candidate, bad: Candidate) -> bool:
    if HEX_FULL.match(good.norm) or HEX_FULL.match(bad.norm):
        return True
    try:
        return version_order(good.value) <= version_order(bad.value)  # equal: two builds of one release (-amd64, -rt-amd64)
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
    out: dict[str, list] = {k: [] for k in ["is_regression", "kind", "culprit", "good", "bad", "range_sets", "cpu",
                                            "storage", "filesystem", "subsystem"] +
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
    hits = {}
    for name in ("good", "bad"):
        gold = norm_version(label.get(name) or "")
        hits[name] = [int(bool(gold) and (cand.norm == gold or (HEX_FULL.match(gold) is not None and len(cand.norm) >= 7
                      and (cand.norm.startswith(gold) or gold.startswith(cand.norm))))) for cand in vc]
        out[name] += [(cand.feats, hit) for cand, hit in zip(vc, hits[name])]
    # the range model learns from whole messages (its pairs need both rankers' scores)
    out["range_sets"] = [(vc, hits["good"], hits["bad"])]
    gold_cpu = label.get("cpu")
    if lkp_machine_cpu(ex) is None:  # (an LKP machine line decides alone)
        out["cpu"] = [(cc.feats, int(gold_cpu is not None and _gate_match("cpu", cc.value, gold_cpu)))
                      for cc in cpu_candidates(ex, c.hardware.get("cpu"))]
    gold_st = label.get("storage")
    # (trained on LKP reports too, though their disk parameter decides alone at run time: their
    # "disk: 1HDD" lines teach what a storage phrase in a setup looks like)
    out["storage"] = [(sc.feats, int(gold_st is not None and _gate_match("storage", sc.value, gold_st)))
                      for sc in storage_candidates(ex, c.hardware.get("storage"))]
    gold_fs = (label.get("filesystem") or "").lower()
    fcs = fs_candidates(ex, c.config.get("filesystem"), label.get("kind"))
    if not any("fs_lkp_pick" in fc.feats for fc in fcs):  # (an LKP parameter decides alone)
        out["filesystem"] = [(fc.feats, int(fc.norm == gold_fs)) for fc in fcs]
    gold_sub = label.get("subsystem")
    out["subsystem"] = [(sc.feats, int(gold_sub is not None and _gate_match("subsystem", sc.value, gold_sub)))
                        for sc in subsystem_candidates(ex, c, label.get("kind"))]
    held = getattr(ex, "held_measure", None) or {}
    for name in GATED_FIELDS:
        value = normalise_value(name, c.field_value(name))
        if value is None and name in held:
            value = held[name]
        fact = next((f for f in list(c.facts) + held.get("facts", []) if f.field == name), None)
        if name == "arch":
            # (an LKP config or machine line decides alone at run time; the gate still learns from
            # the words of those reports what an architecture stated in a setup looks like)
            value, afact, src = _arch_value(ex, c, lkp_lines=False)
            if value is not None:
                out["gate_arch"].append((_arch_features(ex, value, afact or fact, label.get("kind"), src),
                                         int(_gate_match(name, value, label.get(name)))))
            continue
        if value is None:
            continue
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
        # a core-kernel area's short name and its path are one name ("sched" = "kernel/sched")
        return canonical(p.strip("/")) == canonical(g.strip("/"))
    return p == g
