"""Schema, migrations and queries (SQLAlchemy Core + Alembic); SQLite by default, PostgreSQL for scale."""

from storage.store import Store  # noqa: F401
