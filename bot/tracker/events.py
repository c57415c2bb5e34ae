"""Tracker events for notifications, read from the records' history.

Every status change of a regression record is a row in ``regression_history``; the service
turns the new ones into events (new regression triaged, rerun scheduled, confirmed, not
reproduced, inconclusive, fix landed) in history order.  The position reached is a cursor in
the database, advanced in the same transaction that hands the events on, so a restart neither
loses nor repeats an event.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

CURSOR_KEY = "events:history"

# status reached -> event kind
STATUS_EVENTS = {
    "triaged": "triaged",
    "rerun-scheduled": "rerun-scheduled",
    "confirmed": "confirmed",
    "not-reproduced": "not-reproduced",
    "inconclusive": "inconclusive",
    "improved": "improved",
    "fix-pending": "fix-landed",
    "fixed": "fix-landed",
}
EVENT_KINDS = tuple(dict.fromkeys(STATUS_EVENTS.values()))


@dataclass(frozen=True)
class Event:
    kind: str
    regression_id: int
    history_id: int
    status: str
    note: str | None = None

    @property
    def key(self) -> str:
        """Idempotency key: one event per history row."""
        return f"{self.kind}:{self.regression_id}:{self.history_id}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "regression_id": self.regression_id, "history_id": self.history_id,
                "status": self.status, "note": self.note, "key": self.key}


def event_for(field: str, old: str | None, new: str | None) -> str | None:
    """The event a history row means, if any (pure)."""
    if field != "status" or not new or new == old:
        return None
    kind = STATUS_EVENTS.get(new)
    if kind == "fix-landed" and old in ("fix-pending", "fixed"):
        return None  # fix-pending -> fixed is the same fix reaching mainline: one event is enough
    return kind


def pending_events(store, limit: int = 500, *, after: int | None = None) -> tuple[list[Event], int]:
    """Events after the cursor (or history id ``after``), oldest first, and the history id they reach."""
    from storage.records import history_after

    start = after if after is not None else int((store.get_cursor(CURSOR_KEY) or {}).get("history_id", 0))
    rows = history_after(store, start, limit)
    events = []
    last = start
    for r in rows:
        last = r.id
        kind = event_for(r.field, r.old, r.new)
        if kind:
            events.append(Event(kind, r.regression_id, r.id, r.new, r.note))
    return events, last


def consume_events(store, handler, limit: int = 500) -> int:
    """Hand every new event to ``handler(event)`` and advance the cursor past them; returns the
    number handled.  ``handler`` must be idempotent per ``event.key`` (a crash between the
    handler and the cursor write hands the same events over again)."""
    total = 0
    while True:
        events, last = pending_events(store, limit)
        start = int((store.get_cursor(CURSOR_KEY) or {}).get("history_id", 0))
        if last == start:
            return total
        for ev in events:
            handler(ev)
        store.set_cursor(CURSOR_KEY, {"history_id": last})
        total += len(events)


def event_mail_received(store, event: Event):
    """When the mail that caused ``event`` (its history row's message) was received
    (:func:`bot.tracker.trust.received_time`: the list server's ``Received:``, else our ingest time --
    never the sender's ``Date:``), or None for events without a stored mail (lab verdicts,
    changes made by hand)."""
    from bot.tracker.trust import mail_received_at
    from storage.records import history_message_id

    return mail_received_at(store, history_message_id(store, event.history_id))


def is_backfill(store, event, max_age_hours: float, now: datetime | None = None) -> bool:
    """True when the mail behind ``event`` was received more than ``max_age_hours`` ago: history
    being ingested (a backfill from git epochs, a first poll of a busy inbox) is tracked but not
    announced, answered nor rerun as if it were new.  The age is the received time
    (bot.tracker.trust.received_time), never the mail's own ``Date:``, which its sender writes."""
    date = event_mail_received(store, event)
    if date is None:
        return False
    if date.tzinfo is None:
        date = date.replace(tzinfo=timezone.utc)
    return (now or datetime.now(timezone.utc)) - date > timedelta(hours=max_age_hours)
