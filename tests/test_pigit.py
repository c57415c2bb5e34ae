"""public-inbox git epochs: mirror over HTTP from a REAL public-inbox-httpd, walk incrementally,
record deletions, resume after a crash, walk local inboxes and epochs in numeric order."""

from __future__ import annotations

import subprocess

import pytest

from tests.publicinbox import THREADS, PublicInbox, cli_env, fresh, make_epoch, missing_tools
from tests.test_lore import ALL_IDS, CONFIG, LIVE, ids


@pytest.fixture
def pi():
    reason = missing_tools()
    if reason:
        pytest.skip(reason)
    inbox = PublicInbox()
    inbox.bulk_import(sorted(THREADS.glob("*.eml")))
    yield inbox
    inbox.close()


@pytest.fixture
def env(home, tmp_path, cli):
    with cli_env(cli, tmp_path, CONFIG) as (run, store):
        yield run, store, home


def test_git_mirror_walk_live_delivery_and_deletion(env, pi):
    run, store, home = env
    pi.start()
    out = run("subscribe", pi.base, "--git", "--json")
    assert out["kind"] == "git" and out["url"] == pi.base
    first = run("poll", "--json", "--details")
    assert first["errors"] == [] and first["new_messages"] == 5
    assert ids(store) == ALL_IDS
    mirror = home / "mirrors" / f"127.0.0.1_{pi.port}" / "test" / "git" / "0.git"
    assert (mirror / "objects").is_dir()
    # replies threaded under their parents, raw bytes exactly the epoch's blobs
    thread = {n["message_id"]: n for n in store.thread_of("reply-2@example.com")}
    assert thread["reply-2@example.com"]["parent"] == "reply-1@example.net"
    assert thread["reply-1@example.net"]["parent"] == "report-1@example.com"
    assert store.get_message("reply-2@example.com")["origin"].startswith("pigit:")

    spam = fresh((LIVE / "spam.eml").read_bytes())
    pi.deliver(spam, hup=False)
    second = run("poll", "--json", "--details")
    assert second["errors"] == [] and second["new_messages"] == 1
    assert ids(store) == ALL_IDS | {"spam-1@example.biz"}
    assert run("poll", "--json", "--details")["new_messages"] == 0

    pi.remove(spam)  # public-inbox-learn rm: a commit whose tree holds `d`
    third = run("poll", "--json", "--details")
    assert third["errors"] == [] and third["new_messages"] == 0
    state = store.subscriptions()[0]["state"]
    assert state["deleted_total"] == 1
    assert state["deleted"][0]["message_id"] == "spam-1@example.biz"
    assert store.get_message("spam-1@example.biz") is not None  # recorded, not applied
    head = subprocess.run(["git", "--git-dir", str(mirror), "rev-parse", "refs/heads/master"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert state["epochs"] == {"0.git": head}
    assert store.get_cursor(f"subscription:{store.subscriptions()[0]['id']}:git")["epochs"] == {"0.git": head}

    pi.deliver(fresh((LIVE / "live-new.eml").read_bytes()), hup=False)
    fourth = run("poll", "--json", "--details")
    assert fourth["new_messages"] == 1
    assert "perf-report-1@example.com" in ids(store)


def test_git_server_down_then_catch_up(env, pi):
    run, store, home = env
    pi.start()
    run("subscribe", pi.base, "--git", "--json")
    assert run("poll", "--json", "--details")["new_messages"] == 5
    pi.stop()
    pi.deliver(fresh((LIVE / "live-new.eml").read_bytes()), hup=False)
    out = run("poll", "--json", "--details")
    assert out["new_messages"] == 0 and len(out["errors"]) == 1
    assert "cannot fetch" in out["errors"][0] and "Traceback" not in out["errors"][0]
    assert store.subscriptions()[0]["last_error"]
    pi.start()
    out = run("poll", "--json", "--details")
    assert out["errors"] == [] and out["new_messages"] == 1
    assert store.subscriptions()[0]["last_error"] is None


def test_git_clone_failure_is_an_error(env, pi):
    run, store, home = env
    pi.start()
    run("subscribe", f"http://127.0.0.1:{pi.port}/nosuchinbox/", "--git", "--json")
    out = run("poll", "--json", "--details")
    assert out["new_messages"] == 0 and "cannot clone" in out["errors"][0]
    assert not (home / "mirrors" / f"127.0.0.1_{pi.port}" / "nosuchinbox" / "git" / "0.git").exists()


def test_git_and_http_give_identical_bytes(env, pi):
    """The same inbox through its git epoch and through HTTP (t.mbox.gz): no message differs."""
    run, store, home = env
    pi.start()
    run("subscribe", pi.base, "--json")
    run("subscribe", pi.base, "--git", "--json")
    out = run("poll", "--json", "--details")
    assert out["errors"] == [] and out["new_messages"] == 5
    assert [d["new_messages"] for d in out["details"]] == [5, 0]
    assert out["details"][1]["duplicates"] == 5 and out["details"][1]["quarantined"] == 0
    assert store.counts()["quarantined"] == 0


def test_local_inbox_subscription_reads_in_place(env, pi):
    run, store, home = env
    out = run("subscribe", str(pi.inboxdir), "--json")  # a local path is always git
    assert out["kind"] == "git" and out["url"] == str(pi.inboxdir.resolve())
    assert run("poll", "--json", "--details")["new_messages"] == 5
    pi.deliver(fresh((LIVE / "live-reply.eml").read_bytes()), hup=False)
    out = run("poll", "--json", "--details")
    assert out["new_messages"] == 1 and out["errors"] == []
    assert not (home / "mirrors").exists()
    epoch = pi.inboxdir / "git" / "0.git"  # one epoch repository, read in place
    assert run("subscribe", str(epoch), "--git", "--json")["url"] == str(epoch.resolve())
    out = run("poll", "--json", "--details")
    assert out["errors"] == [] and out["new_messages"] == 0
    assert out["details"][1]["duplicates"] == 6
    res = run("subscribe", str(home.parent), "--git", ok=False)
    assert res.exit_code != 0 and "neither a public-inbox" in res.output


def _msg(mid: str, parent: str | None = None) -> bytes:
    refs = f"In-Reply-To: <{parent}>\nReferences: <{parent}>\n" if parent else ""
    return (f"From: T <t@example.org>\nSubject: {'Re: ' if parent else ''}epoch test\n"
            f"Date: Mon, 01 Jan 2024 10:00:00 +0000\nMessage-ID: <{mid}>\n{refs}\nbody {mid}\n").encode()


def test_ingest_epochs_numeric_order_deletions_and_crash_resume(tmp_path, monkeypatch):
    from bot.sources.pigit import ingest_epochs
    from storage.store import Store

    inbox = tmp_path / "inbox"
    (inbox / "git").mkdir(parents=True)
    make_epoch(inbox / "git" / "2.git", [("add", _msg(f"e2-{i}@x")) for i in range(5)])
    make_epoch(inbox / "git" / "10.git", [("add", _msg("e10-0@x", "e2-0@x")), ("del", _msg("e2-1@x")),
                                          ("add", _msg("e10-1@x"))])
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite3'}")

    # crash in the middle: the second chunk's transaction fails
    real = store.write_batch
    calls = []

    def flaky(parsed, rejected, cursor=None):
        calls.append(len(parsed))
        if len(calls) == 2:
            raise RuntimeError("disk full")
        return real(parsed, rejected, cursor)

    monkeypatch.setattr(store, "write_batch", flaky)
    with pytest.raises(RuntimeError):
        ingest_epochs(store, inbox, chunk=2)
    monkeypatch.setattr(store, "write_batch", real)
    assert ids(store) == {"e2-0@x", "e2-1@x"}
    cursor = store.get_cursor(f"pigit:{inbox}")
    assert list(cursor["epochs"]) == ["2.git"]  # not past the unstored messages

    stats = ingest_epochs(store, inbox, chunk=2)
    assert stats["stored"] == 5 and stats["duplicates"] == 0
    assert stats["deleted"] == 1 and stats["cursor"]["deleted"][0]["message_id"] == "e2-1@x"
    assert list(stats["epochs"]) == ["2.git", "10.git"]  # numeric, not lexical, order
    assert ids(store) == {f"e2-{i}@x" for i in range(5)} | {"e10-0@x", "e10-1@x"}
    assert store.get_message("e2-1@x") is not None
    assert store.thread_of("e10-0@x")[0]["message_id"] == "e2-0@x"
    with store.engine.connect() as conn:
        from sqlalchemy import select

        from storage import schema

        order = list(conn.execute(select(schema.messages.c.message_id).order_by(schema.messages.c.id)).scalars())
    assert order.index("e2-4@x") < order.index("e10-0@x")

    again = ingest_epochs(store, inbox)
    assert again["commits"] == 0 and again["stored"] == 0
    make_epoch(inbox / "git" / "10.git", [("add", _msg("e10-2@x"))])
    more = ingest_epochs(store, inbox)
    assert more["commits"] == 1 and more["stored_ids"] == ["e10-2@x"]
    store.close()
