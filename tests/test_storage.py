"""Storage on SQLite and the real PostgreSQL: idempotent writes, quarantine, JWZ threading."""

import itertools

import pytest

from bot.sources.mail import parse_message


def eml(mid, subject="s", refs=(), irt=None, date="Mon, 01 Jan 2024 10:00:00 +0000", body="text\n"):
    h = ["From: Someone <x@example.com>", f"Subject: {subject}", f"Message-ID: <{mid}>", f"Date: {date}"]
    if refs:
        h.append("References: " + " ".join(f"<{r}>" for r in refs))
    if irt:
        h.append(f"In-Reply-To: <{irt}>")
    return ("\n".join(h) + "\n\n" + body).encode()


def put(store, *raws, cursor=None):
    parsed = [(parse_message(r), "test", r) for r in raws]
    return store.write_batch(parsed, [], cursor)


def test_migrations_reach_head(store):
    assert store.revision() is not None
    store.migrate()  # idempotent


def test_head_revision_known_without_alembic_is_alembics_head():
    """storage.migrations.HEAD must be bumped with every new migration."""
    from alembic.script import ScriptDirectory

    from storage.migrations import HEAD
    from storage.store import MIGRATIONS

    assert ScriptDirectory(str(MIGRATIONS)).get_current_head() == HEAD


