"""regression tracker: records, related messages, history, applied regzbot commands

Revision ID: 0003
Revises: 0002
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "regressions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("title_source", sa.String(16), nullable=False),
        sa.Column("status", sa.String(24), nullable=False),
        sa.Column("kind", sa.String(16)),
        sa.Column("culprit_commit", sa.String(64)),
        sa.Column("culprit_subject", sa.Text),
        sa.Column("good", sa.String(128)),
        sa.Column("bad", sa.String(128)),
        sa.Column("version_key", sa.String(24)),
        sa.Column("subsystem", sa.String(255)),
        sa.Column("metric", sa.Text),
        sa.Column("search_text", sa.Text),
        sa.Column("change_percent", sa.Float),
        sa.Column("hardware", sa.JSON, nullable=False),
        sa.Column("config", sa.JSON, nullable=False),
        sa.Column("numbers", sa.JSON, nullable=False),
        sa.Column("evidence", sa.JSON, nullable=False),
        sa.Column("confidence", sa.Float),
        sa.Column("overrides", sa.JSON, nullable=False),
        sa.Column("report_message_id", sa.String(998)),
        sa.Column("report_url", sa.Text),
        sa.Column("thread_key", sa.String(998)),
        sa.Column("duplicate_of", sa.Integer, sa.ForeignKey("regressions.id")),
        sa.Column("fix_commit", sa.String(64)),
        sa.Column("fix_subject", sa.Text),
        sa.Column("fix_tree", sa.String(128)),
        sa.Column("ignore_activity", sa.Boolean, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
    )
    op.create_index("ix_regressions_status_updated", "regressions", ["status", "updated_at"])
    op.create_index("ix_regressions_subsystem", "regressions", ["subsystem"])
    op.create_index("ix_regressions_kind", "regressions", ["kind"])
    op.create_index("ix_regressions_culprit", "regressions", ["culprit_commit"])
    op.create_index("ix_regressions_created", "regressions", ["created_at"])
    op.create_index("ix_regressions_updated", "regressions", ["updated_at"])
    op.create_index("ix_regressions_version", "regressions", ["version_key"])
    op.create_index("ix_regressions_report", "regressions", ["report_message_id"])
    op.create_index("ix_regressions_thread", "regressions", ["thread_key"])
    op.create_index("ix_regressions_duplicate_of", "regressions", ["duplicate_of"])
    op.create_table(
        "regression_messages",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("regression_id", sa.Integer, sa.ForeignKey("regressions.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("message_id", sa.String(998), nullable=False),
        sa.Column("relation", sa.String(16), nullable=False),
        sa.Column("url", sa.Text),
        sa.Column("title", sa.Text),
        sa.Column("activity", sa.Boolean, nullable=False),
        sa.Column("added_by", sa.String(998)),
        sa.Column("created_at", TZ, nullable=False),
        sa.UniqueConstraint("regression_id", "message_id", "relation", name="uq_regression_message"),
    )
    op.create_index("ix_regression_messages_msg", "regression_messages", ["message_id"])
    op.create_table(
        "regression_history",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("regression_id", sa.Integer, sa.ForeignKey("regressions.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("at", TZ, nullable=False),
        sa.Column("field", sa.String(32), nullable=False),
        sa.Column("old", sa.Text),
        sa.Column("new", sa.Text),
        sa.Column("actor", sa.Text),
        sa.Column("message_id", sa.String(998)),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("note", sa.Text),
    )
    op.create_index("ix_regression_history_reg", "regression_history", ["regression_id", "id"])
    op.create_table(
        "regzbot_commands_applied",
        sa.Column("message_id", sa.String(998), primary_key=True),
        sa.Column("line_no", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("command", sa.String(32), nullable=False),
        sa.Column("args", sa.Text),
        sa.Column("regression_id", sa.Integer),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("note", sa.Text),
        sa.Column("applied_at", TZ, nullable=False),
    )
    op.create_index("ix_regzbot_commands_outcome", "regzbot_commands_applied", ["outcome"])


def downgrade() -> None:
    op.drop_table("regzbot_commands_applied")
    op.drop_table("regression_history")
    op.drop_table("regression_messages")
    op.drop_table("regressions")
