"""The query language (bot.tracker.query): natural language and filters parsed into a typed Filter
(pure), and run with SQLAlchemy Core on SQLite and PostgreSQL (bound parameters only)."""

from datetime import datetime, timedelta, timezone

import pytest

from bot.tracker.query import CLOSED, OPEN, QueryError, parse_query

NOW = datetime(2024, 6, 1, 12, 0, tzinfo=timezone.utc)


def q(text):
    return parse_query(text, now=NOW)


# -- parsing (pure) -----------------------------------------------------------------------------
def test_open_regressions_in_mm():
    f = q("open regressions in mm/")
    assert set(f.statuses) == set(OPEN) and f.subsystems == ["mm"]
    assert not f.text and not f.kinds and f.since is None


def test_open_performance_in_xfs_since_version():
    f = q("open performance regressions in fs/xfs since v6.8")
    assert set(f.statuses) == set(OPEN)
    assert f.kinds == ["performance"] and f.subsystems == ["fs/xfs"] and f.since_version == "v6.8"
    assert not f.text


def test_confirmed_last_30_days():
    f = q("confirmed regressions last 30 days")
    assert f.statuses == ("confirmed",) and f.since == NOW - timedelta(days=30) and not f.text
    assert q("confirmed regressions in the last 30 days").since == NOW - timedelta(days=30)
    assert q("confirmed regressions in the past 2 weeks").since == NOW - timedelta(days=14)
    assert q("regressions since yesterday").since == datetime(2024, 5, 31, tzinfo=timezone.utc)


def test_filter_language():
    f = q("status:open subsystem:mm/ kind:performance culprit:54a6eb5c since:2024-01-01 text:zonelist")
    assert set(f.statuses) == set(OPEN) and f.subsystems == ["mm"] and f.kinds == ["performance"]
    assert f.culprits == ["54a6eb5c"] and f.since == datetime(2024, 1, 1, tzinfo=timezone.utc)
    assert f.text == ["zonelist"]
    assert f.describe() == ("status:open subsystem:mm/ kind:performance culprit:54a6eb5c since:2024-01-01 "
                            "text:zonelist")


def test_filter_language_values_and_mixing():
    f = q('status:closed,confirmed text:"two words" since:30d until:2024-05-01 open')
    assert set(f.statuses) == set(CLOSED) | {"confirmed"} | set(OPEN)
    assert f.text == ["two words"] and f.since == NOW - timedelta(days=30)
    assert f.until == datetime(2024, 5, 2, tzinfo=timezone.utc)  # end of that day
    assert q("status:all").statuses is None
    assert q("fix pending regressions").statuses == ("fix-pending",)
    assert q("not reproduced regressions").statuses == ("not-reproduced",)
    assert q("show me fixed regressions in ext4 caused by 54a6eb5c4765").culprits == ["54a6eb5c4765"]
    assert q("regressions in ext4").components == ["ext4"]
    assert q("regressions in networking").subsystems == ["net"]
    assert q("perf regressions 54a6eb5c").culprits == ["54a6eb5c"]


@pytest.mark.parametrize("bad", ["status:frobbed", "kind:weird", "culprit:xyz", "since:notadate", "id:abc",
                                 "subsystem:'", "status:"])
def test_filter_errors(bad):
    with pytest.raises(QueryError):
        q(bad)


def test_hostile_text_is_data():
    assert q("'; DROP TABLE regressions; --").text  # no crash on unbalanced quotes
    assert q("text:100%_done").text == ["100%_done"]
    assert q('"a \\" b"').text


# -- running (SQLite and PostgreSQL) ------------------------------------------------------------
def _insert(store, **kw):
    from sqlalchemy import insert

    import storage.tracker_schema as ts

    base = dict(title="a regression", title_source="report", status="triaged", hardware={}, config={},
                numbers=[], evidence={}, overrides={}, ignore_activity=False, created_at=NOW - timedelta(days=5),
                updated_at=NOW)
    base.update(kw)
    from bot.tracker.fields import search_text

    base["search_text"] = search_text(base["title"], base.get("culprit_subject"), base.get("metric"))
    with store.engine.begin() as conn:
        return conn.execute(insert(ts.regressions).values(**base)).inserted_primary_key[0]


