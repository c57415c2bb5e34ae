"""The counts the Prometheus metrics are made of, read in one connection (bot.web.metrics
turns them into metric families)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import column, func, inspect, select, table

from storage import schema
from storage.store import Store, aware


@dataclass
class Counts:
    messages: int
    quarantined: int
    claims: int  # messages carrying a regression claim
    source_errors: int
    last_polls: list[tuple[int, str, datetime]]  # (subscription id, kind, last poll), polled ones only
    # table name -> {state or status: count}; a table that does not exist yet is left out
    by_state: dict[str, dict[str, int]] = field(default_factory=dict)


STATE_COLUMNS = (("regressions", "status"), ("lab_jobs", "state"), ("notifications", "state"),
                 ("replies", "status"))


def _count(conn, t, *where) -> int:
    q = select(func.count()).select_from(t)
    for w in where:
        q = q.where(w)
    return int(conn.execute(q).scalar_one())


def counts(store: Store) -> Counts:
    s = schema.subscriptions
    with store.engine.connect() as conn:
        out = Counts(
            messages=_count(conn, schema.messages), quarantined=_count(conn, schema.quarantine),
            claims=_count(conn, schema.claims, schema.claims.c.is_regression.is_(True)),
            source_errors=_count(conn, schema.source_errors),
            last_polls=[(sid, kind, aware(last)) for sid, kind, last in
                        conn.execute(select(s.c.id, s.c.kind, s.c.last_poll_at)) if last is not None])
        have = inspect(conn)
        for table_name, col in STATE_COLUMNS:
            if have.has_table(table_name):
                t = table(table_name, column(col))
                out.by_state[table_name] = {str(k): int(n) for k, n in
                                            conn.execute(select(t.c[col], func.count()).group_by(t.c[col]))}
    return out
