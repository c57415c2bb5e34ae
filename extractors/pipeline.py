"""The spaCy pipeline: ``spacy.blank("en")`` with our own tokenizer and components.

Stages (all registered here, no model downloads):

* ``regtriage_mail_tokenizer`` - whitespace tokenizer that keeps the body text byte-exact
  (``doc.text == body``) and is ~10x faster than the rule tokenizer on mail.
* ``regtriage_mail_segmenter`` - cuts the body into lines / quoted blocks / sentences
  (``MailText``), sets ``Token.is_sent_start`` and stores the segmentation in ``doc._.mail``.
  ``Token._.quote_depth`` / ``Span._.quote_depth`` read the ``>`` depth from it.
* ``regtriage_kernel_entities`` - regex entity finder (commit ids, versions, ranges, CONFIG_
  options, percentages, CPU models, memory sizes, arch names, filesystems, benchmarks) into
  ``doc.spans["kernel"]`` (overlapping spans allowed, labels = entity type).
* ``regtriage_claim_scorer`` - rule scorers (``rules.Extractor``) deciding is_regression, kind,
  culprit, good/bad, measurements; the result is ``doc._.claim``.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy
import spacy
from spacy.attrs import IDX, SENT_START
from spacy.language import Language
from spacy.tokens import Doc, Span, Token
from spacy.util import registry

from . import learned
from . import patterns as P
from .claim import Claim, MentionedCommit
from .mailtext import MailText
from .rules import Extractor, clean_commits, clean_versions, find_commits, find_versions, sigmoid
from .subsystems import canonical, subsystem_with_source

WORD_SPACE = re.compile(r"(\S+)( ?)|(\s+)")

if not Doc.has_extension("mail"):
    Doc.set_extension("mail", default=None)
    Doc.set_extension("subject", default=None)
    Doc.set_extension("claim", default=None)
if not Doc.has_extension("rules"):
    Doc.set_extension("rules", default=None)
if not Doc.has_extension("mail_text"):
    Doc.set_extension("mail_text", default=None)


def _depth_of_token(tok: Token) -> int:
    mt = tok.doc._.mail
    return mt.depth_of_body(tok.idx) if mt is not None else 0


def _depth_of_span(span: Span) -> int:
    mt = span.doc._.mail
    return mt.depth_of_body(span.start_char) if mt is not None else 0


if not Token.has_extension("quote_depth"):
    Token.set_extension("quote_depth", getter=_depth_of_token)
if not Span.has_extension("quote_depth"):
    Span.set_extension("quote_depth", getter=_depth_of_span)


class MailTokenizer:
    """Whitespace tokenizer: words are runs of non-space; other whitespace becomes tokens."""

    def __init__(self, vocab):
        self.vocab = vocab

    def __call__(self, text: str) -> Doc:
        # a word takes one following " " as its trailing space; the rest of a whitespace run
        # (or all of it, at the start of the text or when it does not begin with " ") is a token
        parts = WORD_SPACE.findall(text)
        doc = Doc(self.vocab, words=[w or ws for w, _sp, ws in parts], spaces=[bool(sp) for _w, sp, ws in parts])
        doc._.mail_text = text  # == doc.text, without joining the tokens again
        return doc

    # spaCy serialisation hooks (nothing to store)
    def to_bytes(self, **kw):
        return b""

    def from_bytes(self, data, **kw):
        return self

    def to_disk(self, path, **kw):
        pass

    def from_disk(self, path, **kw):
        return self


@registry.tokenizers("regtriage_mail_tokenizer.v1")
def create_mail_tokenizer():
    def make(nlp):
        return MailTokenizer(nlp.vocab)
    return make


def _body_depth_index(mt: MailText):
    starts = [s.bstart for s in mt.segments]
    depths = [s.depth for s in mt.segments]
    from bisect import bisect_right

    def depth_of_body(pos: int) -> int:
        i = bisect_right(starts, pos) - 1
        return depths[i] if i >= 0 else 0
    return depth_of_body


@Language.component("regtriage_mail_segmenter")
def mail_segmenter(doc: Doc) -> Doc:
    text = doc._.mail_text
    mt = MailText(doc.text if text is None else text)
    mt.depth_of_body = _body_depth_index(mt)  # type: ignore[attr-defined]
    doc._.mail = mt
    starts = {mt.to_body(u.cstart) for u in mt.units}
    if len(doc):
        # one array assignment instead of a per-token property write (which re-checks annotations)
        idx = doc.to_array(IDX)
        arr = numpy.full(len(doc), -1, dtype="int64")
        arr[0] = 1
        if starts:
            arr[numpy.isin(idx, numpy.fromiter(starts, dtype=idx.dtype, count=len(starts)))] = 1
        doc.from_array([SENT_START], arr.reshape(-1, 1).view("uint64"))
    return doc


_RANGE_SEP = re.compile(r"\s*(?:\.\.\.?|->|-->|→|=>)\s*")
ENTITY_LABELS = ("COMMIT", "VERSION", "RANGE", "CONFIG", "PERCENT", "CPU", "MEMORY", "ARCH", "FS", "BENCH")


@Language.component("regtriage_kernel_entities")
def kernel_entities(doc: Doc) -> Doc:
    mt: MailText = doc._.mail
    clean = mt.clean
    found: list[tuple[int, int, str]] = []
    for m in clean_commits(mt):
        found.append((m.cstart, m.cend, "COMMIT"))
    vs = clean_versions(mt)
    for m in vs:
        found.append((m.cstart, m.cend, "VERSION"))
    for a, b in zip(vs, vs[1:]):
        if _RANGE_SEP.fullmatch(clean, a.cend, b.cstart):
            found.append((a.cstart, b.cend, "RANGE"))
    for m in mt.finditer(P.CONFIG_OPT):
        found.append((m.start(), m.end(), "CONFIG"))
    for m in mt.finditer(P.PERCENT):
        found.append((m.start(), m.end(), "PERCENT"))
    for rx in P.CPU_PATTERNS[:7]:
        for m in mt.finditer(rx):
            found.append((m.start(1), m.end(1), "CPU"))
    for rx in P.MEMORY_PATTERNS:
        for m in mt.finditer(rx):
            found.append((m.start(1), m.end(1), "MEMORY"))
    for rx, _name in P.ARCH_WORDS:
        for m in mt.finditer(rx):
            found.append((m.start(), m.end(), "ARCH"))
    for m in mt.finditer(P.FS_RE):
        found.append((m.start(), m.end(), "FS"))
    for m in mt.finditer(P.BENCH_RE):
        found.append((m.start(), m.end(), "BENCH"))
    spans = []
    to_body = mt.to_body
    for cs, ce, label in found:
        bs, be = to_body(cs), to_body(max(cs, ce - 1)) + 1
        sp = doc.char_span(bs, be, label=label, alignment_mode="expand")
        if sp is not None:
            spans.append(sp)
    doc.spans["kernel"] = spans
    return doc


@Language.component("regtriage_claim_scorer")
def claim_scorer(doc: Doc) -> Doc:
    doc._.rules = rule_context(doc._.subject, doc._.mail)
    doc._.claim = doc._.rules.rule_claim
    return doc


@Language.component("regtriage_learned_decider")
def learned_decider(doc: Doc) -> Doc:
    """The trained models (``learned``) decide over the rule candidates."""
    model = learned.shipped_model()
    if model is not None and doc._.rules is not None:
        doc._.claim = learned.decide(doc._.rules, model)
    return doc


# ------------------------------------------------------------------------------ assembly

def build_claim(subject: str | None, mt: MailText) -> Claim:
    return rule_context(subject, mt).rule_claim


def rule_context(subject: str | None, mt: MailText) -> "learned.RuleContext":
    """The rule stages' claim together with the candidates they saw."""
    ex = Extractor(subject, mt)
    ex.collect()
    c = ex.claim
    groups = ex.score_commits()
    culprit = ex.choose_culprit(groups)
    r_metric, r_pct, r_span, r_pair = ex.robot_facts()
    measures = ex.measured()
    m0 = measures[0] if measures else None
    measured_pair = None
    if m0 and m0.get("good") and m0.get("bad"):
        measured_pair = (m0["good"], m0["bad"], m0["gpos"], m0["bpos"])
    robot_pair = None
    if r_pair and culprit is not None:
        robot_pair = (r_pair[0], ex.culprit_written(culprit) if r_pair[1] else None, r_pair[2], r_pair[3])
        if robot_pair[1] is None:
            robot_pair = None
    good, bad = ex.choose_good_bad(measured_pair, robot_pair, culprit)

    # -- numbers: change percent and metric
    change = None
    change_span = None
    change_subj = False
    metric = None
    metric_span = None
    stated = ex.stated_percent()
    times = ex.times_phrase()
    if r_pct is not None:
        change, metric = r_pct, r_metric
        change_span = r_span
        change_subj = r_span is None
        metric_span = r_span
    elif m0 is not None and m0.get("pct") is not None:
        change, change_span = m0["pct"], m0["span"]
        metric = m0.get("metric")
        metric_span = m0["span"]
    elif stated is not None and not stated[2]:
        change, change_span, change_subj = stated[0], stated[1], stated[3]
    elif times is not None and not times[2]:
        change, change_span, change_subj = times[0], times[1], times[3]
    if change is not None and r_pct is None:
        if stated is not None and not stated[2] and m0 is None:
            pass
    if metric is None and change is not None:
        metric, metric_span = _fallback_metric(ex, times if (times and change == times[0]) else None)
    if metric is None and r_pct is None:
        metric, metric_span = _unit_of_stated_drop(ex)
    is_time = bool(metric and P.TIME_METRIC.search(metric))
    if change is not None and r_pct is None:
        if stated is not None and m0 is None and change == stated[0] and change > 0 and not is_time:
            change = -change  # "30% regression / drop" on a throughput-like metric
    # -- kind, hardware, config
    has_measure = change is not None or metric is not None
    kind = ex.kind_of(has_measure)
    hw, hw_spans = ex.hardware()
    cfg, cfg_spans = ex.config(kind)
    if cfg["benchmark"] is None and metric:
        mm = re.match(r"([a-z][\w-]+)\.", metric)
        if mm and P.BENCH_RE.fullmatch(mm.group(1)):
            cfg["benchmark"] = mm.group(1)
        elif metric == "build time":
            cfg["benchmark"] = "make"
    # -- is_regression
    score, why = ex.regression_score(culprit, good, bad, change)
    conf = sigmoid(score - 2.5)
    c.is_regression = conf >= 0.5
    c.confidence = round(conf, 3)
    c.numbers = [{k: v for k, v in n.items() if not k.startswith("_")} for n in getattr(ex, "numbers", [])]
    c.hardware.update(hw)
    c.config.update(cfg)
    # culprit & other commits
    for g in groups:
        written = ex.culprit_written(g)
        role = "culprit" if g is culprit else (g.role if g.role != "other" or g.score >= 0 else "other")
        c.mentioned_commits.append(MentionedCommit(written, role, g.subject, g.score))
    if culprit is not None:
        c.culprit_commit = ex.culprit_written(culprit)
        c.culprit_subject = culprit.subject
        if c.culprit_subject is None:
            c.culprit_subject = _anonymous_block_title(ex)
        ex.add_fact("culprit", c.culprit_commit, culprit.best_evidence,
                    in_subject=culprit.best_evidence is None)
    elif c.is_regression:
        t = _anonymous_block_title(ex)
        if t:
            c.culprit_subject = t
    if good is not None:
        c.good = good.text
        gspan = _version_span(ex, good, "good")
        ex.add_fact("good", good.text, gspan, in_subject=good.pos < 0 and gspan is None)
    if bad is not None:
        c.bad = bad.text
        bspan = _version_span(ex, bad, "bad")
        ex.add_fact("bad", bad.text, bspan, in_subject=bad.pos < 0 and bspan is None)
    c.kind = kind if c.is_regression else None
    claim_sent = _claim_sentence(ex, c.kind)
    if c.kind:
        kspan, ksubj = claim_sent
        ex.add_fact("kind", c.kind, kspan, in_subject=ksubj)
        ex.add_fact("kind_reason", c.kind, None, in_subject=True,
                    sentence=f"{c.kind}: " + "; ".join(why[:4]))
    c.metric = metric
    c.change_percent = None if change is None else round(change, 1)
    if metric:
        ex.add_fact("metric", metric, metric_span, in_subject=metric_span is None)
    if change is not None:
        ex.add_fact("change_percent", c.change_percent, change_span, in_subject=change_subj or change_span is None)
    for k, v in hw.items():
        if v:
            ex.add_fact(k, v, hw_spans.get(k))
    for k in ("filesystem", "benchmark", "command", "kernel_config"):
        if cfg.get(k):
            ex.add_fact(k, cfg[k], cfg_spans.get(k), in_subject=cfg_spans.get(k) is None)
    area, ex.subsystem_source = subsystem_with_source(ex.subject, c.culprit_subject, ex.clean,
                                                      c.config.get("filesystem"), c.kind, ex.robot_subject,
                                                      c.culprit_commit)
    c.subsystem = canonical(area)
    if c.subsystem:
        ex.add_fact("subsystem", c.subsystem, None, in_subject=True,
                    sentence=c.culprit_subject or ex.subject)
    rspan, rsubj = claim_sent
    ex.add_fact("is_regression", c.is_regression, rspan, in_subject=rsubj)
    ex.add_fact("is_regression_reason", c.is_regression, None, in_subject=True,
                sentence=f"score {score:+.1f}: " + "; ".join(why))
    for name, value, span in getattr(ex, "setup_facts", []):
        ex.add_fact(name, value, span)
    if not c.is_regression:
        # a non-report keeps its descriptive facts but no regression-specific ones
        c.culprit_commit = c.culprit_subject = None
        c.good = c.bad = None
        c.metric = None
        c.change_percent = None
        ex.facts = [f for f in ex.facts if f.field not in ("culprit", "good", "bad", "metric", "change_percent")]
    c.facts = ex.facts
    return learned.RuleContext(ex, c, groups, culprit, why)


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


