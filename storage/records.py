"""Regression records: every query on the tracker's tables (``storage/tracker_schema.py``),
returning typed records.

* :class:`Record`, :class:`RelatedMessage`, :class:`HistoryEntry`, :class:`MessageHead`:
  dataclasses with timezone-aware datetimes, made once, here.  They also read as mappings
  (``rec["status"]``, ``{**rec}``, Jinja2's ``rec.status``), so templates, JSON documents and
  older callers take them as they took rows.
* :class:`RecordTx`: the statements of one tracker transaction (``bot.tracker.records`` keeps
  the logic: claims, ``#regzbot`` commands, de-duplication, fixes); :func:`transaction` opens one.
* Reading: :func:`find_record`, :func:`get_records`, :func:`record_rows`, :func:`search` (the
  list search, whose SQL is :mod:`storage.search`'s), :func:`history_after`,
  :func:`history_message_id`.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Iterable, Iterator

from sqlalchemy import String, and_, cast, func, insert, or_, select, update

import storage.tracker_schema as ts
from storage import schema
from storage.locks import TRACKER, xact_lock
from storage.rows import HistoryEntry, MessageHead, Record, RelatedMessage  # noqa: F401  (re-exported)
from storage.rows import aware
from storage.search import duplicate_ids
from storage.search import like_escape as _like_escape
from storage.store import Store


def _history(row: Mapping[str, Any]) -> HistoryEntry:
    return HistoryEntry(**{**row, "at": aware(row["at"])})


# -- one tracker transaction ---------------------------------------------------------------------
class RecordTx:
    """The statements of one tracker transaction, on one connection."""

    def __init__(self, conn) -> None:
        self.conn = conn

    # records
    def record(self, rid: int) -> Record | None:
        row = self.conn.execute(select(ts.regressions).where(ts.regressions.c.id == rid)).mappings().first()
        return Record.from_row(row) if row else None

    def insert_record(self, values: dict[str, Any]) -> int:
        return self.conn.execute(insert(ts.regressions).values(**values)).inserted_primary_key[0]

    def update_record(self, rid: int, values: dict[str, Any]) -> None:
        self.conn.execute(update(ts.regressions).where(ts.regressions.c.id == rid).values(**values))

    def duplicate_of(self, rid: int) -> int | None:
        r = ts.regressions
        return self.conn.execute(select(r.c.duplicate_of).where(r.c.id == rid)).scalar()

    def record_with_report(self, msgid: str) -> int | None:
        r = ts.regressions
        return self.conn.execute(select(func.min(r.c.id)).where(r.c.report_message_id == msgid)).scalar()

    def record_with_report_url(self, url: str) -> int | None:
        r = ts.regressions
        return self.conn.execute(select(func.min(r.c.id)).where(r.c.report_url == url)).scalar()

    def record_reported_in_thread(self, root: str) -> int | None:
        """The lowest record whose report is in thread ``root``, else one keyed by that thread
        with no report message (a report outside lore)."""
        r, t = ts.regressions, schema.thread_nodes
        rid = self.conn.execute(
            select(func.min(r.c.id)).select_from(r.join(t, t.c.message_id == r.c.report_message_id))
            .where(t.c.root_id == root)).scalar()
        if rid is None:
            rid = self.conn.execute(select(func.min(r.c.id)).where(r.c.thread_key == root,
                                                                   r.c.report_message_id.is_(None))).scalar()
        return rid

    def record_monitoring_thread(self, root: str) -> int | None:
        t, rm = schema.thread_nodes, ts.regression_messages
        return self.conn.execute(
            select(func.min(rm.c.regression_id)).select_from(rm.join(t, t.c.message_id == rm.c.message_id))
            .where(t.c.root_id == root, rm.c.relation == "monitor")).scalar()

    def records_with_culprit_prefix(self, prefix: str) -> list[dict[str, Any]]:
        r = ts.regressions
        rows = self.conn.execute(select(r.c.id, r.c.culprit_commit, r.c.status, r.c.created_at, r.c.duplicate_of,
                                        r.c.overrides)
                                 .where(r.c.culprit_commit.like(_like_prefix(prefix), escape="\\"))).mappings()
        return [{**x, "created_at": aware(x["created_at"])} for x in rows]

    def open_records(self, closed: Iterable[str]) -> list[dict[str, Any]]:
        r = ts.regressions
        return [dict(x) for x in self.conn.execute(
            select(r.c.id, r.c.report_message_id, r.c.culprit_commit, r.c.status, r.c.fix_commit)
            .where(r.c.status.not_in(list(closed)))).mappings()]

    def fix_pending(self) -> list[tuple[int, str]]:
        r = ts.regressions
        return [(x.id, x.fix_commit) for x in self.conn.execute(
            select(r.c.id, r.c.fix_commit).where(r.c.status == "fix-pending", r.c.fix_commit.is_not(None)))]

    def max_record_id(self) -> int:
        return self.conn.execute(select(func.max(ts.regressions.c.id))).scalar() or 0

    # history
    def add_history(self, rid: int, **values: Any) -> None:
        self.conn.execute(insert(ts.regression_history).values(regression_id=rid, **values))

    def status_before(self, rid: int, status: str) -> str | None:
        """The status a record had before it last became ``status``."""
        h = ts.regression_history
        return self.conn.execute(select(h.c.old).where(h.c.regression_id == rid, h.c.field == "status",
                                                       h.c.new == status).order_by(h.c.id.desc())).scalar()

    # related messages
    def has_relation(self, rid: int, message_id: str, relation: str | None) -> bool:
        rm = ts.regression_messages
        q = select(rm.c.id).where(rm.c.regression_id == rid, rm.c.message_id == message_id)
        if relation is not None:
            q = q.where(rm.c.relation == relation)
        return self.conn.execute(q).first() is not None

    def add_relation(self, rid: int, **values: Any) -> None:
        self.conn.execute(insert(ts.regression_messages).values(regression_id=rid, **values))

    def related_ids(self, rid: int) -> set[str]:
        rm = ts.regression_messages
        return set(self.conn.execute(select(rm.c.message_id).where(rm.c.regression_id == rid)).scalars())

    def remove_relations(self, rid: int, relation: str, message_id: str, url: str) -> int:
        rm = ts.regression_messages
        return self.conn.execute(rm.delete().where(rm.c.regression_id == rid, rm.c.relation == relation,
                                                   or_(rm.c.message_id == message_id, rm.c.url == url))).rowcount

    def mute_activity(self, message_id: str) -> None:
        rm = ts.regression_messages
        self.conn.execute(update(rm).where(rm.c.message_id == message_id).values(activity=False))

    # stored mail and threads
    def message(self, mid: str) -> MessageHead | None:
        m = schema.messages
        row = self.conn.execute(select(m.c.message_id, m.c.subject, m.c.from_addr, m.c.date, m.c.in_reply_to)
                                .where(m.c.message_id == mid)).mappings().first()
        return MessageHead(**{**row, "date": aware(row["date"])}) if row else None

    def root_of(self, mid: str) -> str | None:
        t = schema.thread_nodes
        return self.conn.execute(select(t.c.root_id).where(t.c.message_id == mid)).scalar()

    def parent_of(self, mid: str) -> str | None:
        t = schema.thread_nodes
        return self.conn.execute(select(t.c.parent_id).where(t.c.message_id == mid)).scalar()

    def thread_messages(self, root: str) -> list[tuple[str, str | None]]:
        """(Message-ID, subject) of every stored message of thread ``root``."""
        t, m = schema.thread_nodes, schema.messages
        return [(mid, subject) for mid, subject in self.conn.execute(
            select(m.c.message_id, m.c.subject).select_from(t.join(m, m.c.message_id == t.c.message_id))
            .where(t.c.root_id == root))]

    def thread_message_claims(self, root: str) -> list[tuple[str, Any]]:
        """(Message-ID, claim) of the thread's messages that have a claim, newest first."""
        t, m, c = schema.thread_nodes, schema.messages, schema.claims
        return [(mid, claim) for mid, claim in self.conn.execute(
            select(c.c.message_id, c.c.claim)
            .select_from(t.join(m, m.c.message_id == t.c.message_id).join(c, c.c.message_id == t.c.message_id))
            .where(t.c.root_id == root, c.c.claim.is_not(None))
            .order_by(m.c.date.desc().nulls_last(), m.c.id.desc()))]

    def thread_claim(self, root: str) -> tuple[Any, list[str]] | None:
        """The thread's regression claim and the messages it merged, if it is a regression."""
        tc = schema.thread_claims
        row = self.conn.execute(select(tc.c.claim, tc.c.messages).where(
            tc.c.root_id == root, tc.c.is_regression.is_(True))).first()
        return (row[0], list(row[1] or [])) if row is not None else None

    def regression_claims_since(self, since: datetime | None) -> list[tuple[str, Any, list[str]]]:
        """(root, claim, messages) of thread claims that are regressions, changed since ``since``,
        oldest change first."""
        tc = schema.thread_claims
        q = select(tc.c.root_id, tc.c.claim, tc.c.messages).where(tc.c.is_regression.is_(True))
        if since is not None:
            q = q.where(tc.c.updated_at >= since)
        return [(root, claim, list(msgs or []))
                for root, claim, msgs in self.conn.execute(q.order_by(tc.c.updated_at, tc.c.root_id))]

    def message_ids_after(self, after_id: int, limit: int) -> list[int]:
        m = schema.messages
        return list(self.conn.execute(select(m.c.id).where(m.c.id > after_id).order_by(m.c.id).limit(limit))
                    .scalars())

    def messages_between(self, lo: int, hi: int) -> list[MessageHead]:
        """Stored messages with ids lo..hi, with their thread roots."""
        m, t = schema.messages, schema.thread_nodes
        rows = self.conn.execute(
            select(m.c.id, m.c.message_id, m.c.subject, m.c.from_addr, m.c.date, m.c.in_reply_to, t.c.root_id)
            .select_from(m.outerjoin(t, t.c.message_id == m.c.message_id))
            .where(m.c.id >= lo, m.c.id <= hi)).mappings()
        return [MessageHead(**{**x, "date": aware(x["date"])}) for x in rows]

    def ids_with_body_words(self, lo: int, hi: int, words: Iterable[str]) -> set[int]:
        """Ids lo..hi whose body holds any of ``words`` (case-insensitive): a cheap pre-filter."""
        m = schema.messages
        return set(self.conn.execute(
            select(m.c.id).where(and_(m.c.id >= lo, m.c.id <= hi),
                                 or_(*(m.c.body.ilike(f"%{_like_escape(w)}%", escape="\\") for w in words))))
                   .scalars())

    def body_and_headers(self, message_pk: int) -> tuple[str | None, Any] | None:
        m = schema.messages
        row = self.conn.execute(select(m.c.body, m.c.headers).where(m.c.id == message_pk)).first()
        return (row.body, row.headers) if row is not None else None

    def messages_with_bodies(self, mids: list[str]) -> list[tuple[MessageHead, str | None]]:
        m = schema.messages
        rows = self.conn.execute(select(m.c.id, m.c.message_id, m.c.subject, m.c.from_addr, m.c.date,
                                        m.c.in_reply_to, m.c.body).where(m.c.message_id.in_(mids))).mappings()
        return [(MessageHead(**{k: v for k, v in x.items() if k != "body"} | {"date": aware(x["date"])}), x["body"])
                for x in rows]

    # #regzbot commands
    def command_outcome(self, msg_id: str, line_no: int, seq: int) -> str | None:
        a = ts.regzbot_commands_applied
        return self.conn.execute(select(a.c.outcome).where(a.c.message_id == msg_id, a.c.line_no == line_no,
                                                           a.c.seq == seq)).scalar()

    def save_command(self, msg_id: str, line_no: int, seq: int, values: dict[str, Any], *, replace: bool) -> None:
        a = ts.regzbot_commands_applied
        if replace:
            self.conn.execute(update(a).where(a.c.message_id == msg_id, a.c.line_no == line_no,
                                              a.c.seq == seq).values(**values))
        else:
            self.conn.execute(insert(a).values(message_id=msg_id, line_no=line_no, seq=seq, **values))

    def pending_command_messages(self, limit: int = 1000) -> list[str]:
        a = ts.regzbot_commands_applied
        return list(self.conn.execute(select(a.c.message_id).where(a.c.outcome == "pending").distinct())
                    .scalars())[:limit]

    # cursors
    def cursor(self, key: str) -> dict[str, Any]:
        c = schema.cursors
        return self.conn.execute(select(c.c.value).where(c.c.key == key)).scalar() or {}

    def lock_cursor(self, key: str, value: Any, now: datetime) -> None:
        """Write the cursor row first: serialises concurrent runs (SQLite takes its write lock;
        on PostgreSQL an advisory transaction lock is taken as well)."""
        xact_lock(self.conn, TRACKER)
        self.set_cursor(key, value, now)

    def set_cursor(self, key: str, value: Any, now: datetime) -> None:
        c = schema.cursors
        done = self.conn.execute(update(c).where(c.c.key == key).values(value=value, updated_at=now))
        if done.rowcount == 0:
            self.conn.execute(insert(c).values(key=key, value=value, updated_at=now))


