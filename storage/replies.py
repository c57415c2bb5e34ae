"""The queries of the mail replies (table ``replies``, storage/reply_schema.py), and the two
thread look-ups a reply needs.

Rows come back as :class:`Reply` records with timezone-aware datetimes; rows go in as
:class:`NewReply`.  Never the same reply twice: :func:`claim_send` inserts the ``sending`` row
with ``sent_key`` set (UNIQUE), so a concurrent or earlier send of the same event loses, and
counts the recent sends for the rate limits in the same transaction.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable

from sqlalchemy import func, insert, select, update
from sqlalchemy.exc import IntegrityError

from storage import locks, schema
from storage.reply_schema import replies
from storage.store import aware

REASON_MAX = 2000
ACTIVE = ("sending", "sent")  # the statuses a rate limit counts


@dataclass(frozen=True)
class NewReply:
    """A row to insert (``status``: draft | sending | sent | refused | failed)."""

    regression_id: int
    event_key: str
    event_kind: str
    facts_hash: str
    status: str
    mode: str  # dry-run | send
    created_at: datetime
    reason: str | None = None
    message_id: str | None = None
    in_reply_to: str | None = None
    thread_key: str | None = None
    recipients: dict[str, Any] = field(default_factory=dict)
    outbox_path: str | None = None

    def values(self) -> dict[str, Any]:
        d = asdict(self)
        d["reason"] = self.reason[:REASON_MAX] if self.reason else None
        return d


@dataclass(frozen=True)
class Reply:
    """A stored row; ``created_at`` and ``sent_at`` are timezone-aware."""

    id: int
    regression_id: int
    event_key: str
    event_kind: str
    facts_hash: str
    status: str
    mode: str
    reason: str | None
    message_id: str | None
    in_reply_to: str | None
    thread_key: str | None
    recipients: dict[str, Any]
    outbox_path: str | None
    sent_key: str | None
    created_at: datetime
    sent_at: datetime | None

    @classmethod
    def from_row(cls, r) -> "Reply":
        d = dict(r)
        d["created_at"], d["sent_at"] = aware(d["created_at"]), aware(d["sent_at"])
        return cls(**d)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def record(store, row: NewReply) -> int:
    """Insert a row (a draft, a refusal ...); returns its id."""
    with store.engine.begin() as conn:
        return conn.execute(insert(replies).values(**row.values())).inserted_primary_key[0]


def previous(store, event_key: str) -> tuple[Reply | None, Reply | None]:
    """(the sent or being-sent row, the newest draft) of an event."""
    t = replies
    with store.engine.connect() as conn:
        sent = conn.execute(select(t).where(t.c.sent_key == event_key)).mappings().first()
        draft = conn.execute(select(t).where(t.c.event_key == event_key, t.c.status == "draft")
                             .order_by(t.c.id.desc()).limit(1)).mappings().first()
    return (Reply.from_row(sent) if sent else None), (Reply.from_row(draft) if draft else None)


def list_replies(store, rid: int | None = None, limit: int = 50) -> list[Reply]:
    """The newest rows first, of one record or of all."""
    t = replies
    q = select(t).order_by(t.c.id.desc()).limit(limit)
    if rid is not None:
        q = q.where(t.c.regression_id == rid)
    with store.engine.connect() as conn:
        return [Reply.from_row(r) for r in conn.execute(q).mappings()]


def claim_send(store, row: NewReply, *, thread_window: timedelta,
               judge: Callable[[int | None, int], str | None]) -> tuple[int | None, str | None]:
    """Insert ``row`` as ``sending`` (its ``sent_key`` the event key) and apply the rate
    limits in the same transaction.  ``judge(thread_count, hour_count)`` says why the send is
    refused, or None: ``thread_count`` the active replies to ``row.thread_key`` within
    ``thread_window`` (None without a thread key), ``hour_count`` those in the last hour, both
    before ``row.created_at`` and without this row.  Returns (row id, None) to go ahead, (None,
    "duplicate") when the event is taken, or (row id, reason) when refused (the row then says
    ``refused``, with the reason)."""
    t, now = replies, row.created_at
    try:
        with store.engine.begin() as conn:
            locks.xact_lock(conn, locks.REPLY_SEND)  # serialise the counting; SQLite: the insert's write lock
            row_id = conn.execute(insert(t).values(**{**row.values(), "status": "sending",
                                                      "sent_key": row.event_key})).inserted_primary_key[0]

            def active_since(since: datetime, *where) -> int:
                return conn.execute(select(func.count()).select_from(t).where(
                    t.c.status.in_(ACTIVE), t.c.created_at > since, t.c.id != row_id, *where)).scalar()

            in_thread = (active_since(now - thread_window, t.c.thread_key == row.thread_key)
                         if row.thread_key else None)
            reason = judge(in_thread, active_since(now - timedelta(hours=1)))
            if reason:
                conn.execute(update(t).where(t.c.id == row_id).values(status="refused", sent_key=None,
                                                                      reason=reason[:REASON_MAX]))
            return row_id, reason
    except IntegrityError:
        return None, "duplicate"


def finish_send(store, row_id: int, *, ok: bool, reason: str | None, now: datetime) -> None:
    """The outcome of a claimed send: ``sent`` (at ``now``) or ``failed`` (the event may be
    sent again)."""
    vals = {"status": "sent", "sent_at": now} if ok else {"status": "failed", "sent_key": None}
    with store.engine.begin() as conn:
        conn.execute(update(replies).where(replies.c.id == row_id).values(
            reason=reason[:REASON_MAX] if reason else None, **vals))


# -- threads ------------------------------------------------------------------------------------------
def thread_root(store, mid: str | None) -> str | None:
    """The root of the stored thread of message ``mid``, or None."""
    if not mid:
        return None
    t = schema.thread_nodes
    with store.engine.connect() as conn:
        return conn.execute(select(t.c.root_id).where(t.c.message_id == mid)).scalar()


def thread_newest(store, root: str, limit: int = 200) -> list[str]:
    """Message-IDs of the stored messages of thread ``root``, newest first (undated last)."""
    m, t = schema.messages, schema.thread_nodes
    with store.engine.connect() as conn:
        return list(conn.execute(select(m.c.message_id).select_from(m.join(t, t.c.message_id == m.c.message_id))
                                 .where(t.c.root_id == root).order_by(m.c.date.desc().nulls_last(), m.c.id.desc())
                                 .limit(limit)).scalars())