def _claim_sentence(ex: Extractor, kind: str | None) -> tuple[tuple[int, int] | None, bool]:
    """The sentence (or the subject line) that best states the regression: (clean span, in_subject)."""
    side = STATE_PERF if kind == "performance" else STATE_FUNC if kind == "functional" else None

    may = P.may_match

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
    best = (score(ex.subject, 0, P.fold(ex.subject)) + (1.5 if STATE_STRONG.search(ex.subject) or
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
_BISECT_I = re.compile(r"\bbisect", re.I)


def _version_span(ex: Extractor, vc, role: str) -> tuple[int, int] | None:
    """Span of the mention of ``vc`` in the sentence that says it is good / bad."""
    default = _span_at(vc.pos, vc.text, ex)
    near = GOOD_NEAR if role == "good" else BAD_NEAR
    best = None
    # the pattern (?<![\w.])<text>(?![\w]) can only match where the text is written
    rx = re.compile(r"(?<![\w.])" + re.escape(vc.text) + r"(?![\w])")
    for m in (P.scan_at(rx, ex.clean, ex.clean, (False, (vc.text,))) if vc.text else rx.finditer(ex.clean)):
        u = ex.mt.unit_at(m.start())
        if u is None:
            continue
        ctx = ex.clean[max(u.cstart, m.start() - 80):min(u.cend, m.end() + 80)]
        sc = 2.0 * bool(near.search(ctx))
        if _RANGE_WORDS.search(ctx):
            sc += 1.0
        if _BISECT_I.search(ctx):
            sc += 0.5
        if default is not None and default[0] == m.start():
            sc += 0.75
        sc -= 0.5 * u.depth
        if best is None or sc > best[0]:
            best = (sc, (m.start(), m.end()))
    if best is None:
        return default
    return best[1]


def _span_at(pos: int, text: str, ex: Extractor):
    if pos is None or pos < 0:
        return None
    i = ex.clean.find(text, pos)
    if i < 0 or i - pos > 400:
        return (pos, pos + len(text))
    return (i, i + len(text))


_THIS_PATCH = re.compile(r"\b(?:caused by|introduced by|bisected to|first bad commit is)\s+(?:this|the following|"
                         r"below|the below)\s+(?:patch|commit)\s*:?\s*$", re.I)


def _anonymous_block_title(ex: Extractor) -> str | None:
    """Title of an Author:/Date: block announced by "caused by this patch:"."""
    from .rules import block_title_after
    mt_low = ex.mt.low
    for u in ex.mt.units:
        if P.may_match(_THIS_PATCH, u.text, mt_low[u.cstart:u.cend]) and _THIS_PATCH.search(u.text):
            t = block_title_after(ex.clean, u.cend)
            if t:
                return t
    return None


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


def _unit_of_stated_drop(ex: Extractor) -> tuple[str | None, tuple | None]:
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
    for u in ex.mt.units[:400]:
        for m in UNIT_MEASURED.finditer(u.text):
            if re.match(r"\s*(?:link|port|NIC|interface|card|ethernet|connection|line|uplink|network|adapter)s?\b",
                        u.text[m.end():], re.I):
                continue  # a link or device capacity, not a measurement
            by_unit.setdefault(_norm_unit(m.group(1)).lower(), []).append((m, u))
    for key, hits in by_unit.items():
        values = {re.sub(r"\s", "", h[0].group(0)[:h[0].start(1) - h[0].start()]) for h in hits}
        cue = any(_WORSE_CUE.search(h[1].text) for h in hits)
        if len(values) >= 2 and cue:
            m, u = hits[0]
            return _norm_unit(m.group(1)), (u.cstart + m.start(1), u.cstart + m.end(1))
    return None, None


def _fallback_metric(ex: Extractor, times) -> tuple[str | None, tuple | None]:
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


@lru_cache(maxsize=1)
def get_nlp() -> Language:
    """The pipeline, built once per process."""
    nlp = spacy.blank("en", config={"nlp": {"tokenizer": {"@tokenizers": "regtriage_mail_tokenizer.v1"}}})
    nlp.add_pipe("regtriage_mail_segmenter")
    nlp.add_pipe("regtriage_kernel_entities")
    nlp.add_pipe("regtriage_claim_scorer")
    nlp.add_pipe("regtriage_learned_decider")
    return nlp


def run(subject: str | None, body: str, learned_stage: bool = True) -> Doc:
    """Run the pipeline; ``learned_stage=False`` stops after the rule stages (training)."""
    nlp = get_nlp()
    doc = nlp.make_doc(body)
    doc._.subject = subject
    for name, proc in nlp.pipeline:
        if name == "regtriage_learned_decider" and not learned_stage:
            break
        doc = proc(doc)
    return doc


# cue patterns with a \b(?=\w) check in front (patterns.word_led: same matches, faster scans)
STATE_FUNC = P.word_led(STATE_FUNC)
GOOD_NEAR = P.word_led(GOOD_NEAR)
BAD_NEAR = P.word_led(BAD_NEAR)
