"""The culprit stage: which mentioned commit the message blames.

Every commit id mentioned (body and subject, abbreviations grouped with the full id) is scored
from the cue phrases before and after it (``CUL_BEFORE`` / ``CUL_AFTER``), reverts that fix the
problem, markers, improvement words and a robot's subject; ``choose_culprit`` picks the group
the message blames.  Functions over the rule stages' per-message state ``ex``
(``rules.Extractor``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import patterns as P
from . import scan
from .mentions import Mention
from .scan import fold, may_match
from .titles import title_after

if TYPE_CHECKING:
    from .rules import Extractor

I = re.I

_REVERT = re.compile(r"\brevert", I)
_REVERT_W = re.compile(r"\brevert\w*", I)


@dataclass
class CommitGroup:
    hex: str
    mentions: list[Mention] = field(default_factory=list)
    score: float = 0.0
    role: str = "other"
    subject: str | None = None
    first: int = 10**9
    best_evidence: tuple[int, int] | None = None  # clean span of the deciding cue
    cues: set = field(default_factory=set)  # which cue patterns fired around its mentions


FILL = r"(?:\s|[:\-\[(\"',=#*]|\b(?:the|this|that|a|an|below|following|above|upstream|first|bad|commit|patch|" \
       r"change|sha1?|id|it|is|was|as|to|git|tree|of|one|mainline|problem|issue|regression|kernel|yours|" \
       r"these|those|commits|patches|changes)\b)*$"
CUL_BEFORE: list[tuple[re.Pattern, float, str]] = [
    (re.compile(r"first bad commit(?:\s+is)?" + FILL, I), 6, "culprit"),
    (re.compile(r"regzbot\s+introduced\s*:?" + FILL, I), 6, "culprit"),
    (re.compile(r"\bbisect\w*\b(?:[^.\n]|\.(?=\w)){0,60}?\b(?:to|at|down|blames?|points?|identified|found|located|gives?|says|"
                r"shows?|reveals?|reports?|returned|suggest(?:s|ed)|ends? (?:up )?(?:at|with)|(?:terminated|stopped|landed|converged) "
                r"(?:on|at)|came up with|result\w*(?: in)?)" + FILL, I), 5, "culprit"),
    (re.compile(r"\b(?:caused|introduced|triggered|broken|regressed|exposed)\s+"
                r"(?:(?:directly|indirectly|or|probably|likely|apparently|possibly)\s+){0,4}"
                r"(?:in\s+v?\d[\w.\-]*\s+)?(?:by|with|in)" + FILL, I), 5, "culprit"),
    # "I tracked this to commit", "traced it back to", "narrowed it down to the following commit"
    (re.compile(r"\b(?:tracked|traced|narrowed)\s+(?:(?:it|this|that|the\s+\w+|this\s+\w+)\s+)?(?:back\s+|down\s+)?to"
                + FILL, I), 4, "culprit"),
    # a bisect's verdict introduced by its own line: "The result is as follows:" / "regression with
    # the following commit ..."
    (re.compile(r"\b(?:result|outcome|output)\s+(?:is|was)\s+(?:as\s+)?follows?\W*$|"
                r"\b(?:regression|breakage|problem|failure|slowdown)\s+(?:with|from|since|after)\s+the\s+following\s+"
                r"(?:commit|patch|change)\b[^.]{0,60}[.:]?\s*$", I), 4, "culprit"),
    (re.compile(r"\bculprit(?:\s+is)?" + FILL, I), 5, "culprit"),
    # "the patch that introduces this error is:"
    (re.compile(r"\b(?:patch|commit|change)\s+(?:that|which)\s+(?:introduc\w+|caus\w+|broke|breaks|triggers?)\b"
                r"[^.\n]{0,40}?\s(?:is|was)" + FILL, I), 5, "culprit"),
    (re.compile(r"\broot[-\s]?cause\b[^.]{0,90}?(?:change|commit|patch)?\s*(?:from\s+[^.]{0,40})?[\"'(:\s]*$", I), 4, "culprit"),
    (re.compile(r"\bBUILD (?:REGRESSION|SUCCESS)\s*$|\b(?:tested|testing) (?:head|tree|branch)\b[^.\n]{0,20}$"), -4, "head"),
    (re.compile(r"\bblames?" + FILL, I), 5, "culprit"),
    (re.compile(r"\b(?:originat\w+|comes?|came|stems?)\s+from" + FILL, I), 4, "culprit"),
    (re.compile(r"\bcame up with" + FILL, I), 4, "culprit"),
    (re.compile(r"\bcommit in question" + FILL, I), 3, "culprit"),
    (re.compile(r"\b(?:due to|because of)" + FILL, I), 3, "culprit"),
    (re.compile(r"\b(?:after|since|with)\s+(?:applying\s+|merging\s+)?(?:the\s+|this\s+)?(?:commit|patch)\s*[:\-]?\s*$",
                I), 2, "culprit"),
    (re.compile(r"\bstarting (?:at|with|from)" + FILL, I), 2, "culprit"),
    (re.compile(r"\b(?:explained|caused) by" + FILL, I), 3, "culprit"),
    (re.compile(r"\brevert(?:ing|ed|s)?(?:\s+of)?" + FILL, I), 1, "culprit"),
    (re.compile(r"\bFixes:\s*$"), 2, "culprit"),
    (re.compile(r"\b(?:fix(?:ed|es)?|resolved|addressed|cured)\s+(?:by|in|with|via)" + FILL, I), -6, "fix"),
    (re.compile(r"\b(?:upstream|mainline)(?:\s+kernel)?(?:\s+is)?\s+commit\s*$|cherry[- ]picked from commit\s*$|"
                r"\bin the upstream kernel is commit\s*$", I), -5, "upstream"),
    (re.compile(r"\b(?:merge[- ]base|merge commit|Merge (?:tag|branch|commit)|merged (?:at|in))" + FILL, I), -5,
     "merge-base"),
    (re.compile(r"\bparent(?: commit)?(?: is)?" + FILL + r"|\bthe commit (?:below|before) it\s*,?\s*$", I), -5,
     "parent"),
    (re.compile(r"(?:\bHEAD(?: commit)?:?|\btested (?:on|with)|\bsha1?|\bon top of|\b(?:current|latest) -?git)"
                + FILL, I), -4, "head"),
    (re.compile(r"\bstill (?:a |the )?(?:regress\w*|there|present|reproduc\w*|see\w*|bad|broken)\s+(?:on|in|at|with)"
                + FILL, I), -5, "head"),
    # a CI report's metadata ("Git Commit: <sha>" next to "Git Describe:") names the tested head
    (re.compile(r"\bgit[ _]commit\s*:\s*$", I), -4, "head"),
    (re.compile(r"#?regzbot\s+fix(?:ed)?(?:[ -]by)?\s*:?\s*$", I), -6, "fix"),
    # ids that are no commit of the tree: a format-patch header ("From <sha> Mon Sep 17 ..."), a
    # diff's index line, a build id
    (re.compile(r"(?m)^From\s+$|^index\s+$|\b[Bb]uild[- ]?[Ii][Dd]\b[^\n]{0,80}?:?\s*$"), -5, "other"),
    (re.compile(r"(?:#\s*)?good:\s*\[?\s*$|git bisect good\s*$", I), -6, "good"),
    (re.compile(r"(?:#\s*)?(?:bad|skip):\s*\[?\s*$|git bisect (?:bad|start|skip)\s*'?$", I), -3, "bad"),
    (re.compile(r"\b(?:hand[- ])?appl(?:ied|ying)" + FILL, I), -2, "other"),
    (re.compile(r"\bcommit message (?:for|of)\s*$|\bread (?:the )?commit" + FILL, I), -2, "other"),
]
CUL_AFTER: list[tuple[re.Pattern, float]] = [
    (re.compile(r"^\W*(?:\(HEAD\)\s*)?(?:is|as)\s+(?:the\s+)?first\s+bad\s+commit", I), 6),
    # a later verdict that moves the blame: "... so X is likely the real bad commit" (beats the bisect result)
    (re.compile(r"^[\s\"')]*(?:[^.\n\"]{0,60}[\"')]\s*)?(?:is|was)\s+(?:(?:most\s+)?likely|probably|actually|really|"
                r"indeed|clearly|definitely)?\s*the\s+(?:(?:real|actual|true)\s+(?:bad\s+commit|culprit|cause)|"
                r"(?:bad|guilty|offending|breaking)\s+(?:commit|patch|change))\b", I), 7),
    (re.compile(r"^[^.]{0,140}?\b(?:dropped|reduced|degraded|slowed down|halved|lowered|decreased)\s+(?:the\s+)?(?:\w+\s+){0,2}"
                r"(?:speed|performance|throughput|bandwidth|iops|score|rate)\b", I), 4),
    (re.compile(r"^(?:\s*\([^)]*\))?[^.\n]{0,60}?\b(?:caus(?:es|ed)|introduc(?:es|ed)|broke|breaks|triggers|triggered|"
                r"regressed|is the culprit|is to blame)\b[^.]{0,50}?\b(?:regression|problem|issue|breakage|failure|"
                r"slowdown|bug|crash|hang|drop|loss|this|it|boot)", I), 4),
]
IMPROVE_NEAR = re.compile(r"\b(?:improve\w*|speed\w* up|faster|better|greater|gain\w*|optimi[sz]\w*)\b", I)
FIX_AFTER = re.compile(r"\b(?:fix(?:es|ed)?|solves?|solved|resolves?|resolved|restores?|restored|cures?|recovers?|"
                       r"results? in (?:success|a pass)|succeeds|passes|brings? back|"
                       r"go(?:es)? away|works|boots|is fine|helps|returns?|back to normal)\b", I)
BACKREF = re.compile(r"\b(?:this|that|the above|said)\s+(?:patch|commit|change)\b[^.]{0,60}?\b(?:introduc\w+|caus\w+|"
                     r"is the culprit|breaks|broke|regress\w+)", I)
MARKER = re.compile(r"<-+\s*\**\s*(?:this patch|this commit|bad|culprit|first bad|regression)", I)
CUE_DANGLING = re.compile(r"(?:caused by|introduced by|first bad commit|bisect\w*[^.\n]{0,60}|blames?)"
                          r"[^.\n]{0,30}(?:this|following|below|the)\s+(?:patch|commit|change)\s*:?\s*$", I)


def _unit_text_before(ex: Extractor, m: Mention) -> str:
    u = ex.mt.units[m.unit] if m.unit >= 0 else None
    if u is None:
        return ex.clean[max(0, m.cstart - 90):m.cstart]
    before = ex.clean[u.cstart:m.cstart]
    if len(before.strip(" \t\n-[(#:*")) <= 8 and m.unit > 0:
        prev = ex.mt.units[m.unit - 1]
        if m.cstart - prev.cend < 400:
            before = prev.text + "\n" + before
    return before[-110:]


def _unit_text_after(ex: Extractor, m: Mention) -> str:
    u = ex.mt.units[m.unit] if m.unit >= 0 else None
    end = u.cend if u else m.cend + 150
    if u is not None and u.index + 1 < len(ex.mt.units):
        end = ex.mt.units[u.index + 1].cend
    return ex.clean[m.cend:min(end, m.cend + 200)]


def score_commits(ex: Extractor) -> list[CommitGroup]:
    groups: list[CommitGroup] = []
    mentions = sorted(ex.subject_commits, key=lambda x: 0) + sorted(ex.commits, key=lambda x: x.cstart)
    for m in sorted(mentions, key=lambda x: -len(x.value)):
        _group_for(groups, m.value)
    subj_regress = bool(P.REGRESSION_WORD.search(ex.subject) or P.FAIL_WORDS.search(ex.subject)
                        or re.search(r"\bbisect", ex.subject, I))
    for m in mentions:
        _score_mention(ex, _group_for(groups, m.value), m, subj_regress)
    _score_robot_subject(ex, groups)
    _score_back_references(ex, groups)
    return groups


def _group_for(groups: list[CommitGroup], h: str) -> CommitGroup:
    """The group of commit id ``h`` (one id a prefix of the other; the longer kept), added to
    ``groups`` if new."""
    for g in groups:
        if g.hex.startswith(h) or h.startswith(g.hex):
            if len(h) > len(g.hex):
                g.hex = h
            return g
    g = CommitGroup(h)
    groups.append(g)
    return g


def _score_mention(ex: Extractor, g: CommitGroup, m, subj_regress: bool) -> None:
    """One mention of the group's commit: its position and title, and the culprit score and
    role the cues around it give (kept if stronger than the group's)."""
    g.mentions.append(m)
    pos = m.cstart if not m.in_subject else -1
    g.first = min(g.first, pos if pos >= 0 else -1)
    if m.in_subject:
        before = ex.subject[:m.cstart][-100:]
        after = ex.subject[m.cend:m.cend + 150]
    else:
        before = _unit_text_before(ex, m)
        after = _unit_text_after(ex, m)
    title = title_after(ex.subject if m.in_subject else ex.clean, m.cend)
    if title and not g.subject:
        g.subject = title
    after_wo_title = after.replace(title, " ") if title else after
    best, role = _cue_table_score(g, before, after_wo_title)
    unit = ex.mt.units[m.unit] if m.unit >= 0 else None
    utext = unit.text if unit else (ex.subject if m.in_subject else "")
    if _REVERT.search(before + after_wo_title):
        rv = _REVERT_W.search(before + " " + after_wo_title)
        tail = (before + " " + after_wo_title)[rv.end():] if rv else ""
        if FIX_AFTER.search(tail):
            g.cues.add("revert-fixes")
            best = max(best, 3) if best >= 0 else best + 3
    if MARKER.search(utext):
        g.cues.add("marker")
        best = max(best, 4)
    ctx = (before[-80:] + " " + after_wo_title[:80])
    if IMPROVE_NEAR.search(ctx) and best < 5:
        g.cues.add("improvement-near")
        best -= 3
        role = role or "improvement"
    if m.in_subject and subj_regress and best >= 0:
        best = max(best, 2) + 1
    if best > 0 and ex.robot_subject and m.value.startswith(ex.robot_subject.group(1).lower()):
        best = max(best, 5)
    if best > g.score or (g.score <= 0 and best < g.score):
        g.score = best
        if best > 0:
            g.best_evidence = (m.cstart, m.cend) if not m.in_subject else None
    if role and g.role in ("other",):
        g.role = role


def _cue_table_score(g: CommitGroup, before: str, after_wo_title: str) -> tuple[float, str | None]:
    """The score and role the cue tables (CUL_BEFORE, CUL_AFTER) give a mention; the cues
    seen are added to ``g.cues``."""
    best = 0.0
    role = None
    before_low = fold(before)
    after_low = fold(after_wo_title)
    for i, (rx, w, r) in enumerate(CUL_BEFORE):
        if may_match(rx, before, before_low) and rx.search(before):
            g.cues.add(f"before{i}")
            if w > 0 and w > best:
                best = w
            elif w < 0:
                role = r
                best = min(best, 0) + w if best <= 0 else best + w
    for i, (rx, w) in enumerate(CUL_AFTER):
        if may_match(rx, after_wo_title, after_low) and rx.search(after_wo_title):
            g.cues.add(f"after{i}")
            best = max(best, w)
    return best, role


def _score_robot_subject(ex: Extractor, groups: list[CommitGroup]) -> None:
    """A robot subject names the commit under test: a regression's culprit, or an improvement."""
    if ex.robot_subject:
        h = ex.robot_subject.group(1).lower()
        g = _group_for(groups, h)
        if ex.robot_subject.group(4).lower() == "regression":
            g.score = max(g.score, 6)
        else:
            g.role = "improvement"
            g.score = -6


def _score_back_references(ex: Extractor, groups: list[CommitGroup]) -> None:
    """Back references ("this patch introduces ... regression") point at the last commit
    named up to 8 units before."""
    for u in ex.mt.units:
        if BACKREF.search(u.text) and not any(m.unit == u.index for m in ex.commits):
            prev = [m for m in ex.commits if m.cend <= u.cstart and u.index - m.unit <= 8]
            if prev:
                g = _group_for(groups, prev[-1].value)
                if g.score >= 0:
                    g.score = max(g.score, 3)


def choose_culprit(groups: list[CommitGroup]) -> CommitGroup | None:
    cands = [g for g in groups if g.score >= 3]
    if not cands:
        return None

    def rank(g: CommitGroup):
        tier = 3 if g.score >= 7 else 2 if g.score >= 6 else 1
        return (tier, -g.first)

    return max(cands, key=rank)


def culprit_written(ex: Extractor, g: CommitGroup) -> str:
    if ex.robot_subject and g.hex.startswith(ex.robot_subject.group(1).lower()):
        return ex.robot_subject.group(1)
    body = [m.text for m in g.mentions if not m.in_subject]
    if body:
        return max(body, key=len)
    return max((m.text for m in g.mentions), key=len)


# cue patterns with a \b(?=\w) check in front (scan.word_led: same matches, faster scans)
FIX_AFTER = scan.word_led(FIX_AFTER)
