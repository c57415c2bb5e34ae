"""The chat notification outbox (bot.notify.outbox; its queries: storage/notifications.py), on the
shared ``storage.schema.metadata``.

Created by migration 0006 (storage/migrations/versions/0006_notifications.py); keep the two in
step.

``notifications``: one row per (event, target) -- stored *before* anything is sent, so nothing
is lost while a chat server is down or the bot restarts.

* ``key``: the idempotency key, a SHA-256 of event, record, ``ref`` and target.  UNIQUE: the
  same event is queued once per target however often it is reported (enqueue is an
  INSERT that ignores the conflict).  The Matrix transaction id is derived from it, so a resend
  after a crash between "server accepted" and "marked sent" is deduplicated by the homeserver.
* ``state``: ``queued`` (waiting or retrying), ``sent`` (the server accepted it; only then),
  ``failed`` (given up: a permanent error, too many attempts, or too old), ``skipped`` (never
  sent: a backfill, an old change, a record closed since; ``last_error`` says which).
* ``attempts``, ``next_attempt_at`` (exponential backoff), ``last_error`` (never a secret).
* ``lease_until``: a deliverer claims a row for a short lease before sending, so two
  deliverers (a CLI pass and the service) never send the same row at the same time.
* ``remote_id``: what the server gave back (the Matrix event id); ``thread_root``: the event
  id the message was threaded under (m.thread), i.e. the first message posted about the
  regression in that room.
* ``payload``: the rendered message (IRC line, or Matrix plain + HTML bodies), rendered when
  the event happened.
"""

from __future__ import annotations

from sqlalchemy import JSON, Column, DateTime, ForeignKey, Index, Integer, String, Table, Text, UniqueConstraint

import storage.tracker_schema  # noqa: F401 - the "regressions" table the foreign key names
from storage.schema import metadata

TZ = DateTime(timezone=True)

STATES = ("queued", "sent", "failed", "skipped")

notifications = Table(
    "notifications", metadata,
    Column("id", Integer, primary_key=True),
    Column("key", String(64), nullable=False),  # sha256 hex of event|record|ref|target
    Column("event", String(32), nullable=False),
    Column("regression_id", Integer, ForeignKey("regressions.id", ondelete="CASCADE")),
    Column("ref", String(200), nullable=False, default=""),  # distinguishes repeated events
    Column("target", String(300), nullable=False),  # "irc:#chan", "matrix:#room:server"
    Column("target_kind", String(8), nullable=False),  # irc | matrix
    Column("payload", JSON, nullable=False),
    Column("state", String(8), nullable=False),  # queued | sent | failed
    Column("attempts", Integer, nullable=False, default=0),
    Column("next_attempt_at", TZ, nullable=False),
    Column("lease_until", TZ),
    Column("last_error", Text),
    Column("remote_id", String(255)),
    Column("thread_root", String(255)),
    Column("created_at", TZ, nullable=False),
    Column("updated_at", TZ, nullable=False),
    Column("sent_at", TZ),
    UniqueConstraint("key", name="uq_notifications_key"),
)
Index("ix_notifications_due", notifications.c.state, notifications.c.next_attempt_at)
Index("ix_notifications_thread", notifications.c.target, notifications.c.regression_id, notifications.c.state)
