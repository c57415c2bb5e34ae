"""lore / public-inbox HTTP polling against a REAL public-inbox-httpd on loopback, plus a stdlib
stub server for the broken-server cases (garbage, 500, timeouts, conditional requests)."""

from __future__ import annotations

import gzip
import json
import subprocess
import threading

import pytest

from tests.publicinbox import THREADS, PublicInbox, StubServer, cli_env, fresh, missing_tools

THREAD_IDS = {"report-1@example.com", "reply-1@example.net", "reply-2@example.com"}
PATCH_IDS = {"patch-1@example.org", "patch-1-review@example.net"}
ALL_IDS = THREAD_IDS | PATCH_IDS
LIVE = THREADS / "live"
CONFIG = """
[lore]
contact = "mailto:triage@example.org"
timeout = 1.5
connect_timeout = 1.5
retries = 2
backoff = 0.05
concurrency = 2
"""


@pytest.fixture
def pi():
    reason = missing_tools()
    if reason:
        pytest.skip(reason)
    inbox = PublicInbox()
    inbox.bulk_import(sorted(THREADS.glob("*.eml")))
    inbox.start()
    yield inbox
    inbox.close()


@pytest.fixture
def env(home, tmp_path, cli):
    """(run, store): run(*args) -> parsed JSON of a CLI command on a private SQLite db."""
    with cli_env(cli, tmp_path, CONFIG) as (run, store):
        yield run, store


def ids(store) -> set[str]:
    with store.engine.connect() as conn:
        from sqlalchemy import select

        from storage import schema

        return set(conn.execute(select(schema.messages.c.message_id)).scalars())


def git_blob(pi: PublicInbox, msgid: str) -> bytes:
    """The message as public-inbox stored it in its git epoch."""
    g = pi.inboxdir / "git" / "0.git"
    log = subprocess.run(["git", "-C", str(g), "log", "--format=%H", "refs/heads/master"],
                         capture_output=True, text=True, check=True).stdout.split()
    for c in log:
        blob = subprocess.run(["git", "-C", str(g), "cat-file", "blob", f"{c}:m"], capture_output=True).stdout
        if f"<{msgid}>".encode() in blob.split(b"\n\n", 1)[0]:
            return blob
    raise KeyError(msgid)


# -- subscribe validation -----------------------------------------------------------------
def test_subscribe_rejects_bad_urls_with_one_line(env):
    run, store = env
    for bad, words in [("ftp://lore.kernel.org/lkml/", "only http(s)"),
                       ("/no/such/inbox", "no such local path"),
                       ("https://lore.kernel.org/", "names no inbox"),
                       ("https://lore.kernel.org/lkml/0", "use --git")]:
        res = run("subscribe", bad, "--json", ok=False)
        assert res.exit_code != 0
        err = res.output.strip()
        assert err.count("\n") == 0 and words in err, err
    assert store.subscriptions() == []
    out = run("subscribe", "https://lore.kernel.org/linux-mm/?q=s:regression", "--json")
    assert (out["kind"], out["url"], out["query"]) == ("search", "https://lore.kernel.org/linux-mm/", "s:regression")
    out = run("subscribe", "https://lore.kernel.org/lkml/0", "--git", "--json")
    assert (out["kind"], out["url"]) == ("git", "https://lore.kernel.org/lkml/0")


# -- the main path --------------------------------------------------------------------------
def test_inbox_poll_live_delivery_and_unchanged_feed(env, pi):
    run, store = env
    run("subscribe", pi.base, "--json")
    first = run("poll", "--json", "--details")
    assert first["errors"] == [] and first["subscriptions"] == 1
    assert first["new_messages"] == 5
    assert ids(store) == ALL_IDS
    # thread reconstruction: replies under their parents
    thread = {n["message_id"]: n for n in store.thread_of("reply-2@example.com")}
    assert set(thread) == THREAD_IDS
    assert thread["report-1@example.com"]["depth"] == 0
    assert thread["reply-1@example.net"]["parent"] == "report-1@example.com"
    assert thread["reply-2@example.com"]["parent"] == "reply-1@example.net"
    assert thread["reply-2@example.com"]["depth"] == 2
    # mboxrd undone exactly: the stored bytes are public-inbox's own blob
    raw = store.get_message("reply-2@example.com")["raw"]
    assert b"\nFrom what I can see" in raw and b"\n>From the dmesg" in raw
    assert raw == git_blob(pi, "reply-2@example.com")
    assert store.get_message("patch-1@example.org")["origin"] == f"lore:{pi.base}"

    pi.deliver(fresh((LIVE / "live-reply.eml").read_bytes()))
    second = run("poll", "--json", "--details")
    assert second["errors"] == []
    assert second["new_messages"] == 1
    assert ids(store) == ALL_IDS | {"live-reply-1@example.net"}
    assert store.thread_of("live-reply-1@example.net")[0]["message_id"] == "report-1@example.com"

    third = run("poll", "--json", "--details")
    assert third["new_messages"] == 0 and third["errors"] == []
    detail = third["details"][0]
    assert detail.get("unchanged") or detail.get("not_modified")
    assert detail["requests"] == 1  # only the feed: no thread fetched
    plain = run("poll", "--json")  # the stable contract: exactly these keys
    assert list(plain) == ["subscriptions", "new_messages", "errors"] and plain["new_messages"] == 0
    sub = store.subscriptions()[0]
    assert sub["last_error"] is None
    assert "live-reply-1@example.net" in sub["state"]["seen"]
    assert sub["state"]["updated"] > "2024-01-02"


