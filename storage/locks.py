"""PostgreSQL advisory-lock keys: every key the project takes, named, in one place.

A key is a 64-bit integer shared by every database on the server; two uses must never share
one.  Each lock here is a *transaction* lock (``pg_advisory_xact_lock``): held until the
transaction ends.  SQLite needs none: its first write takes the database's write lock.

* :data:`TRACKER` -- a tracker run or fix scan (storage/records.py ``RecordTx.lock_cursor``):
  one at a time.
* :data:`REPLY_SEND` -- claiming a reply's send (storage/replies.py): the rate-limit counts
  and the ``sending`` row are made under it, so two senders cannot both pass a limit.
"""

from __future__ import annotations

from sqlalchemy import text

TRACKER = 7_482_519
REPLY_SEND = 7_482_520

KEYS = {"tracker": TRACKER, "reply-send": REPLY_SEND}


def xact_lock(conn, key: int) -> None:
    """Take the advisory transaction lock ``key`` on PostgreSQL (waits for it); nothing on
    SQLite, whose write lock serialises writers."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
