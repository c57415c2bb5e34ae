"""storage/lab_jobs.py on SQLite and PostgreSQL: typed jobs with timezone-aware datetimes, the
mapping view the CLI and JSON read, and the conditional updates the scheduler relies on (a
worker that lost a race changes nothing; a machine is leased to one job)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import storage.lab_jobs as jobs
from storage.lab_jobs import Job, JobEvent
from tests.test_lab_matching import make_record


def _queued(store, rid: int, machine: str = "m1") -> Job:
    return jobs.create(store, {"regression_id": rid, "state": "queued", "plan": {"runs": 5}, "machine": machine,
                               "backend": "fake", "backend_config": {}, "spec": {"runs": 5}, "max_attempts": 3},
                       "queued for m1")


def test_jobs_are_typed_records_with_aware_datetimes_and_a_mapping_view(store):
    rid = make_record(store)
    job = _queued(store, rid)
    assert isinstance(job, Job) and job.state == "queued" and job.attempts == 0 and job.events is None
    assert job.created_at.tzinfo is not None and job["plan"] == {"runs": 5} and job.get("handle") is None
    assert "events" not in job and dict(job)["machine"] == "m1" and list(job)[0] == "id"
    shown = jobs.get(store, job.id, events=True)
    assert "events" in shown and [type(e) for e in shown.events] == [JobEvent]
    assert shown["events"][0]["message"] == "queued for m1" and shown.events[0].at.tzinfo is not None
    assert jobs.active_for_record(store, rid).id == job.id and jobs.record_has_jobs(store, rid)
    assert [j.id for j in jobs.list_jobs(store, states=("queued",), regression_id=rid)] == [job.id]
    assert jobs.list_jobs(store, states=("done",)) == [] and jobs.get(store, job.id + 1000) is None
    assert jobs.machine_load(store) == {"m1": 1} and jobs.busy_machines(store) == {}


def test_claim_lease_run_finish_and_stale_workers(store):
    rid = make_record(store)
    a, b = _queued(store, rid), _queued(store, rid)  # two jobs on one machine: one at a time
    t = datetime(2030, 1, 1, tzinfo=timezone.utc)
    got = jobs.claim_next(store, "w1", lambda: t, 60)
    assert got.id == a.id and got.state == "submitting" and got.attempts == 1 and got.owner == "w1"
    assert got.lease_until == t + timedelta(seconds=60) and jobs.busy_machines(store) == {"m1": a.id}
    assert jobs.claim_next(store, "w2", lambda: t, 60) is None  # m1 is leased
    assert not jobs.mark_running(store, got, owner="w2", handle="fake:1", now=t, deadline=t, lease_until=t,
                                 event="not mine")
    assert jobs.mark_running(store, got, owner="w1", handle="fake:1", now=t, deadline=t + timedelta(hours=1),
                             lease_until=t + timedelta(seconds=60), event="submitted")
    run = jobs.get(store, a.id)
    assert (run.state, run.handle, run.started_at) == ("running", "fake:1", t)
    assert jobs.running(store) == [jobs.RunningJob(a.id, "w1", t + timedelta(seconds=60))]
    # another worker takes the run over only once w1's lease has expired
    assert not jobs.take_running(store, a.id, "w2", now=t, lease_until=t + timedelta(seconds=60))
    assert jobs.take_running(store, a.id, "w2", now=t + timedelta(seconds=61), lease_until=t + timedelta(seconds=120))
    assert not jobs.finish(store, run, "done", "w1 lost it", owner="w1")  # seen with owner w1: unchanged
    run = jobs.get(store, a.id)
    assert jobs.finish(store, run, "done", "confirmed", owner="w2", values={"verdict": "confirmed"})
    done = jobs.get(store, a.id, events=True)
    assert done.state == "done" and done.finished_at.tzinfo is not None and done.owner is None
    assert [e.state for e in done.events] == ["queued", "submitting", "running", "done"]
    assert jobs.busy_machines(store) == {} and [j.id for j in jobs.unapplied_verdicts(store)] == [a.id]
    assert jobs.mark_record_updated(store, a.id) and not jobs.mark_record_updated(store, a.id)
    assert [j.id for j in jobs.verdicts_for_records(store, [rid])[rid]] == [a.id]
    # the second job: claimed, its worker stops while submitting; requeued with backoff
    second = jobs.claim_next(store, "w3", lambda: t, 60)
    assert second.id == b.id and second.attempts == 1 and jobs.lost_submissions(store, t + timedelta(seconds=30)) == []
    assert [j.id for j in jobs.lost_submissions(store, t + timedelta(seconds=61))] == [b.id]
    assert jobs.requeue(store, second, owner="w4", expect_owner=False, now=t, retry_at=t + timedelta(seconds=60),
                        message="attempt 1/3 failed", event="retry")
    b = jobs.get(store, b.id)
    assert b.state == "queued" and b.next_attempt_at == t + timedelta(seconds=60)
    assert jobs.busy_machines(store) == {}
    assert jobs.claim_next(store, "w4", lambda: t, 60) is None  # not before its time
    assert jobs.cancel(store, b.id) and jobs.get(store, b.id).state == "cancelled"
    assert [c.state for c in jobs.costs_since(store, datetime(2000, 1, 1, tzinfo=timezone.utc))] == ["done", "cancelled"]
