"""The lab scheduler: durable rerun jobs in the database, run on matched machines.

Scheduling (:func:`schedule_rerun`) makes the plan of a record (bot.lab.plan), matches it to the
inventory (bot.lab.matching) and stores a job:

* plan declined (workload not vetted, builds unknown) -> job ``declined``, reason in the job
  and in the record's history;
* no machine fits -> ``waiting`` (``[lab] on_no_match = "wait"``: re-matched on every scheduler
  pass, runs once a fitting machine is configured) or ``declined`` (the default) -- with the
  reasons in the record's history; a rerun never runs on a misfit;
* otherwise ``queued`` on the best machine, and the record becomes ``rerun-scheduled``.

The scheduler loop (:class:`Scheduler`, ``regtriage lab work``) does, on every pass:

1. *reap*: machine leases of finished jobs are released; jobs left in ``submitting`` by a
   worker whose lease expired go back to the queue (the attempt counts);
2. *waiting* jobs are matched again;
3. *running* jobs are polled through their backend handle (the row stores the backend name,
   its configuration and the handle, so a restarted or different worker resumes polling and
   never resubmits): a finished run's samples are added to the job's, judged
   at this look of the plan's group-sequential design (bot.lab.stats.decide, the same function
   ``regtriage lab power`` simulates); when it says continue, ``next_runs`` more runs per build
   are submitted (a new backend run on the same machine); when it stops (a boundary crossed,
   not-reproduced, futility, or ``max_runs``) the verdict is stored: job ``done``, record status
   ``confirmed`` / ``improved`` / ``not-reproduced`` / ``inconclusive`` via
   ``set_status`` (actor ``regtriage-lab``, note with the change and its interval).  A failed
   run is retried with exponential backoff (``retry_backoff_s`` x 2^(attempt-1), at most
   ``retry_backoff_max_s``) until ``max_attempts`` submissions, then ``failed``; a run past its
   deadline (``job_timeout_s``, default the run's total timeout + 300 s) is cancelled and
   ``failed``;
4. *queued* jobs whose time has come are claimed and submitted to free machines.  Claiming
   takes the job (PostgreSQL: ``SELECT ... FOR UPDATE SKIP LOCKED``; SQLite: a conditional
   ``UPDATE ... WHERE state = 'queued'`` whose row count says who won) and the machine's lease
   (a row in ``lab_machine_leases``, primary key = machine, inserted with ``ON CONFLICT DO
   NOTHING``) in one transaction, so two workers never take the same job and a machine runs one
   job at a time.

Every state change is a conditional UPDATE on the state the worker saw, so a worker that lost
a race (a cancel, another worker after a lease expiry) changes nothing.  Worker leases
(``owner``/``lease_until``, ``[lab] lease_s``, default 60 s) are renewed on every poll.

Job states: waiting, queued, submitting, running, done, failed, cancelled, declined.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

from sqlalchemy import delete, exists, insert, or_, select, update
from sqlalchemy.exc import OperationalError

import storage.lab_schema as ls
from bot.lab.backends import DONE, FAILED, LabError, RunSpec
from bot.lab.inventory import InventoryError, get_machine, lab_section, make_backend
from bot.lab.plan import PlanError, RerunPlan, make_plan
from bot.lab.reruns import job_dict
from bot.lab.settings import (SCHED_DEFAULTS, SchedulerError, default_owner,  # noqa: F401  (re-exported)
                              pinned_backend_config, sched_settings)
from storage.lab_jobs import busy_machines, machine_load  # noqa: F401  (re-exported)
from storage.lab_schema import ACTIVE_STATES, FINAL_STATES

ACTOR = "regtriage-lab"
J, L, E = ls.lab_jobs, ls.lab_machine_leases, ls.lab_job_events


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _aware(dt: datetime | None) -> datetime | None:
    if dt is not None and dt.tzinfo is None:
        return dt.replace(tzinfo=timezone.utc)
    return dt


def _owner_gone(owner: str | None) -> bool:
    """True for a worker id of this host (``host:pid:token``) whose process no longer exists."""
    parts = (owner or "").rsplit(":", 2)
    if len(parts) != 3 or parts[0] != socket.gethostname()[:60] or not parts[1].isdigit():
        return False
    pid = int(parts[1])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


# ---------------------------------------------------------------------------------- reading
def get_job(store, job_id: int, *, events: bool = False) -> dict[str, Any] | None:
    with store.engine.connect() as conn:
        row = conn.execute(select(J).where(J.c.id == job_id)).first()
        if row is None:
            return None
        job = job_dict(row)
        if events:
            job["events"] = [{**dict(e._mapping), "at": _aware(e.at)} for e in
                             conn.execute(select(E).where(E.c.job_id == job_id).order_by(E.c.id))]
    return job


def list_jobs(store, *, states: tuple[str, ...] | None = None, regression_id: int | None = None,
              limit: int = 100) -> list[dict[str, Any]]:
    q = select(J)
    if states:
        q = q.where(J.c.state.in_(states))
    if regression_id is not None:
        q = q.where(J.c.regression_id == regression_id)
    with store.engine.connect() as conn:
        return [job_dict(r) for r in conn.execute(q.order_by(J.c.id.desc()).limit(limit))]


def _event(conn, job_id: int, state: str | None, message: str | None, owner: str | None = None,
           at: datetime | None = None) -> None:
    conn.execute(insert(E).values(job_id=job_id, at=at or utcnow(), state=state,
                                  message=(message or "")[:4000] or None, owner=owner))


# ---------------------------------------------------------------------------------- the record
def _record_note(store, rid: int | None, new: str, note: str) -> None:
    """A history row on the record (field ``rerun``) without changing its status."""
    if rid is None:
        return
    from bot.tracker.records import add_note

    add_note(store, rid, "rerun", new, actor=ACTOR, note=note[:2000], source="lab")


def _restore_status(store, job: dict, note: str) -> None:
    """After a job ends without a verdict: the record leaves ``rerun-scheduled`` (back to what
    it was before), or just gets a history note."""
    rid = job.get("regression_id")
    if rid is None:
        return
    from bot.tracker.records import get_record, set_status

    rec = get_record(store, rid)
    if rec is None:
        return
    prev = (job.get("plan") or {}).get("previous_status") or "triaged"
    if rec["status"] == "rerun-scheduled" and prev != "rerun-scheduled":
        set_status(store, rid, prev, ACTOR, note[:2000], source="lab")
    else:
        _record_note(store, rid, job["state"] if job.get("state") in FINAL_STATES else "ended", note)


def verdict_note(job: dict) -> str:
    r = job.get("result") or {}
    ci = r.get("ci") or [None, None]
    level = (1 - float(r.get("alpha") or 0.01)) * 100
    metric = (job.get("samples") or {}).get("metric") or "metric"
    ci_text = f"{ci[0]:+.2f}%..{ci[1]:+.2f}%" if None not in ci else "n/a"
    machine = f"{job.get('machine')}{' (emulated)' if r.get('emulated') else ''}"
    cv = f", CV {r['cv_percent']:.1f}%" if r.get("cv_percent") is not None else ""
    reason = f" ({r['reasons'][0]})" if r.get("reasons") else ""
    return (f"rerun job {job['id']} on {machine}: {metric} {r.get('change_percent', 0):+.2f}% "
            f"({level:.0f}% CI {ci_text}), p={r.get('p_value', 1):.3g}, n={r.get('n_good')}/{r.get('n_bad')}{cv}: "
            f"{r.get('verdict')}{reason}")[:2000]


def _apply_verdict(store, job: dict) -> bool:
    """Write a done job's verdict to its record (once)."""
    rid = job.get("regression_id")
    if rid is not None and job.get("verdict"):
        from bot.tracker.records import set_status

        try:
            set_status(store, rid, job["verdict"], ACTOR, verdict_note(job), source="lab")
        except KeyError:  # the record is gone
            pass
    with store.engine.begin() as conn:
        r = conn.execute(update(J).where(J.c.id == job["id"], J.c.record_updated.is_(False))
                         .values(record_updated=True))
    return r.rowcount == 1


