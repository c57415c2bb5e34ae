"""The durable notification outbox (table ``notifications``, storage/notify_schema.py): what
goes in.

1. :func:`enqueue_event` -- an event on a record (``confirmed`` on #12 ...): routed to its
   targets ([[notify.route]]), rendered, and stored as one ``queued`` row per target *before*
   anything is sent.  The idempotency key (event, record, ``ref``, target) is UNIQUE: the same
   event reported twice, by two processes or after a restart, is stored once.
2. :func:`announce` -- one tracker transition (a history row) -> :func:`enqueue_event`, keyed
   by the history row id, or ``skipped`` rows with the reason (old mail, old change, closed
   record).  :func:`scan_tracker` (``notify --send-pending``) reads the transitions after its
   cursor ``notify:tracker``; ``regtriage run`` gets them from its event stream.  Both cursors
   start at the beginning of the history, so the two paths announce the same things.
3. :func:`list_notifications` -- the rows as ``notify --list`` shows them.

Delivery (the rows -> IRC, Matrix or another notifier, exactly once) is bot/notify/deliver.py; the queries are
storage/notifications.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from bot.notify.notifiers import get_notifier
from bot.notify.routing import idempotency_key, normalize_event, route_event
from bot.notify.settings import NotifySettings, TargetSpec, settings_from
from storage import notifications as db
from storage.notifications import Notification
from storage.store import utcnow

CURSOR = "notify:tracker"
RESCAN = 200  # history rows re-read below the cursor (rows committed out of id order); enqueue is idempotent


def render_payload(spec: TargetSpec, event: str, e: dict[str, Any], settings: NotifySettings) -> dict[str, Any]:
    """What is stored for ``event`` on record ``e`` to target ``spec``: its notifier's payload."""
    return get_notifier(spec.kind).payload(event, e, settings.base_url)


# -- enqueue ---------------------------------------------------------------------------------------
def enqueue_event(store, event: str, rid: int, config=None, *, ref: str = "", settings: NotifySettings | None = None,
                  now: datetime | None = None, entry: dict[str, Any] | None = None,
                  skip_reason: str | None = None) -> list[dict[str, Any]]:
    """Queue ``event`` on record ``rid`` for every target its routes name.  Returns one dict
    per target: ``{"id", "target", "key", "created"}`` (``created`` False: it was already
    queued or sent).  ``ref`` tells apart repeated events of the same kind on one record
    (the tracker's history row id for transitions); without it an event is notified once per
    record and target.  ``skip_reason``: store the rows as ``skipped`` (never sent) with it."""
    from bot.tracker.entry import entry as load_entry

    s = settings_from(config, settings)
    event = normalize_event(event)
    e = entry if entry is not None else load_entry(store, rid)
    if e is None:
        raise KeyError(f"no regression record {rid}")
    now = now or utcnow()
    out = []
    instance = db.instance_id(store)  # record ids start again at 1 in a new database
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

    s = settings_from(config, settings)
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

    s = settings_from(config, settings)
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


__all__ = ["announce", "counts", "enqueue_event", "list_notifications", "scan_tracker"]