@contextmanager
def transaction(store: Store) -> Iterator[RecordTx]:
    """One transaction over the tracker's tables (committed when the block ends without error)."""
    with store.engine.begin() as conn:
        yield RecordTx(conn)


def _like_prefix(value: str) -> str:
    return _like_escape(value) + "%"


# -- reading -------------------------------------------------------------------------------------
def find_record(store: Store, msgid: str) -> int | None:
    """The record whose report is ``msgid``, else the lowest record it is related to."""
    rm, r = ts.regression_messages, ts.regressions
    with store.engine.connect() as conn:
        rid = conn.execute(select(func.min(r.c.id)).where(r.c.report_message_id == msgid)).scalar()
        if rid is None:
            rid = conn.execute(select(func.min(rm.c.regression_id)).where(rm.c.message_id == msgid)).scalar()
    return rid


def duplicates_column(dialect: str):
    """The ids of the records marked duplicate of each row, as one comma-separated string (a
    correlated subquery): so a page's rows carry them without a statement of their own."""
    r, d = ts.regressions, ts.regressions.alias("dup")
    agg = (func.string_agg(cast(d.c.id, String), ",") if dialect == "postgresql"
           else func.group_concat(d.c.id, ","))
    return select(agg).where(d.c.duplicate_of == r.c.id).scalar_subquery().label("_duplicates")


