"""What a rerun job writes on its record (actor ``regtriage-lab``, source ``lab``): the
``rerun-scheduled`` status and its note when the job is queued, the verdict (``confirmed`` /
``improved`` / ``not-reproduced`` / ``inconclusive``) with the change and its interval when it is
done, and -- when it ends without one (failed, cancelled) -- the status the record had before.
Shared by the scheduling requests (bot.lab.scheduling) and the run loop (bot.lab.scheduler)."""

from __future__ import annotations

import storage.lab_jobs as jobs
from bot.lab.stats import fmt_pct
from bot.tracker.records import add_note, get_record, set_status
from storage.lab_jobs import Job
from storage.lab_schema import FINAL_STATES

ACTOR = "regtriage-lab"


def record_note(store, rid: int | None, new: str, note: str) -> None:
    """A history row on the record (field ``rerun``) without changing its status."""
    if rid is None:
        return
    add_note(store, rid, "rerun", new, actor=ACTOR, note=note[:2000], source="lab")


def scheduled_note(job: Job, score: int) -> str:
    p = job.plan
    bt = p.get("builds_text") or {}
    return (f"rerun job {job.id} on {job.machine} (score {score}): {(p.get('recipe') or {}).get('name')} "
            f"{bt.get('good')} vs {bt.get('bad')}, {p.get('runs')} runs per build, {p.get('order')}, "
            f"{p.get('warmup')} warm-up")


def mark_scheduled(store, job: Job, score: int) -> None:
    """The record of a job just queued on a machine becomes ``rerun-scheduled``."""
    set_status(store, job.regression_id, "rerun-scheduled", ACTOR, scheduled_note(job, score), source="lab")


def restore_status(store, job: Job, note: str) -> None:
    """After a job ends without a verdict: the record leaves ``rerun-scheduled`` (back to what
    it was before), or just gets a history note."""
    rid = job.regression_id
    if rid is None:
        return
    rec = get_record(store, rid)
    if rec is None:
        return
    prev = (job.plan or {}).get("previous_status") or "triaged"
    if rec["status"] == "rerun-scheduled" and prev != "rerun-scheduled":
        set_status(store, rid, prev, ACTOR, note[:2000], source="lab")
    else:
        record_note(store, rid, job.state if job.state in FINAL_STATES else "ended", note)


def ended(store, job_id: int, note: str) -> None:
    """:func:`restore_status` of a job that has just ended, read back."""
    restore_status(store, jobs.get(store, job_id), note)


def verdict_note(job: Job) -> str:
    r = job.result or {}
    ci = r.get("ci") or [None, None]
    level = (1 - float(r.get("alpha") or 0.01)) * 100
    metric = (job.samples or {}).get("metric") or "metric"
    ci_text = f"{fmt_pct(ci[0])}..{fmt_pct(ci[1])}" if None not in ci else "n/a"
    machine = f"{job.machine}{' (emulated)' if r.get('emulated') else ''}"
    cv = f", CV {r['cv_percent']:.1f}%" if r.get("cv_percent") is not None else ""
    reason = f" ({r['reasons'][0]})" if r.get("reasons") else ""
    return (f"rerun job {job.id} on {machine}: {metric} {r.get('change_percent', 0):+.2f}% "
            f"({level:.0f}% CI {ci_text}), p={r.get('p_value', 1):.3g}, n={r.get('n_good')}/{r.get('n_bad')}{cv}: "
            f"{r.get('verdict')}{reason}")[:2000]


def apply_verdict(store, job: Job) -> bool:
    """Write a done job's verdict to its record (once)."""
    rid = job.regression_id
    if rid is not None and job.verdict:
        try:
            set_status(store, rid, job.verdict, ACTOR, verdict_note(job), source="lab")
        except KeyError:  # the record is gone
            pass
    return jobs.mark_record_updated(store, job.id)
