"""The list search as SQL text: one page of the records a filter selects, most recently
updated first, and how many it selects, in one statement.

One builder (:func:`page_sql`) for the two ways it runs, with the same rows back
(:func:`decode` makes the :class:`storage.rows.Record`\\ s):

* on a SQLAlchemy connection (``storage.records.search``: the web pages, chat, the CLI on
  PostgreSQL), through ``exec_driver_sql``;
* on a bare ``sqlite3`` connection (:func:`quick_search`: ``regtriage query`` and
  ``regtriage regressions`` on SQLite), so that a command a user waits on starts without
  importing SQLAlchemy (about 0.15 s of CPU).

No SQLAlchemy here.  Every user value is a bound parameter (``?`` for sqlite3, ``%s`` for
psycopg).  The statement's shape is what the indexes of migration 0010 are for:

* the page's ids are chosen from an index alone and only those rows are read whole (a deferred
  join); the total rides along as an uncorrelated scalar subquery; a row's duplicates as a
  correlated aggregate;
* a path prefix is one range in binary order ("mm" <= x < "mm0", less "mm" < x < "mm/"):
  SQLite's default order, and PostgreSQL's ``COLLATE "C"``, which its list index uses;
* on SQLite the filter's most selective kind of term leads (a commit or record id, else the
  path, else the status) and a unary ``+`` keeps the other columns' indexes out of the
  planner's choice, so plans do not depend on ANALYZE statistics.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Iterable

from storage.rows import RECORD_COLUMNS, Record

JSON_COLUMNS = ("hardware", "config", "numbers", "evidence", "overrides")
ORDER = "regressions.updated_at DESC, regressions.id DESC"


def like_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class _Params:
    """Placeholders and their values, in statement order."""

    def __init__(self, dialect: str) -> None:
        self.dialect, self.values = dialect, []

    def __call__(self, value: Any) -> str:
        if isinstance(value, datetime) and self.dialect == "sqlite":
            # as SQLAlchemy's SQLite DateTime stores it (the wall time as given, no offset)
            value = value.strftime("%Y-%m-%d %H:%M:%S.%f")
        self.values.append(value)
        return "?" if self.dialect == "sqlite" else "%s"

    def many(self, values: Iterable[Any]) -> str:
        return ", ".join(self(v) for v in values)


def duplicate_ids(value) -> list[int]:
    """The ids of a ``_duplicates`` column (comma-separated), sorted."""
    return sorted(int(x) for x in str(value).split(",") if x) if value else []


def _in(col: str, values: list, p: _Params) -> str:
    return f"{col} IN ({p.many(values)})" if values else "1 != 1"


def where(f, since_key: str | None, p: _Params) -> str:
    """The conditions of one filter (``bot.tracker.query.Filter``) on ``regressions``, "1 = 1"
    when it has none; ``since_key`` is the version key of its ``since:vX``."""
    sqlite = p.dialect == "sqlite"
    lead = (("culprit_commit", "id") if f.culprits or f.ids else ("subsystem",) if f.subsystems and not f.components
            else ("status",) if f.statuses is not None else ())

    def col(name: str) -> str:
        return f"+regressions.{name}" if sqlite and lead and name not in lead else f"regressions.{name}"

    conds = []
    if f.statuses is not None:
        conds.append(_in(col("status"), list(f.statuses), p))
    subs = []
    sub = col("subsystem")
    binary = sub if p.dialect in ("sqlite", "postgresql") else None
    if p.dialect == "postgresql":
        binary = f'({sub} COLLATE "C")'
    for s in f.subsystems:
        if binary:
            # [s, s0) without (s, s/): s itself and s/...; no OR, which PostgreSQL would
            # split into a bitmap scan of the table instead of reading the index alone
            subs.append(f"({binary} >= {p(s)} AND {binary} < {p(s + '0')} AND NOT ({binary} > {p(s)} AND "
                        f"{binary} < {p(s + '/')}))")
        else:
            subs += [f"{sub} = {p(s)}", f"{sub} LIKE {p(like_escape(s) + '/%')} ESCAPE '\\'"]
    for c in f.components:
        e = like_escape(c)
        subs += [f"{sub} = {p(c)}"] + [f"{sub} LIKE {p(pattern)} ESCAPE '\\'"
                                      for pattern in (e + "/%", "%/" + e, "%/" + e + "/%")]
    if subs:
        conds.append("(" + " OR ".join(subs) + ")")
    if f.kinds:
        conds.append(_in(col("kind"), list(f.kinds), p))
    if f.culprits:
        ors = []
        for c in f.culprits:
            # the stored id starts with the query ("g" sorts after lower-case hex: an index
            # range, the LIKE keeps it exact whatever the collation), or (query longer) the
            # query starts with a stored id of >= 7 digits
            ors.append(f"(regressions.culprit_commit >= {p(c)} AND regressions.culprit_commit < {p(c + 'g')} AND "
                       f"regressions.culprit_commit LIKE {p(like_escape(c) + '%')} ESCAPE '\\')")
            if len(c) > 7:
                ors.append(_in("regressions.culprit_commit", [c[:k] for k in range(7, len(c))], p))
        conds.append("(" + " OR ".join(ors) + ")")
    if f.since is not None:
        conds.append(f"{col('created_at')} >= {p(f.since)}")
    if f.until is not None:
        conds.append(f"{col('created_at')} < {p(f.until)}")
    if f.updated_since is not None:
        conds.append(f"{col('updated_at')} >= {p(f.updated_since)}")
    if since_key is not None:
        conds.append(f"{col('version_key')} >= {p(since_key)}")
    for t in f.text:
        conds.append(f"regressions.search_text LIKE {p('%' + like_escape(t.lower()) + '%')} ESCAPE '\\'")
    if f.ids:
        conds.append(_in("regressions.id", list(f.ids), p))
    return " AND ".join(conds) or "1 = 1"


def ids_sql(filters: list[tuple[Any, str | None]], p: _Params) -> str:
    """SELECT of the ids every (filter, since_key) pair selects."""
    (first, key), rest = filters[0], filters[1:]
    sql = f"SELECT regressions.id FROM regressions WHERE {where(first, key, p)}"
    for f, k in rest:
        sql += f" AND regressions.id IN (SELECT regressions.id FROM regressions WHERE {where(f, k, p)})"
    return sql


def page_sql(filters: list[tuple[Any, str | None]], dialect: str, *, limit: int,
             offset: int = 0) -> tuple[str, list]:
    """(statement, parameters): the page's rows, each with ``_total`` (how many the filters
    select) and ``_duplicates`` (ids of its duplicates, comma-separated)."""
    p = _Params(dialect)
    agg = ("string_agg(CAST(dup.id AS VARCHAR), ',')" if dialect == "postgresql"
           else "group_concat(dup.id, ',')")
    cols = ", ".join(f"regressions.{c}" for c in RECORD_COLUMNS)
    total = f"(SELECT count(*) FROM ({ids_sql(filters, p)}) AS matched) AS _total"
    dups = f"(SELECT {agg} FROM regressions AS dup WHERE dup.duplicate_of = regressions.id) AS _duplicates"
    page = f"{ids_sql(filters, p)} ORDER BY {ORDER} LIMIT {p(max(0, int(limit)))} OFFSET {p(int(offset))}"
    return (f"SELECT {cols}, {total}, {dups} FROM regressions WHERE regressions.id IN ({page}) ORDER BY {ORDER}",
            p.values)


def count_sql(filters: list[tuple[Any, str | None]], dialect: str) -> tuple[str, list]:
    p = _Params(dialect)
    return f"SELECT count(*) FROM ({ids_sql(filters, p)}) AS matched", p.values


def decode(row: tuple, names: list[str], dialect: str) -> Record:
    """A row of :func:`page_sql` as the driver returned it (no SQLAlchemy types applied) ->
    the :class:`Record` SQLAlchemy's types would have made."""
    vals = dict(zip(names, row))
    if dialect == "sqlite":
        for k in JSON_COLUMNS:
            if isinstance(vals[k], str):
                vals[k] = json.loads(vals[k])
        for k in ("created_at", "updated_at"):
            if isinstance(vals[k], str):
                vals[k] = datetime.fromisoformat(vals[k])
        vals["ignore_activity"] = bool(vals["ignore_activity"])
    rec = Record.from_row(vals)
    rec.duplicates = duplicate_ids(vals.get("_duplicates"))
    return rec