def test_current_schema_is_one_read_and_no_alembic(db_url, monkeypatch):
    """Opening a database whose schema is current reads alembic_version once and never runs
    (or imports) Alembic; a new or older one is still migrated."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    from storage.migrations import HEAD
    from storage.store import Store

    first = Store(db_url)  # a new database: migrated
    assert first.revision() == HEAD
    first.close()
    statements = []

    def seen(conn, cursor, statement, *args):
        statements.append(statement)

    def no_alembic(self):
        raise AssertionError("Alembic ran although the schema is current")

    monkeypatch.setattr(Store, "migrate", no_alembic)
    event.listen(Engine, "before_cursor_execute", seen)
    try:
        again = Store(db_url)
        assert again.ensure_schema() is False
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    assert statements == ["SELECT version_num FROM alembic_version"] * 2
    monkeypatch.undo()
    with again.engine.begin() as conn:  # an older schema: Alembic runs
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0006'")
    ran = []
    monkeypatch.setattr(Store, "migrate", lambda self: ran.append(True))
    assert again.ensure_schema() is True and ran == [True]
    again.close()


def test_cli_query_on_a_current_schema_loads_neither_alembic_nor_the_extractors(tmp_path):
    import os
    import subprocess
    import sys

    env = dict(os.environ, REGTRIAGE_HOME=str(tmp_path))
    env.pop("REGTRIAGE_DB", None)
    env.pop("REGTRIAGE_CONFIG", None)
    probe = ("import atexit, sys\n"
             "atexit.register(lambda: print('LOADED', sorted(m for m in ('alembic', 'spacy', 'extractors', "
             "'jinja2', 'bot.tracker.records') if m in sys.modules), file=sys.stderr))\n"
             "from bot.cli.main import main\n"
             "main(['query', 'open regressions in mm/'])\n")
    runs = [subprocess.run([sys.executable, "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True,
                           timeout=120) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs
    assert "LOADED ['alembic'" in runs[0].stderr  # the first run creates the schema
    assert "LOADED []" in runs[1].stderr, runs[1].stderr


def test_raw_bytes_kept_exactly_and_duplicates(store):
    raw = eml("a@x", body="caf\xe9 r\xe9gression\r\n").replace(b"\n", b"\r\n")
    assert [o.status for o in put(store, raw)] == ["stored"]
    assert [o.status for o in put(store, raw)] == ["duplicate"]
    got = store.get_message("a@x")
    assert got["raw"] == raw and got["size"] == len(raw)
    assert got["date"].isoformat() == "2024-01-01T10:00:00+00:00"


def test_same_id_different_content_is_quarantined_not_lost(store):
    put(store, eml("b@x", body="one\n"))
    outcome = put(store, eml("b@x", body="two\n"))
    assert outcome[0].status == "quarantined" and "different content" in outcome[0].reason
    q = store.quarantined()
    assert len(q) == 1 and q[0]["message_id"] == "b@x"
    assert b"two" in store.quarantined_raw(q[0]["id"])
    assert b"one" in store.get_message("b@x")["raw"]


def test_rejected_input_is_quarantined_with_reason(store):
    out = store.write_batch([], [(b"\x00junk", "file:x", "not an RFC 5322 message", None)])
    assert out[0].status == "quarantined"
    assert store.quarantined()[0]["reason"] == "not an RFC 5322 message"
    assert store.quarantined_raw(store.quarantined()[0]["id"]) == b"\x00junk"


THREAD = [
    eml("root@x", "regression in foo", date="Mon, 01 Jan 2024 10:00:00 +0000"),
    eml("r1@x", "Re: regression in foo", refs=["root@x"], date="Mon, 01 Jan 2024 11:00:00 +0000"),
    eml("r2@x", "Re: regression in foo", refs=["root@x", "r1@x"], date="Mon, 01 Jan 2024 12:00:00 +0000"),
    eml("r3@x", "Re: regression in foo", irt="r1@x", date="Mon, 01 Jan 2024 13:00:00 +0000"),
    eml("other@x", "unrelated patch", date="Tue, 02 Jan 2024 10:00:00 +0000"),
]


def _shape(store):
    t = store.thread_of("r2@x")
    return {n["message_id"]: (n["parent"], n["present"]) for n in t}


@pytest.mark.parametrize("order", list(itertools.permutations(range(4)))[::5])
def test_threading_any_order_one_by_one(store, order):
    for i in order:
        put(store, THREAD[i])
    put(store, THREAD[4])
    assert _shape(store) == {"root@x": (None, True), "r1@x": ("root@x", True),
                             "r2@x": ("r1@x", True), "r3@x": ("r1@x", True)}
    threads = {t["root"]: t for t in store.threads()}
    assert set(threads) == {"root@x", "other@x"}
    assert threads["root@x"]["messages"] == 4 and threads["root@x"]["subject"] == "regression in foo"
    assert threads["root@x"]["last_activity"].startswith("2024-01-01T13:00")


def test_threading_in_one_batch_reversed(store):
    put(store, *reversed(THREAD))
    assert _shape(store)["r3@x"] == ("r1@x", True)
    assert len(store.threads()) == 2


def test_missing_parent_is_a_placeholder_that_fills_in(store):
    put(store, THREAD[2])  # r2 references root and r1, neither here yet
    shape = _shape(store)
    assert shape == {"root@x": (None, False), "r1@x": ("root@x", False), "r2@x": ("r1@x", True)}
    t = store.threads()
    assert len(t) == 1 and t[0]["root"] == "root@x" and t[0]["messages"] == 1
    assert t[0]["subject"] == "Re: regression in foo"  # root not received: first message's subject
    put(store, THREAD[0])
    assert _shape(store)["root@x"] == (None, True)
    assert store.threads()[0]["subject"] == "regression in foo"


def test_two_threads_joined_by_late_parent(store):
    # replies arrive citing only their direct parent, which is missing: two separate trees ...
    put(store, eml("c1@x", "Re: a", irt="p@x"), eml("c2@x", "Re: a", irt="q@x"))
    assert len(store.threads()) == 2
    # ... until q arrives citing p: one thread
    put(store, eml("q@x", "Re: a", refs=["p@x"]))
    roots = {t["root"] for t in store.threads()}
    assert roots == {"p@x"}
    assert store.threads()[0]["messages"] == 3


def test_reference_loops_are_refused(store):
    put(store, eml("l1@x", refs=["l2@x"]), eml("l2@x", refs=["l1@x"]))
    t = store.thread_of("l1@x")
    assert {n["message_id"] for n in t} == {"l1@x", "l2@x"}
    parents = {n["message_id"]: n["parent"] for n in t}
    assert not (parents["l1@x"] == "l2@x" and parents["l2@x"] == "l1@x")


def test_cursor_written_with_batch(store):
    put(store, eml("cur@x"), cursor=("git:/inbox/0", {"last": "abc"}))
    assert store.get_cursor("git:/inbox/0") == {"last": "abc"}
    store.set_cursor("git:/inbox/0", {"last": "def"})
    assert store.get_cursor("git:/inbox/0") == {"last": "def"}


def test_failed_batch_leaves_nothing_and_no_cursor(store, monkeypatch):
    from storage import threads as threads_mod

    def boom(self):
        raise RuntimeError("crash mid-batch")

    monkeypatch.setattr(threads_mod.ThreadBatch, "flush", boom)
    with pytest.raises(RuntimeError):
        put(store, eml("crash@x"), cursor=("k", {"n": 1}))
    monkeypatch.undo()
    assert store.get_message("crash@x") is None and store.get_cursor("k") is None
    assert put(store, eml("crash@x"))[0].status == "stored"


def test_subscriptions_unique(store):
    sid, created = store.add_subscription("inbox", "https://lore.kernel.org/linux-mm/", "")
    sid2, created2 = store.add_subscription("inbox", "https://lore.kernel.org/linux-mm/", "")
    assert created and not created2 and sid == sid2
    store.update_subscription(sid, state={"etag": "x"}, error="boom")
    s = store.subscriptions()[0]
    assert s["state"] == {"etag": "x"} and s["last_error"] == "boom" and s["last_poll_at"]
