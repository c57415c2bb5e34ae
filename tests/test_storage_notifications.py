"""storage/notifications.py on SQLite and the real PostgreSQL: idempotent enqueue, typed rows
with aware datetimes, leases, state changes only on queued rows, threads, and the transition
look-up."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sqlalchemy import insert

import storage.tracker_schema as ts
from storage import notifications as db
from storage.notifications import Notification

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)
LEASE = timedelta(seconds=60)


def enqueue(store, rid, key, *, target="matrix:#r:m.example", at=T0, **kw):
    kind = target.split(":", 1)[0]
    return db.enqueue(store, key=key, event="confirmed", regression_id=rid, ref=kw.pop("ref", ""), target=target,
                      target_kind=kind, payload={"text": key}, now=at, **kw)


def one(store, row_id) -> Notification:
    return {n.id: n for n in db.recent(store, limit=1000)}[row_id]


def test_enqueue_once_per_key_typed_and_aware(store, new_record):
    rid = new_record()
    made = enqueue(store, rid, "k1", ref="r" * 500)
    assert made[1] is True and enqueue(store, rid, "k1") == (made[0], False)
    skipped, _ = enqueue(store, rid, "k2", skip_reason="a backfill")
    n = one(store, made[0])
    assert isinstance(n, Notification) and n.state == "queued" and n.attempts == 0 and len(n.ref) == db.REF_MAX
    assert n.payload == {"text": "k1"} and n.next_attempt_at == T0 and n.created_at.tzinfo is not None
    s = one(store, skipped)
    assert (s.state, s.last_error) == ("skipped", "a backfill")
    assert db.state_counts(store) == {"queued": 1, "skipped": 1}
    assert [x.id for x in db.recent(store, state="skipped")] == [skipped]
    assert [x.id for x in db.recent(store)] == [skipped, made[0]]  # newest first
    assert n.as_dict()["key"] == "k1"


def test_instance_id_made_once_per_database(store):
    db._instances.clear()
    first = db.instance_id(store)
    db._instances.clear()  # read back from the database, not the process cache
    assert db.instance_id(store) == first and len(first) == 32


def test_due_claim_lease_release(store, new_record):
    rid = new_record()
    a, _ = enqueue(store, rid, "a")
    b, _ = enqueue(store, rid, "b", at=T0 + timedelta(hours=1))  # not due yet at T0
    assert [n.id for n in db.due(store, T0)] == [a]
    assert [n.id for n in db.due(store, T0, ignore_schedule=True)] == [a, b]
    assert db.claim(store, a, T0, LEASE) and not db.claim(store, a, T0, LEASE)  # leased
    assert one(store, a).lease_until == T0 + LEASE
    assert db.due(store, T0) == []
    assert db.claim(store, a, T0 + LEASE + timedelta(seconds=1), LEASE)  # the lease ran out
    db.release(store, a)
    assert one(store, a).lease_until is None and [n.id for n in db.due(store, T0)] == [a]


def test_attempts_sent_and_expiry_change_only_queued_rows(store, new_record):
    rid = new_record()
    a, _ = enqueue(store, rid, "a")
    b, _ = enqueue(store, rid, "b", at=T0 - timedelta(days=3))
    db.mark_attempt(store, a, state="queued", attempts=1, error="e" * 3000, now=T0,
                    next_attempt_at=T0 + timedelta(minutes=1))
    n = one(store, a)
    assert (n.state, n.attempts, len(n.last_error)) == ("queued", 1, db.ERROR_MAX)
    assert n.next_attempt_at == T0 + timedelta(minutes=1) and n.updated_at == T0
    db.mark_sent(store, a, remote_id="$ev1", thread_root=None, now=T0 + timedelta(minutes=2))
    n = one(store, a)
    assert (n.state, n.attempts, n.remote_id, n.last_error) == ("sent", 2, "$ev1", None)
    assert n.sent_at == T0 + timedelta(minutes=2) and n.sent_at.tzinfo is not None
    db.mark_attempt(store, a, state="failed", attempts=9, error="late", now=T0, next_attempt_at=T0)
    assert one(store, a).state == "sent"  # never changed again
    assert db.expire(store, created_before=T0 - timedelta(days=1), note=" (too old)", now=T0) == 1
    e = one(store, b)
    assert (e.state, e.last_error) == ("failed", " (too old)")


def test_order_and_threads_per_record_and_target(store, new_record):
    rid, other = new_record(), new_record()
    first, _ = enqueue(store, rid, "1")
    second, _ = enqueue(store, rid, "2")
    third, _ = enqueue(store, rid, "3")
    elsewhere, _ = enqueue(store, other, "4")
    irc, _ = enqueue(store, rid, "5", target="irc:#mm")
    rows = {n.id: n for n in db.recent(store)}
    assert not db.earlier_queued(store, rows[first]) and db.earlier_queued(store, rows[second])
    assert not db.earlier_queued(store, rows[elsewhere]) and not db.earlier_queued(store, rows[irc])
    assert db.sent_thread(store, rows[second]) == (None, None)
    db.mark_sent(store, first, remote_id="$root", thread_root=None, now=T0)
    db.mark_sent(store, second, remote_id="$two", thread_root="$root", now=T0)
    assert db.sent_thread(store, rows[third]) == ("$root", "$two")
    assert db.sent_thread(store, rows[first]) == ("$root", "$two")  # the other: threaded under "$root"
    assert db.sent_thread(store, rows[elsewhere]) == (None, None)


def test_transition_of_a_history_row(store, new_record):
    rid = new_record(status="confirmed")
    with store.engine.begin() as conn:
        hid = conn.execute(insert(ts.regression_history).values(
            regression_id=rid, at=T0, field="status", old="reported", new="confirmed", source="user",
        )).inserted_primary_key[0]
    at, status = db.transition(store, hid, rid)
    assert (at, status) == (T0, "confirmed") and at.tzinfo is not None
    assert db.transition(store, hid + 1000, rid + 1000) == (None, None)
