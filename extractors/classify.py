"""The classification stage: is the message a regression report, and of which kind.

``regression_score`` adds up the evidence (subject shape, culprit and range found, claims in
the author's own words, patch / fix / improvement shape) into a score with its reasons;
``kind_of`` weighs performance against functional words.  Functions over the rule stages'
per-message state ``ex`` (``rules.Extractor``).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from . import patterns as P
from . import scan
from .mailtext import MailText
from .scan import fold

if TYPE_CHECKING:
    from .culprits import CommitGroup
    from .rules import Extractor

I = re.I


def kind_of(ex: Extractor, has_measure: bool) -> str | None:
    if len(ex.clean) <= 20000:
        n_perf, n_fail = len(ex.mt.finditer(P.PERF_WORDS)), len(ex.mt.finditer(P.FAIL_WORDS))
    else:
        text = ex.clean[:20000]
        n_perf, n_fail = len(P.PERF_WORDS.findall(text)), len(P.FAIL_WORDS.findall(text))
    perf = n_perf + 2 * len(P.PERF_WORDS.findall(ex.subject))
    func = n_fail * 0.5 + 2 * len(P.FAIL_WORDS.findall(ex.subject))
    if has_measure:
        perf += 4
    if ex.robot_subject:
        perf += 10
    if perf == 0 and func == 0:
        return "functional"
    return "performance" if perf * 1.5 >= func else "functional"


def regression_score(ex: Extractor, culprit: CommitGroup | None, good, bad, measure_pct) -> tuple[float, list[str]]:
    s = 0.0
    why: list[str] = []
    subj = ex.subject
    mt = ex.mt
    own = own_text(mt)
    own_low = fold(own)

    def own_search(rx):
        return scan.search(rx, own, own_low)  # (tried only where a match can start)

    def add(w, reason):
        nonlocal s
        s += w
        why.append(f"{w:+.1f} {reason}")

    if ex.robot_subject:
        if ex.robot_subject.group(4).lower() == "regression":
            add(5, "robot regression subject")
        else:
            add(-8, "robot improvement subject")
    mb = mt.search(P.ROBOT_BODY)
    if mb and not ex.robot_subject:
        add(4 if mb.group(2).lower() == "regression" else -8, "robot body " + mb.group(2).lower())
    is_patch = bool(P.PATCH_SUBJECT.search(subj))
    is_reply = bool(P.REPLY_SUBJECT.search(subj))
    if is_patch:
        add(-2.0 if is_reply else -5.0, "patch subject")
    if P.PULL_SUBJECT.search(subj):
        add(-4, "pull request")
    subj_other = P.REGRESSION_OTHER_SENSE.search(subj)
    if P.REGRESSION_WORD.search(subj) and not subj_other and not ex.robot_subject:
        add(2.5, "regression in subject")
    elif subj_other and not P.REGRESSION_WORD.search(P.REGRESSION_OTHER_SENSE.sub(" ", subj)):
        # the subject is about regressions as a topic (testing, tracking, tooling): a discussion
        add(-1.5, "subject uses regression in another sense")
    if P.BISECT.search(subj):
        add(1.0, "bisect in subject")
    if P.FAIL_WORDS.search(subj) or _SUBJ_PERF.search(subj):
        add(1.5, "failure/perf words in subject")
    # body evidence
    if culprit is not None:
        add(3.0 if culprit.score >= 5 else 2.0, "culprit cue")
    if good is not None and bad is not None:
        add(1.5, "good/bad pair")
    elif bad is not None:
        add(0.5, "bad version")
    claims = len(mt.finditer(_CLAIMS))
    other = len(mt.finditer(P.REGRESSION_OTHER_SENSE))
    if own_search(_RETRACT):
        add(-4.0, "the message retracts the report (noise / false alarm)")
    if claims:
        add(min(3.0, 1.5 * claims), f"regression claims x{claims}")
    if own_search(_PATCH_BLAMED):
        add(1.5, "the patch under review is blamed")
    if measure_pct is not None and measure_pct < 0 and not ex.robot_subject:
        add(0.5, "measured drop")
    if other:
        add(-1.0 * min(2, other), "regression in another sense")
    # patch / fix / improvement shape (author's own text)
    if own_search(_OWN_DIFF):
        add(-2.5, "own text carries a diff")
    if own_search(_OWN_SOB) and (is_patch or own_search(_OWN_DASHES)):
        add(-1.5, "signed-off patch")
    if own_search(_OWN_FIXES):
        add(-2.5, "Fixes: tag in own text")
    if own_search(P.FIX_PATCH_WORDS):
        add(-1.5, "fix wording")
    if own_search(P.STABLE_REVIEW):
        add(-4, "stable review")
    imp = scan.find_all(P.IMPROVE_WORDS, own, own_low)
    if imp and not claims:
        add(-min(2.0, 0.75 * len(imp)), "improvement wording")
    if own_search(_NO_REGRESSIONS) and not claims:
        add(-2.0, "no regressions report")
    return s, why


_CLAIMS = re.compile(r"\b(?:(?:found|see|seeing|saw|noticed|observed|report\w*|suffering from|hit|have|has|is)"
                     r"\s+(?:a |an |the |this |some |what looks to be a |significant |measurable |"
                     r"performance |big |huge |serious |\w+ )?regression|regression (?:in|from|since|on|with|"
                     r"introduced|caused|is|was|starting)|(?:performance|perf|throughput|write|read|boot)\s+"
                     r"(?:drop|loss|decrease|degradation|regression)|\d+(?:\.\d+)?\s?%\s+(?:\w+\s+){0,2}"
                     r"(?:regression|drop|decrease|slower|degradation)|(?:\w+ )?\d\.\d+[\w.-]* regression|"
                     r"(?:this|that|it) (?:is|was) a regression|"
                     r"(?:no longer|doesn't|does not|fails to|failed to) (?:boot|work|build|compile|resume)|"
                     r"slower (?:than|with|on|since|after)|twice as long|(?:boot|build|compile) (?:failure|"
                     r"problem|error|regression)s?|caused (?:this|the|a) regression|"
                     r"(?:extremely|very|much|really) slow|slow(?:er)? compared|"
                     r"(?:this|your|the) (?:patch|commit|change|series) (?:causes|caused|introduces|introduced)"
                     r"\b[^.]{0,40}\b(?:regression|slowdown|drop|crash|failure|hang|breakage)|"
                     r"(?:speed|performance|throughput|bandwidth|latency|I/O|io)\s+regressions?|"
                     r"(?:bad|poor|terrible|degraded)\s+(?:I/O\s+|io\s+|disk\s+|network\s+|write\s+|read\s+)?performance|"
                     r"drop(?:ped|s)?\s+(?:\w+\s+){0,3}from\s+(?:~|about\s+)?\d|"
                     r"(?:took|takes|taking)\s+(?:\w+\s+){0,2}(?:times\s+)?longer|"
                     r"(?:unable|fails?|failed) to boot|(?:silently )?fails? (?:on|at|during) boot|"
                     r"(?:git[- ])?bisect\w*\s+(?:led|leads|pointed|points)\s+(?:me\s+|us\s+)?to|"
                     r"regress(?:es|ed)?\s+(?:consistently|badly|by\s+~?\d)|"
                     # a commit / patch / change "that introduces" or "caused" a named failure
                     r"(?:commit|patch|change)\s+(?:that|which)\s+(?:first\s+)?(?:introduc\w+|caus\w+|"
                     r"trigger\w+|brought)\s+(?:the\s+|these\s+|this\s+|a\s+)?(?:\w+\s+)?(?:lock-?ups?|"
                     r"hangs?|crash\w*|regression|slowdown|breakage|boot failures?|panics?|oops\w*))\b",
                     I)
_SUBJ_PERF = re.compile(r"\b(?:slow\w*|performance (?:loss|drop|problem|issue|decrease)s?|"
                        r"scalability (?:issue|problem)s?|takes \w+ as long|twice as (?:long|slow))\b", I)
_RETRACT = re.compile(r"\b(?:this|the|that) (?:report|result|bisect\w*|regression) (?:is|was) (?:a |just |simply )?"
                      r"(?:a )?(?:noise|bogus|false|wrong|invalid)\b|\bfalse (?:alarm|positive)s?\b|"
                      r"\bnot a (?:real |kernel )?regression\b", I)
_PATCH_BLAMED = re.compile(r"\b(?:this|your|the) (?:patch|commit|change|series) (?:causes|caused|introduces|introduced)"
                           r"\b[^.]{0,40}\b(?:regression|slowdown|drop|crash|failure|hang|breakage)", I)
_OWN_DIFF = re.compile(r"^(?:diff --git|--- a/|\+\+\+ b/|Index: )", re.M)
_OWN_SOB = re.compile(r"^Signed-off-by:", re.M)
_OWN_DASHES = re.compile(r"^---\s*$", re.M)
_OWN_FIXES = re.compile(r"^Fixes:\s*[0-9a-f]{7,}", re.M)
_NO_REGRESSIONS = re.compile(r"\bno (?:new )?regressions?\b|\bwithout (?:any )?regressions?\b", I)


def own_text(mt: MailText) -> str:
    """The author's own text (depth-0 units joined by newlines), built once per message."""
    r = mt.memo.get("own")
    if r is None:
        r = mt.memo["own"] = "\n".join(u.text for u in mt.units if u.depth == 0)
    return r


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


# cue patterns with a \b(?=\w) check in front (scan.word_led: same matches, faster scans)
_CLAIMS = scan.word_led(_CLAIMS)
CLAIMS = _CLAIMS  # the regression claim phrases (features.change_evidence: where they stand)