def get_records(store: Store, ids: Iterable[int], *, rows: Iterable[Record] | None = None) -> dict[int, Record]:
    """Records with ``messages`` (related, with subject/from/date where stored), ``history``
    (oldest first) and ``duplicates`` (ids of records marked duplicate of them): {id: record}
    in four statements whatever the number of ids; three when ``rows`` (the records as a
    query returned them) are given."""
    ids = list(dict.fromkeys(int(i) for i in ids))
    if not ids:
        return {}
    r, rm, h, m = ts.regressions, ts.regression_messages, ts.regression_history, schema.messages
    out: dict[int, Record] = {}
    with store.engine.connect() as conn:
        dups: dict[int, list[int]] | None = {}
        if rows is not None:
            wanted = set(ids)
            found_rows = [x if isinstance(x, Record) else Record.from_row(x) for x in rows if x["id"] in wanted]
            for x in found_rows:
                if x.duplicates is None:
                    dups = None  # rows without their duplicates: one more statement below
                    break
                dups[x.id] = list(x.duplicates)
        else:
            found_rows = []
            for x in conn.execute(select(r, duplicates_column(conn.dialect.name)).where(r.c.id.in_(ids))).mappings():
                found_rows.append(Record.from_row(x))
                dups[x["id"]] = duplicate_ids(x["_duplicates"])
        for rec in found_rows:
            rec.messages, rec.history, rec.duplicates = [], [], []
            out[rec.id] = rec
        if not out:
            return out
        found = list(out)
        for x in conn.execute(
                select(rm.c.regression_id, rm.c.message_id, rm.c.relation, rm.c.url, rm.c.title, rm.c.activity,
                       rm.c.added_by, m.c.subject, m.c.from_addr, m.c.date)
                .select_from(rm.outerjoin(m, m.c.message_id == rm.c.message_id))
                .where(rm.c.regression_id.in_(found))
                .order_by(rm.c.regression_id, m.c.date.asc().nulls_last(), rm.c.id)).mappings():
            d = dict(x)
            rid = d.pop("regression_id")
            out[rid].messages.append(RelatedMessage(**{**d, "date": aware(d["date"])}))
        for x in conn.execute(select(h).where(h.c.regression_id.in_(found)).order_by(h.c.id)).mappings():
            out[x["regression_id"]].history.append(_history(x))
        if dups is not None:
            for rid in found:
                out[rid].duplicates = dups.get(rid, [])
        else:
            # sorted here: an ORDER BY id would make SQLite walk the whole table in id order
            for rid, dup in sorted(conn.execute(select(r.c.duplicate_of, r.c.id)
                                                .where(r.c.duplicate_of.in_(found)))):
                out[rid].duplicates.append(dup)
    return out


