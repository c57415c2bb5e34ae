"""regtriage extraction engine: mail text in, typed regression facts out.

Public API::

    prefilter(subject, body) -> bool          # cheap: could this be a regression message?
    extract(subject, body) -> Claim           # full extraction (spaCy pipeline + rules)
    merge_thread(claims) -> Claim             # combine claims of one thread, oldest -> newest

Pure functions: no I/O, no network, no database.
"""

from __future__ import annotations

import copy
import re

from . import patterns as P
from . import scan
from .claim import Claim, Fact, MentionedCommit

__all__ = ["Claim", "Fact", "MentionedCommit", "extract", "merge_thread", "prefilter", "get_nlp"]

_CUES = re.compile(
    r"regress|bisect|first bad commit|slow(?:er|down|s)?\b|performance|throughput|latency|"
    r"fail(?:s|ed|ure)?\b|(?:does|did)n'?t (?:boot|work)|not boot|broken|\bbreaks?\b|\bbroke\b|crash|"
    r"\bhangs?\b|\bhung\b|\boops\b|panic|BUG:|WARNING:|introduced by|caused by|\brevert|twice as long|"
    r"% (?:drop|decrease|loss)|unbootable|no longer|stopped working|(?:does|did)n'?t (?:compile|build)|"
    r"not (?:compile|build)|build (?:error|failure)|\berror:|\block-?ups?\b|\block(?:s|ed)? up\b|\bfreez(?:e|es|ing)\b", re.I)
# weaker words of a problem report (a cause, a problem, what works and what not, an upgrade):
# enough to be looked at by the trained classifier, which decides
_WEAK_CUES = re.compile(
    r"\bproblem|\bissues?\b|\bcaus(?:e|es|ed|ing)\b|\bbug\b|\bwarn|\berror|\bcomplain|\bannoy|"
    r"\bworks?\b|\bworked\b|\bworking\b|\bok\b|\bupgrad|\btimes?\b|\blonger\b|\bchanges\b|"
    r"\bnoticed\b|\bregzbot\b|\bsince\b|\bwith(?:out)? (?:commit|patch)", re.I)
_STRONG = re.compile(r"regress|bisect|first bad commit|introduced by|caused by", re.I)
_PATCHY = re.compile(r"^\s*(?:\[[^\]]*\]\s*)*\[(?:PATCH|RFC|RESEND)\b|\[GIT PULL\]|\bpull request\b", re.I)


def prefilter(subject: str | None, body: str) -> bool:
    """Fast test: False for obvious non-candidates (patches, pulls, chatter without cues)."""
    subject = subject or ""
    head = body[:30000]
    if _PATCHY.search(subject) and not P.REPLY_SUBJECT.search(subject):
        # a patch or pull itself: only a report if it talks about a regression it hit
        return bool(_STRONG.search(subject)) and not re.search(r"\bfix", subject, re.I)
    if _PATCHY.search(subject):
        # a reply in a patch or pull thread: a report if it talks like one
        return bool(_STRONG.search(subject) or scan.search(_CUES, head) or P.ROBOT_SUBJECT.search(subject))
    if P.ROBOT_SUBJECT.search(subject):
        return True
    return bool(_CUES.search(subject) or scan.search(_CUES, head) or _WEAK_CUES.search(subject)
                or _WEAK_CUES.search(head))


def get_nlp():
    from .pipeline import get_nlp as _g
    return _g()


def extract(subject: str | None, body: str, model=None) -> Claim:
    """Extract a regression claim from one message (subject may be None).

    ``model``: a ``learned.Model`` to decide with instead of the shipped one (training and
    cross-validation use this)."""
    body = body or ""
    if not prefilter(subject, body):
        return Claim(is_regression=False, confidence=0.02)
    from .pipeline import run
    if model is None:
        return run(subject, body)._.claim
    from .learned import decide
    return decide(run(subject, body, learned_stage=False)._.rules, model)


_FIELDS = ("culprit", "good", "bad", "metric", "change_percent", "kind", "subsystem",
           "cpu", "arch", "memory", "storage", "filesystem", "benchmark", "command")


_REPLY_SUBJECT_EVIDENCE = re.compile(r"^\s*Subject:\s*(?:(?:Re|Fwd?|AW|SV|Antw)\s*:\s*)+", re.I)


def _depth(claim: Claim, name: str) -> int:
    """How second-hand the fact is: its quote depth; a fact read from a reply's inherited
    subject line ("Re: ...") counts as quoted, since the subject restates the report."""
    f = claim.fact(name)
    if f is None:
        return 0
    if f.start < 0 and _REPLY_SUBJECT_EVIDENCE.match(f.sentence or ""):
        return max(f.quote_depth, 1)
    return f.quote_depth


def merge_thread(claims: list[Claim]) -> Claim:
    """Merge claims of one thread (oldest -> newest) into one.

    For every field the value comes from the claim that states it in the least quoted text
    (own words beat quoted words); among equals the newest wins, so a later bisect result
    refines an earlier report.  ``is_regression`` holds if any message makes the claim.
    """
    claims = [c for c in claims if c is not None]
    if not claims:
        return Claim()
    out = Claim()
    out.is_regression = any(c.is_regression for c in claims)
    pos = [c for c in claims if c.is_regression] or claims
    out.confidence = max(c.confidence for c in pos)
    facts: list[Fact] = []
    chosen: dict[str, Claim] = {}
    for name in _FIELDS:
        best = None
        best_key = None
        for i, c in enumerate(claims):
            v = c.field_value(name)
            if v in (None, [], ""):
                continue
            key = (-_depth(c, name), 1 if c.is_regression else 0, i)
            if best_key is None or key > best_key:
                best, best_key = c, key
        if name == "bad" and best is not None and chosen.get("good") is not best and best.good:
            # a range is one statement: keep good and bad from the same message when it has both
            out.good = best.good
            facts = [f for f in facts if f.field != "good"]
            if best.fact("good") is not None:
                facts.append(copy.copy(best.fact("good")))
        if best is None:
            continue
        chosen[name] = best
        if name == "culprit":
            out.culprit_commit, out.culprit_subject = best.culprit_commit, best.culprit_subject
        elif name in ("cpu", "arch", "memory", "storage"):
            out.hardware[name] = best.hardware.get(name)
        elif name in ("filesystem", "benchmark", "command"):
            out.config[name] = best.config.get(name)
        elif name == "change_percent":
            out.change_percent = best.change_percent
        else:
            setattr(out, name, getattr(best, name))
        f = best.fact(name)
        if f is not None:
            facts.append(copy.copy(f))
    if out.culprit_commit and not out.culprit_subject:
        for c in claims:
            if c.culprit_subject and c.culprit_commit and (
                    c.culprit_commit.startswith(out.culprit_commit) or out.culprit_commit.startswith(c.culprit_commit)):
                out.culprit_subject = c.culprit_subject
    # metric and change belong together: take change from the metric's message if it has one
    kc: list[str] = []
    for c in claims:
        for k in c.config.get("kernel_config") or []:
            if k not in kc:
                kc.append(k)
    out.config["kernel_config"] = kc
    for c in reversed(claims):
        if c.numbers:
            out.numbers = list(c.numbers)
            break
    seen = set()
    for c in reversed(claims):
        for m in c.mentioned_commits:
            if m.commit not in seen:
                seen.add(m.commit)
                out.mentioned_commits.append(m)
    if not out.is_regression:
        out.kind = None
    out.facts = facts
    return out
