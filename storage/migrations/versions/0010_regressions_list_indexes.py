"""regressions: list pages read their filters from an index alone.  The two indexes a list
query starts from (by subsystem, by status) also carry the other filter columns (kind, report
date, version key, and each other's), so a page of "open functional regressions in
drivers/" and its count read no table row but the page's 50 (the rows are wide: JSON
evidence, hardware, config).  They replace the (subsystem, status, updated_at) and
(status, updated_at) indexes, their prefixes, and the index on kind alone (two values: it
never narrows much, and without statistics SQLite would prefer its equality to a path range).

Revision ID: 0010
Revises: 0009
"""
import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # on PostgreSQL the subsystem is indexed in binary ("C") order, in which a path prefix is a
    # range (storage.search compares it so); SQLite's default order is binary
    subsystem = sa.text('subsystem COLLATE "C"') if op.get_bind().dialect.name == "postgresql" else "subsystem"
    op.create_index("ix_regressions_list_subsystem", "regressions",
                    [subsystem, "status", "kind", "updated_at", "created_at", "version_key"])
    op.create_index("ix_regressions_list_status", "regressions",
                    ["status", "updated_at", "kind", "created_at", "version_key", "subsystem"])
    op.drop_index("ix_regressions_subsystem_status_updated", table_name="regressions")
    op.drop_index("ix_regressions_status_updated", table_name="regressions")
    op.drop_index("ix_regressions_kind", table_name="regressions")


def downgrade() -> None:
    op.create_index("ix_regressions_kind", "regressions", ["kind"])
    op.create_index("ix_regressions_status_updated", "regressions", ["status", "updated_at"])
    op.create_index("ix_regressions_subsystem_status_updated", "regressions", ["subsystem", "status", "updated_at"])
    op.drop_index("ix_regressions_list_status", table_name="regressions")
    op.drop_index("ix_regressions_list_subsystem", table_name="regressions")
