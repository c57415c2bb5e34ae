"""The rule stages, composed: from a segmented mail (``MailText``) to a ``Claim``.

``rule_context`` runs the stages in order over one per-message state (``Extractor``):
entities (``mentions``), the culprit (``culprits``), the measured change (``measures``), the
good / bad range (``ranges``), the kind (``classify``), the machine and configuration
(``hwconfig``), whether it is a regression report (``classify``), the subsystem
(``subsystems``), and locates every fact (``evidence``, ``titles``).  The spaCy component ``regtriage_claim_scorer`` (``pipeline``)
calls it; every function here is pure.  Decisions are made from cue phrases around entities
(commit ids, versions, numbers), the subject line, quote depth and the overall shape of the
message (patch, pull, robot report).
"""

from __future__ import annotations

import re

from . import learned
from . import patterns as P
from .classify import kind_of, regression_score, sigmoid
from .claim import Claim, Fact, MentionedCommit
from .culprits import choose_culprit, culprit_written, score_commits
from .evidence import claim_sentence, version_span
from .hwconfig import config, hardware
from .mailtext import MailText
from .measures import (fallback_metric, measured, performance_measure, robot_facts, stated_percent, times_phrase,
                       unit_of_stated_drop)
from .mentions import clean_commits, clean_versions, find_commits, find_versions
from .ranges import choose_good_bad
from .subsystems import canonical, subsystem_with_source
from .titles import anonymous_block_title


class Extractor:
    """The rule stages' shared state for one message: the subject (without a "(was: ...)" tail),
    the segmented body, the entities found (``collect``), the facts located so far, and what the
    stages leave for the trained decisions (``vclaims``, ``numbers``, ``setup_facts``,
    ``subsystem_source``)."""

    def __init__(self, subject: str | None, mt: MailText):
        subj = subject or ""
        subj = re.split(r"\((?:was|Was|WAS):|\[(?:was|Was):", subj)[0]
        self.subject = " ".join(subj.split())
        self.mt = mt
        self.clean = mt.clean
        self.claim = Claim()
        self.facts: list[Fact] = []

    # -- facts ---------------------------------------------------------------------------
    def add_fact(self, name: str, value, cspan: tuple[int, int] | None, in_subject: bool = False,
                 sentence: str | None = None) -> None:
        if value is None or value == []:
            return
        if cspan is None or in_subject:
            self.facts.append(Fact(name, value, sentence or ("Subject: " + self.subject), -1, -1, 0))
            return
        cs, ce = cspan
        bs, be = self.mt.to_body(cs), self.mt.to_body(max(cs, ce - 1)) + 1
        sent = sentence if sentence is not None else self.mt.sentence_of(cs)
        self.facts.append(Fact(name, value, sent, bs, be, self.mt.depth_at(cs)))

    # -- entities ------------------------------------------------------------------------
    def collect(self) -> None:
        mt = self.mt
        self.commits = clean_commits(mt) if self.clean is mt.clean else find_commits(self.clean)
        self.subject_commits = find_commits(self.subject, in_subject=True)
        self.versions = clean_versions(mt) if self.clean is mt.clean else find_versions(self.clean)
        self.subject_versions = find_versions(self.subject, in_subject=True,
                                              allow_weak=any(getattr(v, "strong", False) for v in self.versions))
        for m in self.commits + self.versions:
            u = mt.unit_at(m.cstart)
            m.unit = u.index if u else -1
            m.depth = mt.depth_at(m.cstart)
        self.robot_subject = P.ROBOT_SUBJECT.search(self.subject)
        self.is_robot = bool(self.robot_subject) or bool(P.ROBOT_MARK.search(self.clean[:3000])) \
            or bool(mt.search(P.ROBOT_BODY))


def build_claim(subject: str | None, mt: MailText) -> Claim:
    return rule_context(subject, mt).rule_claim


