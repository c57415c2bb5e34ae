"""mail replies: drafts, sends and refusals, with the event each one is about

Revision ID: 0004
Revises: 0003
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "replies",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("regression_id", sa.Integer, sa.ForeignKey("regressions.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("event_key", sa.String(200), nullable=False),
        sa.Column("event_kind", sa.String(24), nullable=False),
        sa.Column("facts_hash", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("mode", sa.String(8), nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("message_id", sa.String(998)),
        sa.Column("in_reply_to", sa.String(998)),
        sa.Column("thread_key", sa.String(998)),
        sa.Column("recipients", sa.JSON, nullable=False),
        sa.Column("outbox_path", sa.Text),
        sa.Column("sent_key", sa.String(200)),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("sent_at", TZ),
        sa.UniqueConstraint("sent_key", name="uq_replies_sent_key"),
    )
    op.create_index("ix_replies_event", "replies", ["event_key"])
    op.create_index("ix_replies_thread", "replies", ["thread_key", "created_at"])
    op.create_index("ix_replies_status", "replies", ["status", "created_at"])
    op.create_index("ix_replies_regression", "replies", ["regression_id"])


def downgrade() -> None:
    op.drop_table("replies")