# ---------------------------------------------------------------------------------- scheduling
def _active_job(store, rid: int) -> dict | None:
    with store.engine.connect() as conn:
        row = conn.execute(select(J).where(J.c.regression_id == rid, J.c.state.in_(ACTIVE_STATES))
                           .order_by(J.c.id).limit(1)).first()
    return job_dict(row) if row else None


def _insert_job(store, values: dict, event: str) -> dict:
    now = utcnow()
    with store.engine.begin() as conn:
        jid = conn.execute(insert(J).values(created_at=now, updated_at=now, attempts=0, rounds=0,
                                            cancel_requested=False, record_updated=False, **values)
                           ).inserted_primary_key[0]
        _event(conn, jid, values["state"], event, at=now)
    return get_job(store, jid)


DEFAULT_DAILY_BUDGET_MINUTES = 480


def daily_budget_minutes(config: Any) -> float:
    """``[lab] daily_budget_minutes``: lab time the bot may start on its own (auto reruns) or on
    chat requests in any 24 hours, default 480; 0: none."""
    v = lab_section(config).get("daily_budget_minutes", DEFAULT_DAILY_BUDGET_MINUTES)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 7 * 24 * 60:
        raise SchedulerError("[lab] daily_budget_minutes must be a number of minutes, 0..10080")
    return float(v)


def job_minutes(job: dict[str, Any], now: datetime) -> float:
    """Lab time a job costs: what it ran when it has finished, its whole time-out while it is
    queued or running (a reservation), nothing when it never ran."""
    started, finished = _aware(job.get("started_at")), _aware(job.get("finished_at"))
    if job.get("state") in ("declined", "waiting") or (finished is not None and started is None):
        return 0.0
    if started is not None and finished is not None:
        return max(0.0, (finished - started).total_seconds() / 60)
    total = ((job.get("plan") or {}).get("timeouts") or {}).get("total_s") or 7200
    if started is not None:  # running: what is left of its time-out counts, and what it ran
        return max(float(total) / 60, (now - started).total_seconds() / 60)
    return float(total) / 60


