"""messages, thread containers, quarantine, subscriptions, cursors

Revision ID: 0001
Revises:
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "messages",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("message_id", sa.String(998), nullable=False, unique=True),
        sa.Column("synthetic_id", sa.Boolean, nullable=False),
        sa.Column("subject", sa.Text, nullable=False),
        sa.Column("from_addr", sa.Text, nullable=False),
        sa.Column("date", TZ),
        sa.Column("date_raw", sa.Text),
        sa.Column("in_reply_to", sa.String(998)),
        sa.Column("refs", sa.JSON, nullable=False),
        sa.Column("headers", sa.JSON, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("raw", sa.LargeBinary, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("problems", sa.JSON, nullable=False),
        sa.Column("origin", sa.Text, nullable=False),
        sa.Column("ingested_at", TZ, nullable=False),
    )
    op.create_index("ix_messages_date", "messages", ["date"])
    op.create_table(
        "thread_nodes",
        sa.Column("message_id", sa.String(998), primary_key=True),
        sa.Column("parent_id", sa.String(998)),
        sa.Column("root_id", sa.String(998), nullable=False),
        sa.Column("present", sa.Boolean, nullable=False),
    )
    op.create_index("ix_thread_nodes_root", "thread_nodes", ["root_id"])
    op.create_index("ix_thread_nodes_parent", "thread_nodes", ["parent_id"])
    op.create_table(
        "quarantine",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("origin", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("message_id", sa.String(998)),
        sa.Column("raw", sa.LargeBinary, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.UniqueConstraint("sha256", "reason", name="uq_quarantine_sha_reason"),
    )
    op.create_table(
        "subscriptions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("query", sa.Text, nullable=False),
        sa.Column("state", sa.JSON, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("last_poll_at", TZ),
        sa.Column("last_error", sa.Text),
        sa.UniqueConstraint("kind", "url", "query", name="uq_subscription"),
    )
    op.create_table(
        "source_errors",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("subscription_id", sa.Integer,
                  sa.ForeignKey("subscriptions.id", ondelete="CASCADE")),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("at", TZ, nullable=False),
    )
    op.create_table(
        "cursors",
        sa.Column("key", sa.String(512), primary_key=True),
        sa.Column("value", sa.JSON, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
    )


def downgrade() -> None:
    for name in ("cursors", "source_errors", "subscriptions", "quarantine", "thread_nodes", "messages"):
        op.drop_table(name)
