"""Every web page and API list costs a fixed, small number of SQL statements, whatever the page
size (issue 11: the list API used to issue a few statements per record).  Counted with
SQLAlchemy's cursor events on the app's engine, SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import event, insert

MAX_STATEMENTS = 5
N = 40


def fill(store, n: int = N) -> list[int]:
    """n records, each with two related messages, three history rows, one duplicate pointing at
    every fourth one and a finished lab rerun on every other one."""
    import storage.lab_schema as ls
    import storage.tracker_schema as ts

    t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    with store.engine.begin() as conn:
        ids = []
        for i in range(n):
            rid = conn.execute(insert(ts.regressions).values(
                title=f"page_fault{i} throughput regression", status="triaged" if i % 3 else "confirmed",
                kind="performance", subsystem="mm" if i % 2 else "fs/xfs", culprit_commit=f"{i:04x}abcdef12",
                search_text=f"page_fault{i} throughput regression", hardware={}, config={}, numbers=[],
                evidence={"metric": f"will-it-scale page_fault{i} -10%"}, overrides={},
                report_message_id=f"r{i}@example.org", created_at=t0 + timedelta(hours=i),
                updated_at=t0 + timedelta(hours=i))).inserted_primary_key[0]
            ids.append(rid)
            for k, rel in enumerate(("report", "reply")):
                conn.execute(insert(ts.regression_messages).values(
                    regression_id=rid, message_id=f"r{i}-{k}@example.org", relation=rel, activity=True,
                    created_at=t0 + timedelta(hours=i, minutes=k)))
            for k, field in enumerate(("status", "culprit_commit", "title")):
                conn.execute(insert(ts.regression_history).values(
                    regression_id=rid, at=t0 + timedelta(hours=i, minutes=k), field=field, old=None, new=str(k),
                    actor="extractor", source="extractor"))
            if i % 2:
                conn.execute(insert(ls.lab_jobs).values(
                    regression_id=rid, state="done", machine="qemu-1", plan={"recipe": {"name": "dd"}},
                    samples={"good": [1.0, 1.1], "bad": [0.9, 0.8]}, result={"change_percent": -15.0},
                    verdict="confirmed", created_at=t0, updated_at=t0, finished_at=t0 + timedelta(hours=i)))
        for i in range(0, n, 4):
            if i + 1 < n:
                conn.execute(ts.regressions.update().where(ts.regressions.c.id == ids[i + 1])
                             .values(duplicate_of=ids[i]))
    return ids


class Counter:
    def __init__(self, engine):
        self.engine, self.statements = engine, []
        event.listen(engine, "before_cursor_execute", self.seen)

    def seen(self, conn, cursor, statement, params, context, executemany):
        self.statements.append(statement)

    def count(self, fn):
        self.statements = []
        result = fn()
        return len(self.statements), result

    def close(self):
        event.remove(self.engine, "before_cursor_execute", self.seen)


@pytest.fixture
def app_client(store):
    from starlette.testclient import TestClient

    from bot.web.app import create_app

    ids = fill(store)
    counter = Counter(store.engine)
    with TestClient(create_app(store, None)) as client:
        yield client, counter, ids
    counter.close()


PAGES = ["/", "/?q=open+regressions+in+mm/", "/?q=performance&status=open&text=throughput&subsystem=mm",
         "/api/regressions", "/api/regressions?q=open+regressions+in+mm/",
         "/api/regressions?q=performance&status=open&text=throughput",
         "/feed.atom"]


@pytest.mark.parametrize("path", PAGES)
def test_pages_and_lists_cost_at_most_five_statements_whatever_the_page_size(app_client, path):
    client, counter, _ = app_client
    seen = {}
    for limit in (1, 5, N):
        url = path + ("&" if "?" in path else "?") + f"limit={limit}" if "feed" not in path else path
        n, res = counter.count(lambda: client.get(url))
        assert res.status_code == 200, res.text
        assert n <= MAX_STATEMENTS, (url, n, counter.statements)
        seen[limit] = n
    assert len(set(seen.values())) == 1, seen  # the same number for 1, 5 and 40 records


def test_record_page_and_api_record(app_client):
    client, counter, ids = app_client
    for rid in ids[:2]:  # without and with reruns
        for path in (f"/regressions/{rid}", f"/api/regressions/{rid}"):
            n, res = counter.count(lambda: client.get(path))
            assert res.status_code == 200 and n <= MAX_STATEMENTS, (path, n, counter.statements)


def test_batched_entries_equal_one_by_one(store):
    """The batched read (bot.tracker.entry.entries) gives exactly what entry() gives per record."""
    from bot.tracker.entry import entries, entry

    ids = fill(store, 12)
    order = ids[::-1] + [999999]
    got = entries(store, order)
    assert [e["id"] for e in got] == ids[::-1]
    assert got == [entry(store, rid) for rid in ids[::-1]]
    assert any(e["reruns"] for e in got) and any(e.get("duplicates") for e in got)
    api = [e["id"] for e in got]
    assert api == ids[::-1]