def record_rows(store: Store, ids: Iterable[int]) -> list[Record]:
    """Several records (no messages or history), in the given order."""
    ids = list(ids)
    if not ids:
        return []
    r = ts.regressions
    with store.engine.connect() as conn:
        rows = {x["id"]: Record.from_row(x) for x in conn.execute(select(r).where(r.c.id.in_(ids))).mappings()}
    return [rows[i] for i in ids if i in rows]


def history_after(store: Store, after: int, limit: int) -> list[HistoryEntry]:
    """History rows with id > ``after``, oldest first, at most ``limit``."""
    h = ts.regression_history
    with store.engine.connect() as conn:
        return [_history(x) for x in conn.execute(
            select(h).where(h.c.id > after).order_by(h.c.id).limit(limit)).mappings()]


def history_message_id(store: Store, history_id: int) -> str | None:
    """The Message-ID of the mail that caused a history row (None for lab or user changes)."""
    h = ts.regression_history
    with store.engine.connect() as conn:
        return conn.execute(select(h.c.message_id).where(h.c.id == history_id)).scalar()


# -- searching -----------------------------------------------------------------------------------
def search(store: Store, filters: list[tuple[Any, str | None]], *, limit: int = 50,
           offset: int = 0) -> tuple[list[Record], int]:
    """(one page of the records every filter selects, most recently updated first; how many
    there are) in one statement.  ``filters``: (filter, since_key) pairs; the SQL is
    :mod:`storage.search`'s, run on this store's connection."""
    from storage import search as sql

    with store.engine.connect() as conn:
        def execute(statement: str, params: list) -> tuple[list[str], list]:
            result = conn.exec_driver_sql(statement, tuple(params))
            return list(result.keys()), result.fetchall()

        return sql.run(execute, filters, store.engine.dialect.name, limit=limit, offset=offset)


