"""The SQL of the lab's rerun jobs (tables ``lab_jobs``, ``lab_machine_leases`` and
``lab_job_events`` in storage/lab_schema.py, migration 0005).  Everything returns dataclasses
(:class:`Job`, :class:`JobEvent`, :class:`JobCost`, :class:`RunningJob`) with timezone-aware
datetimes, made here; a job also reads as a mapping (``job["state"]``, ``{**job}``) as the row
did.  bot.lab.scheduler (the run loop) and bot.lab.scheduling (requests) hold no SQL.

Every state change is a conditional UPDATE on the state the caller saw, and returns whether it
made the change, so a worker that lost a race (a cancel, another worker after a lease expiry)
changes nothing.  :func:`claim_next` takes a queued job and its machine's lease in one
transaction: on PostgreSQL ``SELECT ... FOR UPDATE SKIP LOCKED``; on SQLite a conditional
``UPDATE ... WHERE state = 'queued'`` whose row count says who won.  The lease is a row in
``lab_machine_leases`` (primary key = machine) inserted with ``ON CONFLICT DO NOTHING``, so a
machine runs one job at a time whatever the number of workers.  No advisory lock is taken
(row locks and primary keys suffice; storage/locks.py names the keys the project does take).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any, Callable, Iterable

from sqlalchemy import delete, exists, func, insert, or_, select, update

import storage.lab_schema as ls
from storage.fields import Fields
from storage.lab_schema import ACTIVE_STATES
from storage.store import Store, aware, utcnow

J, L, E = ls.lab_jobs, ls.lab_machine_leases, ls.lab_job_events


@dataclass(eq=False)
class JobEvent(Fields):
    """What happened to a job (a row of ``lab_job_events``)."""

    id: int
    job_id: int
    at: datetime
    state: str | None
    message: str | None
    owner: str | None


@dataclass(eq=False)
class Job(Fields):
    """One rerun job (a row of ``lab_jobs``); ``events`` filled by :func:`get` with
    ``events=True`` (``None``, and absent from the mapping, otherwise)."""

    id: int
    regression_id: int | None
    state: str
    machine: str | None
    backend: str | None
    backend_config: dict | None
    plan: dict
    spec: dict | None
    handle: str | None
    attempts: int
    max_attempts: int
    rounds: int
    next_attempt_at: datetime | None
    deadline_at: datetime | None
    owner: str | None
    lease_until: datetime | None
    cancel_requested: bool
    samples: dict | None
    result: dict | None
    verdict: str | None
    record_updated: bool
    message: str | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    events: list[JobEvent] | None = None

    _details = ("events",)


@dataclass(eq=False)
class JobCost(Fields):
    """What the daily lab budget reads of a job (bot.lab.budget)."""

    state: str
    plan: dict
    started_at: datetime | None
    finished_at: datetime | None


@dataclass(frozen=True)
class RunningJob:
    """A running job and the worker lease on it."""

    id: int
    owner: str | None
    lease_until: datetime | None


def _make(cls, row) -> Any:
    m = row._mapping
    return cls(**{f.name: (aware(m[f.name]) if isinstance(m[f.name], datetime) else m[f.name])
                  for f in fields(cls) if f.name in m})


def _job(row) -> Job:
    return _make(Job, row)


def _add_event(conn, job_id: int, state: str | None, message: str | None, owner: str | None = None,
               at: datetime | None = None) -> None:
    conn.execute(insert(E).values(job_id=job_id, at=at or utcnow(), state=state,
                                  message=(message or "")[:4000] or None, owner=owner))


# ---------------------------------------------------------------------------------- reading
def get(store: Store, job_id: int, *, events: bool = False) -> Job | None:
    with store.engine.connect() as conn:
        row = conn.execute(select(J).where(J.c.id == job_id)).first()
        if row is None:
            return None
        job = _job(row)
        if events:
            job.events = [_make(JobEvent, e) for e in
                          conn.execute(select(E).where(E.c.job_id == job_id).order_by(E.c.id))]
    return job


def list_jobs(store: Store, *, states: tuple[str, ...] | None = None, regression_id: int | None = None,
              limit: int = 100) -> list[Job]:
    """Jobs, newest first: in ``states`` (all when None), of one record (all when None)."""
    q = select(J)
    if states:
        q = q.where(J.c.state.in_(states))
    if regression_id is not None:
        q = q.where(J.c.regression_id == regression_id)
    with store.engine.connect() as conn:
        return [_job(r) for r in conn.execute(q.order_by(J.c.id.desc()).limit(limit))]


def _jobs_where(store: Store, *cond, order=J.c.id) -> list[Job]:
    with store.engine.connect() as conn:
        return [_job(r) for r in conn.execute(select(J).where(*cond).order_by(order))]


def active_for_record(store: Store, rid: int) -> Job | None:
    """The oldest active job (waiting, queued, submitting, running) of record ``rid``."""
    with store.engine.connect() as conn:
        row = conn.execute(select(J).where(J.c.regression_id == rid, J.c.state.in_(ACTIVE_STATES))
                           .order_by(J.c.id).limit(1)).first()
    return _job(row) if row else None


def record_has_jobs(store: Store, rid: int) -> bool:
    """Whether record ``rid`` ever had a job (in any state)."""
    with store.engine.connect() as conn:
        return conn.execute(select(J.c.id).where(J.c.regression_id == rid).limit(1)).first() is not None


def waiting(store: Store) -> list[Job]:
    """Jobs waiting for a machine, oldest first."""
    return _jobs_where(store, J.c.state == "waiting")


def unapplied_verdicts(store: Store) -> list[Job]:
    """Done jobs whose verdict did not reach the record (a crash in between)."""
    return _jobs_where(store, J.c.state == "done", J.c.record_updated.is_(False))


def costs_since(store: Store, since: datetime) -> list[JobCost]:
    """What the budget needs of every job created after ``since``."""
    with store.engine.connect() as conn:
        return [_make(JobCost, r) for r in conn.execute(
            select(J.c.state, J.c.plan, J.c.started_at, J.c.finished_at).where(J.c.created_at > since))]


def running(store: Store) -> list[RunningJob]:
    """Running jobs with their worker leases, oldest first."""
    with store.engine.connect() as conn:
        return [RunningJob(i, o, aware(u)) for i, o, u in conn.execute(
            select(J.c.id, J.c.owner, J.c.lease_until).where(J.c.state == "running").order_by(J.c.id))]


def verdicts_for_records(store: Store, ids: Iterable[int]) -> dict[int, list[Job]]:
    """{record id: its done jobs with a verdict, oldest finished first}, in one statement."""
    ids = list(dict.fromkeys(ids))
    out: dict[int, list[Job]] = {rid: [] for rid in ids}
    if not ids:
        return out
    with store.engine.connect() as conn:
        rows = conn.execute(select(J).where(J.c.regression_id.in_(ids), J.c.state == "done",
                                            J.c.verdict.is_not(None))
                            .order_by(J.c.finished_at, J.c.id)).all()
    for r in rows:
        job = _job(r)
        out[job.regression_id].append(job)
    return out


def machine_load(store: Store) -> dict[str, int]:
    """machine -> number of active jobs (waiting for it, queued on it, running on it)."""
    with store.engine.connect() as conn:
        return {m: n for m, n in conn.execute(select(J.c.machine, func.count()).where(
            J.c.state.in_(ACTIVE_STATES), J.c.machine.is_not(None)).group_by(J.c.machine))}


def busy_machines(store: Store) -> dict[str, int]:
    """machine -> the job holding its lease."""
    with store.engine.connect() as conn:
        return {m: j for m, j in conn.execute(select(L.c.machine, L.c.job_id))}


# ---------------------------------------------------------------------------------- writing
def add_event(store: Store, job_id: int, state: str | None, message: str | None, owner: str | None = None,
              at: datetime | None = None) -> None:
    with store.engine.begin() as conn:
        _add_event(conn, job_id, state, message, owner, at=at)


def create(store: Store, values: dict[str, Any], event: str) -> Job:
    """A new job (``values``: its columns, ``state`` among them) and its first event."""
    now = utcnow()
    with store.engine.begin() as conn:
        jid = conn.execute(insert(J).values(created_at=now, updated_at=now, attempts=0, rounds=0,
                                            cancel_requested=False, record_updated=False, **values)
                           ).inserted_primary_key[0]
        _add_event(conn, jid, values["state"], event, at=now)
    return get(store, jid)


def mark_record_updated(store: Store, job_id: int) -> bool:
    """The job's verdict reached its record; True for the call that marked it."""
    with store.engine.begin() as conn:
        r = conn.execute(update(J).where(J.c.id == job_id, J.c.record_updated.is_(False))
                         .values(record_updated=True))
    return r.rowcount == 1


