"""Alembic migrations (versions/).  HEAD is the newest revision, known here without loading
Alembic, so that opening a database whose schema is current costs one read
(storage.store.Store.ensure_schema).  Adding a migration: bump HEAD too
(tests/test_storage.py checks that it equals Alembic's own head)."""

HEAD = "0010"
