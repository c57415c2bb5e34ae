"""The queries of the chat notification outbox (table ``notifications``,
storage/notify_schema.py), and the look-ups that decide whether a tracker transition is
announced.

Rows come back as :class:`Notification` records with timezone-aware datetimes.  Every state
change of a row is conditional on ``state = 'queued'``: a row sent, failed or skipped is never
changed again, and :func:`claim` gives a row to one deliverer at a time (a lease).
"""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

import storage.tracker_schema as ts
from storage import schema
from storage.notify_schema import notifications
from storage.store import aware, utcnow

INSTANCE = "notify:instance"  # the cursors row holding this database's instance id
ERROR_MAX = 2000
REF_MAX = 200


@dataclass(frozen=True)
class Notification:
    """A stored row; the datetimes are timezone-aware."""

    id: int
    key: str
    event: str
    regression_id: int | None
    ref: str
    target: str
    target_kind: str
    payload: dict[str, Any]
    state: str
    attempts: int
    next_attempt_at: datetime
    lease_until: datetime | None
    last_error: str | None
    remote_id: str | None
    thread_root: str | None
    created_at: datetime
    updated_at: datetime
    sent_at: datetime | None

    @classmethod
    def from_row(cls, r) -> "Notification":
        d = dict(r)
        for k in ("next_attempt_at", "lease_until", "created_at", "updated_at", "sent_at"):
            d[k] = aware(d[k])
        return cls(**d)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _id_of(conn, key: str) -> int | None:
    n = notifications
    return conn.execute(select(n.c.id).where(n.c.key == key)).scalar()


# -- enqueue ---------------------------------------------------------------------------------------
_instances: dict[str, str] = {}


def instance_id(store) -> str:
    """A random id made once per database (cursor ``notify:instance``), cached per process.
    Mixed into every idempotency key: record ids start again at 1 in a new database, and a
    homeserver must not take a new notification for a resend of an old one with the same
    transaction id."""
    cached = _instances.get(store.url)
    if cached:
        return cached
    c = schema.cursors
    with store.engine.begin() as conn:
        value = conn.execute(select(c.c.value).where(c.c.key == INSTANCE)).scalar()
        if not value:
            value = {"id": secrets.token_hex(16)}
            try:
                with conn.begin_nested():
                    conn.execute(insert(c).values(key=INSTANCE, value=value, updated_at=utcnow()))
            except IntegrityError:  # made by another process just now
                value = conn.execute(select(c.c.value).where(c.c.key == INSTANCE)).scalar()
    _instances[store.url] = value["id"]
    return value["id"]


def enqueue(store, *, key: str, event: str, regression_id: int, ref: str, target: str, target_kind: str,
            payload: dict[str, Any], now: datetime, skip_reason: str | None = None) -> tuple[int, bool]:
    """Store a ``queued`` row (``skipped`` with ``skip_reason``) unless its idempotency key is
    already there.  Returns (row id, whether this call made it)."""
    with store.engine.begin() as conn:
        existing = _id_of(conn, key)
        if existing is not None:
            return existing, False
        try:
            with conn.begin_nested():
                res = conn.execute(insert(notifications).values(
                    key=key, event=event, regression_id=regression_id, ref=(ref or "")[:REF_MAX], target=target,
                    target_kind=target_kind, payload=payload, state="skipped" if skip_reason else "queued",
                    attempts=0, last_error=skip_reason, next_attempt_at=now, created_at=now, updated_at=now))
            return res.inserted_primary_key[0], True
        except IntegrityError:  # another process queued it at the same moment
            return _id_of(conn, key), False


def transition(store, history_id: int, regression_id: int) -> tuple[datetime | None, str | None]:
    """(when the tracker's history row ``history_id`` was made, the record's status now);
    (None, None) when the record is gone."""
    h, r = ts.regression_history, ts.regressions
    with store.engine.connect() as conn:
        at = conn.execute(select(h.c.at).where(h.c.id == history_id)).scalar()
        status = conn.execute(select(r.c.status).where(r.c.id == regression_id)).scalar()
    return aware(at), status


# -- listing ---------------------------------------------------------------------------------------
def recent(store, *, state: str | None = None, limit: int = 100) -> list[Notification]:
    """The newest rows first, of one state or of all."""
    n = notifications
    q = select(n)
    if state:
        q = q.where(n.c.state == state)
    with store.engine.connect() as conn:
        return [Notification.from_row(r) for r in conn.execute(q.order_by(n.c.id.desc()).limit(limit)).mappings()]