@pytest.fixture
def records(store):
    from bot.tracker.fields import version_key

    ids = {}
    ids["mm_perf"] = _insert(store, title="page fault throughput drop (zonelist)", kind="performance",
                             subsystem="mm", culprit_commit="54a6eb5c4765aa573a030ceeba2c14e3d2ea5706",
                             version_key=version_key("v6.8"), bad="v6.8", status="confirmed")
    ids["mm_slab"] = _insert(store, title="slab oops", kind="functional", subsystem="mm/slab",
                             culprit_commit="1a2b3c4d5e6f", version_key=version_key("v6.9-rc2"), bad="v6.9-rc2",
                             created_at=NOW - timedelta(days=60))
    ids["mmc"] = _insert(store, title="sdhci card not detected", kind="functional", subsystem="drivers/mmc",
                         version_key=version_key("v6.7"), bad="v6.7")
    ids["mmc_top"] = _insert(store, title="mmc core hang", kind="functional", subsystem="mmc")
    ids["xfs"] = _insert(store, title="xfs fsync latency 30% up", kind="performance", subsystem="fs/xfs",
                         version_key=version_key("v6.8-rc1"), bad="v6.8-rc1")
    ids["xfs_old"] = _insert(store, title="xfs slow mount", kind="performance", subsystem="fs/xfs",
                             version_key=version_key("v6.7"), bad="v6.7")
    ids["xfs_fixed"] = _insert(store, title="xfs log stall", kind="performance", subsystem="fs/xfs",
                               status="fixed", version_key=version_key("v6.9"), bad="v6.9")
    ids["dup"] = _insert(store, title="zonelist again", kind="performance", subsystem="mm", status="duplicate",
                         culprit_commit="54a6eb5c4765")
    ids["short"] = _insert(store, title="100%_done weird title", subsystem="fs/ext4", status="inconclusive",
                           culprit_commit="54a6eb5")
    ids["hostile"] = _insert(store, title="'; DROP TABLE regressions; --", subsystem="net", status="reported")
    return ids


def run(store, text, **kw):
    from bot.tracker.query import run_query

    rows, total = run_query(store, q(text), **kw)
    assert total >= len(rows)
    return {r["id"] for r in rows}


def test_prefix_semantics(store, records):
    r = records
    assert run(store, "open regressions in mm/") == {r["mm_perf"], r["mm_slab"]}
    assert run(store, "subsystem:mm status:all") == {r["mm_perf"], r["mm_slab"], r["dup"]}
    assert r["mmc_top"] not in run(store, "subsystem:mm/ status:all")  # mm/ never matches mmc
    assert run(store, "subsystem:mmc") == {r["mmc_top"]}
    assert run(store, "regressions in mmc") == {r["mmc_top"], r["mmc"]}  # a component: drivers/mmc too
    assert run(store, "subsystem:fs/") == {r["xfs"], r["xfs_old"], r["xfs_fixed"], r["short"]}


def test_natural_language_forms(store, records):
    r = records
    assert run(store, "open performance regressions in fs/xfs since v6.8") == {r["xfs"]}  # v6.8-rc1 counts
    assert run(store, "performance regressions in fs/xfs since v6.8") == {r["xfs"], r["xfs_fixed"]}
    assert run(store, "regressions since v6.8-rc2") == {r["mm_perf"], r["mm_slab"], r["xfs_fixed"]}
    assert run(store, "confirmed regressions last 30 days") == {r["mm_perf"]}
    assert run(store, "open regressions last 30 days") >= {r["mm_perf"], r["xfs"]}
    assert r["mm_slab"] not in run(store, "open regressions last 30 days")  # reported 60 days ago
    assert run(store, "closed regressions") == {r["xfs_fixed"], r["dup"]}
    assert r["short"] in run(store, "status:open")  # an inconclusive rerun keeps the record open
    assert run(store, "duplicates") == {r["dup"]}


def test_filter_language_runs(store, records):
    r = records
    assert run(store, "status:open subsystem:mm/ kind:performance culprit:54a6eb5c since:2024-01-01 "
                      "text:zonelist") == {r["mm_perf"]}
    # culprit prefix either way: abbreviated stored ids match a longer query and vice versa
    assert run(store, "culprit:54a6eb5c4765aa573a status:all") == {r["mm_perf"], r["dup"], r["short"]}
    assert run(store, "culprit:54a6 status:all") == {r["mm_perf"], r["dup"], r["short"]}
    assert run(store, "culprit:54a6eb5d status:all") == {r["short"]}  # 54a6eb5 (7 digits) is its prefix
    assert run(store, "culprit:54a6eb6 status:all") == set()
    assert run(store, "text:ZONELIST status:all") == {r["mm_perf"], r["dup"]}  # case-insensitive
    assert run(store, f"id:{r['mmc']}") == {r["mmc"]}
    assert run(store, "kind:functional") == {r["mm_slab"], r["mmc"], r["mmc_top"]}


