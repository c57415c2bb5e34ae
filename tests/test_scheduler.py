"""The lab scheduler (bot.lab.scheduler) with a small fake backend (the scheduler's logic, not a
lab): verdicts on the record and in the tracker entry, one job per machine, retries with
backoff, timeouts, cancellation, restart resume without resubmitting, extension of
inconclusive results, waiting jobs, and two workers racing for jobs on the real PostgreSQL
(SELECT ... FOR UPDATE SKIP LOCKED) and on SQLite (conditional UPDATE) -- never the same job."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import insert, select

import storage.lab_schema as ls
from bot.lab.backends import DONE, FAILED, RUNNING, Backend, LabError, RunSpec, Samples, Status
from bot.lab.backends import register_backend, unregister_backend
from bot.lab.scheduler import Scheduler
from bot.lab.scheduling import cancel_job, schedule_rerun
from storage.lab_jobs import busy_machines, get as get_job, list_jobs
from bot.tracker.records import get_record
from tests.test_lab_matching import make_record


# ---------------------------------------------------------------------------------- fake backend
class FakeLab:
    """Shared state of the fake backend: its 'lab' outlives backend objects, like a real one."""

    def __init__(self):
        self.lock = threading.Lock()
        self.runs: dict[str, dict] = {}
        self.submits: list[str] = []
        self.submit_calls = 0
        self.fail_submits = 0
        self.outcomes: list[str] = []  # per submit: done | fail | hang
        self.polls_to_finish = 1
        self.cancelled: list[str] = []
        self.samples = regression_samples

    def submitted_labels(self) -> list:
        return [self.runs[h]["spec"]["label"] for h in self.submits]


def regression_samples(label: str, n: int, submit_no: int) -> list[float]:
    base = 100.0 if label == "good" else 80.0
    return [base + ((i * 7) % 5) * 0.1 for i in range(n)]


LAB = FakeLab()


class FakeBackend(Backend):
    name = "fake"

    def __init__(self, config):
        self.config = config

    def supports(self, recipe):
        return True, "ok"

    def submit(self, job: RunSpec) -> str:
        with LAB.lock:
            LAB.submit_calls += 1
            if LAB.fail_submits:
                LAB.fail_submits -= 1
                raise LabError("lab offline")
            h = f"fake:{len(LAB.submits) + 1}"
            LAB.runs[h] = {"spec": job.to_dict(), "polls": 0, "outcome": LAB.outcomes.pop(0) if LAB.outcomes else "done",
                           "state": RUNNING, "no": len(LAB.submits) + 1, "cancelled": False}
            LAB.submits.append(h)
            return h

    def _run(self, h):
        if h not in LAB.runs:
            raise LabError(f"no such run {h}")
        return LAB.runs[h]

    def poll(self, h) -> Status:
        with LAB.lock:
            r = self._run(h)
            if r["state"] == RUNNING:
                r["polls"] += 1
                if r["polls"] >= LAB.polls_to_finish and r["outcome"] != "hang":
                    r["state"] = DONE if r["outcome"] == "done" else FAILED
            msg = "cancelled by request" if r["cancelled"] else ("guest crashed" if r["state"] == FAILED else "")
            return Status(r["state"], msg, cancelled=r["cancelled"])

    def fetch_samples(self, h) -> Samples:
        r = self._run(h)
        if r["state"] != DONE:
            raise LabError(f"run {h} is {r['state']}")
        n = r["spec"]["runs"]
        return Samples({k: LAB.samples(k, n, r["no"]) for k in ("good", "bad")}, log_path=f"/fake/{h}.log",
                       metric="dd.write_MBps", higher_is_better=True, order=["good", "bad"] * n,
                       warmups={"good": [], "bad": []})

    def cancel(self, h) -> Status:
        with LAB.lock:
            r = self._run(h)
            if r["state"] == RUNNING:
                r["state"], r["cancelled"] = FAILED, True
                LAB.cancelled.append(h)
            return Status(r["state"], "cancelled by request", cancelled=r["cancelled"])

    def describe(self, h) -> dict:
        return dict(self._run(h))


@pytest.fixture(autouse=True)
def fake_lab():
    global LAB
    LAB = FakeLab()
    register_backend("fake", FakeBackend)
    yield LAB
    unregister_backend("fake")


class Clock:
    def __init__(self):
        self.t = datetime(2025, 1, 1, 12, 0, tzinfo=timezone.utc)

    def __call__(self):
        return self.t

    def advance(self, seconds: float):
        self.t += timedelta(seconds=seconds)


def lab_config(machines=("m1",), **lab):
    return {"lab": {"machines": [{"name": n, "arch": "x86_64", "backend": "fake", "storage": ["ram"]}
                                 for n in machines],
                    "builds": {"good-1": "image:/k/good", "bad-1": "image:/k/bad"},
                    "runs": 5, "warmup": 0, "retry_backoff_s": 60, **lab}}


DD = {"filesystem": None, "benchmark": "dd", "command": "dd if=/dev/zero of=/x bs=1M count=8", "kernel_config": []}


def record(store, **kw):
    return make_record(store, **{"good": "good-1", "bad": "bad-1", "config": dict(DD), **kw})


def history_notes(store, rid, field="status"):
    return [(h["new"], h["note"]) for h in get_record(store, rid)["history"] if h["field"] == field]


# ---------------------------------------------------------------------------------- tests
def test_verdict_on_the_record_and_in_the_entry(store):
    from bot.lab.reruns import reruns_for
    from bot.tracker.entry import entry

    c = lab_config()
    rid = record(store, change_percent=-20.0)
    job = schedule_rerun(store, c, rid)
    assert job["state"] == "queued" and job["machine"] == "m1" and job["spec"]["runs"] == 5
    assert get_record(store, rid)["status"] == "rerun-scheduled"
    assert entry(store, rid)["reruns"] == []
    clock = Clock()
    s = Scheduler(store, c, clock=clock)
    assert s.tick()["submitted"] == 1
    assert get_job(store, job["id"])["state"] == "running" and busy_machines(store) == {"m1": job["id"]}
    assert s.tick()["done"] == 1
    job = get_job(store, job["id"], events=True)
    assert job["state"] == "done" and job["verdict"] == "confirmed" and job["record_updated"]
    assert busy_machines(store) == {}
    assert [e["state"] for e in job["events"]] == ["queued", "submitting", "running", "done"]
    rec = get_record(store, rid)
    assert rec["status"] == "confirmed"
    last = rec["history"][-1]
    assert last["actor"] == "regtriage-lab" and last["new"] == "confirmed"
    assert "dd.write_MBps -19.9" in last["note"] and "99% CI" in last["note"] and "n=5/5" in last["note"]
    runs = reruns_for(store, rid)
    assert len(runs) == 1
    r = runs[0]
    for k in ("id", "machine", "recipe", "metric", "higher_is_better", "verdict", "change_percent", "ci", "p_value",
              "n_good", "n_bad", "samples", "order", "builds", "finished"):
        assert k in r, k
    assert r["machine"] == "m1" and r["recipe"] == "dd-seqwrite" and r["verdict"] == "confirmed"
    assert r["samples"]["good"] == regression_samples("good", 5, 1) and len(r["ci"]) == 2
    assert r["builds"] == {"good": "image:/k/good", "bad": "image:/k/bad"} and r["n_good"] == r["n_bad"] == 5
    assert entry(store, rid)["reruns"] == runs
    # a second rerun while one is active is refused; after it, another may be scheduled
    job2 = schedule_rerun(store, c, rid)
    with pytest.raises(Exception, match="already has rerun job"):
        schedule_rerun(store, c, rid)
    cancel_job(store, c, job2["id"])


def test_one_job_per_machine(store):
    LAB.polls_to_finish = 2
    c = lab_config()
    jobs = [schedule_rerun(store, c, record(store))["id"] for _ in range(3)]
    s = Scheduler(store, c, clock=Clock())
    seen = []
    for _ in range(12):
        s.tick()
        running = [j for j in list_jobs(store, states=("submitting", "running"))]
        assert len(running) <= 1
        seen += [j["id"] for j in running]
    assert [get_job(store, j)["state"] for j in jobs] == ["done"] * 3
    assert sorted(set(seen)) == jobs and len(LAB.submits) == 3
    # two machines: two jobs at once
    c2 = lab_config(("m1", "m2"))
    more = [schedule_rerun(store, c2, record(store))["id"] for _ in range(2)]
    Scheduler(store, c2, clock=Clock()).tick()
    assert sorted(get_job(store, j)["machine"] for j in more) == ["m1", "m2"]
    assert {get_job(store, j)["state"] for j in more} == {"running"}


def test_retries_with_backoff_then_failed(store):
    c = lab_config(max_attempts=3)
    rid = record(store)
    jid = schedule_rerun(store, c, rid)["id"]
    LAB.fail_submits = 99
    clock = Clock()
    s = Scheduler(store, c, clock=clock)
    s.tick()
    job = get_job(store, jid)
    assert job["state"] == "queued" and job["attempts"] == 1 and "lab offline" in job["message"]
    assert job["next_attempt_at"] == clock.t + timedelta(seconds=60) and busy_machines(store) == {}
    s.tick()
    clock.advance(59)
    s.tick()
    assert LAB.submit_calls == 1  # not before the backoff is over
    clock.advance(2)
    s.tick()
    job = get_job(store, jid)
    assert LAB.submit_calls == 2 and job["attempts"] == 2
    assert job["next_attempt_at"] == clock.t + timedelta(seconds=120)  # doubled
    clock.advance(121)
    s.tick()
    job = get_job(store, jid, events=True)
    assert LAB.submit_calls == 3 and job["state"] == "failed" and "after 3 attempt(s)" in job["message"]
    msgs = [e["message"] for e in job["events"]]
    assert any("retry in 60s" in m for m in msgs) and any("retry in 120s" in m for m in msgs)
    rec = get_record(store, rid)
    assert rec["status"] == "triaged" and "failed after 3 attempt(s)" in rec["history"][-1]["note"]


def test_failed_run_is_retried_and_then_judged(store):
    LAB.outcomes = ["fail", "done"]
    c = lab_config()
    rid = record(store)
    jid = schedule_rerun(store, c, rid)["id"]
    clock = Clock()
    s = Scheduler(store, c, clock=clock)
    s.tick()
    s.tick()  # the run failed: back to the queue
    job = get_job(store, jid)
    assert job["state"] == "queued" and "guest crashed" in job["message"] and job["handle"] is None
    clock.advance(61)
    s.tick()
    s.tick()
    job = get_job(store, jid)
    assert job["state"] == "done" and job["attempts"] == 2 and LAB.submits == ["fake:1", "fake:2"]
    assert len(job["samples"]["good"]) == 5 and job["samples"]["rounds"][0]["handle"] == "fake:2"
    assert get_record(store, rid)["status"] == "confirmed"


def test_timeout_cancels_the_run_and_fails(store):
    LAB.outcomes = ["hang"]
    c = lab_config(job_timeout_s=100)
    rid = record(store)
    jid = schedule_rerun(store, c, rid)["id"]
    clock = Clock()
    s = Scheduler(store, c, clock=clock)
    s.tick()
    clock.advance(50)
    s.tick()
    assert get_job(store, jid)["state"] == "running"
    clock.advance(60)
    s.tick()
    job = get_job(store, jid)
    assert job["state"] == "failed" and job["message"].startswith("timeout: run fake:1 still running")
    assert LAB.cancelled == ["fake:1"] and busy_machines(store) == {}
    assert get_record(store, rid)["status"] == "triaged"
    s.tick()
    assert LAB.submits == ["fake:1"]  # a timeout is final


def test_cancel_queued_and_running_jobs(store):
    LAB.outcomes = ["hang"]
    c = lab_config()
    r1, r2 = record(store), record(store)
    j1, j2 = schedule_rerun(store, c, r1)["id"], schedule_rerun(store, c, r2)["id"]
    s = Scheduler(store, c, clock=Clock())
    s.tick()
    assert get_job(store, j1)["state"] == "running" and get_job(store, j2)["state"] == "queued"
    assert cancel_job(store, c, j2)["state"] == "cancelled"
    assert get_record(store, r2)["status"] == "triaged"
    job = cancel_job(store, c, j1)
    assert job["state"] == "cancelled" and LAB.cancelled == ["fake:1"] and busy_machines(store) == {}
    assert get_record(store, r1)["status"] == "triaged"
    assert "cancelled" in get_record(store, r1)["history"][-1]["note"]
    s.tick()
    assert get_job(store, j1)["state"] == "cancelled" and len(LAB.submits) == 1
    with pytest.raises(Exception, match="already cancelled"):
        cancel_job(store, c, j1)


def test_restart_resumes_polling_without_resubmitting(db_url):
    from storage.store import Store

    LAB.polls_to_finish = 2
    c = lab_config(lease_s=60)
    first = Store(db_url)
    rid = record(first)
    jid = schedule_rerun(first, c, rid)["id"]
    clock = Clock()
    a = Scheduler(first, c, clock=clock, owner="worker-a")
    a.tick()
    a.tick()
    job = get_job(first, jid)
    assert job["state"] == "running" and job["owner"] == "worker-a" and job["handle"] == "fake:1"
    first.close()  # worker a is gone (its backend object too)

    second = Store(db_url)
    b = Scheduler(second, c, clock=clock, owner="worker-b")
    assert b.tick().get("polled", 0) == 0  # a's lease still holds
    clock.advance(61)
    stats = b.tick()
    assert stats["polled"] == 1 and stats["done"] == 1
    job = get_job(second, jid, events=True)
    assert job["state"] == "done" and job["verdict"] == "confirmed"
    assert LAB.submits == ["fake:1"] and LAB.submit_calls == 1
    assert get_record(second, rid)["status"] == "confirmed"

    # a worker of this host whose process is gone: taken over at once, without waiting for its lease
    import socket
    import subprocess

    dead = subprocess.Popen(["true"])
    dead.wait()
    rid2 = record(second)
    jid2 = schedule_rerun(second, c, rid2)["id"]
    crashed = Scheduler(second, c, clock=clock, owner=f"{socket.gethostname()[:60]}:{dead.pid}:dead")
    crashed.tick()
    assert get_job(second, jid2)["owner"].endswith(":dead")
    assert b.tick()["polled"] == 1 and get_job(second, jid2)["owner"] == "worker-b"
    assert b.tick()["done"] == 1 and LAB.submit_calls == 2
    # a clean exit gives the leases up (the next worker need not wait)
    rid3 = record(second)
    jid3 = schedule_rerun(second, c, rid3)["id"]
    b.run(once=True)
    assert get_job(second, jid3)["state"] == "running" and get_job(second, jid3)["owner"] is None
    second.close()


def test_inconclusive_result_is_extended_up_to_the_cap(store):
    # design looks at 3 and 6 runs per build: no boundary at 3+3 (continue), none at 6+6 (the cap);
    # futility off: with 2 df at the first look the paired interval is wide, and futility would
    # (rightly) give up on these samples before the cap this test is about
    rounds = {1: ([100.0, 101.5, 98.5], [99.0, 97.5, 100.5]), 2: ([100.5, 99.5, 100.0], [98.5, 101.0, 99.5])}
    LAB.samples = lambda label, n, no: rounds[no][0 if label == "good" else 1][:n]
    c = lab_config(runs=3, max_runs=6, extend_step=3, futility_power=0.0)
    rid = record(store, change_percent=-5.0)
    jid = schedule_rerun(store, c, rid)["id"]
    s = Scheduler(store, c, clock=Clock())
    s.tick()
    st = s.tick()
    assert st.get("extended") == 1, (st, get_job(store, jid)["message"])
    job = get_job(store, jid)
    assert job["state"] == "running" and job["handle"] == "fake:2" and "3 more runs per build" in job["message"]
    assert "look 1/2" in job["message"] and job["result"]["next_runs"] == 3
    assert LAB.runs["fake:2"]["spec"]["runs"] == 3
    s.tick()
    job = get_job(store, jid)
    assert job["state"] == "done" and job["rounds"] == 2 and len(job["samples"]["good"]) == 6
    assert job["verdict"] == "inconclusive" and job["result"]["n_good"] == 6 and job["result"]["look"] == 2
    assert "the maximum" in job["result"]["reasons"][0]
    assert len(LAB.submits) == 2  # the cap (6 runs) stops it
    # inconclusive keeps the record open
    from bot.tracker.query import parse_query, run_query

    assert get_record(store, rid)["status"] == "inconclusive"
    assert rid in {r["id"] for r in run_query(store, parse_query("open regressions"))[0]}


def test_scheduler_stops_early_on_a_crossing_and_on_futility(store):
    # a clear regression crosses the first look's boundary: 5+5 runs of a 5/10/15/20 design
    c = lab_config(max_runs=20, extend_step=5)
    rid = record(store, change_percent=-20.0)
    jid = schedule_rerun(store, c, rid)["id"]
    s = Scheduler(store, c, clock=Clock())
    s.tick()
    assert s.tick()["done"] == 1
    job = get_job(store, jid)
    assert job["verdict"] == "confirmed" and job["result"]["looks"] == [5, 10, 15, 20]
    assert job["result"]["look"] == 1 and len(LAB.submits) == 1
    # hopeless noise (CV ~25%) stops at the first look too, as inconclusive with the true reason
    noisy = {"good": [100, 140, 70, 125, 80], "bad": [95, 60, 130, 85, 115]}
    LAB.samples = lambda label, n, no: [float(x) for x in noisy[label][:n]]
    rid2 = record(store, change_percent=-3.5)
    jid2 = schedule_rerun(store, c, rid2)["id"]
    s.tick()
    s.tick()
    job = get_job(store, jid2)
    assert job["state"] == "done" and job["verdict"] == "inconclusive" and len(LAB.submits) == 2
    reason = job["result"]["reasons"][0]
    assert reason.startswith("too noisy: CV") and "over 5+5 runs" in reason
    assert get_record(store, rid2)["status"] == "inconclusive"


def test_emulated_machine_never_publishes_not_reproduced(store):
    same = {"good": [100.0, 100.1, 99.9, 100.0, 100.05], "bad": [100.02, 99.95, 100.0, 100.1, 99.98]}
    LAB.samples = lambda label, n, no: same[label][:n]
    c = lab_config()
    c["lab"]["machines"][0]["tags"] = ["emulated"]
    rid = record(store, change_percent=-10.0)
    jid = schedule_rerun(store, c, rid)["id"]
    s = Scheduler(store, c, clock=Clock())
    s.tick()
    s.tick()
    job = get_job(store, jid)
    assert job["verdict"] == "inconclusive" and job["result"]["emulated"] is True
    assert "emulated machine" in job["result"]["reasons"][0] and len(LAB.submits) == 1
    assert "(emulated)" in history_notes(store, rid)[-1][1]
    # allowed by the config: the same samples are not-reproduced
    c["lab"]["allow_emulated"] = True
    rid2 = record(store, change_percent=-10.0)
    jid2 = schedule_rerun(store, c, rid2)["id"]
    s = Scheduler(store, c, clock=Clock())
    s.tick()
    s.tick()
    assert get_job(store, jid2)["verdict"] == "not-reproduced"


def test_waiting_job_runs_when_a_machine_fits(store):
    c = lab_config((), on_no_match="wait")
    rid = record(store)
    job = schedule_rerun(store, c, rid)
    assert job["state"] == "waiting" and "no lab machines" in job["message"]
    Scheduler(store, c, clock=Clock()).tick()
    assert get_job(store, job["id"])["state"] == "waiting"
    c2 = lab_config(("m9",), on_no_match="wait")
    s = Scheduler(store, c2, clock=Clock())
    stats = s.tick()
    assert stats["unwaited"] == 1 and stats["submitted"] == 1
    assert get_job(store, job["id"])["machine"] == "m9"
    s.tick()
    assert get_record(store, rid)["status"] == "confirmed"
    notes = history_notes(store, rid)
    assert [n for n, _ in notes][-2:] == ["rerun-scheduled", "confirmed"]


# ---------------------------------------------------------------------------------- races
def _insert_jobs(store, machines: list[str]) -> list[int]:
    from bot.lab.recipes import make_recipe
    from bot.lab.builds import BuildSpec

    spec = RunSpec(make_recipe("dd-seqwrite", {"bs": "1M", "count": 8}), BuildSpec(image="/k/good"),
                   BuildSpec(image="/k/bad"), runs=5, warmup=0)
    now = datetime.now(timezone.utc)
    ids = []
    with store.engine.begin() as conn:
        for i, m in enumerate(machines):
            d = spec.to_dict()
            d["label"] = f"job-{i}"
            ids.append(conn.execute(insert(ls.lab_jobs).values(
                state="queued", machine=m, backend="fake", backend_config={}, plan={"alpha": 0.01, "max_runs": 5}, spec=d,
                attempts=0, max_attempts=3, rounds=0, cancel_requested=False, record_updated=False,
                created_at=now, updated_at=now)).inserted_primary_key[0])
    return ids


def _race(url: str, workers: int, fn) -> list:
    from storage.store import Store

    stores = [Store(url) for _ in range(workers)]
    barrier = threading.Barrier(workers)
    out: list = [None] * workers
    errors: list = []

    def work(i):
        try:
            barrier.wait()
            out[i] = fn(stores[i], i)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for s in stores:
        s.close()
    assert not errors, errors
    return out


def _claim_all(store, i):
    s = Scheduler(store, lab_config(), owner=f"racer-{i}")
    got = []
    while True:
        job = s.claim_next()
        if job is None:
            return got
        got.append(job["id"])


def _check_race(url: str, store):
    n = 40
    ids = _insert_jobs(store, [f"m{i}" for i in range(n)])
    a, b = _race(url, 2, _claim_all)
    print(f"\nclaim race on {url.split(':')[0]}: worker 0 took {len(a)}, worker 1 took {len(b)} of {n} jobs")
    assert not set(a) & set(b), set(a) & set(b)
    assert sorted(a + b) == ids
    with store.engine.connect() as conn:
        owners = dict(conn.execute(select(ls.lab_jobs.c.id, ls.lab_jobs.c.owner)).all())
        leases = dict(conn.execute(select(ls.lab_machine_leases.c.machine, ls.lab_machine_leases.c.job_id)).all())
    assert all(owners[j] == "racer-0" for j in a) and all(owners[j] == "racer-1" for j in b)
    assert len(leases) == n and sorted(leases.values()) == ids
    # many jobs on ONE machine: only one of them may be taken, by one worker
    more = _insert_jobs(store, ["solo"] * 10)
    a, b = _race(url, 2, _claim_all)
    assert len(a) + len(b) == 1 and (a + b)[0] in more
    return a, b


def _tick_until_done(store, i):
    s = Scheduler(store, lab_config(), owner=f"ticker-{i}")
    for _ in range(200):
        s.tick()
        if not list_jobs(store, states=("queued", "submitting", "running")):
            return True
    return False


def _check_full_race(url: str, store):
    from sqlalchemy import delete

    with store.engine.begin() as conn:  # a clean slate: the claim race left jobs half-taken
        conn.execute(delete(ls.lab_machine_leases))
        conn.execute(delete(ls.lab_job_events))
        conn.execute(delete(ls.lab_jobs))
    LAB.polls_to_finish = 2
    ids = _insert_jobs(store, [f"m{i % 6}" for i in range(24)])
    assert all(_race(url, 3, _tick_until_done))
    assert sorted(LAB.submitted_labels()) == sorted(f"job-{i}" for i in range(24))  # each submitted once
    assert {(get_job(store, j)["state"], get_job(store, j)["rounds"]) for j in ids} == {("done", 1)}


@pytest.mark.postgres
def test_two_workers_never_take_the_same_job_postgres(pg_url):
    from storage.store import Store

    store = Store(pg_url)
    try:
        assert store.engine.dialect.name == "postgresql"
        _check_race(pg_url, store)
        _check_full_race(pg_url, store)
    finally:
        store.close()


def test_two_workers_never_take_the_same_job_sqlite(sqlite_url):
    from storage.store import Store

    store = Store(sqlite_url)
    try:
        _check_race(sqlite_url, store)
        _check_full_race(sqlite_url, store)
    finally:
        store.close()


# ---------------------------------------------------------------------------------- the CLI
def test_cli_rerun_work_jobs_cancel(cli, home, tmp_path):
    import json

    store = _lab_cli(cli, tmp_path, """