def run(execute, filters: list[tuple[Any, str | None]], dialect: str, *, limit: int,
        offset: int = 0) -> tuple[list[Record], int]:
    """(page, total) with ``execute(sql, params) -> (column names, rows)``: one statement;
    only a page that comes back empty past the first row (or no page asked for) costs a
    second, for the total."""
    rows: list = []
    names: list[str] = []
    if limit > 0:
        names, rows = execute(*page_sql(filters, dialect, limit=limit, offset=offset))
    if rows:
        total = rows[0][names.index("_total")]
    elif offset > 0 or limit <= 0:
        total = execute(*count_sql(filters, dialect))[1][0][0]
    else:
        total = 0
    return [decode(r, names, dialect) for r in rows], total


def quick_search(url: str, filters: list[tuple[Any, str | None]], *, limit: int,
                 offset: int = 0) -> tuple[list[Record], int] | None:
    """:func:`run` on a bare read-only ``sqlite3`` connection, when ``url`` is an existing
    SQLite database whose schema is the one this build knows (storage.migrations.HEAD); None
    otherwise (then the caller opens a :class:`storage.store.Store`, which migrates)."""
    import sqlite3
    from pathlib import Path

    from storage.migrations import HEAD

    if not url.startswith("sqlite:///"):
        return None
    path = Path(url[len("sqlite:///"):])
    if not path.is_file():
        return None
    try:
        conn = sqlite3.connect(path, timeout=30)  # only reads (read-only mode would not open a WAL database cleanly)
    except sqlite3.Error:
        return None
    try:
        try:
            if [r for (r,) in conn.execute("SELECT version_num FROM alembic_version")] != [HEAD]:
                return None
        except sqlite3.Error:
            return None

        def execute(sql: str, params: list) -> tuple[list[str], list]:
            cur = conn.execute(sql, params)
            return [d[0] for d in cur.description], cur.fetchall()

        return run(execute, filters, "sqlite", limit=limit, offset=offset)
    finally:
        conn.close()