def state_counts(store) -> dict[str, int]:
    n = notifications
    with store.engine.connect() as conn:
        return {s: c for s, c in conn.execute(select(n.c.state, func.count()).group_by(n.c.state)).all()}


# -- delivery --------------------------------------------------------------------------------------
def _free(now: datetime):
    n = notifications
    return and_(n.c.state == "queued", or_(n.c.lease_until.is_(None), n.c.lease_until < now))


def due(store, now: datetime, *, ignore_schedule: bool = False, limit: int = 500) -> list[Notification]:
    """Queued rows not leased, whose next attempt is due (any, with ``ignore_schedule``), in id
    order."""
    n = notifications
    q = select(n).where(_free(now))
    if not ignore_schedule:
        q = q.where(n.c.next_attempt_at <= now)
    with store.engine.connect() as conn:
        return [Notification.from_row(r) for r in conn.execute(q.order_by(n.c.id).limit(limit)).mappings()]


def claim(store, row_id: int, now: datetime, lease: timedelta) -> bool:
    """Lease a queued row until ``now + lease``; False when it is leased or no longer queued."""
    n = notifications
    with store.engine.begin() as conn:
        res = conn.execute(update(n).where(n.c.id == row_id, _free(now))
                           .values(lease_until=now + lease, updated_at=now))
        return res.rowcount == 1


def release(store, row_id: int) -> None:
    n = notifications
    with store.engine.begin() as conn:
        conn.execute(update(n).where(n.c.id == row_id, n.c.state == "queued").values(lease_until=None))


def mark_sent(store, row_id: int, *, remote_id: str | None, thread_root: str | None, now: datetime) -> None:
    n = notifications
    with store.engine.begin() as conn:
        conn.execute(update(n).where(n.c.id == row_id, n.c.state == "queued").values(
            state="sent", sent_at=now, updated_at=now, remote_id=remote_id, thread_root=thread_root,
            attempts=n.c.attempts + 1, lease_until=None, last_error=None))


def mark_attempt(store, row_id: int, *, state: str, attempts: int, error: str, now: datetime,
                 next_attempt_at: datetime) -> None:
    """A failed attempt: ``state`` queued (to retry at ``next_attempt_at``) or failed."""
    n = notifications
    with store.engine.begin() as conn:
        conn.execute(update(n).where(n.c.id == row_id, n.c.state == "queued").values(
            state=state, attempts=attempts, last_error=error[:ERROR_MAX], lease_until=None, updated_at=now,
            next_attempt_at=next_attempt_at))


def expire(store, *, created_before: datetime, note: str, now: datetime) -> int:
    """Queued rows made before ``created_before`` -> failed, ``note`` appended to their error.
    Returns how many."""
    n = notifications
    with store.engine.begin() as conn:
        res = conn.execute(update(n).where(n.c.state == "queued", n.c.created_at < created_before).values(
            state="failed", updated_at=now, lease_until=None, last_error=func.coalesce(n.c.last_error, "") + note))
        return res.rowcount or 0


def earlier_queued(store, row: Notification) -> bool:
    """Whether an earlier row of the same record and target is still queued."""
    if row.regression_id is None:
        return False
    n = notifications
    with store.engine.connect() as conn:
        return conn.execute(select(n.c.id).where(
            n.c.target == row.target, n.c.regression_id == row.regression_id, n.c.state == "queued",
            n.c.id < row.id).limit(1)).first() is not None


def sent_thread(store, row: Notification) -> tuple[str | None, str | None]:
    """(thread root, latest remote id) of the other sent rows of the same record and target:
    the root is what the first one was threaded under, else the first one itself; (None, None)
    when none was sent."""
    if row.regression_id is None:
        return None, None
    n = notifications
    cond = and_(n.c.target == row.target, n.c.regression_id == row.regression_id, n.c.state == "sent",
                n.c.remote_id.is_not(None), n.c.id != row.id)
    with store.engine.connect() as conn:
        first = conn.execute(select(n.c.remote_id, n.c.thread_root).where(cond).order_by(n.c.id).limit(1)).first()
        last = conn.execute(select(n.c.remote_id).where(cond).order_by(n.c.id.desc()).limit(1)).scalar()
    if first is None:
        return None, None
    return first.thread_root or first.remote_id, last