def cancel(store: Store, job_id: int) -> bool:
    """Cancel a job that has not started (waiting, queued): True.  Otherwise flag it
    ``cancel_requested`` (its worker, or the caller, stops the run): False."""
    now = utcnow()
    with store.engine.begin() as conn:
        r = conn.execute(update(J).where(J.c.id == job_id, J.c.state.in_(("waiting", "queued")))
                         .values(state="cancelled", finished_at=now, updated_at=now, owner=None,
                                 message="cancelled on request"))
        if r.rowcount:
            conn.execute(delete(L).where(L.c.job_id == job_id))
            _add_event(conn, job_id, "cancelled", "cancelled on request", at=now)
            return True
        conn.execute(update(J).where(J.c.id == job_id).values(cancel_requested=True, updated_at=now))
        _add_event(conn, job_id, None, "cancel requested", at=now)
    return False


def _seen(job: Job, owner: str | None, *, handle: bool = False) -> list:
    """The conditions that the job is still as the caller saw it."""
    cond = [J.c.id == job.id, J.c.state == job.state]
    if handle and job.handle is not None:
        cond.append(J.c.handle == job.handle)
    if owner is not None:
        cond.append(J.c.owner == owner)
    return cond


def finish(store: Store, job: Job, state: str, message: str, *, owner: str | None = None,
           expect_owner: bool = True, values: dict | None = None) -> bool:
    """running/submitting -> a final state, if nobody changed the job meanwhile; releases the
    machine.  Returns whether this call made the change."""
    now = utcnow()
    cond = _seen(job, owner if expect_owner else None, handle=True)
    with store.engine.begin() as conn:
        r = conn.execute(update(J).where(*cond).values(state=state, finished_at=now, updated_at=now, owner=None,
                                                       lease_until=None, message=message[:4000], **(values or {})))
        if r.rowcount != 1:
            return False
        conn.execute(delete(L).where(L.c.job_id == job.id))
        _add_event(conn, job.id, state, message, owner, at=now)
    return True