def budget_used_minutes(store, now: datetime | None = None) -> float:
    """Lab time of every job created in the last 24 hours (whoever asked for it)."""
    now = now or utcnow()
    with store.engine.connect() as conn:
        rows = conn.execute(select(J.c.state, J.c.plan, J.c.started_at, J.c.finished_at)
                            .where(J.c.created_at > now - timedelta(hours=24))).mappings().all()
    return sum(job_minutes(dict(r), now) for r in rows)


def schedule_rerun(store, config: Any, rid: int, *, machine: str | None = None, runs: int | None = None,
                   dry_run: bool = False, requested_by: str = "cli") -> dict[str, Any]:
    """Plan, match and store a rerun job for record ``rid``; returns the job (or, with
    ``dry_run``, ``{"plan", "match"}`` without storing anything).  Raises SchedulerError for
    requests that cannot be made (unknown record, a job already active, unknown machine, or --
    for ``requested_by`` other than ``"cli"``, i.e. the service's own policy and chat -- a run
    that would take the last 24 hours' lab time past ``[lab] daily_budget_minutes``; that refusal
    is noted in the record's history)."""
    from bot.lab.matching import match_record
    from bot.tracker.records import get_record, set_status

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
                             busy=busy_machines(store), load=machine_load(store))
        except InventoryError as exc:
            raise SchedulerError(str(exc)) from None
        info["match"] = m.to_dict()
    if dry_run:
        return {"plan": info, "match": info.get("match")}
    active = _active_job(store, rid)
    if active is not None:
        raise SchedulerError(f"record #{rid} already has rerun job {active['id']} ({active['state']}); "
                             f"cancel it first (regtriage jobs cancel {active['id']})")
    if not plan.ok:
        reason = "; ".join(plan.declined)
        job = _insert_job(store, {"regression_id": rid, "state": "declined", "plan": info, "message": reason,
                                  "finished_at": utcnow(), "max_attempts": plan.max_attempts},
                          f"declined: {reason}")
        _record_note(store, rid, "declined", f"rerun declined (job {job['id']}): {reason}")
        return job
    best = m.best
    if best is None:
        why = m.why_none()
        state = "waiting" if s["on_no_match"] == "wait" and machine is None else "declined"
        job = _insert_job(store, {"regression_id": rid, "state": state, "plan": info, "message": why,
                                  "max_attempts": plan.max_attempts,
                                  "finished_at": utcnow() if state == "declined" else None},
                          f"{state}: {why}")
        verb = "waits for a machine" if state == "waiting" else "declined"
        _record_note(store, rid, state, f"rerun {verb} (job {job['id']}): {why}")
        return job
    if requested_by != "cli":
        budget, used = daily_budget_minutes(config), budget_used_minutes(store)
        need = float(plan.timeouts.total_s) / 60
        if used + need > budget:
            why = (f"rerun not started ({requested_by}): the daily lab budget is spent ({used:.0f} of "
                   f"[lab] daily_budget_minutes = {budget:g} used in the last 24 h; this run may take "
                   f"{need:.0f} min)")
            _record_note(store, rid, "over-budget", why)
            raise SchedulerError(why)
    mach = get_machine(config, best.machine)
    spec = plan.run_spec(label=f"regtriage-{rid}", machine=mach.name, config=config)
    queued = f"queued for {mach.name} (score {best.score}{'; a stand-in: the report names no hardware' if m.stand_in else ''})"
    job = _insert_job(store, {"regression_id": rid, "state": "queued", "plan": info, "machine": mach.name,
                              "backend": mach.backend, "backend_config": pinned_backend_config(mach, config),
                              "spec": spec.to_dict(), "max_attempts": plan.max_attempts, "message": queued},
                      queued)
    set_status(store, rid, "rerun-scheduled", ACTOR, _scheduled_note(job, best.score), source="lab")
    return job



def auto_schedule(store, config: Any, rid: int) -> dict[str, Any] | None:
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
    from bot.tracker.records import get_record

    rec = get_record(store, rid)
    if rec is None or rec.get("kind") not in kinds:
        return None
    if not rec.get("culprit_commit") and not (rec.get("good") and rec.get("bad")):
        return None  # nothing to compare: neither a culprit nor a good..bad range
    with store.engine.connect() as conn:
        if conn.execute(select(J.c.id).where(J.c.regression_id == rid).limit(1)).first() is not None:
            return None
    from bot.lab.matching import NO_HARDWARE, requirements_from_record

    refusal = _untrusted_report(store, config, rec)
    if not refusal and not requirements_from_record(rec).names_hardware:
        refusal = f"rerun not started (auto): {NO_HARDWARE}; `regtriage rerun {rid} [--machine M]` runs it on one"
    if refusal:
        _record_note(store, rid, "not-started", refusal)
        return None
    try:
        return schedule_rerun(store, config, rid, requested_by="auto")
    except SchedulerError:
        return None