def test_search_subscription_only_matching_threads(env, pi):
    run, store = env
    run("subscribe", pi.base, "--query", "s:regression", "--json")
    run("subscribe", pi.base + "?q=nosuchwordanywhere", "--json")  # empty search = 404
    out = run("poll", "--json", "--details")
    assert out["errors"] == [], out
    assert out["new_messages"] == 3
    assert ids(store) == THREAD_IDS
    pi.deliver(fresh((LIVE / "live-new.eml").read_bytes()), hup=False)
    pi.deliver(fresh((LIVE / "live-reply.eml").read_bytes()))
    out = run("poll", "--json", "--details")
    assert out["errors"] == [] and out["new_messages"] == 1
    assert ids(store) == THREAD_IDS | {"live-reply-1@example.net"}


def test_search_since_backfill(env, pi):
    run, store = env
    run("subscribe", pi.base, "--query", "s:regression OR s:typo", "--json")
    out = run("poll", "--since", "2023-12-31", "--json")  # searches (s:regression OR s:typo) rt:2023-12-31..
    assert out["errors"] == [] and out["new_messages"] == 5
    assert ids(store) == ALL_IDS


def test_since_backfills_through_search(env, pi, tmp_path, cli):
    run, store = env
    run("subscribe", pi.base, "--json")
    out = run("poll", "--since", "2030-01-01", "--json")
    assert out["errors"] == [] and out["new_messages"] == 0  # rt:2030-01-01.. has no hits: 404
    res = run("poll", "--since", "yesterday-ish", "--json", ok=False)
    assert res.exit_code != 0 and "YYYY-MM-DD" in res.output
    # a fresh database: --since before the mail backfills everything
    db2 = f"sqlite:///{tmp_path / 'rt2.sqlite3'}"
    assert cli("subscribe", pi.base, db=db2).exit_code == 0
    res = cli("poll", "--since", "2023-12-31", "--json", db=db2)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["errors"] == [] and out["new_messages"] == 5


def test_server_stopped_mid_poll_loses_nothing(env, pi, monkeypatch):
    run, store = env
    run("subscribe", pi.base, "--json")
    assert run("poll", "--json", "--details")["new_messages"] == 5
    pi.deliver(fresh((LIVE / "live-new.eml").read_bytes()), hup=False)
    pi.deliver(fresh((LIVE / "live-reply.eml").read_bytes()), hup=False)

    from bot.sources import lore

    original = lore.LoreClient.thread_mbox
    lock = threading.Lock()

    def stop_then_fetch(self, msgid):
        with lock:  # the feed was read; the server goes away before any thread is
            if pi.proc is not None:
                pi.stop()
        return original(self, msgid)

    monkeypatch.setattr(lore.LoreClient, "thread_mbox", stop_then_fetch)
    out = run("poll", "--json", "--details")
    assert out["new_messages"] == 0
    assert len(out["errors"]) == 1 and "connection refused" in out["errors"][0], out
    sub = store.subscriptions()[0]
    assert sub["last_error"] and "connection refused" in sub["last_error"]
    assert "perf-report-1@example.com" not in sub["state"]["seen"]
    assert store.source_errors()[0]["subscription_id"] == sub["id"]
    monkeypatch.setattr(lore.LoreClient, "thread_mbox", original)

    out = run("poll", "--json", "--details")  # server still down
    assert out["new_messages"] == 0 and "connection refused" in out["errors"][0]

    port = pi.port
    pi.start()
    assert pi.port == port  # same URL after the restart
    out = run("poll", "--json", "--details")
    assert out["errors"] == [] and out["new_messages"] == 2
    assert ids(store) == ALL_IDS | {"perf-report-1@example.com", "live-reply-1@example.net"}
    assert store.subscriptions()[0]["last_error"] is None


