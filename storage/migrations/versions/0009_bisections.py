"""lab bisections: automatic bisections and their steps

Revision ID: 0009
Revises: 0008
"""
import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "lab_bisections",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("regression_id", sa.Integer, sa.ForeignKey("regressions.id", ondelete="CASCADE")),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("tree", sa.Text, nullable=False),
        sa.Column("good_ref", sa.String(200)),
        sa.Column("bad_ref", sa.String(200)),
        sa.Column("machine", sa.String(64)),
        sa.Column("plan", sa.JSON, nullable=False),
        sa.Column("bisect", sa.JSON),
        sa.Column("ends", sa.JSON),
        sa.Column("result", sa.JSON),
        sa.Column("owner", sa.String(128)),
        sa.Column("lease_until", TZ),
        sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("record_updated", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("message", sa.Text),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.Column("finished_at", TZ),
    )
    op.create_index("ix_lab_bisections_state", "lab_bisections", ["state"])
    op.create_index("ix_lab_bisections_regression", "lab_bisections", ["regression_id"])
    op.create_table(
        "lab_bisection_steps",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("bisection_id", sa.Integer, sa.ForeignKey("lab_bisections.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("n", sa.Integer, nullable=False),
        sa.Column("commit", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("build", sa.JSON),
        sa.Column("handle", sa.String(200)),
        sa.Column("samples", sa.JSON),
        sa.Column("verdict", sa.String(16)),
        sa.Column("change_percent", sa.Float),
        sa.Column("judgement", sa.JSON),
        sa.Column("lab_s", sa.Float),
        sa.Column("started_at", TZ, nullable=False),
        sa.Column("finished_at", TZ),
    )
    op.create_index("ix_lab_bisection_steps", "lab_bisection_steps", ["bisection_id", "n"], unique=True)


def downgrade() -> None:
    op.drop_table("lab_bisection_steps")
    op.drop_table("lab_bisections")