def _untrusted_report(store, config: Any, rec: dict[str, Any]) -> str | None:
    """Why the service must not rerun this record on its own, or None.  A report that reads like
    a test robot's counts as one only from ``[trust] robot_senders``; with ``[lab]
    auto_rerun_from = "trusted"`` the report must come from a robot or ``[trust] trusted_senders``."""
    from extractors.patterns import ROBOT_MARK, ROBOT_SUBJECT
    from bot.tracker.trust import TrustSettings, address_of

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


def _scheduled_note(job: dict, score: int) -> str:
    p = job["plan"]
    bt = p.get("builds_text") or {}
    return (f"rerun job {job['id']} on {job['machine']} (score {score}): {(p.get('recipe') or {}).get('name')} "
            f"{bt.get('good')} vs {bt.get('bad')}, {p.get('runs')} runs per build, {p.get('order')}, "
            f"{p.get('warmup')} warm-up")


def cancel_job(store, config: Any, job_id: int) -> dict[str, Any]:
    """Cancel a job: at once if it is not running; a running one is cancelled through its
    backend (and the worker polling it sees ``cancel_requested``)."""
    job = get_job(store, job_id)
    if job is None:
        raise SchedulerError(f"no job {job_id}")
    if job["state"] in FINAL_STATES:
        raise SchedulerError(f"job {job_id} is already {job['state']}")
    now = utcnow()
    with store.engine.begin() as conn:
        r = conn.execute(update(J).where(J.c.id == job_id, J.c.state.in_(("waiting", "queued")))
                         .values(state="cancelled", finished_at=now, updated_at=now, owner=None,
                                 message="cancelled on request"))
        if r.rowcount:
            conn.execute(delete(L).where(L.c.job_id == job_id))
            _event(conn, job_id, "cancelled", "cancelled on request", at=now)
        else:
            conn.execute(update(J).where(J.c.id == job_id).values(cancel_requested=True, updated_at=now))
            _event(conn, job_id, None, "cancel requested", at=now)
    if r.rowcount:
        job = get_job(store, job_id)
        _restore_status(store, job, f"rerun job {job_id} cancelled")
        return job
    job = get_job(store, job_id)
    if job["state"] == "running" and job.get("handle"):
        try:
            make_backend(job["backend"], job.get("backend_config")).cancel(job["handle"])
        except Exception as exc:  # noqa: BLE001 - the worker retries the cancel on its next poll
            with store.engine.begin() as conn:
                _event(conn, job_id, None, f"backend cancel failed: {exc}")
            return get_job(store, job_id)
        done = _finish(store, job, "cancelled", "cancelled on request", expect_owner=False)
        if done:
            _restore_status(store, get_job(store, job_id), f"rerun job {job_id} cancelled")
    return get_job(store, job_id)


def _finish(store, job: dict, state: str, message: str, *, owner: str | None = None, expect_owner: bool = True,
            values: dict | None = None) -> bool:
    """running/submitting -> a final state, if nobody changed the job meanwhile; releases the
    machine.  Returns whether this call made the change."""
    now = utcnow()
    cond = [J.c.id == job["id"], J.c.state == job["state"]]
    if job.get("handle") is not None:
        cond.append(J.c.handle == job["handle"])
    if expect_owner and owner is not None:
        cond.append(J.c.owner == owner)
    with store.engine.begin() as conn:
        r = conn.execute(update(J).where(*cond).values(state=state, finished_at=now, updated_at=now, owner=None,
                                                       lease_until=None, message=message[:4000], **(values or {})))
        if r.rowcount != 1:
            return False
        conn.execute(delete(L).where(L.c.job_id == job["id"]))
        _event(conn, job["id"], state, message, owner, at=now)
    return True


