"""The scheduling policy: rerun jobs asked for by a person (``regtriage rerun``), by chat, or by
the service on its own (:func:`auto_schedule`), and cancelled (:func:`cancel_job`).  The run
loop that carries the jobs out is bot.lab.scheduler; their SQL is storage/lab_jobs.py.

:func:`schedule_rerun` makes the plan of a record (bot.lab.plan), matches it to the inventory
(bot.lab.matching) and stores a job:

* plan declined (workload not vetted, builds unknown) -> job ``declined``, reason in the job
  and in the record's history;
* no machine fits -> ``waiting`` (``[lab] on_no_match = "wait"``: re-matched on every scheduler
  pass, runs once a fitting machine is configured) or ``declined`` (the default) -- with the
  reasons in the record's history; a rerun never runs on a misfit;
* otherwise ``queued`` on the best machine, and the record becomes ``rerun-scheduled``.

Runs not asked for on the command line are capped by the daily lab budget (bot.lab.budget).
"""

from __future__ import annotations

from typing import Any

import storage.lab_jobs as jobs
from bot.lab.budget import over_budget
from bot.lab.inventory import InventoryError, get_machine, lab_section, make_backend
from bot.lab.matching import NO_HARDWARE, match_record, requirements_from_record
from bot.lab.outcomes import ended, mark_scheduled, record_note
from bot.lab.plan import PlanError, make_plan
from bot.lab.settings import SchedulerError, pinned_backend_config, sched_settings
from bot.tracker.records import get_record
from bot.tracker.trust import TrustSettings, address_of
from extractors.patterns import ROBOT_MARK, ROBOT_SUBJECT
from storage.lab_jobs import Job
from storage.lab_schema import FINAL_STATES
from storage.store import utcnow


def schedule_rerun(store, config: Any, rid: int, *, machine: str | None = None, runs: int | None = None,
                   dry_run: bool = False, requested_by: str = "cli") -> Job | dict[str, Any]:
    """Plan, match and store a rerun job for record ``rid``; returns the job (or, with
    ``dry_run``, ``{"plan", "match"}`` without storing anything).  Raises SchedulerError for
    requests that cannot be made (unknown record, a job already active, unknown machine, or --
    for ``requested_by`` other than ``"cli"``, i.e. the service's own policy and chat -- a run
    that would take the last 24 hours' lab time past ``[lab] daily_budget_minutes``; that refusal
    is noted in the record's history)."""
    rec = get_record(store, rid)
    if rec is None:
        raise SchedulerError(f"no regression record {rid}")
    s = sched_settings(config)
    try:
        plan = make_plan(rec, config, runs=runs)
    except PlanError as exc:
        raise SchedulerError(str(exc)) from None
    info = plan.to_dict()
    info["previous_status"] = rec["status"]
    info["named_machine"] = machine
    info["requested_by"] = requested_by
    m = None
    if plan.ok:
        try:
            m = match_record(rec, config, recipe=plan.recipe, build_arch=plan.build_arch, machine=machine,
                             busy=jobs.busy_machines(store), load=jobs.machine_load(store))
        except InventoryError as exc:
            raise SchedulerError(str(exc)) from None
        info["match"] = m.to_dict()
    if dry_run:
        return {"plan": info, "match": info.get("match")}
    active = jobs.active_for_record(store, rid)
    if active is not None:
        raise SchedulerError(f"record #{rid} already has rerun job {active.id} ({active.state}); "
                             f"cancel it first (regtriage jobs cancel {active.id})")
    if not plan.ok:
        reason = "; ".join(plan.declined)
        job = jobs.create(store, {"regression_id": rid, "state": "declined", "plan": info, "message": reason,
                                  "finished_at": utcnow(), "max_attempts": plan.max_attempts},
                          f"declined: {reason}")
        record_note(store, rid, "declined", f"rerun declined (job {job.id}): {reason}")
        return job
    best = m.best
    if best is None:
        why = m.why_none()
        state = "waiting" if s["on_no_match"] == "wait" and machine is None else "declined"
        job = jobs.create(store, {"regression_id": rid, "state": state, "plan": info, "message": why,
                                  "max_attempts": plan.max_attempts,
                                  "finished_at": utcnow() if state == "declined" else None},
                          f"{state}: {why}")
        verb = "waits for a machine" if state == "waiting" else "declined"
        record_note(store, rid, state, f"rerun {verb} (job {job.id}): {why}")
        return job
    if requested_by != "cli":
        why = over_budget(store, config, float(plan.timeouts.total_s) / 60, requested_by)
        if why:
            record_note(store, rid, "over-budget", why)
            raise SchedulerError(why)
    mach = get_machine(config, best.machine)
    spec = plan.run_spec(label=f"regtriage-{rid}", machine=mach.name, config=config)
    stand_in = "; a stand-in: the report names no hardware" if m.stand_in else ""
    queued = f"queued for {mach.name} (score {best.score}{stand_in})"
    job = jobs.create(store, {"regression_id": rid, "state": "queued", "plan": info, "machine": mach.name,
                              "backend": mach.backend, "backend_config": pinned_backend_config(mach, config),
                              "spec": spec.to_dict(), "max_attempts": plan.max_attempts, "message": queued},
                      queued)
    mark_scheduled(store, job, best.score)
    return job


