"""The lab backends' run state machine (bot.lab.backends.runstate): pure, so every transition,
timeout and diagnosis is checked here with explicit clocks, no processes or files."""

from __future__ import annotations

import json

import pytest

from bot.lab.backends import DONE, FAILED, QUEUED, RUNNING, LabError, RunSpec, Status, Timeouts
from bot.lab.backends.runstate import (POWEROFF_GRACE_S, Batch, BatchFinished, BatchStarted, Begin, CancelRequested,
                                       Complete, Expired, Failed, Finished, GuestStarted, Progress, Ready, Rebooting,
                                       ResultSeen, RunBatch, RunMachine, SampleParsed, Save, StopWork, Tick, Waiting,
                                       WorkerGone, batch_list)
from bot.lab.builds import BuildSpec
from bot.lab.recipes import make_recipe

T = Timeouts(boot_s=30, batch_s=100, total_s=1000)


def _spec(**kw) -> RunSpec:
    return RunSpec(make_recipe("syscall-getpid"), BuildSpec(image="/boot/a"), BuildSpec(image="/boot/b"), **kw)


def _machine(runs=2, samples_per_batch=1, order="abab", timeouts=T) -> RunMachine:
    return RunMachine(_spec(runs=runs, samples_per_batch=samples_per_batch, order=order).schedule(), timeouts)


def _record(b: Batch, ok=True, values=(10.0,), warm=(1.0,), **kw) -> dict:
    return {"index": b.index, "build": b.label, "samples": list(values) * b.samples, "warmups": list(warm),
            "ok": ok, "error": None if ok else "broken", **kw}


def _kinds(actions) -> list[str]:
    return [type(a).__name__ for a in actions]


def _run_all(m: RunMachine, now=0.0) -> list[Batch]:
    """Drive a machine through every batch successfully; the batches in the order handed out."""
    seen = []
    actions = m.send(Ready(now))
    while (run := next((a for a in actions if isinstance(a, RunBatch)), None)) is not None:
        seen.append(run.batch)
        m.send(BatchStarted(now, run.batch.index, boot_s=T.boot_s))
        actions = m.send(BatchFinished(now, _record(run.batch, values=(float(run.batch.index + 1),))))
    return seen


# ============================================================================ batch order
@pytest.mark.parametrize("order,runs,spb,want", [
    ("abab", 3, 1, ["good", "bad"] * 3),
    ("abba", 4, 1, ["good", "bad", "bad", "good", "good", "bad", "bad", "good"]),
    ("blocked", 3, 1, ["good"] * 3 + ["bad"] * 3),
    ("abab", 5, 2, ["good", "bad"] * 3),
])
def test_batches_are_handed_out_in_the_schedule_order_once_each(order, runs, spb, want):
    m = _machine(runs=runs, samples_per_batch=spb, order=order)
    seen = _run_all(m)
    assert [b.label for b in seen] == want
    assert [b.index for b in seen] == list(range(len(want)))
    sizes = {label: sum(b.samples for b in seen if b.label == label) for label in ("good", "bad")}
    assert sizes == {"good": runs, "bad": runs}  # the last batch of each build carries the remainder
    assert m.next_batch() is None and m.send(Ready(1.0)) == []  # nothing is handed out twice


def test_one_batch_at_a_time():
    m = _machine()
    first = m.send(Ready(0.0))
    assert _kinds(first) == ["RunBatch"] and first[0].batch == Batch(0, "good", 1)
    assert m.send(Ready(0.5)) == []  # the batch handed out is still running
    with pytest.raises(LabError, match="handed out"):
        m.send(BatchStarted(1.0, 1))
    with pytest.raises(LabError, match="not the batch handed out"):
        m.send(BatchFinished(1.0, {"index": 1, "build": "bad", "ok": True}))


def test_batch_list_validates():
    assert batch_list([["good", 2], ["bad", 1]]) == [Batch(0, "good", 2), Batch(1, "bad", 1)]
    for bad in ([("ugly", 1)], [("good", 0)], [("good", "1")]):
        with pytest.raises(LabError):
            batch_list(bad)