def test_broken_servers_record_reasons_and_others_go_on(env, pi):
    run, store = env
    stubs = {mode: StubServer(mode, delay=4) for mode in ("garbage", "500", "slow", "html")}
    try:
        for stub in stubs.values():
            run("subscribe", stub.base, "--json")
        run("subscribe", pi.base, "--json")
        run("subscribe", f"http://127.0.0.1:{pi.port}/nosuchinbox/", "--json")
        out = run("poll", "--json", "--details")
        assert out["subscriptions"] == 6
        assert out["new_messages"] == 5 and ids(store) == ALL_IDS
        errors = {e.split(" ")[0]: e for e in out["errors"]}
        assert len(out["errors"]) == 5, out["errors"]
        text = "\n".join(out["errors"])
        assert "garbage feed" in text and "not well-formed XML" in text
        assert "not an Atom/RSS feed" in text
        assert "HTTP 500" in text and "after 2 attempts" in text
        assert "timed out" in text
        assert "HTTP 404" in text and "no such inbox" in text
        assert "Traceback" not in text
        assert len(stubs["500"].hits) == 2  # bounded retries
        ua = stubs["garbage"].hits[0][1]["User-Agent"]
        assert ua == "regtriage/0.1.0 (+mailto:triage@example.org)"
        reasons = {r["subscription_id"]: r["reason"] for r in store.source_errors()}
        assert len(reasons) == 5
        for sub in store.subscriptions():
            assert (sub["last_error"] is None) == (sub["url"] == pi.base)
        assert len(errors) == 5
    finally:
        for stub in stubs.values():
            stub.close()


def _atom(base: str, entries: list[tuple[str, str]]) -> bytes:
    items = "".join(
        f'<entry><title>t</title><updated>{up}</updated><link href="{base}{mid}/"/>'
        f"<id>urn:x:{mid}</id></entry>" for mid, up in entries)
    return (f'<?xml version="1.0" encoding="us-ascii"?><feed xmlns="http://www.w3.org/2005/Atom">'
            f"<title>t</title><id>urn:x</id><updated>2024-01-02T00:00:00Z</updated>{items}</feed>").encode()


def test_conditional_requests_and_raw_fallback(env):
    """A server that sends ETags gets If-None-Match and its 304 means nothing new; a thread
    whose t.mbox.gz fails comes from /raw; concurrency is bounded."""
    run, store = env
    report = (THREADS / "01-report.eml").read_bytes()
    patch = (THREADS / "04-patch.eml").read_bytes()
    review = (THREADS / "05-patch-review.eml").read_bytes()
    mbox = b"".join(b"From mboxrd@z Thu Jan  1 00:00:00 1970\n" + m + b"\n" for m in (patch, review))
    stub = StubServer("routes")
    base = stub.base
    stub.routes.update({
        "/list/new.atom": (200, {"Content-Type": "application/atom+xml", "ETag": '"v1"'},
                           _atom(base, [("patch-1-review@example.net", "2024-01-01T14:00:00Z"),
                                        ("patch-1@example.org", "2024-01-01T13:00:00Z"),
                                        ("report-1@example.com", "2024-01-01T10:00:00Z")])),
        "/list/patch-1%40example.org/t.mbox.gz": (200, {"Content-Type": "application/gzip"}, gzip.compress(mbox)),
        "/list/report-1%40example.com/t.mbox.gz": (500, {}, b"boom"),
        "/list/report-1%40example.com/raw": (200, {}, b"From mboxrd@z Thu Jan  1 00:00:00 1970\n" + report + b"\n"),
    })
    try:
        run("subscribe", base, "--json")
        out = run("poll", "--json", "--details")
        assert out["errors"] == [] and out["new_messages"] == 3
        assert store.get_message("report-1@example.com")["raw"] == report
        assert store.get_message("patch-1-review@example.net")["raw"] == review
        paths = [p for p, _ in stub.hits]
        assert paths.count("/list/patch-1%40example.org/t.mbox.gz") == 1  # review covered by the thread
        assert paths.count("/list/report-1%40example.com/t.mbox.gz") == 2  # retried once
        n = len(stub.hits)
        out = run("poll", "--json", "--details")
        assert out["new_messages"] == 0 and out["errors"] == []
        assert out["details"][0]["not_modified"] is True
        assert len(stub.hits) == n + 1
        assert stub.hits[-1][1].get("If-None-Match") == '"v1"'
    finally:
        stub.close()