def rule_context(subject: str | None, mt: MailText) -> "learned.RuleContext":
    """The rule stages' claim together with the candidates they saw."""
    ex = Extractor(subject, mt)
    ex.collect()
    c = ex.claim
    groups = score_commits(ex)
    culprit = choose_culprit(groups)
    robot = robot_facts(ex)
    measures = measured(ex)
    m0 = measures[0] if measures else None
    measured_pair, robot_pair = _range_pairs(ex, m0, robot[3], culprit)
    good, bad = choose_good_bad(ex, measured_pair, robot_pair, culprit)
    change, change_span, change_subj, metric, metric_span = _change_and_metric(ex, m0, robot)
    kind, hw, hw_spans, cfg, cfg_spans = _setup(ex, change, metric)
    # -- is_regression
    score, why = regression_score(ex, culprit, good, bad, change)
    if kind == "performance":  # (after the score: these weaker candidates are no evidence of a report)
        change, change_span, metric, metric_span = performance_measure(ex, change, change_span, metric, metric_span)
    conf = sigmoid(score - 2.5)
    c.is_regression = conf >= 0.5
    c.confidence = round(conf, 3)
    c.numbers = [{k: v for k, v in n.items() if not k.startswith("_")} for n in getattr(ex, "numbers", [])]
    c.hardware.update(hw)
    c.config.update(cfg)
    _record_commits(ex, groups, culprit)
    _record_good_bad(ex, good, bad)
    c.kind = kind if c.is_regression else None
    claim_sent = claim_sentence(ex, c.kind)
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
    _record_setup(ex, hw, hw_spans, cfg, cfg_spans)
    _record_subsystem(ex)
    rspan, rsubj = claim_sent
    ex.add_fact("is_regression", c.is_regression, rspan, in_subject=rsubj)
    ex.add_fact("is_regression_reason", c.is_regression, None, in_subject=True,
                sentence=f"score {score:+.1f}: " + "; ".join(why))
    for name, value, span in getattr(ex, "setup_facts", []):
        ex.add_fact(name, value, span)
    if not c.is_regression:
        # a non-report keeps its descriptive facts but no regression-specific ones; the measure
        # stays on ``ex`` for the learned stage, which may judge the message a report after all
        ex.held_measure = {"metric": c.metric, "change_percent": c.change_percent,
                           "facts": [f for f in ex.facts if f.field in ("metric", "change_percent")]}
        c.culprit_commit = c.culprit_subject = None
        c.good = c.bad = None
        c.metric = None
        c.change_percent = None
        ex.facts = [f for f in ex.facts if f.field not in ("culprit", "good", "bad", "metric", "change_percent")]
    c.facts = ex.facts
    return learned.RuleContext(ex, c, groups, culprit, why)


def _range_pairs(ex: Extractor, m0: dict | None, r_pair, culprit) -> tuple:
    """The good / bad pairs the measured comparison and the robot report name, for
    ``choose_good_bad``: (label, label, pos, pos) each, or None."""
    measured_pair = None
    if m0 and m0.get("good") and m0.get("bad"):
        measured_pair = (m0["good"], m0["bad"], m0["gpos"], m0["bpos"])
    robot_pair = None
    if r_pair and culprit is not None:
        robot_pair = (r_pair[0], culprit_written(ex, culprit) if r_pair[1] else None, r_pair[2], r_pair[3])
        if robot_pair[1] is None:
            robot_pair = None
    return measured_pair, robot_pair


def _change_and_metric(ex: Extractor, m0: dict | None, robot: tuple) -> tuple:
    """The change percent and the metric: from the robot report, the measured comparison, a
    stated percent or an "N times" phrase.  Returns (change, change_span, change_subj, metric,
    metric_span)."""
    r_metric, r_pct, r_span, _ = robot
    change = None
    change_span = None
    change_subj = False
    metric = None
    metric_span = None
    stated = stated_percent(ex)
    times = times_phrase(ex)
    ex.measure_source = None
    if r_pct is not None:
        change, metric = r_pct, r_metric
        change_span = r_span
        change_subj = r_span is None
        metric_span = r_span
        ex.measure_source = "robot"
    elif m0 is not None and m0.get("pct") is not None:
        change, change_span = m0["pct"], m0["span"]
        metric = m0.get("metric")
        metric_span = m0["span"]
        ex.measure_source = "pair" if "vals" in m0 else ("version_rows" if m0.get("good") else "table")
    elif stated is not None and not stated[2]:
        change, change_span, change_subj = stated[0], stated[1], stated[3]
        ex.measure_source = "stated"
    elif times is not None and not times[2]:
        change, change_span, change_subj = times[0], times[1], times[3]
        ex.measure_source = "times"
    if metric is None and change is not None:
        metric, metric_span = fallback_metric(ex, times if (times and change == times[0]) else None)
    if metric is None and r_pct is None:
        metric, metric_span = unit_of_stated_drop(ex)
    is_time = bool(metric and P.TIME_METRIC.search(metric))
    if change is not None and r_pct is None:
        if stated is not None and m0 is None and change == stated[0] and change > 0 and not is_time:
            change = -change  # "30% regression / drop" on a throughput-like metric
    return change, change_span, change_subj, metric, metric_span