# ============================================================================ transitions
def test_a_whole_run_queued_running_done_with_samples_in_order():
    m = _machine(runs=2, order="abba")
    assert m.status.state == QUEUED and m.status.message == "waiting for the worker" and m.status.batches_total == 4
    assert _kinds(m.send(Waiting(0.0, "waiting for the lab lock"))) == ["Save"] and m.status.state == QUEUED
    acts = m.send(Begin(0.0, "resolving builds"))
    assert _kinds(acts) == ["Save"] and acts[0].status.state == RUNNING and acts[0].status.message == "resolving builds"
    acts = m.send(Ready(1.0))
    b = acts[0].batch
    m.send(BatchStarted(1.0, b.index, boot_s=30))
    acts = m.send(BatchFinished(2.0, _record(b, values=(5.0,), warm=(0.5,), accel="tcg")))
    assert _kinds(acts) == ["Save", "RunBatch"]
    assert acts[0].status == Status(RUNNING, "batch 1/4 done", 1, 4)
    assert m.batches[0]["accel"] == "tcg"  # transport keys are kept
    for v in (6.0, 7.0, 8.0):
        b = acts[-1].batch
        m.send(BatchStarted(3.0, b.index))
        acts = m.send(BatchFinished(3.0, _record(b, values=(v,), warm=(v / 10,))))
    assert _kinds(acts) == ["Save", "Complete"]
    c = acts[-1]
    assert c == Complete({"good": [5.0, 8.0], "bad": [6.0, 7.0]}, {"good": [0.5, 0.8], "bad": [0.6, 0.7]},
                         ["good", "bad", "bad", "good"])
    assert not m.finished  # until the transport has stored the samples
    acts = m.send(Finished(4.0, "(getppid_ops_per_sec, accel tcg)"))
    assert acts == [Save(Status(DONE, "2 good + 2 bad samples (getppid_ops_per_sec, accel tcg)", 4, 4))]
    assert m.finished and m.status.updated_at is None  # the transport stamps the time


def test_a_failed_batch_fails_the_run_with_its_reason_and_stops():
    m = _machine()
    b = m.send(Ready(0.0))[0].batch
    m.send(BatchStarted(0.0, 0))
    acts = m.send(BatchFinished(1.0, _record(b, ok=False, error="guest never reached init")))
    assert _kinds(acts) == ["Save"]
    assert acts[0].status == Status(FAILED, "batch 1 (good) failed: guest never reached init", 0, 4)
    assert m.batches[0]["ok"] is False and m.next_batch() is None


def test_ok_follows_the_error_when_the_record_does_not_say():
    m = _machine()
    m.send(Ready(0.0))
    acts = m.send(BatchFinished(1.0, {"error": "no"}))
    assert m.status.state == FAILED and "failed: no" in acts[-1].status.message


def test_samples_parsed_fill_a_record_without_them():
    m = _machine(runs=1)
    b = m.send(Ready(0.0))[0].batch
    m.send(BatchStarted(0.0, b.index))
    for v, warm in ((1.5, True), (10.0, False)):
        m.send(SampleParsed(0.1, v, warmup=warm))
    m.send(BatchFinished(0.2, {"index": 0, "build": "good", "ok": True, "error": None}))
    assert m.batches[0]["samples"] == [10.0] and m.batches[0]["warmups"] == [1.5]


def test_finished_before_every_batch_is_in_is_a_bug():
    m = _machine()
    m.send(Ready(0.0))
    with pytest.raises(LabError, match="before every batch"):
        m.send(Finished(1.0))


