"""storage/bisections.py on SQLite and PostgreSQL: leases between workers, steps, cancel, the
record-update flag (the SQL the bisection driver relies on for resuming)."""

from __future__ import annotations

import time

import storage.bisections as db
from tests.test_lab_matching import make_record


def test_bisection_rows_leases_steps_and_cancel(store):
    rid = make_record(store)
    b = db.create(store, regression_id=rid, tree="/src/linux", good_ref="v6.1", bad_ref="v6.2", machine="m1",
                  plan={"runs": 5}, bisect={"commits": ["a", "b"]})
    assert b.state == "queued" and b.active and b.steps == [] and b.plan == {"runs": 5}
    assert db.active_for_record(store, rid).id == b.id and [x.id for x in db.for_record(store, rid)] == [b.id]
    # one worker at a time; an expired lease can be taken over
    assert db.take(store, b.id, "w1", 0.5)
    assert not db.take(store, b.id, "w2", 30)
    assert db.takeable(store, "w2") == [] and db.takeable(store, "w1") == [b.id]
    time.sleep(0.7)
    assert db.takeable(store, "w2") == [b.id] and db.take(store, b.id, "w2", 30)
    assert not db.save(store, b.id, "w1", message="stale worker")  # w1 lost it: its writes do nothing
    assert db.save(store, b.id, "w2", state="running", message="running")
    # steps: the open one is found again after a restart
    s0 = db.add_step(store, b.id, 0, "b")
    assert db.open_step(store, b.id).id == s0.id
    db.save_step(store, s0.id, state="running", handle="qemu:20240101T000000-00000000", samples={"good": [1.0]})
    assert db.open_step(store, b.id).handle == "qemu:20240101T000000-00000000"
    db.save_step(store, s0.id, state="done", verdict="bad", change_percent=-30.0)
    assert db.open_step(store, b.id) is None and db.get_step(store, s0.id).finished_at is not None
    s1 = db.add_step(store, b.id, 1, "a")
    got = db.get(store, b.id)
    assert [s.n for s in got.steps] == [0, 1] and got.steps[0].verdict == "bad" and got.steps[1].id == s1.id
    # cancel: a running bisection is flagged for its worker; release frees the lease
    assert db.request_cancel(store, b.id).cancel_requested
    assert db.release(store, "w2") == 1 and db.get(store, b.id, steps=False).owner is None
    assert db.save(store, b.id, None, state="done", result={"kind": "done", "culprit": "a"})
    done = db.get(store, b.id)
    assert not done.active and done.finished_at is not None and done.owner is None
    assert db.pending_record_updates(store) == [b.id]
    assert db.mark_record_updated(store, b.id) and not db.mark_record_updated(store, b.id)
    assert db.pending_record_updates(store) == [] and db.active_for_record(store, rid) is None
    # a queued one nobody holds is cancelled at once
    q = db.create(store, regression_id=rid, tree="/src/linux", good_ref="v6.1", bad_ref="v6.2", machine="m1",
                  plan={})
    assert db.request_cancel(store, q.id).state == "cancelled"
    assert [x.id for x in db.list_bisections(store, states=("cancelled",))] == [q.id]


def test_a_done_bisection_reaches_the_record_and_the_chat_outbox(store):
    """apply_result: the culprit with source lab-bisect (once), the log as evidence, and one
    chat notification whose rendered entry shows the bisect log."""
    import json

    from bot.lab import bisect_driver as drv
    from bot.notify.outbox import list_notifications
    from bot.tracker.records import get_record

    rid = make_record(store, kind="performance", subsystem="mm")
    log = "git bisect start\n# bad: [bbbb] x\ngit bisect bad bbbb\n# first bad commit: [cccc] mm: slow"
    b = db.create(store, regression_id=rid, tree="/src/linux", good_ref="v6.1", bad_ref="v6.2", machine="m1",
                  plan={"recipe": {"name": "syscall-getpid"}}, bisect={"commits": ["cccc", "bbbb"], "steps": []})
    db.save(store, b.id, None, state="done", result={"kind": "done", "culprit": "c" * 40, "subject": "mm: slow",
                                                     "candidates": ["c" * 40], "reason": "", "steps": 3,
                                                     "lab_minutes": 4.0, "log": log})
    config = {"notify": {"irc": [{"server": "irc.example.org", "nick": "rt", "channels": ["#lab"]}],
                         "route": [{"events": ["confirmed"], "targets": ["irc:#lab"]}]}}
    drv.apply_result(store, db.get(store, b.id), config)
    drv.apply_result(store, db.get(store, b.id), config)  # once
    rec = get_record(store, rid)
    assert rec["culprit_commit"] == "c" * 40 and rec["culprit_subject"] == "mm: slow"
    assert rec["overrides"]["culprit_commit"]["source"] == "lab-bisect"
    assert rec["evidence"]["bisection"]["log"] == log
    assert [h["new"] for h in rec["history"] if h["field"] == "bisection"] == ["found"]
    rows = list_notifications(store)
    assert [(r["event"], r["target"], r["state"]) for r in rows] == [("confirmed", "irc:#lab", "queued")]
    from sqlalchemy import select

    from storage.notify_schema import notifications as n

    with store.engine.connect() as conn:
        ref, payload = conn.execute(select(n.c.ref, n.c.payload)).one()
    assert ref == f"bisection:{b.id}" and "c" * 12 in json.dumps(payload)
