"""The durable notification outbox (table ``notifications``, storage/notify_schema.py).

1. :func:`enqueue_event` -- an event on a record (``confirmed`` on #12 ...): routed to its
   targets ([[notify.route]]), rendered, and stored as one ``queued`` row per target *before*
   anything is sent.  The idempotency key (event, record, ``ref``, target) is UNIQUE: the same
   event reported twice, by two processes or after a restart, is stored once.
2. :func:`announce` -- one tracker transition (a history row) -> :func:`enqueue_event`, keyed
   by the history row id, or ``skipped`` rows with the reason (old mail, old change, closed
   record).  :func:`scan_tracker` (``notify --send-pending``) reads the transitions after its
   cursor ``notify:tracker``; ``regtriage run`` gets them from its event stream.  Both cursors
   start at the beginning of the history, so the two paths announce the same things.
3. :class:`Deliverer` (async; a long-running service keeps one, with its adapters connected)
   and :func:`deliver_pending` (one synchronous pass, for the CLI): due rows in id order, each
   claimed with a short lease, sent, and marked ``sent`` only after the server accepted it.
   A failure is retried with exponential backoff (``attempts``, ``next_attempt_at``) while
   the server is down; a permanent failure, ``max_attempts`` or ``max_age_hours`` marks it
   ``failed``.  A row whose server is unreachable does not hold up other servers.

Exactly once: a crash between "the server accepted it" and "marked sent" leaves the row
queued under its lease; the next pass sends it again with the same Matrix transaction id
(derived from the key), which the homeserver answers with the first event.  IRC has no such
acknowledgement; the adapter confirms each message with PING/PONG, so the window is that
round trip.

Follow-ups: on Matrix, a row about a record that already has a sent row in the same room is
posted in an m.thread under the first one (stored as ``thread_root``).  Rows of one record
and target go out in order: a later one waits while an earlier one is still queued.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from typing import Any, Callable

from bot.notify.base import DeliveryError, OutMessage, PermanentError, TransientError, describe
from bot.notify.routing import idempotency_key, normalize_event, route_event, txn_id
from bot.notify.settings import NotifySettings, TargetSpec, load_settings
from storage import notifications as db
from storage.notifications import Notification
from storage.store import utcnow

log = logging.getLogger("regtriage.notify.outbox")
CURSOR = "notify:tracker"
RESCAN = 200  # history rows re-read below the cursor (rows committed out of id order); enqueue is idempotent


def _settings(config, settings: NotifySettings | None) -> NotifySettings:
    if settings is not None:
        return settings
    if isinstance(config, NotifySettings):
        return config
    return load_settings(config)


def render_payload(spec: TargetSpec, event: str, e: dict[str, Any], settings: NotifySettings) -> dict[str, Any]:
    from bot.notify.format import irc_line, matrix_bodies

    if spec.kind == "irc":
        return {"text": irc_line(event, e, settings.base_url)}
    plain, html = matrix_bodies(event, e, settings.base_url)
    return {"text": plain, "html": html}


def timed_out(doing: str, adapter) -> str:
    """"timed out connecting", with the real cause when the adapter knows it (a refused nick,
    a failed login, a closed connection ...)."""
    cause = getattr(adapter, "problem", None) or getattr(adapter, "last_error", None)
    return f"timed out {doing}: {cause}" if cause else f"timed out {doing} (no answer from the server)"


# -- enqueue ---------------------------------------------------------------------------------------
def instance_id(store) -> str:
    """A random id made once per database (cursor ``notify:instance``) and mixed into every
    idempotency key: record ids start again at 1 in a new database, and the homeserver must
    not take a new notification for a resend of an old one with the same transaction id."""
    return db.instance_id(store)


def enqueue_event(store, event: str, rid: int, config=None, *, ref: str = "", settings: NotifySettings | None = None,
                  now: datetime | None = None, entry: dict[str, Any] | None = None,
                  skip_reason: str | None = None) -> list[dict[str, Any]]:
    """Queue ``event`` on record ``rid`` for every target its routes name.  Returns one dict
    per target: ``{"id", "target", "key", "created"}`` (``created`` False: it was already
    queued or sent).  ``ref`` tells apart repeated events of the same kind on one record
    (the tracker's history row id for transitions); without it an event is notified once per
    record and target.  ``skip_reason``: store the rows as ``skipped`` (never sent) with it."""
    from bot.tracker.entry import entry as load_entry

    s = _settings(config, settings)
    event = normalize_event(event)
    e = entry if entry is not None else load_entry(store, rid)
    if e is None:
        raise KeyError(f"no regression record {rid}")
    now = now or utcnow()
    out = []
    instance = instance_id(store)
    for target in route_event(s.routes, event, e):
        spec = s.resolve_target(target)
        key = idempotency_key(event, rid, ref, spec.name, instance)
        row_id, created = db.enqueue(store, key=key, event=event, regression_id=rid, ref=ref, target=spec.name,
                                     target_kind=spec.kind, payload=render_payload(spec, event, e, s), now=now,
                                     skip_reason=skip_reason)
        out.append({"id": row_id, "target": spec.name, "key": key, "created": created})
    return out


SUPERSEDED_BY_CLOSE = ("triaged", "rerun-scheduled")
CLOSED_STATUSES = ("fixed", "resolved", "duplicate", "not-reproduced", "inconclusive")


def announce(store, event, config=None, *, settings: NotifySettings | None = None,
             now: datetime | None = None) -> dict[str, Any]:
    """One tracker transition (:class:`bot.tracker.events.Event`) -> the outbox, once per transition and
    target (the key holds the history row id: a record reaching the same status again is a new
    announcement).  Used by ``regtriage run`` and ``notify --send-pending`` alike.  Not announced
    but stored as ``skipped`` rows with the reason (never silently lost): an event caused by mail
    *received* more than ``[notify] max_age_hours`` ago (a backfill; the mail's Date: is not
    believed), a transition itself older than that (history from before the notifier ran), and
    a "new regression" / "rerun scheduled" for a record that has since been closed.
    Returns ``{"queued": n, "skipped": n, "reason": str | None}``."""
    from bot.tracker.events import is_backfill

    s = _settings(config, settings)
    now = now or utcnow()
    limit = timedelta(hours=s.max_age_hours)
    at, status = db.transition(store, event.history_id, event.regression_id)
    reason = None
    if status is None:
        return {"queued": 0, "skipped": 0, "reason": "the record is gone"}
    if is_backfill(store, event, s.max_age_hours, now=now):
        reason = f"caused by mail received more than {s.max_age_hours:g} h ago (a backfill): tracked, not announced"
    elif at is not None and now - at > limit:
        reason = f"the change is older than {s.max_age_hours:g} h: tracked, not announced"
    elif event.kind in SUPERSEDED_BY_CLOSE and status in CLOSED_STATUSES:
        reason = f"the record has since been closed ({status}): not announced"
    made = enqueue_event(store, event.kind, event.regression_id, settings=s, ref=f"history:{event.history_id}",
                         now=now, skip_reason=reason)
    n = sum(1 for m in made if m["created"])
    return {"queued": 0 if reason else n, "skipped": n if reason else 0, "reason": reason}


def scan_tracker(store, config=None, *, settings: NotifySettings | None = None) -> dict[str, int]:
    """Tracker transitions since the last scan (cursor ``notify:tracker``) -> :func:`announce`.
    The cursor starts at the beginning of the history, as the service's event cursor does: the
    first scan of a database sees every transition, announces the recent ones and records the
    old ones as skipped.  A few rows below the cursor are read again (rows committed out of id
    order); announcing is idempotent per transition."""
    from bot.tracker.events import pending_events

    s = _settings(config, settings)
    stats = {"events": 0, "queued": 0, "skipped": 0}
    state = store.get_cursor(CURSOR)
    last = int(state.get("last_id", 0)) if isinstance(state, dict) else 0
    start = max(0, last - RESCAN)
    while True:
        events, reached = pending_events(store, after=start)
        if reached == start:
            break
        for ev in events:
            try:
                out = announce(store, ev, settings=s)
            except KeyError:
                continue
            stats["events"] += 1 if ev.history_id > last else 0
            stats["queued"] += out["queued"]
            stats["skipped"] += out["skipped"]
        start = reached
        last = max(last, reached)
        store.set_cursor(CURSOR, {"last_id": last})
    return stats


# -- listing ----------------------------------------------------------------------------------------
LISTED = ("id", "event", "regression_id", "target", "state", "attempts", "next_attempt_at", "last_error",
          "remote_id", "thread_root", "created_at", "sent_at", "key")


def listed(n: Notification) -> dict[str, Any]:
    """A row as ``notify --list`` shows it (JSON-ready: times as ISO 8601 strings)."""
    d = {k: getattr(n, k) for k in LISTED}
    for k in ("next_attempt_at", "created_at", "sent_at"):
        d[k] = d[k].isoformat() if d[k] else None
    return d


def list_notifications(store, *, state: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    return [listed(n) for n in db.recent(store, state=state, limit=limit)]


def counts(store) -> dict[str, int]:
    return db.state_counts(store)


# -- delivery ---------------------------------------------------------------------------------------
def make_adapter(account):
    if account.kind == "irc":
        from bot.notify.irc import IrcAdapter

        return IrcAdapter(account)
    from bot.notify.matrix import MatrixAdapter

    return MatrixAdapter(account)


class Deliverer:
    """Delivers due outbox rows through adapters (one per configured connection).

    ``adapters``: already started adapters keyed by ``(kind, name)`` (a service passes its
    own, and they stay open); missing ones are made with ``adapter_factory`` and started on
    first use, and :meth:`close` stops only those."""

    def __init__(self, store, settings: NotifySettings, *, adapters: dict[tuple[str, str], Any] | None = None,
                 adapter_factory: Callable[[Any], Any] = make_adapter) -> None:
        self.store = store
        self.s = settings
        self.adapters: dict[tuple[str, str], Any] = dict(adapters or {})
        self._own: set[tuple[str, str]] = set()
        self.factory = adapter_factory

    async def close(self) -> None:
        for key in list(self._own):
            a = self.adapters.pop(key, None)
            if a is not None:
                try:
                    await a.stop()
                except Exception:  # noqa: BLE001
                    log.exception("stopping %s", key)
        self._own.clear()

    async def _adapter(self, kind: str, name: str):
        key = (kind, name)
        a = self.adapters.get(key)
        if a is None:
            a = self.factory(self.s.account(kind, name))
            self.adapters[key] = a
            self._own.add(key)
        if not getattr(a, "connected", False):
            await a.start(wait=True, timeout=self.s.send_timeout)
        return a

    # -- row state changes -----------------------------------------------------------------------
    def _claim(self, row_id: int, now: datetime) -> bool:
        return db.claim(self.store, row_id, now, timedelta(seconds=self.s.lease))

    def _mark_sent(self, row: Notification, remote_id: str | None, thread_root: str | None) -> None:
        db.mark_sent(self.store, row.id, remote_id=remote_id, thread_root=thread_root, now=utcnow())

    def _mark_failed_attempt(self, row: Notification, error: str, *, permanent: bool, now: datetime) -> str:
        """Count a failed attempt: retry later with exponential backoff, or give up (a
        permanent error, ``max_attempts``).  Returns the row's new state."""
        attempts = row.attempts + 1
        too_many = attempts >= self.s.max_attempts
        state = "failed" if permanent or too_many else "queued"
        if too_many and not permanent:
            error = f"{error} (gave up after {attempts} attempts)"
        delay = min(self.s.retry_max, self.s.retry_base * (2 ** min(attempts - 1, 30)))
        db.mark_attempt(self.store, row.id, state=state, attempts=attempts, error=error, now=now,
                        next_attempt_at=now + timedelta(seconds=delay))
        return state

    def _expire(self, now: datetime) -> int:
        return db.expire(self.store, created_before=now - timedelta(hours=self.s.max_age_hours), now=now,
                         note=f" (older than {self.s.max_age_hours:g} h: dropped)")

    def _thread(self, row: Notification) -> tuple[str | None, str | None]:
        """(root event, latest event) of the sent rows about the same record in the same room
        (Matrix threads; IRC has none)."""
        if row.target_kind != "matrix":
            return None, None
        return db.sent_thread(self.store, row)

    # -- the pass ------------------------------------------------------------------------------------
    async def run_once(self, *, now: datetime | None = None, ignore_schedule: bool = False,
                       limit: int = 500) -> dict[str, Any]:
        """One pass over the due rows.  Returns counts and the errors per target."""
        now = now or utcnow()
        stats: dict[str, Any] = {"due": 0, "sent": 0, "retry": 0, "failed": 0, "waiting": 0,
                                 "expired": self._expire(now), "errors": {}}
        rows = db.due(self.store, now, ignore_schedule=ignore_schedule, limit=limit)
        stats["due"] = len(rows)
        groups: dict[tuple[str, str], list[Notification]] = {}
        for row in rows:
            try:
                spec = self.s.resolve_target(row.target)
            except Exception as exc:  # noqa: BLE001 - target no longer configured
                if self._claim(row.id, now):
                    self._mark_failed_attempt(row, f"target no longer configured: {exc}", permanent=True, now=now)
                    stats["failed"] += 1
                continue
            groups.setdefault((spec.kind, spec.account), []).append(row)
        await asyncio.gather(*(self._run_group(kind, account, grp, now, stats)
                               for (kind, account), grp in groups.items()))
        return stats

    def _count_failure(self, row: Notification, err: str, *, permanent: bool, now: datetime,
                       stats: dict[str, Any]) -> None:
        state = self._mark_failed_attempt(row, err, permanent=permanent, now=now)
        stats["failed" if state == "failed" else "retry"] += 1
        stats["errors"][row.target] = err

    async def _run_group(self, kind: str, account: str, rows: list[Notification], now: datetime,
                         stats: dict[str, Any]) -> None:
        """The due rows of one connection: connect (or count the attempt of each), then send in
        order, holding back later rows of a record whose earlier row is not out yet."""
        try:
            adapter = await asyncio.wait_for(self._adapter(kind, account), self.s.send_timeout + 5)
        except (DeliveryError, asyncio.TimeoutError, OSError) as exc:
            err = describe(exc) if not isinstance(exc, asyncio.TimeoutError) else \
                timed_out("connecting", self.adapters.get((kind, account)))
            for row in rows:
                if self._claim(row.id, now):
                    self._count_failure(row, err, permanent=isinstance(exc, PermanentError), now=now, stats=stats)
            return
        held: set[tuple[str, int | None]] = set()
        down: str | None = None
        for row in rows:
            hold_key = (row.target, row.regression_id)
            if row.regression_id is not None and hold_key in held:
                stats["waiting"] += 1
                continue
            if not self._claim(row.id, now):
                continue
            if down is not None:  # the connection broke during this pass: count the attempt, retry later
                self._mark_failed_attempt(row, down, permanent=False, now=now)
                stats["retry"] += 1
                continue
            if db.earlier_queued(self.store, row):
                db.release(self.store, row.id)
                held.add(hold_key)
                stats["waiting"] += 1
                continue
            sent, down = await self._send_row(adapter, row, now, stats)
            if not sent:
                held.add(hold_key)

    async def _send_row(self, adapter, row: Notification, now: datetime,
                        stats: dict[str, Any]) -> tuple[bool, str | None]:
        """Send one claimed row (threaded under the record's first message in a Matrix room).
        Returns (whether it was sent, the error when the connection is down since)."""
        spec = self.s.resolve_target(row.target)
        root, last = self._thread(row)
        payload = row.payload or {}
        msg = OutMessage(text=payload.get("text") or "", html=payload.get("html"), txn_id=txn_id(row.key),
                         thread_root=root, reply_to=last)
        try:
            sent = await asyncio.wait_for(adapter.send(spec.dest, msg), self.s.send_timeout)
        except (DeliveryError, asyncio.TimeoutError, OSError) as exc:
            err = timed_out("sending", adapter) if isinstance(exc, asyncio.TimeoutError) else describe(exc)
            permanent = isinstance(exc, PermanentError)
            self._count_failure(row, err, permanent=permanent, now=now, stats=stats)
            return False, (err if not permanent and not getattr(adapter, "connected", True) else None)
        self._mark_sent(row, sent.remote_id, sent.thread_root)
        stats["sent"] += 1
        return True, None


def deliver_pending(store, config=None, *, settings: NotifySettings | None = None, now: datetime | None = None,
                    ignore_schedule: bool = False, adapter_factory: Callable[[Any], Any] = make_adapter
                    ) -> dict[str, Any]:
    """One synchronous delivery pass (connects, sends what is due, disconnects).  Not for use
    inside a running event loop: there, keep a :class:`Deliverer`."""
    s = _settings(config, settings)

    async def go():
        d = Deliverer(store, s, adapter_factory=adapter_factory)
        try:
            return await d.run_once(now=now, ignore_schedule=ignore_schedule)
        finally:
            await d.close()

    return asyncio.run(go())


async def send_test(settings: NotifySettings, *, adapter_factory: Callable[[Any], Any] = make_adapter,
                    now: datetime | None = None) -> list[dict[str, Any]]:
    """One test message to every configured target, directly (not through the outbox).
    Returns ``[{"target", "ok", "error"}]``."""
    from bot.notify.format import irc_test_line, matrix_test_bodies, test_when

    when = test_when(now or utcnow())
    results: list[dict[str, Any]] = []

    async def one_account(account) -> list[dict[str, Any]]:
        specs = [t for t in settings.targets() if t.kind == account.kind and t.account == account.name]
        a = adapter_factory(account)
        out = []
        try:
            try:
                await asyncio.wait_for(a.start(wait=True, timeout=settings.send_timeout), settings.send_timeout + 5)
            except (DeliveryError, asyncio.TimeoutError, OSError) as exc:
                err = timed_out("connecting", a) if isinstance(exc, asyncio.TimeoutError) else describe(exc)
                return [{"target": t.name, "ok": False, "error": err} for t in specs]
            for t in specs:
                if t.kind == "irc":
                    msg = OutMessage(text=irc_test_line(t.name, when))
                else:
                    plain, html = matrix_test_bodies(t.name, when)
                    msg = OutMessage(text=plain, html=html)
                try:
                    await asyncio.wait_for(a.send(t.dest, msg), settings.send_timeout)
                    out.append({"target": t.name, "ok": True, "error": None})
                except (DeliveryError, asyncio.TimeoutError, OSError) as exc:
                    err = timed_out("sending", a) if isinstance(exc, asyncio.TimeoutError) else describe(exc)
                    out.append({"target": t.name, "ok": False, "error": err})
            return out
        finally:
            await a.stop()

    for part in await asyncio.gather(*(one_account(a) for a in settings.accounts())):
        results += part
    return results


__all__ = ["Deliverer", "PermanentError", "TransientError", "counts", "deliver_pending", "enqueue_event",
           "list_notifications", "scan_tracker", "send_test"]