def test_cancel_and_failure_stop_the_work_and_end_the_run():
    m = _machine()
    m.send(Ready(0.0))
    acts = m.send(CancelRequested(1.0))
    assert _kinds(acts) == ["StopWork", "Save"]
    assert acts[1].status == Status(FAILED, "cancelled by request", 0, 4, cancelled=True)
    m2 = _machine()
    acts = m2.send(Failed(1.0, "kernel image not found: /x"))
    assert isinstance(acts[0], StopWork) and acts[1].status.message == "kernel image not found: /x"
    assert not acts[1].status.cancelled


def test_a_finished_run_ignores_every_later_event():
    m = _machine(runs=1)
    _run_all(m)
    m.send(Finished(5.0))
    done = m.status
    for e in (CancelRequested(6.0), Failed(6.0, "late"), Tick(1e9), WorkerGone(7.0, 123), Ready(8.0),
              Waiting(8.0, "x"), Progress(8.0, "x"), Begin(8.0, "again")):
        assert m.send(e) == []
    assert m.status == done


def test_progress_and_its_counts():
    m = _machine()
    acts = m.send(Progress(0.0, "submitted LAVA job(s) 101", state=QUEUED, batches_done=0))
    assert acts[0].status == Status(QUEUED, "submitted LAVA job(s) 101", 0, 4)
    acts = m.send(Progress(1.0, "job 101 Running", batches_done=2))
    assert acts[0].status.state == RUNNING and acts[0].status.batches_done == 2
    with pytest.raises(LabError):
        m.send(Progress(1.0, "x", state=DONE))
    with pytest.raises(TypeError):
        m.send("started")


def test_failed_with_lava_counts_and_cancel_flag():
    m = _machine()
    acts = m.send(Failed(1.0, "LAVA job 7 Canceled", cancelled=True, batches_done=2))
    assert acts[-1].status == Status(FAILED, "LAVA job 7 Canceled", 2, 4, cancelled=True)


# ============================================================================ timeouts
def test_total_timeout_fails_the_run_from_begin():
    m = _machine()
    m.send(Begin(100.0, "resolving builds"))
    assert m.send(Tick(1100.0)) == []  # exactly at the limit: not yet
    acts = m.send(Tick(1100.5))
    assert _kinds(acts) == ["Expired", "StopWork", "Save"]
    assert acts[0] == Expired("total", 1000) and acts[0].reason == "total timeout of 1000s exceeded"
    assert m.status == Status(FAILED, "total timeout of 1000s exceeded", 0, 4)


def test_begin_without_a_message_only_starts_the_clock():
    m = _machine()
    assert m.send(Begin(0.0)) == [] and m.status.state == QUEUED
    assert m.send(Tick(1001.0))[0].phase == "total"


def test_boot_timeout_then_batch_timeout_fire_once_each():
    m = _machine()
    m.send(Begin(0.0, "go"))
    m.send(Ready(0.0))
    m.send(BatchStarted(10.0, 0, boot_s=30))
    assert m.send(Tick(40.0)) == [] and m.boot_time_left(35.0) == 5
    assert m.send(Tick(40.1)) == [Expired("boot", 30)]
    assert m.send(Tick(41.0)) == []  # reported once
    assert m.send(Tick(110.5)) == [Expired("batch", 100)]
    assert m.send(Tick(111.0)) == []
    assert not m.finished  # the transport ends the batch (its record says why)


def test_start_marker_ends_the_boot_phase():
    m = _machine()
    m.send(Ready(0.0))
    m.send(BatchStarted(0.0, 0, boot_s=30))
    m.send(GuestStarted(5.0))
    assert m.send(Tick(50.0)) == [] and m.batch_time_left(50.0) == 50


def test_a_probe_retry_of_the_same_batch_restarts_its_clocks():
    m = _machine()
    m.send(Ready(0.0))
    m.send(BatchStarted(0.0, 0, boot_s=8))  # KVM probe, short boot limit
    assert m.send(Tick(9.0)) == [Expired("boot", 8)]
    m.send(BatchStarted(9.0, 0, boot_s=30))  # again under TCG
    assert m.send(Tick(38.0)) == [] and m.send(Tick(39.5)) == [Expired("boot", 30)]


