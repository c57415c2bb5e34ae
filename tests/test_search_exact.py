"""The list search (storage.records.search, through bot.tracker.query.run_query) returns exactly
what a naive scan of every record returns, in the same order, on SQLite and PostgreSQL: the
index-friendly forms of its conditions (binary path-prefix ranges, "C" collation on PostgreSQL,
the unary + that steers SQLite towards the commit index, migration 0010's covering indexes)
change plans, never results.  The records are bench/query.py-like (kernel paths, statuses,
culprits shared and abbreviated, titles from kernel words) plus the awkward neighbours of a
path prefix ('mm-x', 'mm.y', 'mm0', 'MM', 'mmc')."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import insert

N = 700
NOW = datetime(2026, 11, 24, 12, 0, tzinfo=timezone.utc)
SUBSYSTEMS = ["mm", "mm/slab", "mm/damon", "mmc", "drivers/mmc", "mm-x", "mm.y", "mm0", "MM", "mm/slab/x",
              "fs/xfs", "fs/ext4", "fs", "net", "net/ipv4", "drivers", "drivers/gpu/drm/i915", "drivers/usb",
              "kernel/sched", "sched", "block", "sound", None]
STATUSES = ["reported", "triaged", "confirmed", "not-reproduced", "inconclusive", "fix-pending", "fixed",
            "duplicate", "resolved", "backburner", "improved", "rerun-scheduled"]
WORDS = ["page", "fault", "throughput", "latency", "zonelist", "oops", "hang", "boot", "fsync", "writeback",
         "tlb", "flush", "100%", "50%_done", "under_score", "back\\slash", "Ünïcode", "straße", "use-after-free"]
CULPRIT = "54a6eb5c4765aa573a030ceeba2c14e3d2ea5706"



def _bench_queries() -> list[str]:
    """The queries bench/query.py times (every one of them must stay exact)."""
    import ast

    tree = ast.parse((Path(__file__).resolve().parent.parent / "bench" / "query.py").read_text())
    return next(ast.literal_eval(n.value) for n in tree.body
                if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == "QUERIES")


QUERIES = _bench_queries() + [
    "culprit:54a6eb5c4765aa573a status:all",
    "culprit:54a6 status:all kind:performance",
    "status:all subsystem:mm",
    "status:all subsystem:mm/slab",
    "status:all subsystem:mm,fs",
    "status:all subsystem:MM",
    "status:all subsystem:mm0",
    "status:all subsystem:*/ext4",
    "closed regressions in sched",
    "status:all text:100% text:page",
    "status:all text:_done",
    'status:all text:"back\\\\slash"',
    "status:all text:ünïcode",
    "status:all text:STRAßE",
    "status:all text:straße",
    "open regressions updated:30d",
    "status:all until:2025-01-01 since:2024-06-01",
    "status:all since:v6.10-rc3",
]


def rows(n: int = N, seed: int = 11) -> list[dict]:
    from bot.tracker.fields import search_text, version_key

    rnd = random.Random(seed)
    versions = [f"v6.{m}{rc}" for m in range(1, 13) for rc in ("-rc1", "-rc3", "")]
    culprits = [f"{rnd.getrandbits(160):040x}" for _ in range(n // 4)] + [CULPRIT]
    out = []
    for i in range(n):
        created = NOW - timedelta(seconds=rnd.randint(0, 3 * 365 * 86400))
        culprit = rnd.choice(culprits) if rnd.random() < 0.6 else None
        if i % 40 == 0:
            culprit = CULPRIT
        if culprit and rnd.random() < 0.5:
            culprit = culprit[:rnd.choice((7, 8, 12))]
        title = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(3, 7)))
        kind, subsystem, status = rnd.choice(["performance", "functional", None]), rnd.choice(SUBSYSTEMS), \
            rnd.choice(STATUSES)
        if i % 80 == 0:  # what the bench's combined query looks for
            kind, subsystem, status, title = "performance", "mm/slab", "triaged", "zonelist " + title
        bad = rnd.choice(versions) if rnd.random() < 0.8 else None
        out.append({
            "title": title, "title_source": "report", "status": status, "kind": kind,
            "culprit_commit": culprit, "culprit_subject": None, "good": None, "bad": bad,
            "version_key": version_key(bad), "subsystem": subsystem, "metric": None,
            "search_text": search_text(title), "change_percent": None, "hardware": {}, "config": {},
            "numbers": [], "evidence": {}, "confidence": 0.9, "overrides": {},
            "report_message_id": f"exact-{i}@example.org", "thread_key": f"exact-{i}@example.org",
            "ignore_activity": False, "created_at": created,
            # ties on updated_at: the order falls back on the id
            "updated_at": created + timedelta(days=rnd.randint(0, 30)) if i % 7 else NOW - timedelta(days=1),
        })
    return out


def naive(records: list[dict], f, since_key: str | None) -> list[int]:
    """The ids a filter selects, by looking at every record in Python, most recently updated first."""
    def prefix(sub, s):
        return sub is not None and (sub == s or sub.startswith(s + "/"))

    def component(sub, c):
        return sub is not None and (sub == c or sub.startswith(c + "/") or sub.endswith("/" + c)
                                    or f"/{c}/" in sub)

    def culprit(stored, c):
        return stored is not None and (stored.startswith(c) or (7 <= len(stored) < len(c) and c.startswith(stored)))

    def keep(r):
        return ((f.statuses is None or r["status"] in f.statuses)
                and (not (f.subsystems or f.components)
                     or any(prefix(r["subsystem"], s) for s in f.subsystems)
                     or any(component(r["subsystem"], c) for c in f.components))
                and (not f.kinds or r["kind"] in f.kinds)
                and (not f.culprits or any(culprit(r["culprit_commit"], c) for c in f.culprits))
                and (f.since is None or r["created_at"] >= f.since)
                and (f.until is None or r["created_at"] < f.until)
                and (f.updated_since is None or r["updated_at"] >= f.updated_since)
                and (since_key is None or (r["version_key"] is not None and r["version_key"] >= since_key))
                and all(t.lower() in (r["search_text"] or "") for t in f.text)
                and (not f.ids or r["id"] in f.ids))

    hits = [r for r in records if keep(r)]
    hits.sort(key=lambda r: (r["updated_at"], r["id"]), reverse=True)
    return [r["id"] for r in hits]


@pytest.fixture
def filled(store):
    import storage.tracker_schema as ts

    records = rows()
    with store.engine.begin() as conn:
        for r in records:
            r["id"] = conn.execute(insert(ts.regressions).values(**r)).inserted_primary_key[0]
    return records


@pytest.mark.parametrize("text", QUERIES)
def test_search_equals_a_naive_scan(store, filled, text):
    from bot.tracker.query import _since_key, parse_query, run_query

    f = parse_query(text, now=NOW)
    want = naive(filled, f, _since_key(f))
    for limit, offset in ((50, 0), (7, 3), (1000, 0)):
        got, total = run_query(store, f, limit=limit, offset=offset)
        assert [r.id for r in got] == want[offset:offset + limit], (text, limit, offset)
        assert total == len(want), text
    assert want, f"{text}: matches nothing, a weak check"


def test_two_filters_equal_a_naive_scan_of_both(store, filled):
    """The web list with a query and filter fields: what both select."""
    from bot.tracker.query import _since_key, parse_query, run_query

    f, g = parse_query("open regressions in mm/", now=NOW), parse_query("kind:performance text:page", now=NOW)
    want = [i for i in naive(filled, f, None) if i in set(naive(filled, g, _since_key(g)))]
    got, total = run_query(store, f, g, limit=20)
    assert [r.id for r in got] == want[:20] and total == len(want) and want


def test_sqlite_list_queries_read_an_index_not_the_table(tmp_path):
    """The plans the speed rests on (bench/query.py): a path prefix is one range of the list
    index, which also covers the status, kind and dates; a commit id starts from its index."""
    from sqlalchemy import event

    from bot.tracker.query import parse_query, run_query
    from storage.store import Store

    store = Store(f"sqlite:///{tmp_path / 'plans.sqlite3'}")
    seen = []
    event.listen(store.engine, "before_cursor_execute", lambda *a: seen.append((a[2], a[3])))

    def plan(text: str) -> str:
        seen.clear()
        run_query(store, parse_query(text, now=NOW), limit=50)
        statement, params = seen[-1]
        raw = store.engine.raw_connection()
        try:
            return " | ".join(r[3] for r in raw.cursor().execute("EXPLAIN QUERY PLAN " + statement, params))
        finally:
            raw.close()

    try:
        p = plan("status:open kind:functional subsystem:drivers/")
        assert "COVERING INDEX ix_regressions_list_subsystem (subsystem>? AND subsystem<?)" in p, p
        assert "SCAN regressions" not in p and "MULTI-INDEX OR" not in p, p
        p = plan("confirmed regressions last 30 days")
        assert "COVERING INDEX ix_regressions_list_status (status=?)" in p and "SCAN regressions" not in p, p
        p = plan("status:open subsystem:mm/ kind:performance culprit:54a6eb5c since:2024-01-01 text:zonelist")
        assert "ix_regressions_culprit" in p and "ix_regressions_list" not in p, p
    finally:
        store.close()


def test_record_columns_are_the_table_columns():
    """storage.rows.RECORD_COLUMNS (what storage.search selects, without SQLAlchemy) follows
    the table declared in storage/tracker_schema.py."""
    import storage.tracker_schema as ts
    from storage.rows import RECORD_COLUMNS

    assert RECORD_COLUMNS == tuple(c.name for c in ts.regressions.columns)


def test_quick_search_without_sqlalchemy_equals_the_store(tmp_path):
    """regtriage query's read path on a bare sqlite3 connection makes the same records (every
    field, datetimes aware, JSON decoded, duplicates) as the Store's; and it declines what it
    cannot do alone: another database, no database yet, an older schema."""
    import storage.tracker_schema as ts
    from bot.tracker.query import _since_key, parse_query, run_query
    from storage.search import quick_search
    from storage.store import Store

    url = f"sqlite:///{tmp_path / 'quick.sqlite3'}"
    store = Store(url)
    records = rows(200)
    with store.engine.begin() as conn:
        for r in records:
            r["evidence"] = {"metric": "will-it-scale -10%", "n": [1, 2]}
            r["id"] = conn.execute(insert(ts.regressions).values(**r)).inserted_primary_key[0]
        conn.execute(ts.regressions.update().where(ts.regressions.c.id == records[1]["id"])
                     .values(duplicate_of=records[0]["id"], ignore_activity=True))
    try:
        for text in QUERIES:
            f = parse_query(text, now=NOW)
            for limit, offset in ((50, 0), (5, 400), (0, 0)):
                got = quick_search(url, [(f, _since_key(f))], limit=limit, offset=offset)
                want = run_query(store, f, limit=limit, offset=offset)
                assert got is not None
                assert got[1] == want[1], text
                assert [x.to_dict() for x in got[0]] == [x.to_dict() for x in want[0]], text
        page, _ = quick_search(url, [(parse_query("status:all", now=NOW), None)], limit=1000)
        assert {x.id: x.duplicates for x in page}[records[0]["id"]] == [records[1]["id"]]
        assert all(x.created_at.tzinfo is not None and isinstance(x.evidence, dict) for x in page)
        f = [(parse_query("status:all"), None)]
        assert quick_search("postgresql+psycopg://nobody@127.0.0.1/none", f, limit=5) is None
        assert quick_search(f"sqlite:///{tmp_path / 'absent.sqlite3'}", f, limit=5) is None
        with store.engine.begin() as conn:
            conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0009'")
        assert quick_search(url, f, limit=5) is None
    finally:
        store.close()


def test_cli_query_on_a_current_sqlite_database_does_not_import_sqlalchemy(tmp_path):
    """`regtriage query` (and `regressions`) on a current SQLite database: SQLAlchemy is not
    imported (its import is most of the command's start-up); the first run creates the schema."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, REGTRIAGE_HOME=str(tmp_path), COLUMNS="100",
               PYTHONPATH=str(Path(__file__).resolve().parent.parent))  # this tree's code
    env.pop("REGTRIAGE_DB", None)
    env.pop("REGTRIAGE_CONFIG", None)
    probe = ("import atexit, sys\n"
             "atexit.register(lambda: print('SQLALCHEMY', 'sqlalchemy' in sys.modules, file=sys.stderr))\n"
             "from bot.cli.main import main\n"
             "main(sys.argv[1:])\n")
    out = []
    for args in (["query", "open regressions in mm/"], ["query", "open regressions in mm/"], ["regressions"]):
        r = subprocess.run([sys.executable, "-c", probe, *args], env=env, cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        out.append(r)
    assert "SQLALCHEMY True" in out[0].stderr  # the first run creates the schema
    assert "SQLALCHEMY False" in out[1].stderr and "SQLALCHEMY False" in out[2].stderr
    assert "0 regressions" in out[1].stdout and "0 regressions" in out[2].stdout


def test_known_subsystems_are_the_distinct_values_in_code_point_order(store, filled):
    """The list page's subsystem choices (on PostgreSQL read by stepping along the list index)."""
    from storage.records import subsystems

    want = sorted({r["subsystem"] for r in filled if r["subsystem"] is not None})
    assert subsystems(store) == want and "MM" in want and "mm-x" in want
    assert subsystems(store, limit=3) == want[:3]
