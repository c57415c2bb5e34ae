"""regressions: a covering index for list pages (subsystem, status, updated_at): a page of
"open regressions in mm/" and its count read the index, not 10,000 rows (it replaces the index
on subsystem alone, its prefix)

Revision ID: 0008
Revises: 0007
"""
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_regressions_subsystem_status_updated", "regressions",
                    ["subsystem", "status", "updated_at"])
    op.drop_index("ix_regressions_subsystem", table_name="regressions")


def downgrade() -> None:
    op.create_index("ix_regressions_subsystem", "regressions", ["subsystem"])
    op.drop_index("ix_regressions_subsystem_status_updated", table_name="regressions")
