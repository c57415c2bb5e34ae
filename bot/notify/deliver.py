"""Delivering the notification outbox (bot/notify/outbox.py) through the adapters of its notifiers
(IRC, Matrix, and any a package adds: bot/notify/notifiers.py).

:class:`Deliverer` (async; a long-running service keeps one, with its adapters connected) and
:func:`deliver_pending` (one synchronous pass, for the CLI): due rows in id order, each claimed
with a short lease, sent, and marked ``sent`` only after the server accepted it.  A failure is
retried with exponential backoff (``attempts``, ``next_attempt_at``) while the server is down;
a permanent failure, ``max_attempts`` or ``max_age_hours`` marks it ``failed``.  A row whose
server is unreachable does not hold up other servers.  :func:`send_test` sends one test
message to every target, directly.

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
from bot.notify.format import test_when
from bot.notify.notifiers import get_notifier, make_adapter
from bot.notify.routing import txn_id
from bot.notify.settings import NotifySettings, settings_from
from storage import notifications as db
from storage.notifications import Notification
from storage.store import utcnow

log = logging.getLogger("regtriage.notify.deliver")


def timed_out(doing: str, adapter) -> str:
    """"timed out connecting", with the real cause when the adapter knows it (a refused nick,
    a failed login, a closed connection ...)."""
    cause = getattr(adapter, "problem", None) or getattr(adapter, "last_error", None)
    return f"timed out {doing}: {cause}" if cause else f"timed out {doing} (no answer from the server)"


def message(payload: dict[str, Any], **kw) -> OutMessage:
    """The message of a stored payload (a notifier's ``payload()``: text, optional HTML)."""
    return OutMessage(text=payload.get("text") or "", html=payload.get("html"), **kw)


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
        (for a notifier that threads follow-ups, as Matrix does; IRC has no threads)."""
        if not get_notifier(row.target_kind).threads:
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
        msg = message(row.payload or {}, txn_id=txn_id(row.key), thread_root=root, reply_to=last)
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
    s = settings_from(config, settings)

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
                msg = message(get_notifier(t.kind).test_payload(t.name, when))
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


__all__ = ["Deliverer", "PermanentError", "TransientError", "deliver_pending", "make_adapter", "send_test"]
