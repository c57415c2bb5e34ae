"""Automatic bisection: the decisions, as pure functions on plain data (no I/O, no git, no clock).

The driver (:mod:`bot.lab.bisect_driver`) reads the range from git, builds and boots each step,
stores everything in the database, and asks this module what to do next.

**The range** is what ``git rev-list --parents good..bad`` lists: the commits that are ancestors
of ``bad`` (itself included) and not of ``good``, each with its parents inside the range.

**Git bisect semantics** (as ``git bisect`` does them):

* the *candidates* are the ancestors of the current bad commit (itself included) that are not
  ancestors of any good commit (:func:`candidates`);
* the next commit to test is the candidate (not the bad one, not skipped) whose ancestors among
  the candidates are closest to half of them (:func:`next_commit`: ``min(k, n - k)`` largest,
  ties to the oldest) -- with a linear history the middle, with merges what ``git rev-list
  --bisect`` picks;
* ``good`` adds the commit to the good set, ``bad`` makes it the new bad end, ``skip`` leaves it
  out of the choice;
* done when the bad commit is the only candidate (the first bad commit); when all other
  candidates are skipped the result is ambiguous: "the first bad commit could be any of ...".

**Judging a step** (:func:`judge_step`) with the lab's statistics (:func:`bot.lab.stats.decide`,
the same group-sequential design as reruns): the step runs alternating with the good end; the
repeated confidence interval of its change against the good end is compared with half the
change the ends showed: entirely on the good side -> ``good``, on the bad side -> ``bad``,
straddling it -> more runs while the design allows (``more``), else ``skip`` (inconclusive after
the allowed runs).  A build that fails is a ``skip`` too (:data:`SKIP`).

**Bounds** (:func:`next_action`): at most ``max_steps`` steps and ``max_lab_s`` seconds of lab
time; reaching one ends the bisection ``exhausted`` with the candidates left.

The state is a JSON-able dict (:func:`new_state`), stored by the driver after every change, so a
restarted worker continues from it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

GOOD, BAD, SKIP, MORE = "good", "bad", "skip", "more"
VERDICTS = (GOOD, BAD, SKIP)
# bisection states
QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
FINAL = (DONE, FAILED, CANCELLED)


class BisectError(ValueError):
    """The range or a transition is invalid; the message says why."""


# ---------------------------------------------------------------------------------- the range
def parse_rev_list(text: str) -> tuple[list[str], dict[str, list[str]]]:
    """``git rev-list --topo-order --parents good..bad`` output -> (commits oldest first,
    parents within the range)."""
    rows = [ln.split() for ln in text.splitlines() if ln.strip()]
    commits = [r[0] for r in rows][::-1]
    inside = set(commits)
    parents = {r[0]: [p for p in r[1:] if p in inside] for r in rows}
    return commits, parents


def new_state(good: str, bad: str, commits: list[str], parents: dict[str, list[str]],
              subjects: dict[str, str] | None = None) -> dict[str, Any]:
    """The state of a fresh bisection of ``good..bad`` (``commits``: the range oldest first,
    parents before children; ``bad`` must be in it, ``good`` must not)."""
    if bad not in parents or not commits or commits[-1] != bad and bad not in commits:
        raise BisectError("the bad commit is not in the range good..bad")
    if good in parents:
        raise BisectError("the good commit is inside the range (is it a descendant of bad?)")
    order = {c: i for i, c in enumerate(commits)}
    for c, ps in parents.items():
        if any(order.get(p, -1) >= order[c] for p in ps):
            raise BisectError("the range is not in topological order (parents first)")
    return {"good_end": good, "bad_end": bad, "commits": list(commits),
            "parents": {c: list(parents.get(c, [])) for c in commits}, "subjects": dict(subjects or {}),
            "goods": [], "bad": bad, "skipped": [], "steps": [], "lab_s": 0.0}


def _ancestor_sets(state: dict[str, Any]) -> tuple[dict[str, int], dict[str, int]]:
    """commit -> bit index, commit -> bitset of its ancestors in the range (itself included)."""
    idx = {c: i for i, c in enumerate(state["commits"])}
    anc: dict[str, int] = {}
    for c in state["commits"]:  # parents first
        bits = 1 << idx[c]
        for p in state["parents"].get(c, ()):
            bits |= anc[p]
        anc[c] = bits
    return idx, anc


def candidates(state: dict[str, Any]) -> list[str]:
    """Commits that may still be the first bad one, oldest first (the bad commit last)."""
    idx, anc = _ancestor_sets(state)
    cand = anc[state["bad"]]
    for g in state["goods"]:
        if g in anc:
            cand &= ~anc[g]
    return [c for c in state["commits"] if cand >> idx[c] & 1]


@dataclass
class Action:
    kind: str  # "test" | "done" | "ambiguous" | "exhausted"
    commit: str | None = None  # the commit to test, or the first bad commit (done)
    candidates: list[str] = field(default_factory=list)  # left (ambiguous / exhausted)
    reason: str = ""
    remaining: int = 0  # candidates left
    steps_left_estimate: int = 0  # ~log2(remaining)

    def to_dict(self) -> dict:
        return asdict(self)


def next_commit(state: dict[str, Any]) -> str | None:
    """The commit git bisect would test next (None: nothing left to test)."""
    cand = candidates(state)
    skipped = set(state["skipped"])
    if len(cand) <= 1:
        return None
    idx, anc = _ancestor_sets(state)
    mask = 0
    for c in cand:
        mask |= 1 << idx[c]
    n = len(cand)
    best, best_score = None, -1
    for c in cand:
        if c == state["bad"] or c in skipped:
            continue
        k = (anc[c] & mask).bit_count()
        score = min(k, n - k)
        if score > best_score:
            best, best_score = c, score
    return best


def next_action(state: dict[str, Any], *, max_steps: int, max_lab_s: float) -> Action:
    cand = candidates(state)
    n = len(cand)
    est = math.ceil(math.log2(n)) if n > 1 else 0
    if n == 1:
        return Action("done", cand[0], cand, f"{cand[0]} is the first bad commit", 1, 0)
    nxt = next_commit(state)
    if nxt is None:
        left = [c for c in cand if c in set(state["skipped"])] + [state["bad"]]
        return Action("ambiguous", None, left, f"only skipped commits are left: the first bad commit could be "
                      f"any of {len(left)}", n, 0)
    if len(state["steps"]) >= max_steps:
        return Action("exhausted", None, cand, f"stopped after {len(state['steps'])} steps ([lab.bisect] "
                      f"max_steps = {max_steps}) with {n} candidates left", n, est)
    if state.get("lab_s", 0.0) >= max_lab_s:
        return Action("exhausted", None, cand, f"stopped after {state['lab_s'] / 60:.0f} min of lab time "
                      f"([lab.bisect] max_lab_minutes = {max_lab_s / 60:g}) with {n} candidates left", n, est)
    return Action("test", nxt, [], f"{n} candidates left, about {est} steps", n, est)


def record_step(state: dict[str, Any], commit: str, verdict: str, *, lab_s: float = 0.0,
                info: dict | None = None) -> dict[str, Any]:
    """A new state with ``commit`` marked ``verdict`` (good / bad / skip)."""
    if verdict not in VERDICTS:
        raise BisectError(f"verdict must be one of {', '.join(VERDICTS)}")
    if commit not in state["parents"]:
        raise BisectError(f"{commit[:12]} is not in the range")
    if commit not in candidates(state):
        raise BisectError(f"{commit[:12]} is not a candidate any more")
    s = {**state, "goods": list(state["goods"]), "skipped": list(state["skipped"]), "steps": list(state["steps"])}
    if verdict == GOOD:
        s["goods"].append(commit)
    elif verdict == BAD:
        s["bad"] = commit
    else:
        s["skipped"].append(commit)
    s["steps"].append({"commit": commit, "verdict": verdict, **(info or {})})
    s["lab_s"] = float(state.get("lab_s", 0.0)) + float(lab_s)
    return s


# ---------------------------------------------------------------------------------- judging
@dataclass
class StepJudgement:
    verdict: str  # good / bad / skip / more
    change_percent: float | None  # the step's median vs the good end's (same run), in %
    next_runs: int  # with "more": runs to add
    reasons: list[str] = field(default_factory=list)
    vs_good: dict | None = None  # bot.lab.stats.Judgement of good end vs step

    def to_dict(self) -> dict:
        return asdict(self)


def _median(xs: Iterable[float]) -> float:
    v = sorted(float(x) for x in xs)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def _log_change(percent: float) -> float:
    return math.log1p(max(percent, -99.999) / 100)


def judge_step(good: list[float], step: list[float], design, *, ends_change_percent: float,
               higher_is_better: bool = True) -> StepJudgement:
    """Is the step like the good end or like the bad end?

    ``good``: the good end's samples measured in the same runs as the step's (alternating, so
    slow drift of the host hits both alike); ``ends_change_percent``: how much worse the bad end
    measured than the good one.  The step's change against the good end gets the lab's repeated
    confidence interval (:func:`bot.lab.stats.decide`, the design's current look); on the log
    scale the interval is compared with half the ends' change: entirely on the good side ->
    ``good``, entirely on the bad side -> ``bad``; straddling it -> ``more`` runs while the
    design has looks left, then ``skip`` (inconclusive)."""
    from bot.lab.stats import decide

    n = min(len(good), len(step))
    if n < 2:
        return StepJudgement(MORE, None, max(2, design.looks[0]) - n, ["fewer than 2 samples"])
    j = decide(good, step, design, higher_is_better=higher_is_better)
    mg, ms = _median(good), _median(step)
    change = (ms / mg - 1) * 100 if mg else None
    half = _log_change(ends_change_percent) / 2
    lo, hi = j.ci
    bounded = lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi)
    if not bounded:  # no interval at this look (a look that spends nothing, or one boot per side)
        lo, hi = -math.inf, math.inf
    l_lo = _log_change(lo) if math.isfinite(lo) else -math.inf
    l_hi = _log_change(hi) if math.isfinite(hi) else math.inf
    bad_side_low = half < 0  # the bad end lies below the good one (a throughput drop)
    like_good = bounded and (l_lo > half if bad_side_low else l_hi < half)
    like_bad = bounded and (l_hi < half if bad_side_low else l_lo > half)
    what = (f"{j.change_percent:+.2f}% vs the good end (interval {lo:+.2f}%..{hi:+.2f}%, p={j.p_value:.2g}); "
            f"half the ends' change is {math.expm1(half) * 100:+.1f}%")
    common = dict(change_percent=round(change, 3) if change is not None else None, vs_good=j.to_dict())
    if like_good:
        return StepJudgement(GOOD, next_runs=0, reasons=[f"like the good end: {what}"], **common)
    if like_bad:
        return StepJudgement(BAD, next_runs=0, reasons=[f"like the bad end: {what}"], **common)
    k = design.look_index(n)
    if k + 1 < len(design.looks):
        more = design.looks[k + 1] - n
        return StepJudgement(MORE, next_runs=more, reasons=[f"undecided: {what}; {more} more runs"], **common)
    return StepJudgement(SKIP, next_runs=0, reasons=[f"inconclusive after {n} runs: {what}"], **common)


# ---------------------------------------------------------------------------------- the log
def _subject(state: dict[str, Any], c: str) -> str:
    s = (state.get("subjects") or {}).get(c)
    return f"[{c}] {s}" if s else f"[{c}]"


def bisect_log(state: dict[str, Any], result: dict | None = None) -> str:
    """The bisection as ``git bisect log`` prints it, each verdict's comment with the median
    change against the good end (``# bad: [sha] subject (-35.1%)``)."""
    lines = ["git bisect start"]
    for label, c in (("bad", state["bad_end"]), ("good", state["good_end"])):
        lines.append(f"# {label}: {_subject(state, c)}")
        lines.append(f"git bisect {label} {c}")
    for st in state["steps"]:
        extra = []
        if st.get("change_percent") is not None:
            extra.append(f"{st['change_percent']:+.1f}% vs good")
        if st.get("reason") and st["verdict"] == SKIP:
            extra.append(str(st["reason"])[:120])
        tail = f" ({'; '.join(extra)})" if extra else ""
        lines.append(f"# {st['verdict']}: {_subject(state, st['commit'])}{tail}")
        lines.append(f"git bisect {st['verdict']} {st['commit']}")
    if result:
        if result.get("culprit"):
            lines.append(f"# first bad commit: {_subject(state, result['culprit'])}")
        elif result.get("candidates"):
            lines.append("# only skipped commits left to test")
            for c in result["candidates"]:
                lines.append(f"# possible first bad commit: {_subject(state, c)}")
    return "\n".join(lines)


# -- views of a stored bisection (storage.bisections.Bisection) -------------------------------
def summary(b) -> dict[str, Any]:
    """JSON-able view for `regtriage show`, the web page and `regtriage bisect --json`."""
    st = b.bisect or {}
    out = {"id": b.id, "state": b.state, "machine": b.machine, "range": f"{b.good_ref}..{b.bad_ref}",
           "tree": b.tree, "message": b.message, "steps": len(st.get("steps") or []),
           "commits": len(st.get("commits") or []), "result": b.result,
           "created_at": b.created_at.isoformat() if b.created_at else None,
           "finished_at": b.finished_at.isoformat() if b.finished_at else None}
    if b.active and st:
        try:
            out["candidates_left"] = len(candidates(st))
        except (KeyError, BisectError):
            pass
    out["log"] = (b.result or {}).get("log") or (bisect_log(st) if st else "")
    return out


def report_text(b) -> str:
    """The notification / reply-draft text: the result and the log as ``git bisect log``."""
    s = summary(b)
    r = b.result or {}
    if r.get("culprit"):
        head = (f"The lab bisected {s['range']} on {b.machine} ({s['steps']} steps, "
                f"{r.get('lab_minutes', 0)} min of lab time) with the report's workload "
                f"({(b.plan.get('recipe') or {}).get('name')}); first bad commit:\n\n"
                f"  {r['culprit'][:12]} (\"{r.get('subject') or ''}\")")
    else:
        head = f"Bisection of {s['range']} on {b.machine}: {b.state}: {r.get('reason') or b.message or ''}"
    ends = b.ends or {}
    if ends:
        head += (f"\n\nThe ends differ by {ends.get('change_percent', 0):+.1f}% ({ends.get('metric')}); "
                 "each step's median change against the good end is in the log:")
    return f"{head}\n\n" + "\n".join("    " + ln for ln in s["log"].splitlines()) + "\n"
