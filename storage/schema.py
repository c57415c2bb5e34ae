"""Table definitions (SQLAlchemy Core).  Alembic migrations in storage/migrations create them;
this module is what the code queries against.  Keep the two in step."""

from __future__ import annotations

from sqlalchemy import (JSON, Boolean, Column, DateTime, Float, ForeignKey, Index, Integer, LargeBinary,
                        MetaData, String, Table, Text, UniqueConstraint)

metadata = MetaData()

messages = Table(
    "messages", metadata,
    Column("id", Integer, primary_key=True),
    Column("message_id", String(998), nullable=False, unique=True),  # bot.sources.mail.msgid_key
    Column("synthetic_id", Boolean, nullable=False, default=False),
    Column("message_id_full", Text),  # the whole Message-ID when message_id is a hash of it
    Column("subject", Text, nullable=False, default=""),
    Column("from_addr", Text, nullable=False, default=""),
    Column("date", DateTime(timezone=True)),
    Column("date_raw", Text),
    Column("in_reply_to", String(998)),
    Column("refs", JSON, nullable=False),
    Column("headers", JSON, nullable=False),
    Column("body", Text, nullable=False, default=""),
    Column("raw", LargeBinary, nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("size", Integer, nullable=False),
    Column("problems", JSON, nullable=False),
    Column("origin", Text, nullable=False),
    Column("ingested_at", DateTime(timezone=True), nullable=False),
)
Index("ix_messages_date", messages.c.date)

# JWZ containers: one row per Message-ID seen, present or not (placeholder).
thread_nodes = Table(
    "thread_nodes", metadata,
    Column("message_id", String(998), primary_key=True),
    Column("parent_id", String(998)),
    Column("root_id", String(998), nullable=False),
    Column("present", Boolean, nullable=False, default=False),
)
Index("ix_thread_nodes_root", thread_nodes.c.root_id)
Index("ix_thread_nodes_parent", thread_nodes.c.parent_id)

quarantine = Table(
    "quarantine", metadata,
    Column("id", Integer, primary_key=True),
    Column("origin", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("message_id", String(998)),
    Column("raw", LargeBinary, nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("size", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("sha256", "reason", name="uq_quarantine_sha_reason"),
)

subscriptions = Table(
    "subscriptions", metadata,
    Column("id", Integer, primary_key=True),
    Column("kind", String(16), nullable=False),  # inbox | search | git
    Column("url", Text, nullable=False),
    Column("query", Text, nullable=False, default=""),
    Column("state", JSON, nullable=False),  # feed validators, last entry seen, git cursors
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("last_poll_at", DateTime(timezone=True)),
    Column("last_error", Text),
    UniqueConstraint("kind", "url", "query", name="uq_subscription"),
)

source_errors = Table(
    "source_errors", metadata,
    Column("id", Integer, primary_key=True),
    Column("subscription_id", Integer, ForeignKey("subscriptions.id", ondelete="CASCADE")),
    Column("source", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
)

# Resumable cursors for file and git sources that are not subscriptions (e.g. ingest of a
# large mbox: byte offset reached), keyed by a stable source key.
cursors = Table(
    "cursors", metadata,
    Column("key", String(512), primary_key=True),
    Column("value", JSON, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

# One row per message the extractor has looked at (regression or not), so each message is
# extracted once; ``claim`` holds the contract JSON plus the located facts (provenance).
claims = Table(
    "claims", metadata,
    Column("message_id", String(998), primary_key=True),
    Column("is_regression", Boolean, nullable=False),
    Column("confidence", Float, nullable=False),
    Column("kind", String(16)),
    Column("culprit", String(64)),
    Column("claim", JSON),
    Column("extractor_version", String(32), nullable=False),
    Column("extracted_at", DateTime(timezone=True), nullable=False),
)
Index("ix_claims_regression", claims.c.is_regression)
Index("ix_claims_culprit", claims.c.culprit)

# The merged claim of a thread (newer statements refine older ones).
thread_claims = Table(
    "thread_claims", metadata,
    Column("root_id", String(998), primary_key=True),
    Column("is_regression", Boolean, nullable=False),
    Column("confidence", Float, nullable=False),
    Column("claim", JSON, nullable=False),
    Column("messages", JSON, nullable=False),  # message ids that contributed, oldest first
    Column("updated_at", DateTime(timezone=True), nullable=False),
)