[lab]
runs = 5
warmup = 0
[lab.builds]
"good-1" = "image:/k/good"
"bad-1" = "image:/k/bad"
[[lab.machines]]
name = "m1"
arch = "x86_64"
backend = "fake"
cpu = "Intel(R) Xeon(R) Gold 6238M CPU @ 2.10GHz"
cores = 4
memory = "8G"
storage = ["ssd"]
filesystems = ["ext4"]
""")
    r1, r2 = record(store), record(store)
    r3 = record(store, good=None, bad=None)  # nothing to build: the plan is declined
    store.close()
    listed = json.loads(cli("lab", "list", "--json").output)
    assert listed[0]["name"] == "m1" and listed[0]["cpu"]["vendor"] == "intel" and listed[0]["busy_with"] is None
    m = json.loads(cli("lab", "match", str(r1), "--json").output)
    assert m["match"]["best"] == "m1" and m["plan_declined"] == []
    out = cli("lab", "match", str(r1)).output
    assert "m1: score 0, eligible" in out and "report names no CPU vendor" in out
    # the report names no hardware: m1 is only a stand-in, so `lab match` says so and exits 1
    assert "no machine matches: the report names no hardware; best stand-in: m1" in " ".join(out.split())
    assert cli("lab", "match", str(r1)).exit_code == 1 and m["match"]["stand_in"] is True
    plan = cli("lab", "plan", str(r1))
    assert "dd-seqwrite" in plan.output and plan.exit_code == 0
    declined = cli("lab", "plan", str(r3))
    assert declined.exit_code == 1 and "DECLINED" in declined.output  # non-zero, with the reason
    assert cli("lab", "plan", str(r3), "--json").exit_code == 1
    job = json.loads(cli("rerun", str(r1), "--json").output)
    assert job["state"] == "queued" and job["machine"] == "m1"
    assert "already has rerun job" in cli("rerun", str(r1)).output
    j2 = json.loads(cli("rerun", str(r2), "--json").output)
    stats = json.loads(cli("lab", "work", "--once", "--json").output)
    assert stats["submitted"] == 1
    assert [j["state"] for j in json.loads(cli("jobs", "--json").output)] == ["queued", "running"]
    assert "cancelled" in cli("jobs", "cancel", str(j2["id"])).output
    cli("lab", "work", "--once")
    shown = json.loads(cli("jobs", "show", str(job["id"]), "--json").output)
    assert shown["state"] == "done" and shown["verdict"] == "confirmed"
    assert [e["state"] for e in shown["events"]][-1] == "done"
    assert "verdict:" in cli("jobs", "show", str(job["id"])).output
    e = json.loads(cli("show", str(r1), "--json").output)
    assert e["status"] == "confirmed" and e["reruns"][0]["id"] == job["id"]
    # the verdict is the lab's, not a person's override
    assert "status" not in (e.get("set_by") or {})
    assert any(h["field"] == "status" and h["new"] == "confirmed" and h["source"] == "lab"
               for h in e["history"])
    assert [j["state"] for j in json.loads(cli("jobs", "--all", "--json").output)] == ["cancelled", "done"]
    r = cli("rerun", "999")
    assert r.exit_code != 0 and "no regression record" in r.output


def test_auto_schedule_policy(store):
    from bot.lab.scheduling import auto_schedule

    hw = {"cpu": None, "arch": "x86_64", "memory": "8G", "storage": None}  # names some hardware
    rid = record(store, kind="performance", hardware=hw)
    assert auto_schedule(store, lab_config(), rid) is None  # off unless [lab] auto_rerun = true
    c = lab_config(auto_rerun=True)
    # a report that names no hardware matches no machine: never rerun on its own (noted why)
    bare = record(store, kind="performance")
    assert auto_schedule(store, c, bare) is None and list_jobs(store, regression_id=bare) == []
    assert "the report names no hardware" in history_notes(store, bare, "rerun")[-1][1]
    job = auto_schedule(store, c, rid)
    assert job["state"] == "queued"
    assert auto_schedule(store, c, rid) is None  # once per record
    cancel_job(store, c, job["id"])
    assert auto_schedule(store, c, rid) is None
    assert auto_schedule(store, lab_config((), auto_rerun=True), record(store, kind="performance", hardware=hw)) is None  # no machines
    # the policy: performance claims only (unless auto_rerun_kinds says more), with a culprit or a range
    assert auto_schedule(store, c, record(store, kind="functional", hardware=hw)) is None
    assert auto_schedule(store, lab_config(auto_rerun=True, auto_rerun_kinds=["functional"]),
                         record(store, kind="functional", hardware=hw))["state"] == "queued"
    assert auto_schedule(store, c, record(store, kind="performance", good=None, bad=None, hardware=hw)) is None
    assert auto_schedule(store, c, record(store, kind="performance", good=None, bad=None, hardware=hw,
                                          culprit_commit="54a6eb5c4765"))["state"] != "queued"  # no tree: declined


def test_backend_work_dir_is_pinned_in_the_job(store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    c = {"lab": {"machines": [{"name": "q", "arch": "x86_64", "backend": "qemu",
                               "settings": {"work_dir": "rel/lab"}}],
                 "builds": {"good-1": "image:/k/good", "bad-1": "image:/k/bad"}}}
    job = schedule_rerun(store, c, record(store))
    assert job["backend_config"]["qemu"]["work_dir"] == str(tmp_path / "rel" / "lab")


# ------------------------------------------------------------------ listings at 80 columns, rerun --dry-run
LONG_LAB = """
[lab]
runs = 5
warmup = 0
[lab.builds]
"good-1" = "image:/k/good"
"bad-1" = "image:/k/bad"
[[lab.machines]]
name = "epyc-7763-rack12-node03"
arch = "x86_64"
backend = "fake"
cpu = "AMD EPYC 7763 64-Core Processor"
cores = 128
memory = "512G"
storage = ["nvme", "ssd"]
filesystems = ["ext4", "xfs", "btrfs"]
tags = ["perf", "numa", "big"]
"""


def _lab_cli(cli, tmp_path, toml=LONG_LAB):
    from bot.cli.main import main

    if "rerun" not in main.commands:
        from bot.cli.lab import register

        register(main)
    (tmp_path / "regtriage.toml").write_text(toml)
    from bot.config import load
    from storage.store import Store

    store = Store(load().db_url)
    return store


def _no_ellipsis_in(output: str, *cells: str) -> None:
    assert "…" not in output, output
    for c in cells:
        assert c in output, (c, output)
    assert all(len(line) <= 80 for line in output.splitlines()), output


def test_listings_readable_at_80_columns(cli, home, tmp_path, monkeypatch):
    import json

    monkeypatch.setenv("COLUMNS", "80")
    store = _lab_cli(cli, tmp_path)
    rids = [record(store, title="page_fault1 throughput -14.6% regression on 128 threads with THP enabled "
                                 "in the will-it-scale benchmark")
            for _ in range(3)]
    store.close()
    for rid in rids[:2]:
        assert json.loads(cli("rerun", str(rid), "--json").output)["state"] == "queued"
    cli("lab", "work", "--once")  # one job is running on the machine now
    jobs = json.loads(cli("jobs", "--json").output)
    states = {j["state"] for j in jobs}
    assert "running" in states
    lab = cli("lab", "list").output
    _no_ellipsis_in(lab, "epyc-7763-rack12-node03", "fake", f"job {jobs[0]['id']}" if jobs[0]["state"] == "running"
                    else f"job {jobs[1]['id']}")
    out = cli("jobs").output
    _no_ellipsis_in(out, *[str(j["id"]) for j in jobs], "running", "queued", "epyc-7763-rack12-node03")
    regs = cli("regressions").output
    _no_ellipsis_in(regs, *[f"{r}" for r in rids], "rerun-scheduled", "triaged")
    assert "page_fault1" in regs and "benchmark" in regs  # the title wraps, whole


def test_rerun_dry_run_is_text_unless_json(cli, home, tmp_path):
    import json

    store = _lab_cli(cli, tmp_path)
    rid = record(store)
    store.close()
    out = cli("rerun", str(rid), "--dry-run")
    assert out.exit_code == 0, out.output
    assert not out.output.lstrip().startswith(("{", "[")), out.output
    assert "dd-seqwrite" in out.output and "nothing scheduled" in out.output
    assert "machine:  epyc-7763-rack12-node03" in out.output
    data = json.loads(cli("rerun", str(rid), "--dry-run", "--json").output)
    assert data["plan"]["recipe"]["name"] == "dd-seqwrite" and data["match"]["best"] == "epyc-7763-rack12-node03"
    assert json.loads(cli("jobs", "--all", "--json").output) == []  # nothing scheduled either way