def test_thread_mbox_bomb_is_cut_and_the_message_comes_from_raw(env):
    """A t.mbox.gz that expands beyond [ingest] max_compression_ratio is never expanded whole:
    the thread download stops there and the message itself is fetched from /raw."""
    run, store = env
    report = (THREADS / "01-report.eml").read_bytes()
    bomb = gzip.compress(b"From mboxrd@z Thu Jan  1 00:00:00 1970\n" + report + b"\n" + b"\0" * (64 << 20))
    assert len(bomb) < 200_000
    # (16 MiB pass freely, then the ratio limit applies: 64 MiB of NULs from <200 KB is cut)
    stub = StubServer("routes")
    base = stub.base
    stub.routes.update({
        "/list/new.atom": (200, {"Content-Type": "application/atom+xml"},
                           _atom(base, [("report-1@example.com", "2024-01-01T10:00:00Z")])),
        "/list/report-1%40example.com/t.mbox.gz": (200, {"Content-Type": "application/gzip"}, bomb),
        "/list/report-1%40example.com/raw": (200, {}, b"From mboxrd@z Thu Jan  1 00:00:00 1970\n" + report + b"\n"),
    })
    try:
        run("subscribe", base, "--json")
        out = run("poll", "--json", "--details")
        assert out["errors"] == [] and out["new_messages"] == 1
        assert store.get_message("report-1@example.com")["raw"] == report
        paths = [p for p, _ in stub.hits]
        assert paths.count("/list/report-1%40example.com/t.mbox.gz") == 1  # a limit is not retried
        assert paths.count("/list/report-1%40example.com/raw") == 1
    finally:
        stub.close()


def test_bounded_thread_reads_several_gzip_members_and_rejects_a_truncated_one():
    import zlib

    from bot.sources.lore import LoreClient, LoreSettings, SourceError

    class Resp:
        def __init__(self, data):
            self.status_code, self.data = 200, data

        def iter_content(self, n):
            return (self.data[i:i + n] for i in range(0, len(self.data), n))

        def close(self):
            pass

    client = LoreClient("http://127.0.0.1:9/list/", LoreSettings())
    try:
        two = gzip.compress(b"From a\nx\n") + gzip.compress(b"From b\ny\n")
        client.node.request = lambda *a, **k: Resp(two)
        assert client._bounded_get("u", gz=True) == b"From a\nx\nFrom b\ny\n"
        padded = gzip.compress(b"From a\nx\n") + b"\0" * 70000 + gzip.compress(b"From b\ny\n") + b"\0" * 10
        client.node.request = lambda *a, **k: Resp(padded)  # NUL padding across chunk boundaries
        assert client._bounded_get("u", gz=True) == b"From a\nx\nFrom b\ny\n"
        client.node.request = lambda *a, **k: Resp(gzip.compress(b"From a\n" * 1000)[:-12])
        with pytest.raises(SourceError, match="ends inside a member"):
            client._bounded_get("u", gz=True)
        client.node.request = lambda *a, **k: Resp(b"not gzip at all")
        with pytest.raises(zlib.error):
            client._bounded_get("u", gz=True)
    finally:
        client.close()


def _generated(n: int) -> list[bytes]:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "bench" / "gen_mail.py"
    if not path.is_file():
        pytest.skip("bench/gen_mail.py not available")
    spec = importlib.util.spec_from_file_location("rt_gen_mail", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.generate(n, seed=7)


def test_feed_overflow_gap_fill_and_since_paging(env, pi, tmp_path, cli):
    """More new mail than new.atom shows (25) between two polls: the gap is filled from the
    search endpoint, page by page (&o=200, &o=400); --since backfills the same way."""
    run, store = env
    run("subscribe", pi.base, "--json")
    assert run("poll", "--json", "--details")["new_messages"] == 5
    msgs = _generated(450)
    mbox = tmp_path / "gen.mbox"
    mbox.write_bytes(b"".join(b"From mboxrd@z Thu Jan  1 00:00:00 1970\n"
                              + m.replace(b"\nFrom ", b"\n>From ") + b"\n" for m in msgs))
    with open(mbox, "rb") as fh:
        subprocess.run(["perl", str(THREADS.parent.parent / "pi-bulk-import.pl"), pi.name], stdin=fh,
                       env=pi.env, check=True, capture_output=True)
    pi.hup()
    out = run("poll", "--json", "--details")
    assert out["errors"] == [], out
    assert out["details"][0].get("gap_filled") is True
    assert out["new_messages"] == 450
    assert len(ids(store)) == 455

    db2 = f"sqlite:///{tmp_path / 'rt2.sqlite3'}"
    cli("subscribe", pi.base, db=db2)
    res = cli("poll", "--since", "2024-12-31", "--json", db=db2)
    out = json.loads(res.output)
    assert out["errors"] == [] and out["new_messages"] == 450  # the 2024-01-01 threads are older