def test_a_batch_without_a_boot_phase_only_has_its_batch_limit():
    m = _machine()
    m.send(Ready(0.0))
    m.send(BatchStarted(0.0, 0))
    assert m.send(Tick(99.0)) == [] and m.send(Tick(101.0)) == [Expired("batch", 100)]


def test_result_seen_gives_the_guest_a_grace_to_power_off_and_no_other_limit():
    m = _machine()
    m.send(Ready(0.0))
    m.send(BatchStarted(0.0, 0, boot_s=30))
    m.send(GuestStarted(1.0))
    m.send(ResultSeen(95.0))
    m.send(ResultSeen(96.0))  # the first sighting counts
    assert m.send(Tick(95.0 + POWEROFF_GRACE_S)) == []  # past batch_s, but the result is in
    assert m.send(Tick(95.1 + POWEROFF_GRACE_S)) == [Expired("poweroff", POWEROFF_GRACE_S)]
    assert m.send(Tick(200.0)) == []


def test_rebooting_opens_a_boot_phase_before_the_batch_clock():
    m = _machine()
    m.send(Ready(0.0))
    m.send(Rebooting(10.0))
    assert m.send(Tick(39.0)) == [] and m.send(Tick(40.5)) == [Expired("boot", 30)]
    m.send(Rebooting(50.0))  # another switch: a fresh boot phase
    assert m.send(Tick(79.0)) == []
    m.send(BatchStarted(80.0, 0))  # the host runs the kernel: measuring
    assert m.send(Tick(179.0)) == [] and m.send(Tick(181.0)) == [Expired("batch", 100)]


def test_no_batch_limits_between_batches():
    m = _machine()
    assert m.send(Tick(10_000.0)) == []  # no Begin: no total clock either
    assert m.batch_time_left(5.0) == 100 and m.boot_time_left(5.0) == 0


def test_expired_reasons():
    assert Expired("batch", 900).reason == "batch timeout: 900s exceeded"
    assert Expired("boot", 120).reason == "boot timeout after 120s"
    assert "power-off" in Expired("poweroff", 10).reason


# ============================================================================ dead workers
def test_worker_gone_is_diagnosed_with_the_last_state_and_log_line():
    m = _machine()
    m.send(Ready(0.0))
    m.send(BatchStarted(0.0, 0))
    m.send(BatchFinished(1.0, _record(Batch(0, "good", 1))))
    m.send(Progress(2.0, "batch 2/4: booting bad (tcg)"))
    acts = m.send(WorkerGone(3.0, 4242, "worker.log: Traceback: MemoryError"))
    assert _kinds(acts) == ["StopWork", "Save"]
    assert acts[1].status == Status(
        FAILED, "worker process 4242 died before finishing (last state: running: batch 2/4: booting bad (tcg)); "
                "worker.log: Traceback: MemoryError", 1, 4)


def test_worker_gone_without_a_log_and_under_another_name():
    m = _machine()
    acts = m.send(WorkerGone(1.0, None, "", name="preparer", doing="submitting"))
    assert acts[-1].status.message == ("preparer None died before submitting "
                                       "(last state: queued: waiting for the worker)")


def test_restore_round_trips_through_json():
    m = _machine()
    m.send(Ready(0.0))
    m.send(BatchStarted(0.0, 0))
    m.send(BatchFinished(1.0, _record(Batch(0, "good", 1))))
    state = json.loads(json.dumps(m.state()))
    back = RunMachine.restore(m.schedule and [(b.label, b.samples) for b in m.schedule], T, state)
    assert back.status == m.status and back.batches == m.batches and back.next_batch() == Batch(1, "bad", 1)
    assert not back.finished
    broken = RunMachine.restore([("good", 1), ("bad", 1)], T, {"batches": []})
    assert broken.finished and broken.status.message == "state.json unreadable"
    assert RunMachine.restore([("good", 1)], None, None).finished  # nothing readable at all