def test_hostile_query_text_is_data(store, records):
    from sqlalchemy import func, select

    import storage.tracker_schema as ts

    r = records
    # unbalanced quote: plain words, each a text term that must match (only the record titled so)
    assert run(store, "'; DROP TABLE regressions; --") == {r["hostile"]}
    assert run(store, "'; DROP TABLE nothing; --") == set()
    assert run(store, 'text:"\'; DROP TABLE regressions; --"') == {r["hostile"]}
    assert run(store, "text:% status:all") == {r["short"], r["xfs"]}  # % is a literal, not a wildcard
    assert run(store, "text:_ status:all") == {r["short"]}
    assert run(store, "text:100%_done status:all") == {r["short"]}
    assert run(store, "text:0%_d status:all") == {r["short"]}
    assert run(store, 'text:"\\" status:all') == set()
    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(ts.regressions)).scalar() == len(records)


def test_limit_and_total(store, records):
    from bot.tracker.query import run_query

    rows, total = run_query(store, q("status:all"), limit=3)
    assert len(rows) == 3 and total == len(records)


def test_query_cli_json_entries(store, records, db_url, home):
    import json

    from click.testing import CliRunner

    from bot.cli.main import main
    from bot.cli.tracker import register

    register(main)
    runner = CliRunner()
    res = runner.invoke(main, ["--db", db_url, "query", "open", "regressions", "in", "mm/", "--json"],
                        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert {e["id"] for e in out} == {records["mm_perf"], records["mm_slab"]}
    assert all(e["reruns"] == [] for e in out)
    res = runner.invoke(main, ["--db", db_url, "query", "open regressions in mm/"], catch_exceptions=False)
    assert res.exit_code == 0 and "slab oops" in res.stdout and "status:open subsystem:mm/" in res.stdout
    res = runner.invoke(main, ["--db", db_url, "query", "status:bogus"])
    assert res.exit_code == 2 and "unknown status" in res.output


def test_user_values_are_bound_parameters_never_sql_text():
    from bot.tracker.query import build_select

    f = q("text:\"'; DROP TABLE regressions; --\" subsystem:mm/ culprit:54a6eb5c since:v6.8")
    for dialect in ("sqlite", "postgresql", "other"):  # (any other: LIKE for the path prefix)
        sql, params = build_select(f, dialect=dialect)
        assert "DROP" not in sql and "54a6eb5c" not in sql and "'mm" not in sql and "006.008" not in sql
        assert "mm" in params or "mm/%" in params, params
        assert "%'; drop table regressions; --%" in params and "54a6eb5c" in params
        assert any(str(v).startswith("006.008") for v in params), params
        assert sql.count("?" if dialect == "sqlite" else "%s") == len(params)


def test_core_kernel_areas_by_short_name():
    from bot.tracker.query import parse_query

    for q in ("open regressions in kernel/sched", "open regressions in sched", "subsystem:kernel/sched",
              "open regressions in the scheduler"):
        assert parse_query(q).subsystems == ["sched"], q


def test_subsystem_canonical_without_loading_the_extractors():
    from bot.tracker.query import _canonical
    from extractors.subsystems import canonical

    for value in ("mm/", "mm", " fs/xfs/ ", "kernel/sched", "kernel/sched/", "kernel", "kernel/", "/", "drivers/kernelx",
                  "sched"):
        assert _canonical(value) == canonical(value), value


def test_page_and_total_in_one_statement_and_past_the_end(store, records):
    from sqlalchemy import event

    from bot.tracker.query import run_query

    seen = []

    def count(*args):
        seen.append(args[2])

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        rows, total = run_query(store, q("status:all"), limit=3)
        assert len(rows) == 3 and total == len(records) and len(seen) == 1
        seen.clear()
        rows, total = run_query(store, q("status:all"), limit=3, offset=100)  # an empty page still knows the total
        assert rows == [] and total == len(records)
        seen.clear()
        rows, total = run_query(store, q("text:nothing-matches-this"), limit=3)
        assert rows == [] and total == 0 and len(seen) == 1
        rows, total = run_query(store, q("status:all"), limit=0)
        assert rows == [] and total == len(records)
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
