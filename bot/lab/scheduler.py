"""The lab scheduler's run loop (:class:`Scheduler`, ``regtriage lab work``): durable rerun jobs
in the database, run on matched machines.  Jobs are made by bot.lab.scheduling (a person, chat
or the service's policy); their SQL is storage/lab_jobs.py; what they write on their record is
bot.lab.outcomes.

On every pass the loop does:

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
4. *queued* jobs whose time has come are claimed and submitted to free machines
   (storage.lab_jobs.claim_next: the job and the machine's lease in one transaction, so two
   workers never take the same job and a machine runs one job at a time).

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
from datetime import datetime, timedelta
from typing import Any, Callable

import storage.bisections as bdb
import storage.lab_jobs as jobs
from bot.lab.backends import DONE, FAILED, RunSpec
from bot.lab.bisect_driver import Driver, auto_start
from bot.lab.inventory import InventoryError, Machine, get_machine, is_emulated, make_backend
from bot.lab.matching import match_record
from bot.lab.outcomes import apply_verdict, ended, mark_scheduled
from bot.lab.plan import PlanError, RerunPlan
from bot.lab.settings import default_owner, pinned_backend_config, sched_settings
from bot.lab.stats import Design, decide, fmt_pct
from bot.tracker.records import get_record
from storage.lab_jobs import Job
from storage.lab_schema import FINAL_STATES
from storage.store import UNAVAILABLE_ERRORS, aware, utcnow


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


def add_round(samples: dict | None, s, handle: str, attempt: int) -> dict:
    """A job's samples with a finished backend run's (``s``, bot.lab.backends Samples) added."""
    acc = dict(samples or {})
    for k in ("good", "bad"):
        acc[k] = list(acc.get(k) or []) + [float(v) for v in s.get(k, [])]
    acc["order"] = list(acc.get("order") or []) + list(s.order)
    w = dict(acc.get("warmups") or {})
    for k in ("good", "bad"):
        w[k] = list(w.get(k) or []) + [float(v) for v in (s.warmups or {}).get(k, [])]
    acc["warmups"] = w
    acc["metric"], acc["higher_is_better"] = s.metric, bool(s.higher_is_better)
    acc["rounds"] = list(acc.get("rounds") or []) + [
        {"handle": handle, "n_good": len(s.get("good", [])), "n_bad": len(s.get("bad", [])),
         "log_path": s.log_path, "attempt": attempt}]
    return acc


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
        self._bisect: Driver | None = None

    # -- helpers ------------------------------------------------------------------------------
    def now(self) -> datetime:
        return aware(self.clock())

    def lease_until(self) -> datetime:
        return self.now() + timedelta(seconds=self.settings["lease_s"])

    def backend_of(self, job: Job):
        key = json.dumps([job.backend, job.backend_config], sort_keys=True, default=str)
        b = self._backends.get(key)
        if b is None:
            b = make_backend(job.backend, job.backend_config)
            self._backends[key] = b
        return b

    def backoff(self, attempts: int) -> float:
        return min(self.settings["retry_backoff_max_s"], self.settings["retry_backoff_s"] * 2 ** max(0, attempts - 1))

    def deadline(self, spec: dict) -> datetime:
        jt = self.settings["job_timeout_s"]
        if jt is None:
            jt = float((spec.get("timeouts") or {}).get("total_s", 7200)) + self.settings["deadline_grace_s"]
        return self.now() + timedelta(seconds=jt)

    def finish(self, job: Job, state: str, message: str, *, expect_owner: bool = True,
               values: dict | None = None) -> bool:
        return jobs.finish(self.store, job, state, message, owner=self.owner, expect_owner=expect_owner,
                           values=values)

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
        if self._bisect is None:
            self._bisect = Driver(self.store, self.config, owner=self.owner, log=self.log)
        for what, n in self._bisect.tick().items():
            stats[f"bisect_{what}"] += n

    def reap(self, stats: Counter) -> None:
        now = self.now()
        stats["leases_released"] += jobs.release_stale_leases(self.store)
        for job in jobs.lost_submissions(self.store, now):
            self.failure(job, f"worker {job.owner} stopped while submitting", stats, expect_owner=False)

    def recheck_waiting(self, stats: Counter) -> None:
        t = time.monotonic()
        if self._last_wait_check is not None and t - self._last_wait_check < self.settings["wait_recheck_s"]:
            return
        self._last_wait_check = t
        for job in jobs.waiting(self.store):
            rec = get_record(self.store, job.regression_id) if job.regression_id else None
            if rec is None:
                continue
            try:
                plan = RerunPlan.from_dict(job.plan, self.config)
                m = match_record(rec, self.config, recipe=plan.recipe, build_arch=plan.build_arch,
                                 busy=jobs.busy_machines(self.store), load=jobs.machine_load(self.store))
            except (PlanError, InventoryError) as exc:
                jobs.add_event(self.store, job.id, None, f"re-match failed: {exc}", self.owner, at=self.now())
                continue
            if m.best is None:
                continue
            mach = get_machine(self.config, m.best.machine)
            info = dict(job.plan)
            info["match"] = m.to_dict()
            values = {"machine": mach.name, "backend": mach.backend,
                      "backend_config": pinned_backend_config(mach, self.config), "plan": info,
                      "spec": plan.run_spec(label=f"regtriage-{job.regression_id}", machine=mach.name,
                                            config=self.config).to_dict(),
                      "message": f"queued for {mach.name} (score {m.best.score})"}
            if jobs.queue_waiting(self.store, job.id, values, owner=self.owner, now=self.now(),
                                  event=f"a machine fits now: {mach.name} (score {m.best.score})"):
                stats["unwaited"] += 1
                mark_scheduled(self.store, jobs.get(self.store, job.id), m.best.score)

    # -- claiming and submitting ----------------------------------------------------------------
    def claim_next(self) -> Job | None:
        """Take the next queued job whose machine is free (storage.lab_jobs.claim_next)."""
        return jobs.claim_next(self.store, self.owner, self.now, self.settings["lease_s"])

    def submit(self, job: Job, stats: Counter) -> None:
        try:
            backend = self.backend_of(job)
            handle = backend.submit(RunSpec.from_dict(job.spec, job.backend_config))
        except Exception as exc:  # noqa: BLE001 - any backend failure is a failed attempt
            stats["submit_failed"] += 1
            self.failure(job, f"submit failed: {exc}", stats)
            return
        if jobs.mark_running(self.store, job, owner=self.owner, handle=handle, now=self.now(),
                             deadline=self.deadline(job.spec), lease_until=self.lease_until(),
                             event=f"submitted to {job.machine}: {handle} (attempt {job.attempts})"):
            stats["submitted"] += 1
            self.log(f"job {job.id}: submitted to {job.machine} as {handle}")
        else:  # cancelled or taken over meanwhile: do not leave the run behind
            try:
                backend.cancel(handle)
            except Exception:  # noqa: BLE001
                pass

    def failure(self, job: Job, message: str, stats: Counter, *, expect_owner: bool = True) -> None:
        """A failed attempt: back to the queue with backoff, or failed after max_attempts."""
        now = self.now()
        if job.cancel_requested:
            if self.finish(job, "cancelled", f"cancelled on request ({message})", expect_owner=expect_owner):
                stats["cancelled"] += 1
                ended(self.store, job.id, f"rerun job {job.id} cancelled")
            return
        if job.attempts < job.max_attempts:
            delay = self.backoff(job.attempts)
            handle = f" ({job.handle})" if job.handle else ""
            if jobs.requeue(self.store, job, owner=self.owner, expect_owner=expect_owner, now=now,
                            retry_at=now + timedelta(seconds=delay),
                            message=f"attempt {job.attempts}/{job.max_attempts} failed: {message}",
                            event=f"attempt {job.attempts} failed{handle}: {message}; retry in {delay:.0f}s"):
                stats["retried"] += 1
                self.log(f"job {job.id}: {message}; retry in {delay:.0f}s")
            return
        final = f"failed after {job.attempts} attempt(s): {message}"
        if self.finish(job, "failed", final, expect_owner=expect_owner):
            stats["failed"] += 1
            self.log(f"job {job.id}: {final}")
            ended(self.store, job.id, f"rerun job {job.id} {final}")

    # -- polling --------------------------------------------------------------------------------
    def release(self) -> int:
        """Give up this worker's leases on running jobs and bisections (a clean exit), so the
        next worker resumes polling them at once instead of after ``lease_s``."""
        return jobs.release_running(self.store, self.owner) + bdb.release(self.store, self.owner)

    def poll_running(self, stats: Counter) -> None:
        now = self.now()
        for r in jobs.running(self.store):
            from_owner = None
            if r.owner not in (None, self.owner) and r.lease_until is not None and r.lease_until >= now:
                if not _owner_gone(r.owner):
                    continue  # another live worker polls it
                from_owner = r.owner  # its worker died on this host: take over now
            if not jobs.take_running(self.store, r.id, self.owner, now=now, lease_until=self.lease_until(),
                                     from_owner=from_owner):
                continue  # another worker holds it
            job = jobs.get(self.store, r.id)
            stats["polled"] += 1
            try:
                self.poll_one(job, stats)
            except Exception as exc:  # noqa: BLE001 - a backend problem fails this attempt, not the loop
                self.failure(job, f"{exc.__class__.__name__}: {exc}", stats)

    def poll_one(self, job: Job, stats: Counter) -> None:
        backend = self.backend_of(job)
        handle = job.handle
        if job.cancel_requested:
            backend.cancel(handle)
            if self.finish(job, "cancelled", "cancelled on request"):
                stats["cancelled"] += 1
                ended(self.store, job.id, f"rerun job {job.id} cancelled")
            return
        st = backend.poll(handle)
        if st.state == DONE:
            self.collect(job, backend, stats)
        elif st.state == FAILED:
            if st.cancelled:
                if self.finish(job, "cancelled", f"cancelled in the backend: {st.message}"):
                    stats["cancelled"] += 1
                    ended(self.store, job.id, f"rerun job {job.id} cancelled")
            else:
                self.failure(job, f"run {handle} failed: {st.message}", stats)
        elif job.deadline_at and self.now() > job.deadline_at:
            try:
                backend.cancel(handle)
            finally:
                msg = f"timeout: run {handle} still {st.state} at its deadline {job.deadline_at.isoformat()}"
                if self.finish(job, "failed", msg):
                    stats["timed_out"] += 1
                    self.log(f"job {job.id}: {msg}")
                    ended(self.store, job.id, f"rerun job {job.id} {msg}")
        else:
            msg = f"{st.state} on {job.machine}: {st.message} ({st.batches_done}/{st.batches_total} batches)"
            if msg != job.message:
                jobs.set_message(self.store, job.id, msg, self.now())

    def collect(self, job: Job, backend, stats: Counter) -> None:
        """A backend run finished: add its samples, judge, extend or store the verdict."""
        acc = add_round(job.samples, backend.fetch_samples(job.handle), job.handle, job.attempts)
        plan = job.plan or {}
        try:
            design = Design.from_settings(plan)
            j = decide(acc["good"], acc["bad"], design, higher_is_better=acc["higher_is_better"],
                       claimed_change_percent=plan.get("claimed_change_percent"),
                       emulated=self.machine_emulated(job))
        except ValueError as exc:
            self.failure(job, f"samples cannot be judged: {exc}", stats)
            return
        result = j.to_dict()
        if j.next_runs > 0:
            self.extend(job, backend, j, acc, result, stats)
            return
        done = self.finish(job, "done", f"{j.verdict}: {j.change_percent:+.2f}% "
                           f"(CI {fmt_pct(j.ci[0])}..{fmt_pct(j.ci[1])}), n={j.n_good}/{j.n_bad}: {j.reasons[0]}"[:4000],
                           values={"samples": acc, "result": result, "verdict": j.verdict, "rounds": job.rounds + 1})
        if done:
            stats["done"] += 1
            self.log(f"job {job.id}: {j.verdict} {j.change_percent:+.2f}%")
            apply_verdict(self.store, jobs.get(self.store, job.id))
            if auto_start(self.store, self.config, jobs.get(self.store, job.id)) is not None:
                stats["bisections_started"] += 1

    def extend(self, job: Job, backend, j, acc: dict, result: dict, stats: Counter) -> None:
        """No decision at this look: ``j.next_runs`` more runs per build, a new backend run."""
        n = j.next_runs
        spec = dict(job.spec)
        spec["runs"] = n
        spec["samples_per_batch"] = min(int(spec.get("samples_per_batch", 1)), n)
        try:
            handle = backend.submit(RunSpec.from_dict(spec, job.backend_config))
        except Exception as exc:  # noqa: BLE001
            jobs.save_round(self.store, job, samples=acc, result=result, spec=spec)
            self.failure(jobs.get(self.store, job.id), f"extension submit failed: {exc}", stats)
            return
        msg = (f"no decision at look {j.look}/{len(j.looks)} after {j.n_good}/{j.n_bad} runs "
               f"({j.change_percent:+.2f}%, CI {fmt_pct(j.ci[0])}..{fmt_pct(j.ci[1])}, CV {j.cv_percent:.1f}%): "
               f"{n} more runs per build ({handle})")
        if jobs.extend(self.store, job, owner=self.owner, handle=handle, spec=spec, samples=acc, result=result,
                       deadline=self.deadline(spec), lease_until=self.lease_until(), now=self.now(), message=msg):
            stats["extended"] += 1
            self.log(f"job {job.id}: {msg}")
        else:
            backend.cancel(handle)

    def machine_emulated(self, job: Job) -> bool:
        """The noise gate's "emulated" for the job's machine (bot.lab.inventory.is_emulated); a
        machine no longer configured is judged from the job's stored backend settings."""
        try:
            m = get_machine(self.config, job.machine or "")
        except InventoryError:
            m = None
        if m is None:
            backend = job.backend or ""
            cfg = job.backend_config or {}
            settings = cfg.get(backend) if isinstance(cfg.get(backend), dict) else {}
            m = Machine(job.machine or "?", "unknown", backend, settings=settings)
        return is_emulated(m, self.config)

    def apply_verdicts(self, stats: Counter) -> None:
        """Done jobs whose verdict did not reach the record (a crash in between)."""
        for job in jobs.unapplied_verdicts(self.store):
            if apply_verdict(self.store, job):
                stats["verdicts_applied"] += 1

    # -- running --------------------------------------------------------------------------------
    def run(self, *, once: bool = False, until_job: int | None = None, timeout: float | None = None,
            interval: float | None = None, max_ticks: int | None = None) -> dict | Job | None:
        """Pass after pass (``once``: one pass) until ``until_job`` is final, ``timeout`` seconds
        pass or ``max_ticks`` passes are done.  Returns the last pass's stats, or the job."""
        interval = self.settings["poll_interval_s"] if interval is None else interval
        t0 = time.monotonic()
        ticks = 0
        try:
            while True:
                try:
                    stats = self.tick()
                except UNAVAILABLE_ERRORS as exc:  # the database went away for a moment: next pass
                    if once:
                        raise
                    self.log(f"scheduler pass failed: {str(exc).splitlines()[0]}")
                    stats = {"errors": 1}
                ticks += 1
                if once or (max_ticks is not None and ticks >= max_ticks):
                    return stats
                if until_job is not None:
                    job = jobs.get(self.store, until_job)
                    if job is None or job.state in FINAL_STATES:
                        return job
                if timeout is not None and time.monotonic() - t0 > timeout:
                    return jobs.get(self.store, until_job) if until_job is not None else stats
                self.sleep(interval)
        finally:
            self.release()
