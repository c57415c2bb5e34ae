"""lab scheduler: rerun jobs, machine leases, job events

Revision ID: 0005
Revises: 0004
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "lab_jobs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("regression_id", sa.Integer, sa.ForeignKey("regressions.id", ondelete="CASCADE")),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("machine", sa.String(64)),
        sa.Column("backend", sa.String(32)),
        sa.Column("backend_config", sa.JSON),
        sa.Column("plan", sa.JSON, nullable=False),
        sa.Column("spec", sa.JSON),
        sa.Column("handle", sa.String(200)),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("max_attempts", sa.Integer, nullable=False, server_default="3"),
        sa.Column("rounds", sa.Integer, nullable=False, server_default="0"),
        sa.Column("next_attempt_at", TZ),
        sa.Column("deadline_at", TZ),
        sa.Column("owner", sa.String(128)),
        sa.Column("lease_until", TZ),
        sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("samples", sa.JSON),
        sa.Column("result", sa.JSON),
        sa.Column("verdict", sa.String(16)),
        sa.Column("record_updated", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("message", sa.Text),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.Column("started_at", TZ),
        sa.Column("finished_at", TZ),
    )
    op.create_index("ix_lab_jobs_state", "lab_jobs", ["state", "next_attempt_at"])
    op.create_index("ix_lab_jobs_regression", "lab_jobs", ["regression_id"])
    op.create_index("ix_lab_jobs_machine", "lab_jobs", ["machine", "state"])
    op.create_table(
        "lab_machine_leases",
        sa.Column("machine", sa.String(64), primary_key=True),
        sa.Column("job_id", sa.Integer, sa.ForeignKey("lab_jobs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("owner", sa.String(128)),
        sa.Column("acquired_at", TZ, nullable=False),
    )
    op.create_table(
        "lab_job_events",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("job_id", sa.Integer, sa.ForeignKey("lab_jobs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("at", TZ, nullable=False),
        sa.Column("state", sa.String(16)),
        sa.Column("message", sa.Text),
        sa.Column("owner", sa.String(128)),
    )
    op.create_index("ix_lab_job_events_job", "lab_job_events", ["job_id", "id"])


def downgrade() -> None:
    op.drop_table("lab_job_events")
    op.drop_table("lab_machine_leases")
    op.drop_table("lab_jobs")
