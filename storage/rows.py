"""Typed rows of the tracker's tables (:class:`Record`, :class:`RelatedMessage`,
:class:`HistoryEntry`, :class:`MessageHead`): dataclasses with timezone-aware datetimes that
also read as mappings.  No SQLAlchemy here, so that a read path that does without it
(storage.search on a bare sqlite3 connection, for ``regtriage query``) makes the same records;
``storage.records`` re-exports them."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime, timezone
from typing import Any, Mapping

from storage.fields import Fields


def aware(dt: datetime | None) -> datetime | None:
    """A datetime read back from the database, timezone-aware (SQLite hands back naive UTC)."""
    if dt is not None and dt.tzinfo is None:
        return dt.replace(tzinfo=timezone.utc)
    return dt


@dataclass(eq=False)
class RelatedMessage(Fields):
    message_id: str  # the Message-ID, or the URL of a report outside lore
    relation: str  # report | reply | link | monitor | duplicate
    url: str | None
    title: str | None
    activity: bool
    added_by: str | None
    subject: str | None  # of the stored message, when it is stored
    from_addr: str | None
    date: datetime | None


@dataclass(eq=False)
class HistoryEntry(Fields):
    id: int
    regression_id: int
    at: datetime
    field: str
    old: str | None  # JSON text for structured values
    new: str | None
    actor: str | None
    message_id: str | None
    source: str  # extractor | regzbot | kernel-tree | user | lab
    note: str | None


@dataclass(eq=False)
class MessageHead(Fields):
    """The headers of a stored message the tracker reads."""

    message_id: str
    subject: str | None
    from_addr: str | None
    date: datetime | None
    in_reply_to: str | None
    id: int | None = None
    root_id: str | None = None


@dataclass(eq=False)
class Record(Fields):
    """One regression record (a row of ``regressions``); ``messages``, ``history`` and
    ``duplicates`` are filled by :func:`get_records` (``None`` when not loaded)."""

    id: int
    title: str
    title_source: str
    status: str
    kind: str | None
    culprit_commit: str | None
    culprit_subject: str | None
    good: str | None
    bad: str | None
    version_key: str | None
    subsystem: str | None
    metric: str | None
    search_text: str | None
    change_percent: float | None
    hardware: dict
    config: dict
    numbers: list
    evidence: dict
    confidence: float | None
    overrides: dict
    report_message_id: str | None
    report_url: str | None
    thread_key: str | None
    duplicate_of: int | None
    fix_commit: str | None
    fix_subject: str | None
    fix_tree: str | None
    ignore_activity: bool
    created_at: datetime
    updated_at: datetime
    messages: list[RelatedMessage] | None = None
    history: list[HistoryEntry] | None = None
    duplicates: list[int] | None = None

    _details = ("messages", "history", "duplicates")

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Record:
        vals = {k: row[k] for k in RECORD_COLUMNS}
        vals["created_at"], vals["updated_at"] = aware(vals["created_at"]), aware(vals["updated_at"])
        for k, empty in (("hardware", dict), ("config", dict), ("numbers", list), ("evidence", dict),
                         ("overrides", dict)):
            if vals[k] is None:
                vals[k] = empty()
        return cls(**vals)


# the columns of ``regressions`` (storage/tracker_schema.py; tests/test_search_exact.py checks)
RECORD_COLUMNS = tuple(f.name for f in fields(Record) if f.name not in Record._details)