def requeue(store: Store, job: Job, *, owner: str, expect_owner: bool, now: datetime, retry_at: datetime,
            message: str, event: str) -> bool:
    """A failed attempt: back to the queue (not before ``retry_at``), the machine released."""
    cond = _seen(job, owner if expect_owner else None)
    with store.engine.begin() as conn:
        r = conn.execute(update(J).where(*cond).values(
            state="queued", handle=None, owner=None, lease_until=None, deadline_at=None, updated_at=now,
            next_attempt_at=retry_at, message=message[:4000]))
        if not r.rowcount:
            return False
        conn.execute(delete(L).where(L.c.job_id == job.id))
        _add_event(conn, job.id, "queued", event, owner, at=now)
    return True


def queue_waiting(store: Store, job_id: int, values: dict[str, Any], *, event: str, owner: str,
                  now: datetime) -> bool:
    """A waiting job found its machine: queued with ``values`` (machine, backend, plan, spec ...)."""
    with store.engine.begin() as conn:
        r = conn.execute(update(J).where(J.c.id == job_id, J.c.state == "waiting")
                         .values(state="queued", updated_at=now, **values))
        if not r.rowcount:
            return False
        _add_event(conn, job_id, "queued", event, owner, at=now)
    return True


def release_stale_leases(store: Store) -> int:
    """Machine leases of jobs no longer submitting or running, released; how many."""
    with store.engine.begin() as conn:
        stale = select(J.c.id).where(J.c.state.not_in(("submitting", "running")))
        return conn.execute(delete(L).where(L.c.job_id.in_(stale))).rowcount or 0


def lost_submissions(store: Store, now: datetime) -> list[Job]:
    """Jobs left in ``submitting`` by a worker whose lease expired before ``now``."""
    return _jobs_where(store, J.c.state == "submitting", J.c.lease_until < now)


# ---------------------------------------------------------------------------------- claiming
def _take_lease(conn, machine: str, job_id: int, owner: str, now: datetime) -> bool:
    # the dialects' INSERT ... ON CONFLICT, imported here: the PostgreSQL dialect's import alone
    # costs ~20 ms of every command's start-up
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    else:
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    stmt = dialect_insert(L).values(machine=machine, job_id=job_id, owner=owner, acquired_at=now)
    stmt = stmt.on_conflict_do_nothing(index_elements=["machine"])
    return conn.execute(stmt.returning(L.c.machine)).first() is not None  # (rowcount is -1 on psycopg)


def _queued_query(now: datetime):
    busy = exists().where(L.c.machine == J.c.machine)
    return (select(J.c.id, J.c.machine)
            .where(J.c.state == "queued", J.c.machine.is_not(None),
                   or_(J.c.next_attempt_at.is_(None), J.c.next_attempt_at <= now), ~busy)
            .order_by(J.c.next_attempt_at.is_not(None), J.c.id))


def _mark_claimed(conn, jid: int, owner: str, now: datetime, lease_until: datetime, *cond) -> int:
    return conn.execute(update(J).where(J.c.id == jid, *cond).values(
        state="submitting", owner=owner, lease_until=lease_until, updated_at=now, attempts=J.c.attempts + 1)).rowcount


