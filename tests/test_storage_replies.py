"""storage/replies.py on SQLite and the real PostgreSQL: typed rows with aware datetimes, the
send claim (once per event, rate-limit counts in the same transaction), the thread look-ups;
and storage/locks.py."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

from storage import locks
from storage import replies as db
from storage.replies import NewReply, Reply
from tests.test_storage import eml, put

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)
NO_LIMIT = dict(thread_window=timedelta(hours=24), judge=lambda in_thread, in_hour: None)


def new(rid: int, key: str = "1:confirmed:abc", *, status: str = "draft", at: datetime = T0, **kw) -> NewReply:
    return NewReply(regression_id=rid, event_key=key, event_kind="confirmed", facts_hash="abc" * 4, status=status,
                    mode="dry-run" if status == "draft" else "send", created_at=at, **kw)


def test_lock_keys_are_distinct_and_named():
    assert len(set(locks.KEYS.values())) == len(locks.KEYS)
    assert locks.KEYS["reply-send"] == locks.REPLY_SEND and locks.KEYS["tracker"] == locks.TRACKER


def test_record_previous_and_list_are_typed_and_aware(store, new_record):
    rid, other = new_record(), new_record()
    first = db.record(store, new(rid, outbox_path="/o/1", recipients={"to": ["a@example.org"]}))
    second = db.record(store, new(rid, at=T0 + timedelta(minutes=5), reason="x" * 5000, outbox_path="/o/2"))
    db.record(store, new(other, "2:confirmed:abc"))
    sent, draft = db.previous(store, "1:confirmed:abc")
    assert sent is None and isinstance(draft, Reply)
    assert draft.id == second and draft.outbox_path == "/o/2" and len(draft.reason) == db.REASON_MAX
    assert draft.created_at == T0 + timedelta(minutes=5) and draft.created_at.tzinfo is not None
    rows = db.list_replies(store, rid)
    assert [r.id for r in rows] == [second, first]  # newest first
    assert rows[1].recipients == {"to": ["a@example.org"]} and rows[1].sent_at is None
    assert len(db.list_replies(store)) == 3 and len(db.list_replies(store, limit=1)) == 1
    assert rows[0].as_dict()["event_key"] == "1:confirmed:abc"


def test_claim_send_once_per_event_then_finish(store, new_record):
    rid = new_record()
    row = new(rid, status="sending", thread_key="root@x")
    row_id, reason = db.claim_send(store, row, **NO_LIMIT)
    assert row_id is not None and reason is None
    assert db.claim_send(store, row, **NO_LIMIT) == (None, "duplicate")
    sent, _ = db.previous(store, row.event_key)
    assert (sent.id, sent.status, sent.sent_key) == (row_id, "sending", row.event_key)
    db.finish_send(store, row_id, ok=True, reason="one refused", now=T0 + timedelta(seconds=3))
    sent, _ = db.previous(store, row.event_key)
    assert sent.status == "sent" and sent.reason == "one refused"
    assert sent.sent_at == T0 + timedelta(seconds=3) and sent.sent_at.tzinfo is not None


def test_a_failed_send_frees_the_event(store, new_record):
    rid = new_record()
    row = new(rid, status="sending")
    row_id, _ = db.claim_send(store, row, **NO_LIMIT)
    db.finish_send(store, row_id, ok=False, reason="SMTP down", now=T0)
    assert db.previous(store, row.event_key) == (None, None)
    failed = db.list_replies(store, rid)[0]
    assert (failed.status, failed.sent_key, failed.reason) == ("failed", None, "SMTP down")
    again, reason = db.claim_send(store, row, **NO_LIMIT)
    assert again not in (None, row_id) and reason is None


def test_rate_limit_counts_and_refusal(store, new_record):
    rid = new_record()
    seen = []

    def judge(in_thread, in_hour):
        seen.append((in_thread, in_hour))
        return "too many" if in_hour >= 2 else None

    window = timedelta(hours=24)
    old = new(rid, "1:a:1", status="sending", thread_key="t@x", at=T0 - timedelta(hours=30))
    db.claim_send(store, old, thread_window=window, judge=judge)  # outside both windows later
    db.record(store, new(rid, "1:a:2", status="draft", thread_key="t@x", at=T0))  # drafts do not count
    a, _ = db.claim_send(store, new(rid, "1:a:3", status="sending", thread_key="t@x", at=T0 - timedelta(hours=2)),
                         thread_window=window, judge=judge)
    b, _ = db.claim_send(store, new(rid, "1:a:4", status="sending", at=T0 - timedelta(minutes=10)),
                         thread_window=window, judge=judge)
    c, _ = db.claim_send(store, new(rid, "1:a:5", status="sending", at=T0 - timedelta(minutes=5)),
                         thread_window=window, judge=judge)
    d, reason = db.claim_send(store, new(rid, "1:a:6", status="sending", thread_key="t@x", at=T0),
                              thread_window=window, judge=judge)
    assert seen == [(0, 0), (0, 0), (None, 0), (None, 1), (1, 2)]
    assert reason == "too many"
    refused = {r.id: r for r in db.list_replies(store, rid)}[d]
    assert (refused.status, refused.sent_key, refused.reason) == ("refused", None, "too many")
    assert db.previous(store, "1:a:6") == (None, None)  # a refused event may be sent later
    assert None not in (a, b, c)


def test_concurrent_claims_count_each_other(store, new_record):
    """Two senders at once with an hourly limit of one: exactly one goes ahead (PostgreSQL: the
    advisory lock; SQLite: the write lock)."""
    rid = new_record()
    barrier, out = threading.Barrier(2), []

    def claim(key):
        barrier.wait()
        out.append(db.claim_send(store, new(rid, key, status="sending"), thread_window=timedelta(hours=1),
                                 judge=lambda in_thread, in_hour: "limit" if in_hour >= 1 else None))

    threads = [threading.Thread(target=claim, args=(f"1:b:{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(reason or "" for _, reason in out) == ["", "limit"]


def test_thread_root_and_newest(store):
    put(store, eml("r@x", date="Mon, 01 Jan 2024 10:00:00 +0000"),
        eml("a@x", refs=["r@x"], date="Mon, 01 Jan 2024 12:00:00 +0000"),
        eml("b@x", refs=["r@x", "a@x"], date="Mon, 01 Jan 2024 11:00:00 +0000"),
        eml("other@x"))
    assert db.thread_root(store, "b@x") == "r@x" and db.thread_root(store, "r@x") == "r@x"
    assert db.thread_root(store, "missing@x") is None and db.thread_root(store, None) is None
    assert db.thread_newest(store, "r@x") == ["a@x", "b@x", "r@x"]
    assert db.thread_newest(store, "r@x", limit=1) == ["a@x"]