def _setup(ex: Extractor, change, metric) -> tuple:
    """The kind, hardware and config; a benchmark named by the metric fills a missing one.
    Returns (kind, hw, hw_spans, cfg, cfg_spans)."""
    has_measure = change is not None or metric is not None
    kind = kind_of(ex, has_measure)
    hw, hw_spans = hardware(ex)
    cfg, cfg_spans = config(ex, kind)
    if cfg["benchmark"] is None and metric:
        mm = re.match(r"([a-z][\w-]+)\.", metric)
        if mm and P.BENCH_RE.fullmatch(mm.group(1)):
            cfg["benchmark"] = mm.group(1)
        elif metric == "build time":
            cfg["benchmark"] = "make"
    return kind, hw, hw_spans, cfg, cfg_spans


def _record_commits(ex: Extractor, groups, culprit) -> None:
    """The mentioned commits with their roles, and the culprit (its fact, a title for an
    anonymous one)."""
    c = ex.claim
    for g in groups:
        written = culprit_written(ex, g)
        role = "culprit" if g is culprit else (g.role if g.role != "other" or g.score >= 0 else "other")
        c.mentioned_commits.append(MentionedCommit(written, role, g.subject, g.score))
    if culprit is not None:
        c.culprit_commit = culprit_written(ex, culprit)
        c.culprit_subject = culprit.subject
        if c.culprit_subject is None:
            c.culprit_subject = anonymous_block_title(ex)
        ex.add_fact("culprit", c.culprit_commit, culprit.best_evidence,
                    in_subject=culprit.best_evidence is None)
    elif c.is_regression:
        t = anonymous_block_title(ex)
        if t:
            c.culprit_subject = t


def _record_good_bad(ex: Extractor, good, bad) -> None:
    """The good and bad versions on the claim, with their facts."""
    c = ex.claim
    if good is not None:
        c.good = good.text
        gspan = version_span(ex, good, "good")
        ex.add_fact("good", good.text, gspan, in_subject=good.pos < 0 and gspan is None)
    if bad is not None:
        c.bad = bad.text
        bspan = version_span(ex, bad, "bad")
        ex.add_fact("bad", bad.text, bspan, in_subject=bad.pos < 0 and bspan is None)


def _record_setup(ex: Extractor, hw: dict, hw_spans: dict, cfg: dict, cfg_spans: dict) -> None:
    """The hardware and config facts."""
    for k, v in hw.items():
        if v:
            ex.add_fact(k, v, hw_spans.get(k))
    for k in ("filesystem", "benchmark", "command", "kernel_config"):
        if cfg.get(k):
            ex.add_fact(k, cfg[k], cfg_spans.get(k), in_subject=cfg_spans.get(k) is None)


def _record_subsystem(ex: Extractor) -> None:
    """The subsystem (and where it was found, ``ex.subsystem_source``), with its fact."""
    c = ex.claim
    area, ex.subsystem_source = subsystem_with_source(ex.subject, c.culprit_subject, ex.clean,
                                                      c.config.get("filesystem"), c.kind, ex.robot_subject,
                                                      c.culprit_commit)
    c.subsystem = canonical(area)
    if c.subsystem:
        ex.add_fact("subsystem", c.subsystem, None, in_subject=True,
                    sentence=c.culprit_subject or ex.subject)
