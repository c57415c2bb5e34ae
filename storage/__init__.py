"""Schema, migrations and queries (SQLAlchemy Core + Alembic); SQLite by default, PostgreSQL for scale."""


def __getattr__(name: str):
    # ``storage.Store`` on first use: importing a module of the package (storage.rows,
    # storage.search) must not import SQLAlchemy (regtriage query's start-up does without it)
    if name == "Store":
        from storage.store import Store

        return Store
    raise AttributeError(f"module 'storage' has no attribute {name!r}")