def subsystems(store: Store, limit: int = 500) -> list[str]:
    """The distinct subsystems of the records, sorted (binary order: by code point)."""
    r = ts.regressions
    with store.engine.connect() as conn:
        if conn.dialect.name != "postgresql":  # SQLite reads them off its list index
            return list(conn.execute(select(r.c.subsystem).where(r.c.subsystem.is_not(None)).distinct()
                                     .order_by(r.c.subsystem).limit(limit)).scalars())
        # PostgreSQL would read all 100k index entries (or hash the table) for a few dozen
        # values: step from one to the next on the list index instead (subsystem COLLATE "C",
        # migration 0010), one probe per value
        return list(conn.exec_driver_sql(
            'WITH RECURSIVE s(v) AS (SELECT min(subsystem COLLATE "C") FROM regressions '
            'UNION ALL SELECT (SELECT min(subsystem COLLATE "C") FROM regressions WHERE subsystem COLLATE "C" > s.v) '
            'FROM s WHERE s.v IS NOT NULL) SELECT v FROM s WHERE v IS NOT NULL LIMIT %s', (int(limit),)).scalars())


FEED_COLUMNS = ("id", "title", "status", "kind", "subsystem", "culprit_commit", "culprit_subject",
                "change_percent", "metric", "created_at", "updated_at", "duplicate_of")


def feed_rows(store: Store, size: int) -> tuple[list[dict[str, Any]], dict[int, datetime], list[dict[str, Any]]]:
    """For the Atom feed: the ``size`` newest records (``FEED_COLUMNS``), when each got its
    first history row, and the ``size`` newest confirmations (the record's columns plus the
    history row's ``history_id`` and ``at``); datetimes aware."""
    r, h = ts.regressions, ts.regression_history
    cols = [r.c[c] for c in FEED_COLUMNS]

    def _aware_row(x) -> dict[str, Any]:
        return {k: aware(v) if isinstance(v, datetime) else v for k, v in x.items()}

    with store.engine.connect() as conn:
        new = [_aware_row(x) for x in conn.execute(select(*cols).order_by(r.c.id.desc()).limit(size)).mappings()]
        first = {rid: aware(at) for rid, at in conn.execute(
            select(h.c.regression_id, func.min(h.c.at)).where(h.c.regression_id.in_([x["id"] for x in new]))
            .group_by(h.c.regression_id))} if new else {}
        confirmed = [_aware_row(x) for x in conn.execute(
            select(h.c.id.label("history_id"), h.c.at, *cols).select_from(h.join(r, r.c.id == h.c.regression_id))
            .where(h.c.field == "status", h.c.new == "confirmed").order_by(h.c.at.desc(), h.c.id.desc())
            .limit(size)).mappings()]
    return new, first, confirmed
