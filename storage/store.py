"""The database: engine, migrations, and the queries the bot runs.  Same code on SQLite and
PostgreSQL (SQLAlchemy Core); schema changes go through Alembic (storage/migrations)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from sqlalchemy import create_engine, event, func, insert, select, text, update
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine

from storage import schema
from storage.migrations import HEAD as MIGRATIONS_HEAD
from storage.rows import aware
from storage.threads import ThreadBatch

MIGRATIONS = Path(__file__).with_name("migrations")
CHUNK = 400
QUARANTINE_PREFIX = 1024 * 1024  # bytes of a quarantined input kept ([ingest] quarantine_prefix_bytes)
INGEST_LOCK = "lock:ingest"  # the cursors row every ingest batch upserts first


def _text(value: str | None) -> str | None:
    """Text that PostgreSQL and SQLite both take: NUL shown as U+2400, lone surrogates
    replaced.  (bot.sources.mail cleans what it parses and notes it; this is the last guard.)"""
    if value is None:
        return None
    if "\x00" in value:
        value = value.replace("\x00", "\u2400")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-8", "replace").decode("utf-8")
    return value


def _upsert(conn, table, rows: list[dict], keys: list[str], update: list[str] | None = None) -> None:
    """INSERT ... ON CONFLICT (keys) DO NOTHING, or DO UPDATE of ``update`` from the new row;
    the same statement on PostgreSQL and SQLite."""
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    elif conn.dialect.name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    else:  # pragma: no cover - only the two databases are supported
        raise RuntimeError(f"unsupported database {conn.dialect.name}")
    stmt = dialect_insert(table)
    if update:
        stmt = stmt.on_conflict_do_update(index_elements=keys,
                                          set_={c: getattr(stmt.excluded, c) for c in update})
    else:
        stmt = stmt.on_conflict_do_nothing(index_elements=keys)
    conn.execute(stmt, rows)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


_aware = aware

# errors of a database whose schema lacks a table (an older database, before a migration)
MISSING_TABLE_ERRORS = (sa_exc.OperationalError, sa_exc.ProgrammingError)
# errors of a database that went away for a moment (restart, lost connection, locked): try again later
UNAVAILABLE_ERRORS = (sa_exc.OperationalError,)


def write_refused(exc: BaseException) -> bool:
    """A database error caused by the data written (not by the database being unreachable): a
    batch is then retried message by message, and a message refused alone is quarantined."""
    if isinstance(exc, (sa_exc.OperationalError, sa_exc.InterfaceError)):
        return False  # lost connection, locked database, disk full: the run must stop
    return isinstance(exc, (sa_exc.StatementError, UnicodeError, ValueError, TypeError, OverflowError))


@dataclass
class Outcome:
    status: str  # stored | duplicate | quarantined
    message_id: str | None
    reason: str | None = None


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 30})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record):  # pragma: no cover - trivial
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


class Store:
    def __init__(self, url: str, *, migrate: bool = True) -> None:
        self.url = url
        self.engine = make_engine(url)
        if migrate:
            self.ensure_schema()

    # -- schema ------------------------------------------------------------------------------
    def ensure_schema(self) -> bool:
        """Create or upgrade the schema when needed; True when Alembic had to run.  When the
        stored revision is the head this build knows (storage.migrations.HEAD) that is one
        read of ``alembic_version`` and Alembic is not even imported."""
        if self.stored_revisions() == [MIGRATIONS_HEAD]:
            return False
        self.migrate()
        return True

    def stored_revisions(self) -> list[str] | None:
        """The rows of ``alembic_version`` (None: no such table yet), read without Alembic."""
        from sqlalchemy.exc import DBAPIError

        try:
            with self.engine.connect() as conn:
                return [r for (r,) in conn.exec_driver_sql("SELECT version_num FROM alembic_version")]
        except DBAPIError:  # a new database: no table yet
            return None

    def migrate(self) -> None:
        """Run Alembic's upgrade to head (idempotent, but it loads every migration script)."""
        from alembic import command
        from alembic.config import Config as AlembicConfig

        cfg = AlembicConfig()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        with self.engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")

    def revision(self) -> str | None:
        from alembic.migration import MigrationContext

        with self.engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()

    def close(self) -> None:
        self.engine.dispose()

    # -- ingest ------------------------------------------------------------------------------
    def write_batch(self, parsed: list[tuple[Any, str, bytes]],
                    rejected: list[tuple],
                    cursor: tuple[str, Any] | None = None, *,
                    quarantine_prefix: int = QUARANTINE_PREFIX) -> list[Outcome]:
        """Store a batch in one transaction.

        ``parsed``: (ParsedMessage, origin, raw) for messages that parsed; ``rejected``:
        (raw, origin, reason, message_id[, sha256, size]) for input to quarantine (sha256 and
        size of the whole input when ``raw`` is only a prefix of it).  ``cursor`` (key, value)
        is saved in the same transaction, so a crash never records progress without the data.
        Returns one Outcome per ``parsed`` item, then one per ``rejected`` item.

        Several ingests may write into one database at once: each batch first takes the ingest
        lock (an upserted row: a row lock on PostgreSQL, the write lock on SQLite), so the
        look-ups below see every batch committed before, and every insert is an upsert besides.
        """
        now = utcnow()
        outcomes: list[Outcome] = []
        with self.engine.begin() as conn:
            self._take_ingest_lock(conn, now)
            ids = list({p.message_id for p, _, _ in parsed})
            known: dict[str, str] = {}
            for start in range(0, len(ids), CHUNK):
                rows = conn.execute(select(schema.messages.c.message_id, schema.messages.c.sha256)
                                    .where(schema.messages.c.message_id.in_(ids[start:start + CHUNK])))
                known.update({mid: sha for mid, sha in rows})
            rows, tb = [], ThreadBatch(conn, upsert=_upsert)
            tb.preload({p.message_id for p, _, _ in parsed} | {r for p, _, _ in parsed for r in p.references}
                       | {p.in_reply_to for p, _, _ in parsed if p.in_reply_to})
            collisions: list[tuple] = []
            for p, origin, raw in parsed:
                if p.message_id in known:
                    if known[p.message_id] == p.sha256:
                        outcomes.append(Outcome("duplicate", p.message_id))
                    else:
                        reason = "Message-ID already stored with different content"
                        collisions.append((raw, origin, reason, p.message_id))
                        outcomes.append(Outcome("quarantined", p.message_id, reason))
                    continue
                known[p.message_id] = p.sha256
                rows.append({
                    "message_id": p.message_id, "synthetic_id": p.synthetic_id,
                    "message_id_full": _text(getattr(p, "message_id_full", None)),
                    "subject": _text(p.subject), "from_addr": _text(p.from_addr), "date": p.date,
                    "date_raw": _text(p.date_raw), "in_reply_to": p.in_reply_to, "refs": p.references,
                    "headers": [[_text(str(n)), _text(str(v))] for n, v in p.headers],
                    "body": _text(p.body), "raw": raw, "sha256": p.sha256,
                    "size": p.size, "problems": [_text(str(x)) for x in p.problems],
                    "origin": _text(origin), "ingested_at": now,
                })
                refs = p.references or ([p.in_reply_to] if p.in_reply_to else [])
                tb.add_message(p.message_id, refs)
                outcomes.append(Outcome("stored", p.message_id,
                                        "; ".join(p.problems) if p.problems else None))
            if rows:
                _upsert(conn, schema.messages, rows, ["message_id"])
            tb.flush()
            for item in list(rejected) + collisions:
                raw, origin, reason, mid = item[:4]
                sha, size = (tuple(item[4:6]) + (None, None))[:2]
                self._quarantine(conn, raw, origin, reason, mid, now, sha, size, quarantine_prefix)
            outcomes.extend(Outcome("quarantined", item[3], item[2]) for item in rejected)
            if cursor is not None:
                self._set_cursor(conn, cursor[0], cursor[1], now)
        return outcomes

    def _take_ingest_lock(self, conn, now: datetime) -> None:
        _upsert(conn, schema.cursors, [{"key": INGEST_LOCK, "value": {}, "updated_at": now}],
                ["key"], update=["updated_at"])

    def _quarantine(self, conn, raw: bytes, origin: str, reason: str, mid: str | None,
                    now: datetime, sha: str | None = None, size: int | None = None,
                    prefix: int = QUARANTINE_PREFIX) -> None:
        """Keep at most ``prefix`` bytes of the input, with the sha256 and size of the whole."""
        import hashlib

        if sha is None:
            sha = hashlib.sha256(raw).hexdigest()
        if size is None:
            size = len(raw)
        _upsert(conn, schema.quarantine, [{
            "origin": _text(origin), "reason": _text(reason), "message_id": mid, "raw": raw[:prefix],
            "sha256": sha, "size": size, "created_at": now}], ["sha256", "reason"])

    def record_source_error(self, source: str, reason: str, subscription_id: int | None = None) -> None:
        with self.engine.begin() as conn:
            conn.execute(insert(schema.source_errors).values(
                subscription_id=subscription_id, source=_text(source), reason=_text(reason), at=utcnow()))

    # -- cursors -----------------------------------------------------------------------------
    def _set_cursor(self, conn, key: str, value: Any, now: datetime) -> None:
        _upsert(conn, schema.cursors, [{"key": key, "value": value, "updated_at": now}], ["key"],
                update=["value", "updated_at"])

    def get_cursor(self, key: str) -> Any:
        with self.engine.connect() as conn:
            row = conn.execute(select(schema.cursors.c.value).where(schema.cursors.c.key == key)).first()
        return None if row is None else row[0]

    def set_cursor(self, key: str, value: Any) -> None:
        with self.engine.begin() as conn:
            self._set_cursor(conn, key, value, utcnow())

    # -- reading -----------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            return {
                "messages": conn.execute(select(func.count()).select_from(schema.messages)).scalar_one(),
                "quarantined": conn.execute(select(func.count()).select_from(schema.quarantine)).scalar_one(),
                "threads": conn.execute(select(func.count(func.distinct(schema.thread_nodes.c.root_id)))
                                        .where(schema.thread_nodes.c.present.is_(True))).scalar_one(),
            }

    def threads(self, limit: int | None = None) -> list[dict[str, Any]]:
        """One entry per thread with at least one stored message, most recent activity first."""
        m, t = schema.messages, schema.thread_nodes
        agg = (select(t.c.root_id.label("root"), func.count().label("n"),
                      func.max(m.c.date).label("last"), func.min(m.c.id).label("first_id"))
               .select_from(t.join(m, m.c.message_id == t.c.message_id))
               .group_by(t.c.root_id).subquery())
        root_msg = m.alias("root_msg")
        first_msg = m.alias("first_msg")
        q = (select(agg.c.root, agg.c.n, agg.c.last, root_msg.c.subject, first_msg.c.subject)
             .select_from(agg.outerjoin(root_msg, root_msg.c.message_id == agg.c.root)
                          .join(first_msg, first_msg.c.id == agg.c.first_id))
             .order_by(agg.c.last.desc().nulls_last(), agg.c.root))
        if limit:
            q = q.limit(limit)
        out = []
        with self.engine.connect() as conn:
            for root, n, last, root_subject, first_subject in conn.execute(q):
                last = _aware(last)
                out.append({"root": root, "subject": root_subject if root_subject is not None else first_subject,
                            "messages": n, "last_activity": last.isoformat() if last else None})
        return out

    def ping(self) -> None:
        """One trivial statement: raises when the database cannot be reached."""
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def received_inputs(self, message_id: str) -> tuple[Any, datetime | None] | None:
        """(stored headers, ingest time) of a message: what its received time is read from."""
        m = schema.messages
        with self.engine.connect() as conn:
            row = conn.execute(select(m.c.headers, m.c.ingested_at).where(m.c.message_id == message_id)).first()
        return None if row is None else (row.headers, _aware(row.ingested_at))

    def get_message(self, message_id: str) -> dict[str, Any] | None:
        m = schema.messages
        with self.engine.connect() as conn:
            row = conn.execute(select(m).where(m.c.message_id == message_id)).mappings().first()
        if row is None:
            return None
        d = dict(row)
        d["date"] = _aware(d["date"])
        d["ingested_at"] = _aware(d["ingested_at"])
        return d

    def thread_of(self, message_id: str) -> list[dict[str, Any]]:
        """The containers of the message's thread (placeholders included), parents first."""
        t, m = schema.thread_nodes, schema.messages
        with self.engine.connect() as conn:
            root = conn.execute(select(t.c.root_id).where(t.c.message_id == message_id)).scalar()
            if root is None:
                return []
            rows = conn.execute(
                select(t.c.message_id, t.c.parent_id, t.c.present, m.c.subject, m.c.from_addr, m.c.date)
                .select_from(t.outerjoin(m, m.c.message_id == t.c.message_id))
                .where(t.c.root_id == root)).all()
        nodes = {r.message_id: r for r in rows}
        children: dict[str | None, list[str]] = {}
        for r in rows:
            parent = r.parent_id if r.parent_id in nodes else None
            children.setdefault(parent, []).append(r.message_id)

        def key(mid: str):
            d = _aware(nodes[mid].date)
            return (d is None, d or datetime.min.replace(tzinfo=timezone.utc), mid)

        out: list[dict[str, Any]] = []
        seen: set[str] = set()

        def walk(mid: str, depth: int) -> None:
            if mid in seen:
                return
            seen.add(mid)
            r = nodes[mid]
            d = _aware(r.date)
            out.append({"message_id": mid, "parent": r.parent_id, "depth": depth,
                        "present": bool(r.present), "subject": r.subject, "from": r.from_addr,
                        "date": d.isoformat() if d else None})
            for c in sorted(children.get(mid, []), key=key):
                walk(c, depth + 1)

        for top in sorted(children.get(None, []), key=key):
            walk(top, 0)
        return out

    def quarantined(self, limit: int = 100) -> list[dict[str, Any]]:
        q = schema.quarantine
        with self.engine.connect() as conn:
            rows = conn.execute(select(q.c.id, q.c.origin, q.c.reason, q.c.message_id, q.c.size,
                                       q.c.sha256, func.length(q.c.raw).label("kept"), q.c.created_at)
                                .order_by(q.c.id.desc()).limit(limit)).mappings().all()
        return [{**dict(r), "created_at": _aware(r["created_at"]).isoformat()} for r in rows]

    def quarantined_raw(self, qid: int) -> bytes | None:
        q = schema.quarantine
        with self.engine.connect() as conn:
            return conn.execute(select(q.c.raw).where(q.c.id == qid)).scalar()

    # -- subscriptions -----------------------------------------------------------------------
    def add_subscription(self, kind: str, url: str, query: str = "") -> tuple[int, bool]:
        s = schema.subscriptions
        with self.engine.begin() as conn:
            row = conn.execute(select(s.c.id).where(s.c.kind == kind, s.c.url == url, s.c.query == query)).first()
            if row:
                return row[0], False
            res = conn.execute(insert(s).values(kind=kind, url=url, query=query, state={}, created_at=utcnow()))
            return res.inserted_primary_key[0], True

    def subscriptions(self) -> list[dict[str, Any]]:
        s = schema.subscriptions
        with self.engine.connect() as conn:
            rows = conn.execute(select(s).order_by(s.c.id)).mappings().all()
        return [dict(r) for r in rows]

    def update_subscription(self, sid: int, *, state: dict | None = None, error: str | None = None,
                            polled: bool = True) -> None:
        s = schema.subscriptions
        values: dict[str, Any] = {"last_error": error}
        if polled:
            values["last_poll_at"] = utcnow()
        if state is not None:
            values["state"] = state
        with self.engine.begin() as conn:
            conn.execute(update(s).where(s.c.id == sid).values(**values))

    def source_errors(self, limit: int = 50) -> list[dict[str, Any]]:
        e = schema.source_errors
        with self.engine.connect() as conn:
            rows = conn.execute(select(e).order_by(e.c.id.desc()).limit(limit)).mappings().all()
        return [{**dict(r), "at": _aware(r["at"]).isoformat()} for r in rows]

    def message_ids(self, ids: Iterable[str]) -> set[str]:
        ids = list(ids)
        found: set[str] = set()
        with self.engine.connect() as conn:
            for start in range(0, len(ids), CHUNK):
                found.update(conn.execute(select(schema.messages.c.message_id).where(
                    schema.messages.c.message_id.in_(ids[start:start + CHUNK]))).scalars())
        return found


    # -- claims ------------------------------------------------------------------------------
    def messages_without_claims(self, limit: int = 500) -> list[dict[str, Any]]:
        m, c = schema.messages, schema.claims
        q = (select(m.c.message_id, m.c.subject, m.c.body, m.c.headers)
             .select_from(m.outerjoin(c, c.c.message_id == m.c.message_id))
             .where(c.c.message_id.is_(None)).order_by(m.c.id).limit(limit))
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(q).mappings()]

    def save_claims(self, rows: list[dict[str, Any]]) -> None:
        """rows: message_id, is_regression, confidence, kind, culprit, claim, extractor_version."""
        if not rows:
            return
        now = utcnow()
        c = schema.claims
        with self.engine.begin() as conn:
            ids = [r["message_id"] for r in rows]
            conn.execute(c.delete().where(c.c.message_id.in_(ids)))
            conn.execute(insert(c), [{**r, "extracted_at": now} for r in rows])

    def thread_keys(self, message_ids: list[str]) -> set[str]:
        t = schema.thread_nodes
        keys: set[str] = set()
        with self.engine.connect() as conn:
            for start in range(0, len(message_ids), CHUNK):
                keys.update(conn.execute(select(t.c.root_id).where(
                    t.c.message_id.in_(message_ids[start:start + CHUNK]))).scalars())
        return keys

    def thread_message_claims(self, root_id: str) -> list[dict[str, Any]]:
        """Claims of a thread's messages, oldest first (by Date, then arrival)."""
        t, m, c = schema.thread_nodes, schema.messages, schema.claims
        q = (select(m.c.message_id, m.c.date, m.c.subject, c.c.is_regression, c.c.claim)
             .select_from(t.join(m, m.c.message_id == t.c.message_id)
                          .join(c, c.c.message_id == t.c.message_id))
             .where(t.c.root_id == root_id).order_by(m.c.date.asc().nulls_last(), m.c.id))
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(q).mappings()]

    def save_thread_claim(self, root_id: str, claim: dict[str, Any] | None, is_regression: bool,
                          confidence: float, message_ids: list[str]) -> None:
        tc = schema.thread_claims
        with self.engine.begin() as conn:
            conn.execute(tc.delete().where(tc.c.root_id == root_id))
            if claim is not None:
                conn.execute(insert(tc).values(root_id=root_id, is_regression=is_regression,
                                               confidence=confidence, claim=claim,
                                               messages=message_ids, updated_at=utcnow()))

    def thread_claims(self, regressions_only: bool = True) -> list[dict[str, Any]]:
        tc, m = schema.thread_claims, schema.messages
        q = (select(tc.c.root_id, tc.c.is_regression, tc.c.confidence, tc.c.claim, tc.c.messages,
                    tc.c.updated_at, m.c.subject)
             .select_from(tc.outerjoin(m, m.c.message_id == tc.c.root_id))
             .order_by(tc.c.updated_at.desc(), tc.c.root_id))
        if regressions_only:
            q = q.where(tc.c.is_regression.is_(True))
        with self.engine.connect() as conn:
            rows = [dict(r) for r in conn.execute(q).mappings()]
        for r in rows:
            r["updated_at"] = _aware(r["updated_at"]).isoformat()
            if r["subject"] is None and r["messages"]:
                first = self.get_message(r["messages"][0])
                r["subject"] = first["subject"] if first else None
        return rows

    def message_claim(self, message_id: str) -> dict[str, Any] | None:
        c = schema.claims
        with self.engine.connect() as conn:
            row = conn.execute(select(c).where(c.c.message_id == message_id)).mappings().first()
        if row is None:
            return None
        d = dict(row)
        d["extracted_at"] = _aware(d["extracted_at"]).isoformat()
        return d

    # -- leases (several workers on one database) ---------------------------------------------
    def try_lease(self, name: str, owner: str, ttl_seconds: float) -> datetime | None:
        """Take the named lease if it is free or expired; returns its stamp (to release it) or
        None when another worker holds it.  Race-free on SQLite and PostgreSQL: a conditional
        UPDATE of an expired row, else an INSERT that the primary key lets only one win."""
        from datetime import timedelta

        from sqlalchemy.exc import IntegrityError

        c = schema.cursors
        key = f"lease:{name}"
        now = utcnow()
        expired = now - timedelta(seconds=ttl_seconds)
        with self.engine.begin() as conn:
            taken = conn.execute(update(c).where(c.c.key == key, c.c.updated_at < expired)
                                 .values(value={"owner": owner}, updated_at=now)).rowcount
        if taken:
            return now
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(c).values(key=key, value={"owner": owner}, updated_at=now))
        except IntegrityError:
            return None
        return now

    def release_lease(self, name: str, stamp: datetime) -> None:
        """Give the lease back, unless it expired and another worker took it meanwhile."""
        c = schema.cursors
        with self.engine.begin() as conn:
            conn.execute(c.delete().where(c.c.key == f"lease:{name}", c.c.updated_at == stamp))