def auto_schedule(store, config: Any, rid: int) -> Job | None:
    """The service's policy hook (a record became ``triaged``): schedule a rerun when
    ``[lab] auto_rerun = true``, lab machines are configured, the record's kind is one of
    ``[lab] auto_rerun_kinds`` (default: performance only), it names a culprit or a good..bad
    range, and it never had a rerun job (a person can always ask again with ``regtriage
    rerun``).  None when nothing was done.  A plan or match that fails is recorded (declined
    or waiting, with the reasons) as for a rerun asked by hand."""
    lab = lab_section(config)
    if lab.get("auto_rerun") is not True or not lab.get("machines"):
        return None
    kinds = lab.get("auto_rerun_kinds", ["performance"])
    if not isinstance(kinds, list) or any(k not in ("performance", "functional") for k in kinds):
        raise SchedulerError('[lab] auto_rerun_kinds must be a list of "performance" / "functional"')
    rec = get_record(store, rid)
    if rec is None or rec.get("kind") not in kinds:
        return None
    if not rec.get("culprit_commit") and not (rec.get("good") and rec.get("bad")):
        return None  # nothing to compare: neither a culprit nor a good..bad range
    if jobs.record_has_jobs(store, rid):
        return None
    refusal = _untrusted_report(store, config, rec)
    if not refusal and not requirements_from_record(rec).names_hardware:
        refusal = f"rerun not started (auto): {NO_HARDWARE}; `regtriage rerun {rid} [--machine M]` runs it on one"
    if refusal:
        record_note(store, rid, "not-started", refusal)
        return None
    try:
        return schedule_rerun(store, config, rid, requested_by="auto")
    except SchedulerError:
        return None


def _untrusted_report(store, config: Any, rec) -> str | None:
    """Why the service must not rerun this record on its own, or None.  A report that reads like
    a test robot's counts as one only from ``[trust] robot_senders``; with ``[lab]
    auto_rerun_from = "trusted"`` the report must come from a robot or ``[trust] trusted_senders``."""
    mode = lab_section(config).get("auto_rerun_from", "anyone")
    if mode not in ("anyone", "trusted"):
        raise SchedulerError('[lab] auto_rerun_from must be "anyone" or "trusted"')
    trust = TrustSettings.from_config(config)
    msg = store.get_message(rec["report_message_id"]) if rec.get("report_message_id") else None
    sender = (msg or {}).get("from_addr") or ""
    robot = trust.robot(sender)
    if msg is not None and not robot:
        text = (msg.get("body") or "")[:3000]
        if ROBOT_SUBJECT.search(msg.get("subject") or "") or ROBOT_MARK.search(text):
            return (f"reads like a test robot's report but {address_of(sender) or 'its sender'} is not on "
                    "[trust] robot_senders: not rerun on its own")
    if mode == "trusted" and not (robot or trust.trusted(sender)):
        return (f"the report's sender {address_of(sender) or '(unknown)'} is neither on [trust] trusted_senders "
                "nor robot_senders ([lab] auto_rerun_from = \"trusted\"): not rerun on its own")
    return None


def cancel_job(store, config: Any, job_id: int) -> Job:
    """Cancel a job: at once if it is not running; a running one is cancelled through its
    backend (and the worker polling it sees ``cancel_requested``)."""
    job = jobs.get(store, job_id)
    if job is None:
        raise SchedulerError(f"no job {job_id}")
    if job.state in FINAL_STATES:
        raise SchedulerError(f"job {job_id} is already {job.state}")
    if jobs.cancel(store, job_id):
        ended(store, job_id, f"rerun job {job_id} cancelled")
        return jobs.get(store, job_id)
    job = jobs.get(store, job_id)
    if job.state == "running" and job.handle:
        try:
            make_backend(job.backend, job.backend_config).cancel(job.handle)
        except Exception as exc:  # noqa: BLE001 - the worker retries the cancel on its next poll
            jobs.add_event(store, job_id, None, f"backend cancel failed: {exc}")
            return jobs.get(store, job_id)
        if jobs.finish(store, job, "cancelled", "cancelled on request", expect_owner=False):
            ended(store, job_id, f"rerun job {job_id} cancelled")
    return jobs.get(store, job_id)
