"""Tables of the mail replies (bot.reply; their queries: storage/replies.py), on the shared
``storage.schema.metadata``.

Created by migration 0004 (storage/migrations/versions/0004_replies.py); keep the two in step.

``replies``: one row per reply attempt -- a draft written to the outbox, a message sent (or
being sent), a refusal (rate limit, allow-list, loop protection, configuration) or a failed
send -- each with its reason.  ``event_key`` names what the reply is about: the record, the
event kind (``triaged``, ``confirmed`` ...) and a hash of the facts it states.

Never the same reply twice: ``sent_key`` is the event key on rows that were sent or are being
sent (status ``sending``/``sent``) and NULL otherwise; its UNIQUE constraint makes the claim
"I am sending this event" atomic across processes on SQLite and PostgreSQL alike (NULLs do not
collide).
"""

from __future__ import annotations

from sqlalchemy import (JSON, Column, DateTime, ForeignKey, Index, Integer, String, Table, Text,
                        UniqueConstraint)

import storage.tracker_schema  # noqa: F401 - the "regressions" table the foreign key names
from storage.schema import metadata

TZ = DateTime(timezone=True)

STATUSES = ("draft", "sending", "sent", "refused", "failed")

replies = Table(
    "replies", metadata,
    Column("id", Integer, primary_key=True),
    Column("regression_id", Integer, ForeignKey("regressions.id", ondelete="CASCADE"), nullable=False),
    Column("event_key", String(200), nullable=False),  # "<record id>:<event kind>:<facts hash>"
    Column("event_kind", String(24), nullable=False),
    Column("facts_hash", String(64), nullable=False),
    Column("status", String(16), nullable=False),  # draft|sending|sent|refused|failed
    Column("mode", String(8), nullable=False),  # dry-run|send
    Column("reason", Text),  # why refused/failed; notes (dropped lists) for drafts and sends
    Column("message_id", String(998)),  # the Message-ID the reply was given
    Column("in_reply_to", String(998)),  # the message it answers
    Column("thread_key", String(998)),  # thread root of the answered message (per-thread limit)
    Column("recipients", JSON, nullable=False),  # {"to": [...], "cc": [...], "dropped": [...]}
    Column("outbox_path", Text),
    Column("sent_key", String(200)),  # = event_key while sending/sent, else NULL
    Column("created_at", TZ, nullable=False),
    Column("sent_at", TZ),
    UniqueConstraint("sent_key", name="uq_replies_sent_key"),
)
Index("ix_replies_event", replies.c.event_key)
Index("ix_replies_thread", replies.c.thread_key, replies.c.created_at)
Index("ix_replies_status", replies.c.status, replies.c.created_at)
Index("ix_replies_regression", replies.c.regression_id)
