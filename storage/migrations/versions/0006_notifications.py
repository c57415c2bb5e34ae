"""chat notifications: the durable outbox of IRC and Matrix messages

Revision ID: 0006
Revises: 0005
"""
import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "notifications",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("event", sa.String(32), nullable=False),
        sa.Column("regression_id", sa.Integer, sa.ForeignKey("regressions.id", ondelete="CASCADE")),
        sa.Column("ref", sa.String(200), nullable=False, server_default=""),
        sa.Column("target", sa.String(300), nullable=False),
        sa.Column("target_kind", sa.String(8), nullable=False),
        sa.Column("payload", sa.JSON, nullable=False),
        sa.Column("state", sa.String(8), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("next_attempt_at", TZ, nullable=False),
        sa.Column("lease_until", TZ),
        sa.Column("last_error", sa.Text),
        sa.Column("remote_id", sa.String(255)),
        sa.Column("thread_root", sa.String(255)),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.Column("sent_at", TZ),
        sa.UniqueConstraint("key", name="uq_notifications_key"),
    )
    op.create_index("ix_notifications_due", "notifications", ["state", "next_attempt_at"])
    op.create_index("ix_notifications_thread", "notifications", ["target", "regression_id", "state"])


def downgrade() -> None:
    op.drop_table("notifications")