def claim_next(store: Store, owner: str, clock: Callable[[], datetime], lease_s: float) -> Job | None:
    """Take the next queued job whose machine is free (its time come by ``clock()``): the job
    (now ``submitting``, held by ``owner`` for ``lease_s``) and the machine's lease in one
    transaction.  None when there is nothing to take."""
    pg = store.engine.dialect.name == "postgresql"
    for _ in range(50):
        now = clock()
        until = now + timedelta(seconds=lease_s)
        if pg:
            with store.engine.begin() as conn:
                row = conn.execute(_queued_query(now).limit(1).with_for_update(skip_locked=True, of=J)).first()
                if row is None:
                    return None
                jid, machine = row
                # False: another worker leased the machine for another job meanwhile
                claimed = _take_lease(conn, machine, jid, owner, now)
                if claimed:
                    _mark_claimed(conn, jid, owner, now, until)
                    _add_event(conn, jid, "submitting", f"claimed; machine {machine} leased", owner, at=now)
            if claimed:
                return get(store, jid)
            continue
        # SQLite: no row locks; the conditional UPDATE takes the database's write lock, and
        # its row count says whether this worker won the job
        with store.engine.connect() as conn:
            cands = conn.execute(_queued_query(now).limit(20)).all()
        if not cands:
            return None
        for jid, machine in cands:
            got = False
            with store.engine.connect() as conn:
                trans = conn.begin()
                try:
                    if (_mark_claimed(conn, jid, owner, now, until, J.c.state == "queued") == 1
                            and _take_lease(conn, machine, jid, owner, now)):
                        _add_event(conn, jid, "submitting", f"claimed; machine {machine} leased", owner, at=now)
                        got = True
                finally:
                    if got:
                        trans.commit()
                    else:
                        trans.rollback()  # lost the job, or its machine is busy: leave it queued
            if got:
                return get(store, jid)
        return None
    return None


# ---------------------------------------------------------------------------------- running
def mark_running(store: Store, job: Job, *, owner: str, handle: str, now: datetime, deadline: datetime,
                 lease_until: datetime, event: str) -> bool:
    """A claimed job was submitted to its backend as ``handle``."""
    with store.engine.begin() as conn:
        r = conn.execute(update(J).where(J.c.id == job.id, J.c.state == "submitting", J.c.owner == owner)
                         .values(state="running", handle=handle, started_at=job.started_at or now,
                                 deadline_at=deadline, lease_until=lease_until, updated_at=now,
                                 message=f"running on {job.machine} ({handle})"))
        if not r.rowcount:
            return False
        _add_event(conn, job.id, "running", event, owner, at=now)
    return True


def take_running(store: Store, job_id: int, owner: str, *, now: datetime, lease_until: datetime,
                 from_owner: str | None = None) -> bool:
    """Hold a running job's worker lease (to poll it): when it is free, ours or expired -- or,
    with ``from_owner``, when that (dead) worker still holds it."""
    takeable = (J.c.owner == from_owner if from_owner is not None else
                or_(J.c.owner.is_(None), J.c.owner == owner, J.c.lease_until < now))
    with store.engine.begin() as conn:
        r = conn.execute(update(J).where(J.c.id == job_id, J.c.state == "running", takeable)
                         .values(owner=owner, lease_until=lease_until))
    return r.rowcount == 1


def release_running(store: Store, owner: str) -> int:
    """Give up ``owner``'s leases on running jobs; how many."""
    with store.engine.begin() as conn:
        r = conn.execute(update(J).where(J.c.owner == owner, J.c.state == "running")
                         .values(owner=None, lease_until=None))
    return r.rowcount or 0


def set_message(store: Store, job_id: int, message: str, now: datetime) -> None:
    """A running job's status line."""
    with store.engine.begin() as conn:
        conn.execute(update(J).where(J.c.id == job_id, J.c.state == "running")
                     .values(message=message[:4000], updated_at=now))


def save_round(store: Store, job: Job, *, samples: dict, result: dict, spec: dict) -> None:
    """A finished round's samples and judgement, kept while its run is still the job's."""
    with store.engine.begin() as conn:
        conn.execute(update(J).where(J.c.id == job.id, J.c.handle == job.handle)
                     .values(samples=samples, result=result, rounds=job.rounds + 1, spec=spec))


def extend(store: Store, job: Job, *, owner: str, handle: str, spec: dict, samples: dict, result: dict,
           deadline: datetime, lease_until: datetime, now: datetime, message: str) -> bool:
    """A round judged "continue": the job runs on as ``handle`` with ``spec``."""
    with store.engine.begin() as conn:
        r = conn.execute(update(J).where(J.c.id == job.id, J.c.state == "running",
                                         J.c.handle == job.handle, J.c.owner == owner)
                         .values(handle=handle, spec=spec, samples=samples, result=result, rounds=job.rounds + 1,
                                 deadline_at=deadline, lease_until=lease_until, updated_at=now, message=message))
        if not r.rowcount:
            return False
        _add_event(conn, job.id, "running", message, owner, at=now)
    return True