# ---------------------------------------------------------------------------------- the loop
class Scheduler:
    """One worker.  Several may run at once (processes or threads, same database)."""

    def __init__(self, store, config: Any, *, owner: str | None = None, clock: Callable[[], datetime] | None = None,
                 sleep: Callable[[float], None] = time.sleep, log: Callable[[str], None] | None = None):
        self.store = store
        self.config = config
        self.settings = sched_settings(config)
        self.owner = owner or default_owner()
        self.clock = clock or utcnow
        self.sleep = sleep
        self.log = log or (lambda msg: None)
        self._backends: dict[str, Any] = {}
        self._last_wait_check: float | None = None
        self.pg = store.engine.dialect.name == "postgresql"

    # -- helpers ------------------------------------------------------------------------------
    def now(self) -> datetime:
        return _aware(self.clock())

    def lease_until(self) -> datetime:
        return self.now() + timedelta(seconds=self.settings["lease_s"])

    def backend_of(self, job: dict):
        key = json.dumps([job["backend"], job.get("backend_config")], sort_keys=True, default=str)
        b = self._backends.get(key)
        if b is None:
            b = make_backend(job["backend"], job.get("backend_config"))
            self._backends[key] = b
        return b

    def backoff(self, attempts: int) -> float:
        return min(self.settings["retry_backoff_max_s"], self.settings["retry_backoff_s"] * 2 ** max(0, attempts - 1))

    def deadline(self, spec: dict) -> datetime:
        jt = self.settings["job_timeout_s"]
        if jt is None:
            jt = float((spec.get("timeouts") or {}).get("total_s", 7200)) + self.settings["deadline_grace_s"]
        return self.now() + timedelta(seconds=jt)

    def _event(self, job_id: int, state: str | None, message: str) -> None:
        with self.store.engine.begin() as conn:
            _event(conn, job_id, state, message, self.owner, at=self.now())

    # -- one pass -------------------------------------------------------------------------------
    def tick(self) -> dict[str, int]:
        stats: Counter = Counter()
        self.reap(stats)
        self.recheck_waiting(stats)
        self.poll_running(stats)
        while True:
            job = self.claim_next()
            if job is None:
                break
            stats["claimed"] += 1
            self.submit(job, stats)
        self.apply_verdicts(stats)
        self.bisections(stats)
        return dict(stats)

    def bisections(self, stats: Counter) -> None:
        """One action on each active bisection (bot.lab.bisect_driver; a build blocks the pass)."""
        from bot.lab.bisect_driver import Driver

        if getattr(self, "_bisect", None) is None:
            self._bisect = Driver(self.store, self.config, owner=self.owner, log=self.log)
        for what, n in self._bisect.tick().items():
            stats[f"bisect_{what}"] += n

    def reap(self, stats: Counter) -> None:
        now = self.now()
        with self.store.engine.begin() as conn:
            stale = select(J.c.id).where(J.c.state.not_in(("submitting", "running")))
            r = conn.execute(delete(L).where(L.c.job_id.in_(stale)))
            stats["leases_released"] += r.rowcount or 0
        with self.store.engine.connect() as conn:
            lost = [job_dict(x) for x in conn.execute(select(J).where(J.c.state == "submitting", J.c.lease_until < now))]
        for job in lost:
            self.failure(job, f"worker {job.get('owner')} stopped while submitting", stats, expect_owner=False)

    def recheck_waiting(self, stats: Counter) -> None:
        t = time.monotonic()
        if self._last_wait_check is not None and t - self._last_wait_check < self.settings["wait_recheck_s"]:
            return
        self._last_wait_check = t
        with self.store.engine.connect() as conn:
            waiting = [job_dict(x) for x in conn.execute(select(J).where(J.c.state == "waiting").order_by(J.c.id))]
        if not waiting:
            return
        from bot.lab.matching import match_record
        from bot.tracker.records import get_record, set_status

        for job in waiting:
            rec = get_record(self.store, job["regression_id"]) if job.get("regression_id") else None
            if rec is None:
                continue
            try:
                plan = RerunPlan.from_dict(job["plan"], self.config)
                m = match_record(rec, self.config, recipe=plan.recipe, build_arch=plan.build_arch,
                                 busy=busy_machines(self.store), load=machine_load(self.store))
            except (PlanError, InventoryError) as exc:
                self._event(job["id"], None, f"re-match failed: {exc}")
                continue
            if m.best is None:
                continue
            mach = get_machine(self.config, m.best.machine)
            info = dict(job["plan"])
            info["match"] = m.to_dict()
            now = self.now()
            with self.store.engine.begin() as conn:
                r = conn.execute(update(J).where(J.c.id == job["id"], J.c.state == "waiting").values(
                    state="queued", machine=mach.name, backend=mach.backend,
                    backend_config=pinned_backend_config(mach, self.config), plan=info,
                    spec=plan.run_spec(label=f"regtriage-{job['regression_id']}", machine=mach.name,
                                      config=self.config).to_dict(), updated_at=now,
                    message=f"queued for {mach.name} (score {m.best.score})"))
                if r.rowcount:
                    _event(conn, job["id"], "queued", f"a machine fits now: {mach.name} (score {m.best.score})",
                           self.owner, at=now)
            if r.rowcount:
                stats["unwaited"] += 1
                job = get_job(self.store, job["id"])
                set_status(self.store, job["regression_id"], "rerun-scheduled", ACTOR,
                           _scheduled_note(job, m.best.score), source="lab")

    # -- claiming -------------------------------------------------------------------------------
    def _take_lease(self, conn, machine: str, job_id: int) -> bool:
        values = {"machine": machine, "job_id": job_id, "owner": self.owner, "acquired_at": self.now()}
        if self.pg:
            from sqlalchemy.dialects.postgresql import insert as dialect_insert
        else:
            from sqlalchemy.dialects.sqlite import insert as dialect_insert
        stmt = dialect_insert(L).values(**values).on_conflict_do_nothing(index_elements=["machine"])
        return conn.execute(stmt.returning(L.c.machine)).first() is not None  # (rowcount is -1 on psycopg)

    def _queued_query(self, now: datetime):
        busy = exists().where(L.c.machine == J.c.machine)
        return (select(J.c.id, J.c.machine)
                .where(J.c.state == "queued", J.c.machine.is_not(None),
                       or_(J.c.next_attempt_at.is_(None), J.c.next_attempt_at <= now), ~busy)
                .order_by(J.c.next_attempt_at.is_not(None), J.c.id))

    def _claim_values(self, now: datetime) -> dict:
        return {"state": "submitting", "owner": self.owner, "lease_until": self.lease_until(), "updated_at": now,
                "attempts": J.c.attempts + 1}

    def claim_next(self) -> dict | None:
        """Take the next queued job whose machine is free: the job and the machine's lease in
        one transaction.  None when there is nothing to take."""
        for _ in range(50):
            now = self.now()
            if self.pg:
                with self.store.engine.begin() as conn:
                    row = conn.execute(self._queued_query(now).limit(1).with_for_update(skip_locked=True, of=J)).first()
                    if row is None:
                        return None
                    jid, machine = row
                    if self._take_lease(conn, machine, jid):
                        conn.execute(update(J).where(J.c.id == jid).values(**self._claim_values(now)))
                        _event(conn, jid, "submitting", f"claimed; machine {machine} leased", self.owner, at=now)
                        claimed = jid
                    else:
                        claimed = None  # another worker leased the machine for another job meanwhile
                if claimed is not None:
                    return get_job(self.store, claimed)
                continue
            # SQLite: no row locks; the conditional UPDATE takes the database's write lock, and
            # its row count says whether this worker won the job
            with self.store.engine.connect() as conn:
                cands = conn.execute(self._queued_query(now).limit(20)).all()
            if not cands:
                return None
            for jid, machine in cands:
                got = False
                with self.store.engine.connect() as conn:
                    trans = conn.begin()
                    try:
                        r = conn.execute(update(J).where(J.c.id == jid, J.c.state == "queued")
                                         .values(**self._claim_values(now)))
                        if r.rowcount == 1 and self._take_lease(conn, machine, jid):
                            _event(conn, jid, "submitting", f"claimed; machine {machine} leased", self.owner, at=now)
                            got = True
                    finally:
                        if got:
                            trans.commit()
                        else:
                            trans.rollback()  # lost the job, or its machine is busy: leave it queued
                if got:
                    return get_job(self.store, jid)
            return None
        return None

    # -- submitting -----------------------------------------------------------------------------
    def submit(self, job: dict, stats: Counter) -> None:
        try:
            backend = self.backend_of(job)
            spec = RunSpec.from_dict(job["spec"], job.get("backend_config"))
            handle = backend.submit(spec)
        except Exception as exc:  # noqa: BLE001 - any backend failure is a failed attempt
            stats["submit_failed"] += 1
            self.failure(job, f"submit failed: {exc}", stats)
            return
        now = self.now()
        with self.store.engine.begin() as conn:
            r = conn.execute(update(J).where(J.c.id == job["id"], J.c.state == "submitting", J.c.owner == self.owner)
                             .values(state="running", handle=handle, started_at=job.get("started_at") or now,
                                     deadline_at=self.deadline(job["spec"]), lease_until=self.lease_until(),
                                     updated_at=now, message=f"running on {job['machine']} ({handle})"))
            if r.rowcount:
                _event(conn, job["id"], "running", f"submitted to {job['machine']}: {handle} "
                                                   f"(attempt {job['attempts']})", self.owner, at=now)
        if r.rowcount:
            stats["submitted"] += 1
            self.log(f"job {job['id']}: submitted to {job['machine']} as {handle}")
        else:  # cancelled or taken over meanwhile: do not leave the run behind
            try:
                backend.cancel(handle)
            except Exception:  # noqa: BLE001
                pass

    def failure(self, job: dict, message: str, stats: Counter, *, expect_owner: bool = True) -> None:
        """A failed attempt: back to the queue with backoff, or failed after max_attempts."""
        now = self.now()
        if job.get("cancel_requested"):
            if _finish(self.store, job, "cancelled", f"cancelled on request ({message})", owner=self.owner,
                       expect_owner=expect_owner):
                stats["cancelled"] += 1
                _restore_status(self.store, get_job(self.store, job["id"]), f"rerun job {job['id']} cancelled")
            return
        if job["attempts"] < job["max_attempts"]:
            delay = self.backoff(job["attempts"])
            cond = [J.c.id == job["id"], J.c.state == job["state"]]
            if expect_owner:
                cond.append(J.c.owner == self.owner)
            with self.store.engine.begin() as conn:
                r = conn.execute(update(J).where(*cond).values(
                    state="queued", handle=None, owner=None, lease_until=None, deadline_at=None, updated_at=now,
                    next_attempt_at=now + timedelta(seconds=delay),
                    message=f"attempt {job['attempts']}/{job['max_attempts']} failed: {message}"[:4000]))
                if r.rowcount:
                    conn.execute(delete(L).where(L.c.job_id == job["id"]))
                    _event(conn, job["id"], "queued", f"attempt {job['attempts']} failed"
                           f"{' (' + job['handle'] + ')' if job.get('handle') else ''}: {message}; "
                           f"retry in {delay:.0f}s", self.owner, at=now)
            if r.rowcount:
                stats["retried"] += 1
                self.log(f"job {job['id']}: {message}; retry in {delay:.0f}s")
            return
        final = f"failed after {job['attempts']} attempt(s): {message}"
        if _finish(self.store, job, "failed", final, owner=self.owner, expect_owner=expect_owner):
            stats["failed"] += 1
            self.log(f"job {job['id']}: {final}")
            _restore_status(self.store, get_job(self.store, job["id"]), f"rerun job {job['id']} {final}")

    # -- polling --------------------------------------------------------------------------------
    def release(self) -> int:
        """Give up this worker's leases on running jobs and bisections (a clean exit), so the
        next worker resumes polling them at once instead of after ``lease_s``."""
        import storage.bisections as bdb

        with self.store.engine.begin() as conn:
            r = conn.execute(update(J).where(J.c.owner == self.owner, J.c.state == "running")
                             .values(owner=None, lease_until=None))
        return (r.rowcount or 0) + bdb.release(self.store, self.owner)

    def poll_running(self, stats: Counter) -> None:
        now = self.now()
        with self.store.engine.connect() as conn:
            rows = conn.execute(select(J.c.id, J.c.owner, J.c.lease_until).where(J.c.state == "running")
                                .order_by(J.c.id)).all()
        for jid, owner, until in rows:
            takeable = or_(J.c.owner.is_(None), J.c.owner == self.owner, J.c.lease_until < now)
            if owner not in (None, self.owner) and _aware(until) is not None and _aware(until) >= now:
                if not _owner_gone(owner):
                    continue  # another live worker polls it
                takeable = J.c.owner == owner  # its worker died on this host: take over now
            with self.store.engine.begin() as conn:
                r = conn.execute(update(J).where(J.c.id == jid, J.c.state == "running", takeable)
                                 .values(owner=self.owner, lease_until=self.lease_until()))
            if r.rowcount != 1:
                continue  # another worker holds it
            job = get_job(self.store, jid)
            stats["polled"] += 1
            try:
                self.poll_one(job, stats)
            except Exception as exc:  # noqa: BLE001 - a backend problem fails this attempt, not the loop
                self.failure(job, f"{exc.__class__.__name__}: {exc}", stats)

    def poll_one(self, job: dict, stats: Counter) -> None:
        backend = self.backend_of(job)
        handle = job["handle"]
        if job.get("cancel_requested"):
            backend.cancel(handle)
            if _finish(self.store, job, "cancelled", "cancelled on request", owner=self.owner):
                stats["cancelled"] += 1
                _restore_status(self.store, get_job(self.store, job["id"]), f"rerun job {job['id']} cancelled")
            return
        st = backend.poll(handle)
        if st.state == DONE:
            self.collect(job, backend, stats)
        elif st.state == FAILED:
            if st.cancelled:
                if _finish(self.store, job, "cancelled", f"cancelled in the backend: {st.message}", owner=self.owner):
                    stats["cancelled"] += 1
                    _restore_status(self.store, get_job(self.store, job["id"]), f"rerun job {job['id']} cancelled")
            else:
                self.failure(job, f"run {handle} failed: {st.message}", stats)
        elif job.get("deadline_at") and self.now() > job["deadline_at"]:
            try:
                backend.cancel(handle)
            finally:
                msg = f"timeout: run {handle} still {st.state} at its deadline {job['deadline_at'].isoformat()}"
                if _finish(self.store, job, "failed", msg, owner=self.owner):
                    stats["timed_out"] += 1
                    self.log(f"job {job['id']}: {msg}")
                    _restore_status(self.store, get_job(self.store, job["id"]), f"rerun job {job['id']} {msg}")
        else:
            msg = f"{st.state} on {job['machine']}: {st.message} ({st.batches_done}/{st.batches_total} batches)"
            if msg != job.get("message"):
                with self.store.engine.begin() as conn:
                    conn.execute(update(J).where(J.c.id == job["id"], J.c.state == "running")
                                 .values(message=msg[:4000], updated_at=self.now()))

    def collect(self, job: dict, backend, stats: Counter) -> None:
        """A backend run finished: add its samples, judge, extend or store the verdict."""
        from bot.lab.stats import Design, decide

        s = backend.fetch_samples(job["handle"])
        acc = dict(job.get("samples") or {})
        for k in ("good", "bad"):
            acc[k] = list(acc.get(k) or []) + [float(v) for v in s.get(k, [])]
        acc["order"] = list(acc.get("order") or []) + list(s.order)
        w = dict(acc.get("warmups") or {})
        for k in ("good", "bad"):
            w[k] = list(w.get(k) or []) + [float(v) for v in (s.warmups or {}).get(k, [])]
        acc["warmups"] = w
        acc["metric"], acc["higher_is_better"] = s.metric, bool(s.higher_is_better)
        acc["rounds"] = list(acc.get("rounds") or []) + [
            {"handle": job["handle"], "n_good": len(s.get("good", [])), "n_bad": len(s.get("bad", [])),
             "log_path": s.log_path, "attempt": job["attempts"]}]
        plan = job.get("plan") or {}
        try:
            design = Design.from_settings(plan)
            j = decide(acc["good"], acc["bad"], design, higher_is_better=acc["higher_is_better"],
                       claimed_change_percent=plan.get("claimed_change_percent"),
                       emulated=self.machine_emulated(job))
        except ValueError as exc:
            self.failure(job, f"samples cannot be judged: {exc}", stats)
            return
        result = j.to_dict()
        n = j.next_runs
        now = self.now()
        if n > 0:
            spec = dict(job["spec"])
            spec["runs"] = n
            spec["samples_per_batch"] = min(int(spec.get("samples_per_batch", 1)), n)
            try:
                handle = backend.submit(RunSpec.from_dict(spec, job.get("backend_config")))
            except Exception as exc:  # noqa: BLE001
                with self.store.engine.begin() as conn:
                    conn.execute(update(J).where(J.c.id == job["id"], J.c.handle == job["handle"])
                                 .values(samples=acc, result=result, rounds=job["rounds"] + 1, spec=spec))
                job = get_job(self.store, job["id"])
                self.failure(job, f"extension submit failed: {exc}", stats)
                return
            msg = (f"no decision at look {j.look}/{len(j.looks)} after {j.n_good}/{j.n_bad} runs "
                   f"({j.change_percent:+.2f}%, CI {j.ci[0]:+.2f}%..{j.ci[1]:+.2f}%, CV {j.cv_percent:.1f}%): "
                   f"{n} more runs per build ({handle})")
            with self.store.engine.begin() as conn:
                r = conn.execute(update(J).where(J.c.id == job["id"], J.c.state == "running",
                                                 J.c.handle == job["handle"], J.c.owner == self.owner)
                                 .values(handle=handle, spec=spec, samples=acc, result=result, rounds=job["rounds"] + 1,
                                         deadline_at=self.deadline(spec), lease_until=self.lease_until(),
                                         updated_at=now, message=msg))
                if r.rowcount:
                    _event(conn, job["id"], "running", msg, self.owner, at=now)
            if r.rowcount:
                stats["extended"] += 1
                self.log(f"job {job['id']}: {msg}")
            else:
                backend.cancel(handle)
            return
        done = _finish(self.store, job, "done", f"{j.verdict}: {j.change_percent:+.2f}% "
                       f"(CI {j.ci[0]:+.2f}%..{j.ci[1]:+.2f}%), n={j.n_good}/{j.n_bad}: {j.reasons[0]}"[:4000],
                       owner=self.owner,
                       values={"samples": acc, "result": result, "verdict": j.verdict, "rounds": job["rounds"] + 1})
        if done:
            stats["done"] += 1
            self.log(f"job {job['id']}: {j.verdict} {j.change_percent:+.2f}%")
            _apply_verdict(self.store, get_job(self.store, job["id"]))
            from bot.lab.bisect_driver import auto_start

            if auto_start(self.store, self.config, get_job(self.store, job["id"])) is not None:
                stats["bisections_started"] += 1

    def machine_emulated(self, job: dict) -> bool:
        """The noise gate's "emulated" for the job's machine (bot.lab.inventory.is_emulated); a
        machine no longer configured is judged from the job's stored backend settings."""
        from bot.lab.inventory import Machine, is_emulated

        try:
            m = get_machine(self.config, job.get("machine") or "")
        except InventoryError:
            m = None
        if m is None:
            backend = job.get("backend") or ""
            cfg = job.get("backend_config") or {}
            settings = cfg.get(backend) if isinstance(cfg.get(backend), dict) else {}
            m = Machine(job.get("machine") or "?", "unknown", backend, settings=settings)
        return is_emulated(m, self.config)

    def apply_verdicts(self, stats: Counter) -> None:
        """Done jobs whose verdict did not reach the record (a crash in between)."""
        with self.store.engine.connect() as conn:
            rows = [job_dict(r) for r in conn.execute(select(J).where(J.c.state == "done", J.c.record_updated.is_(False)))]
        for job in rows:
            if _apply_verdict(self.store, job):
                stats["verdicts_applied"] += 1

    # -- running --------------------------------------------------------------------------------
    def run(self, *, once: bool = False, until_job: int | None = None, timeout: float | None = None,
            interval: float | None = None, max_ticks: int | None = None) -> dict | None:
        """Pass after pass (``once``: one pass) until ``until_job`` is final, ``timeout`` seconds
        pass or ``max_ticks`` passes are done.  Returns the last pass's stats, or the job."""
        interval = self.settings["poll_interval_s"] if interval is None else interval
        t0 = time.monotonic()
        ticks = 0
        try:
            while True:
                try:
                    stats = self.tick()
                except OperationalError as exc:  # the database went away for a moment: next pass
                    if once:
                        raise
                    self.log(f"scheduler pass failed: {str(exc).splitlines()[0]}")
                    stats = {"errors": 1}
                ticks += 1
                if once or (max_ticks is not None and ticks >= max_ticks):
                    return stats
                if until_job is not None:
                    job = get_job(self.store, until_job)
                    if job is None or job["state"] in FINAL_STATES:
                        return job
                if timeout is not None and time.monotonic() - t0 > timeout:
                    return get_job(self.store, until_job) if until_job is not None else stats
                self.sleep(interval)
        finally:
            self.release()


__all__ = ["Scheduler", "SchedulerError", "schedule_rerun", "cancel_job", "get_job", "list_jobs", "busy_machines",
           "verdict_note", "LabError"]
