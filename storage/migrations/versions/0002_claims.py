"""extracted claims per message and merged per thread

Revision ID: 0002
Revises: 0001
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "claims",
        sa.Column("message_id", sa.String(998), primary_key=True),
        sa.Column("is_regression", sa.Boolean, nullable=False),
        sa.Column("confidence", sa.Float, nullable=False),
        sa.Column("kind", sa.String(16)),
        sa.Column("culprit", sa.String(64)),
        sa.Column("claim", sa.JSON),
        sa.Column("extractor_version", sa.String(32), nullable=False),
        sa.Column("extracted_at", TZ, nullable=False),
    )
    op.create_index("ix_claims_regression", "claims", ["is_regression"])
    op.create_index("ix_claims_culprit", "claims", ["culprit"])
    op.create_table(
        "thread_claims",
        sa.Column("root_id", sa.String(998), primary_key=True),
        sa.Column("is_regression", sa.Boolean, nullable=False),
        sa.Column("confidence", sa.Float, nullable=False),
        sa.Column("claim", sa.JSON, nullable=False),
        sa.Column("messages", sa.JSON, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("thread_claims")
    op.drop_table("claims")
