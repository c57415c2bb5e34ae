"""PostgreSQL advisory-lock keys, in one place (each a transaction-level lock,
``pg_advisory_xact_lock``; SQLite serialises writers by its own write lock instead).
A new key must differ from every key here."""

TRACKER_CURSORS = 7_482_519  # one tracker update (or fix scan) at a time: storage.records
REPLY_SEND = 7_482_520  # one reply sent per event: the reply outbox
