"""Chat notifications without chat servers: settings, routing, formatting (mail strings in IRC
lines and Matrix HTML), chat command parsing, the allow-list, rate limits, the chat answers
on records built through the real pipeline, and the outbox (idempotency, retries, backoff,
order, threads, leases, tracker scan) on SQLite and PostgreSQL with a scripted adapter.  The
IRC adapter's SASL PLAIN, NickServ and flood limit are checked against a small scripted IRC
server on 127.0.0.1 (ngircd has no SASL); tests/test_chat_servers.py runs the real servers."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
from datetime import timedelta

import pytest

from bot.config import ConfigError
from bot.notify.base import Incoming, OutMessage, PermanentError, Sent, TransientError
from bot.notify.chat import Command, RateLimiter, TokenBucket, is_admin, parse_command
from bot.notify.format import (IRC_MAX_BYTES, irc_line, lines_to_matrix, markdown_to_html, matrix_bodies,
                               query_answer)
from bot.notify.routing import Route, idempotency_key, normalize_event, route_event, subsystem_matches, txn_id
from bot.notify.settings import Secret, load_settings

ISSUE_CONFIG = {
    "notify": {
        "irc": [{"server": "irc.oftc.net", "port": 6697, "tls": True, "nick": "regtriage",
                 "channels": ["#mm-regressions"]}],
        "matrix": [{"homeserver": "https://matrix.example.org", "user_id": "@regtriage:example.org",
                    "access_token_env": "REGTRIAGE_MATRIX_TOKEN", "rooms": ["#regressions:example.org"]}],
        "route": [{"events": ["confirmed"], "subsystem": "mm/", "kind": "performance",
                   "targets": ["irc:#mm-regressions", "matrix:#regressions:example.org"]}],
    },
    "web": {"base_url": "https://regtriage.example.org/"},
}


def cfg(**notify):
    c = json.loads(json.dumps(ISSUE_CONFIG))
    c["notify"].update(notify)
    return c


# -- settings -------------------------------------------------------------------------------------------
def test_issue_config_parses():
    s = load_settings(ISSUE_CONFIG)
    assert [t.name for t in s.targets()] == ["irc:#mm-regressions", "matrix:#regressions:example.org"]
    irc, mx = s.irc[0], s.matrix[0]
    assert (irc.server, irc.port, irc.tls, irc.tls_verify, irc.nick) == ("irc.oftc.net", 6697, True, True, "regtriage")
    assert mx.access_token == Secret("REGTRIAGE_MATRIX_TOKEN", None, mx.access_token.what)
    assert s.base_url == "https://regtriage.example.org"
    assert s.routes == [Route(("confirmed",), ("mm",), ("performance",),
                              ("irc:#mm-regressions", "matrix:#regressions:example.org"))]
    assert s.resolve_target("irc:irc.oftc.net/#mm-regressions").name == "irc:#mm-regressions"


@pytest.mark.parametrize("change, message", [
    ({"irc": [{"server": "irc.oftc.net", "channels": ["#a"], "password": "hunter2"}]}, "do not put password"),
    ({"matrix": [{"homeserver": "https://m.example", "user_id": "@a:m.example", "access_token": "syt_x",
                  "rooms": ["#r:m.example"]}]}, "do not put access_token"),
    ({"matrix": [{"homeserver": "https://m.example", "user_id": "@a:m.example", "rooms": ["#r:m.example"]}]},
     "needs access_token_env"),
    ({"route": [{"events": ["confirmed"], "targets": ["irc:#nowhere"]}]}, "unknown notification target"),
    ({"route": [{"events": ["exploded"], "targets": ["irc:#mm-regressions"]}]}, "unknown event"),
    ({"route": [{"kind": "speedy", "targets": ["irc:#mm-regressions"]}]}, "unknown kind"),
    ({"irc": [{"server": "irc.oftc.net", "channels": ["mm-regressions"]}]}, "not an IRC channel"),
    ({"irc": [{"server": "irc.oftc.net", "channels": ["#a"], "nick": "9bad nick"}]}, "not a valid IRC nick"),
    ({"matrix": [{"homeserver": "ftp://m.example", "user_id": "@a:m.example", "password_env": "X",
                  "rooms": ["#r:m.example"]}]}, "http(s) URL"),
])
def test_config_errors(change, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_settings(cfg(**change))


def test_same_channel_on_two_servers_needs_the_qualified_name():
    c = cfg(irc=[{"name": "oftc", "server": "irc.oftc.net", "channels": ["#k"]},
                 {"name": "libera", "server": "irc.libera.chat", "channels": ["#k"]}],
            route=[{"targets": ["irc:libera/#k"]}])
    s = load_settings(c)
    assert s.routes[0].targets == ("irc:libera/#k",)
    with pytest.raises(ConfigError, match="unknown notification target"):
        load_settings(cfg(irc=c["notify"]["irc"], route=[{"targets": ["irc:#k"]}]))


def test_secret_from_env_or_file_never_shown(tmp_path, monkeypatch):
    s = Secret(env="RT_SECRET_X", file=None, what="token")
    monkeypatch.setenv("RT_SECRET_X", "  tok-123  ")
    assert s.read() == "tok-123" and "tok-123" not in repr(s)
    monkeypatch.delenv("RT_SECRET_X")
    with pytest.raises(ConfigError, match=r"\$RT_SECRET_X is not set"):
        s.read()
    f = tmp_path / "pw"
    f.write_text("file-secret\n")
    os.chmod(f, 0o600)
    assert Secret(file=str(f)).read() == "file-secret"
    os.chmod(f, 0o644)
    with pytest.raises(ConfigError, match="readable by everyone"):
        Secret(file=str(f)).read()
    s = load_settings(ISSUE_CONFIG)
    assert "REGTRIAGE_MATRIX_TOKEN" in repr(s) and "syt_" not in repr(s)


# -- routing ----------------------------------------------------------------------------------------------
ROUTES = [
    Route(("confirmed",), ("mm",), ("performance",), ("irc:#mm", "matrix:#reg:x")),
    Route(None, ("fs",), None, ("irc:#fs",)),
    Route(("fix-landed", "confirmed"), None, None, ("matrix:#reg:x", "irc:#all")),
    Route(("triaged",), ("sched",), None, ("irc:#sched",)),
]


@pytest.mark.parametrize("event, subsystem, kind, expected", [
    ("confirmed", "mm", "performance", ["irc:#mm", "matrix:#reg:x", "irc:#all"]),
    ("confirmed", "mm/slab", "performance", ["irc:#mm", "matrix:#reg:x", "irc:#all"]),
    ("confirmed", "mmc", "performance", ["matrix:#reg:x", "irc:#all"]),  # mmc is not under mm/
    ("confirmed", "mm", "functional", ["matrix:#reg:x", "irc:#all"]),
    ("inconclusive", "fs/ext4", None, ["irc:#fs"]),
    ("inconclusive", None, None, []),
    ("fixed", "drivers/gpu", None, ["matrix:#reg:x", "irc:#all"]),  # alias of fix-landed
    ("new", "kernel/sched", None, ["irc:#sched"]),  # core-kernel areas by their short name
])
def test_route_event(event, subsystem, kind, expected):
    assert route_event(ROUTES, event, {"subsystem": subsystem, "kind": kind}) == expected


def test_event_names_and_keys():
    assert [normalize_event(x) for x in ("Not reproduced", "rerun", "fix_landed", "new")] == \
        ["not-reproduced", "rerun-scheduled", "fix-landed", "triaged"]
    with pytest.raises(ValueError):
        normalize_event("party")
    assert subsystem_matches("sched", "kernel/sched/fair") and subsystem_matches("mm", "mm")
    assert not subsystem_matches("mm", "mmc") and not subsystem_matches("mm", None)
    k1 = idempotency_key("confirmed", 12, "", "irc:#mm", "db1")
    assert k1 == idempotency_key("confirmed", 12, "", "irc:#mm", "db1")
    assert len({k1, idempotency_key("confirmed", 12, "", "irc:#mm", "db2"),
                idempotency_key("confirmed", 12, "r2", "irc:#mm", "db1"),
                idempotency_key("confirmed", 12, "", "irc:#fs", "db1")}) == 4
    assert txn_id(k1) == txn_id(k1) and txn_id(k1).startswith("regtriage.")


# -- formatting ------------------------------------------------------------------------------------------
HOSTILE = ("mm: <script>alert(1)</script> <img src=x onerror=alert(2)> [click](javascript:alert(3)) "
           "\x02bold\x02 \x0304red\x03 \x01ACTION x\x01 a & b\r\nInjected: line")


def entry(**kw):
    e = {"id": 12, "title": "page_fault1 throughput regression since v6.8", "status": "confirmed",
         "open": True, "kind": "performance", "subsystem": "mm", "metric": "page_fault1", "change_percent": -15.04,
         "culprit": {"commit": "54a6eb5c4765aa573a030ceeba2c14e3d2ea5706", "subject": "mm: use zonelist_zone()",
                     "url": "https://git.kernel.org/torvalds/c/54a6eb5c4765aa573a030ceeba2c14e3d2ea5706"},
         "range": {"good": "v6.7", "bad": "v6.8"}, "hardware": {"cpu": "AMD EPYC 7763"}, "config": {},
         "numbers": [], "report": {"message_id": "a@b", "url": "https://lore.kernel.org/r/a@b/"},
         "related": [], "reruns": [], "history": [], "updated": "2024-03-05T10:00:00+00:00",
         "created": "2024-03-04T10:00:00+00:00", "title_source": "report", "duplicate_of": None,
         "duplicates": [], "fix": None, "set_by": {}, "evidence": {}, "confidence": 0.9}
    e.update(kw)
    return e


def test_irc_line_is_short_clean_and_keeps_the_link():
    line = irc_line("confirmed", entry(), "https://rt.example")
    assert line == ("confirmed #12: page_fault1 throughput regression since v6.8 [mm] "
                    "(performance, page_fault1 -15.0%) culprit 54a6eb5c4765 https://rt.example/regressions/12")
    long = irc_line("confirmed", entry(title="x" * 300 + " " + HOSTILE * 5), "https://rt.example")
    assert len(long.encode()) <= IRC_MAX_BYTES and long.endswith(" https://rt.example/regressions/12")
    assert not re.search(r"[\x00-\x1f\x7f]", long)
    hostile = irc_line("fix-landed", entry(title=HOSTILE), None)
    assert not re.search(r"[\x00-\x1f\x7f]", hostile) and "Injected: line" in hostile
    assert hostile.endswith(" https://lore.kernel.org/r/a@b/")  # no web page: the report
    multibyte = irc_line("confirmed", entry(title="Größe ü" * 100), "https://rt.example")
    assert len(multibyte.encode()) <= IRC_MAX_BYTES
    multibyte.encode("utf-8").decode("utf-8")  # cut at a character boundary


def test_matrix_html_escapes_mail_strings():
    e = entry(title=HOSTILE, culprit={"commit": "54a6eb5c4765", "subject": '"><script>x</script>',
                                      "url": "javascript:alert(9)"},
              related=[{"relation": "reply", "message_id": "r@x", "url": "javascript:alert(4)",
                        "subject": "<b>re</b>", "from": "Eve <eve@x>", "date": None, "counts_as_activity": True}],
              hardware={"cpu": "<i>cpu</i>"})
    plain, html = matrix_bodies("confirmed", e, "https://rt.example")
    assert plain.startswith("[regtriage] confirmed: regression #12: mm: <script>alert(1)</script>")
    assert "\nhttps://rt.example/regressions/12\n" in plain
    for bad in ("<script", "<img", "<i>", "<b>re", 'href="javascript', "\x02", "\x01"):
        assert bad not in html, bad
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&amp;" in html
    hrefs = re.findall(r'href="([^"]*)"', html)
    assert hrefs and all(h.startswith("https://") for h in hrefs), hrefs
    assert '<a href="https://rt.example/regressions/12">web page</a>' in html
    assert "<strong>Regression #12:" in html


def test_markdown_to_html_drops_raw_html_and_bad_links():
    html = markdown_to_html("<b>x</b> [a](javascript:alert(1)) [b](https://ok.example/)")
    assert "<b>" not in html and 'href="javascript' not in html and 'href="https://ok.example/"' in html


def test_lines_to_matrix_links_only_our_urls():
    plain, html = lines_to_matrix(["#1 [open] <b>t</b> https://rt.example/regressions/1", "and 2 more: x"])
    assert plain == "#1 [open] <b>t</b> https://rt.example/regressions/1\nand 2 more: x"
    assert html == ('#1 [open] &lt;b&gt;t&lt;/b&gt; <a href="https://rt.example/regressions/1">'
                    'https://rt.example/regressions/1</a><br>\nand 2 more: x')


def test_query_answer_is_short():
    rows = [{"id": i, "title": f"regression {i}", "status": "triaged", "subsystem": "mm", "kind": None,
             "report_message_id": f"m{i}@x"} for i in range(1, 8)]
    lines = query_answer(rows[:5], 7, "status:open subsystem:mm/", "open mm/", base_url="https://rt.example",
                         max_lines=5, max_len=120)
    assert len(lines) == 5 and lines[-1] == "and 3 more: https://rt.example/?q=open%20mm%2F"
    assert lines[0] == "#1 [triaged] regression 1 [mm] https://rt.example/regressions/1"
    lines = query_answer(rows[:2], 2, "x", "x", base_url=None, max_lines=5, max_len=120)
    assert lines[1] == "#2 [triaged] regression 2 [mm] https://lore.kernel.org/r/m2@x/"
    assert query_answer([], 0, "status:open", "open", base_url=None, max_lines=5, max_len=120) == \
        ["no regressions match (status:open)"]


# -- chat commands ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("!regtriage open mm/", Command("query", "open mm/")),
    ("!REGTRIAGE   open   regressions in mm/ ", Command("query", "open regressions in mm/")),
    ("regtriage: open regressions in mm/", Command("query", "open regressions in mm/")),
    ("rtbot, show #12", Command("show", "", 12)),
    ("!regtriage show 12", Command("show", "", 12)),
    ("!regtriage", Command("help")),
    ("!regtriage help", Command("help")),
    ("!regtriage show", Command("usage", error="usage: !regtriage show ID")),
    ("!regtriage show twelve", Command("usage", error="usage: !regtriage show ID")),
    ("!regtriage rerun 7", Command("rerun", "", 7)),
    ("!regtriage resolve 7 fixed by   the revert", Command("resolve", "fixed by the revert", 7)),
    ("!regtriagex open", None),
    ("open regressions in mm/", None),
    ("hey regtriage: open", None),
    ("", None),
])
def test_parse_command(text, expected):
    assert parse_command(text, names=("rtbot", "regtriage")) == expected


def test_allow_list():
    admins = ["boss!*@*.corp.example", "Op[x]!~op@host.example", "@alice:example.org", "jane!jane@*"]
    assert is_admin("irc", "boss!b@vpn.corp.example", admins)
    assert is_admin("irc", "BOSS!b@VPN.corp.example", admins)  # IRC case folding
    assert not is_admin("irc", "boss!b@corp.example.evil", admins)
    assert is_admin("irc", "op{X}!~op@host.example", admins)  # [ ] fold to { }; not a char class
    assert not is_admin("irc", "opx!~op@host.example", admins)
    assert is_admin("matrix", "@alice:example.org", admins)
    assert not is_admin("matrix", "@alice:example.org.evil", admins)
    assert not is_admin("irc", "@alice:example.org", admins) and not is_admin("matrix", "jane!jane@x", admins)
    assert not is_admin("irc", None, admins) and not is_admin("irc", "boss!b@x", [])


def test_token_bucket_and_rate_limiter():
    b = TokenBucket(rate=1, burst=2, now=0)
    assert b.take(now=0) and b.take(now=0) and not b.take(now=0)
    assert b.wait_time(now=0) == pytest.approx(1.0)
    assert b.take(now=1.0) and not b.take(now=1.5)
    clock = [0.0]
    rl = RateLimiter(user_rate=0.1, user_burst=2, channel_rate=1, channel_burst=3, clock=lambda: clock[0])
    assert rl.allow("u1", "#c") and rl.allow("u1", "#c") and not rl.allow("u1", "#c")  # per user
    assert rl.allow("u2", "#c") and not rl.allow("u3", "#c")  # per channel
    assert rl.allow("u3", "#d")  # other channel
    clock[0] = 1.0
    assert rl.allow("u3", "#c") and not rl.allow("u1", "#c")
    clock[0] = 10.0
    assert rl.allow("u1", "#c")
    assert rl.refused == 3


# -- answers on real records ---------------------------------------------------------------------------------
def mail(mid, subject, body, date, *, frm="Perf Tester <perf@example.org>", parent=None):
    head = f"From: {frm}\nTo: linux-kernel@vger.kernel.org\nSubject: {subject}\nMessage-ID: <{mid}>\nDate: {date}\n"
    if parent:
        head += f"In-Reply-To: <{parent}>\nReferences: <{parent}>\n"
    return (head + "\n" + body).encode()


MM = mail("n-mm@example.org", "[REGRESSION] page_fault1 throughput regression in will-it-scale since v6.8", """Hi,

Since v6.8 we see a 15% drop in will-it-scale page_fault1 throughput on an AMD EPYC 7763 box.
v6.7 is fine.  The first bad commit is 54a6eb5c4765aa573a030ceeba2c14e3d2ea5706
("mm: use zonelist_zone() to get zone").
""", "Mon, 04 Mar 2024 10:00:00 +0000")
FS = mail("n-fs@example.org", "[REGRESSION] ext4: fsync returns EIO after remount since v6.9", """Hi,

Since v6.9, fsync() on ext4 returns EIO after a remount,ro cycle. v6.8 is fine.
""", "Fri, 08 Mar 2024 10:00:00 +0000", frm="Fs Tester <fs@example.org>")


def build(store, *raws):
    from bot.sources.ingest import Ingester
    from bot.tracker.records import update_tracker
    from bot.triage.runner import triage_pending

    ing = Ingester(store, workers=1)
    for raw in raws:
        ing.add(raw, "test")
    ing.flush()
    triage_pending(store)
    update_tracker(store, None, fixes=False)


def rid_of(store, msgid):
    from sqlalchemy import select

    import storage.tracker_schema as ts

    with store.engine.connect() as conn:
        return conn.execute(select(ts.regressions.c.id).where(ts.regressions.c.report_message_id == msgid)).scalar()


class RecordingActions:
    def __init__(self):
        self.calls = []

    def resolve(self, rid, actor, note):
        self.calls.append(("resolve", rid, actor, note))
        return True

    def rerun(self, rid, actor):
        self.calls.append(("rerun", rid, actor))
        return True


def incoming(text, *, network="irc", sender="joe", sender_id="joe!~joe@host.example", channel="#c"):
    return Incoming(network=network, account="a", channel=channel, sender=sender, sender_id=sender_id, text=text,
                    names=("rtbot", "regtriage"))


def test_chat_responder_answers_and_refuses(store):
    from bot.notify.responder import ChatResponder
    from bot.tracker.records import get_record

    build(store, MM, FS)
    mm, fs = rid_of(store, "n-mm@example.org"), rid_of(store, "n-fs@example.org")
    s = load_settings({"web": {"base_url": "https://rt.example"},
                       "chat": {"admins": ["boss!*@*", "@boss:x.org"], "max_lines": 1, "user_burst": 3, "channel_burst": 50,
                                "user_rate": 0.001}})
    acts = RecordingActions()
    r = ChatResponder(store, s, acts)
    ask = lambda text, **kw: asyncio.run(r(incoming(text, **kw)))  # noqa: E731

    lines = ask("!regtriage open mm/")
    assert lines == [f"#{mm} [triaged] [REGRESSION] page_fault1 throughput regression in will-it-scale since v6.8 "
                     f"[mm] (performance, page_fault1 throughput -15.0%) culprit 54a6eb5c4765 https://rt.example/regressions/{mm}"]
    assert ask("rtbot: open regressions in fs/")[0].startswith(f"#{fs} [triaged] [REGRESSION] ext4:")
    assert ask("!regtriage regressions") == ["2 regressions match: https://rt.example/?q=regressions"]
    assert ask("!regtriage show 9999") is None  # joe's burst of 3 is used up: silently dropped
    assert r.limiter.refused == 1
    ask2 = lambda text, **kw: asyncio.run(r(incoming(text, sender="ann", sender_id="ann!a@h", **kw)))  # noqa: E731
    assert ask2("!regtriage show 9999") == ["no regression #9999"]
    assert ask2("!regtriage since:notadate") == ["cannot understand that query: not a date: 'notadate' "
                                                 "(use YYYY-MM-DD, 30d, v6.8, ...)"]
    assert ask2("!regtriage resolve 1 nope")[0] == "ann: sorry, resolve is only for allow-listed users; " \
                                                   "anyone may query, show and help."
    assert acts.calls == []
    boss = lambda text: asyncio.run(r(incoming(text, sender="boss", sender_id="boss!b@h")))  # noqa: E731
    assert boss(f"!regtriage rerun {mm}") == [f"#{mm}: rerun requested by boss https://rt.example/regressions/{mm}"]
    assert boss(f"!regtriage resolve {fs} dup of the other") == \
        [f"#{fs}: resolved by boss https://rt.example/regressions/{fs}"]
    assert acts.calls == [("rerun", mm, "irc:boss!b@h"), ("resolve", fs, "irc:boss!b@h", "dup of the other")]
    mx = asyncio.run(r(incoming(f"!regtriage resolve {fs}", network="matrix", sender="@boss:x.org",
                                sender_id="@boss:x.org", channel="!room:x.org")))
    assert mx[0].startswith(f"#{fs}: resolved by @boss:x.org")
    assert get_record(store, fs)["status"] == "triaged"  # RecordingActions changed nothing

    # the default actions: the tracker, with history
    r2 = ChatResponder(store, s)
    out = asyncio.run(r2(incoming(f"!regtriage resolve {fs} works now", sender="boss", sender_id="boss!b@h")))
    assert out == [f"#{fs}: resolved by boss https://rt.example/regressions/{fs}"]
    rec = get_record(store, fs)
    assert rec["status"] == "resolved"
    assert (rec["history"][-1]["actor"], rec["history"][-1]["note"], rec["history"][-1]["source"]) == \
        ("irc:boss!b@h", "works now", "user")
    asyncio.run(r2(incoming(f"!regtriage rerun {mm}", sender="boss", sender_id="boss!b@h")))
    rec = get_record(store, mm)
    assert rec["status"] == "rerun-scheduled" and rec["history"][-1]["note"] == "rerun requested from chat"


# -- the outbox with a scripted adapter ---------------------------------------------------------------------
class FakeAdapter:
    """Records sends; ``script`` is a list of outcomes (None = ok, or an exception) per send."""

    def __init__(self, account, log):
        self.account = account
        self.kind = account.kind
        self.log = log
        self.connected = False
        self.script = log.setdefault("script", {}).setdefault(account.kind, [])
        self.down = log.get("down", set())

    async def start(self, *, listen=False, wait=True, timeout=None):
        if self.kind in self.down:
            raise TransientError("connection refused")
        self.connected = True

    async def stop(self):
        self.connected = False

    async def send(self, dest, msg: OutMessage):
        outcome = self.script.pop(0) if self.script else None
        if isinstance(outcome, Exception):
            if isinstance(outcome, TransientError) and "lost" in str(outcome):
                self.connected = False
            raise outcome
        n = len(self.log.setdefault("sent", []))
        self.log["sent"].append((self.kind, dest, msg))
        return Sent(remote_id=f"$ev{n}" if self.kind == "matrix" else None, thread_root=msg.thread_root)


def outbox_settings(**notify):
    c = {"web": {"base_url": "https://rt.example"},
         "notify": {"retry_base": 10, "retry_max": 40, "max_attempts": 4, "watch_tracker": True,
                    "irc": [{"server": "irc.example", "tls": False, "channels": ["#mm", "#fs"]}],
                    "matrix": [{"homeserver": "https://m.example", "user_id": "@bot:m.example",
                                "password_env": "X", "rooms": ["#reg:m.example"]}],
                    "route": [{"subsystem": "mm/", "targets": ["irc:#mm", "matrix:#reg:m.example"]},
                              {"subsystem": "fs/", "events": ["confirmed"], "targets": ["irc:#fs"]}]}}
    c["notify"].update(notify)
    return load_settings(c)


def rows(store):
    from bot.notify.outbox import list_notifications

    return {(r["event"], r["regression_id"], r["target"]): r for r in list_notifications(store, limit=1000)}


def test_outbox_enqueue_retry_backoff_threads_and_order(store):
    from bot.notify.deliver import deliver_pending
    from bot.notify.outbox import enqueue_event
    from storage.store import utcnow

    build(store, MM, FS)
    mm, fs = rid_of(store, "n-mm@example.org"), rid_of(store, "n-fs@example.org")
    s = outbox_settings()
    log: dict = {}
    factory = lambda account: FakeAdapter(account, log)  # noqa: E731

    made = enqueue_event(store, "confirmed", mm, settings=s)
    assert [(m["target"], m["created"]) for m in made] == [("irc:#mm", True), ("matrix:#reg:m.example", True)]
    assert [m["created"] for m in enqueue_event(store, "confirmed", mm, settings=s)] == [False, False]
    assert enqueue_event(store, "inconclusive", fs, settings=s) == []  # no route
    enqueue_event(store, "fix-landed", mm, settings=s)
    enqueue_event(store, "confirmed", fs, settings=s)
    r = rows(store)
    assert len(r) == 5 and {x["state"] for x in r.values()} == {"queued"}
    payload_irc = r[("confirmed", mm, "irc:#mm")]
    assert payload_irc["attempts"] == 0

    # Matrix down, IRC ok: IRC rows go out; Matrix rows wait with backoff
    log["down"] = {"matrix"}
    t0 = utcnow()
    st = deliver_pending(store, settings=s, adapter_factory=factory, now=t0)
    assert (st["sent"], st["retry"]) == (3, 2) and st["errors"] == {"matrix:#reg:m.example": "connection refused"}
    r = rows(store)
    m1 = r[("confirmed", mm, "matrix:#reg:m.example")]
    assert m1["state"] == "queued" and m1["attempts"] == 1 and m1["last_error"] == "connection refused"
    assert abs((_dt(m1["next_attempt_at"]) - t0).total_seconds() - 10) < 1
    # not due yet: nothing happens
    st = deliver_pending(store, settings=s, adapter_factory=factory, now=t0 + timedelta(seconds=5))
    assert st["due"] == 0
    st = deliver_pending(store, settings=s, adapter_factory=factory, now=t0 + timedelta(seconds=11))
    assert st["retry"] == 2
    assert abs((_dt(rows(store)[("confirmed", mm, "matrix:#reg:m.example")]["next_attempt_at"]) - t0)
               .total_seconds() - 31) < 1  # 11 s + 20 s (doubled)

    # back: the first about the record goes first; the follow-up is threaded under it
    log["down"] = set()
    # the first send is lost mid-way: the follow-up waits for it (order per record and room)
    log["script"]["matrix"] = [TransientError("connection lost")]
    st = deliver_pending(store, settings=s, adapter_factory=factory, now=t0 + timedelta(seconds=60))
    assert st["sent"] == 0 and st["retry"] == 1 and st["waiting"] == 1, st
    st = deliver_pending(store, settings=s, adapter_factory=factory, now=t0 + timedelta(seconds=200))
    assert st["sent"] == 2, st
    matrix_sent = [m for k, d, m in log["sent"] if k == "matrix"]
    assert matrix_sent[0].thread_root is None and matrix_sent[0].txn_id == txn_id(m1["key"])
    assert matrix_sent[0].html and "<strong>" in matrix_sent[0].html
    assert matrix_sent[1].thread_root == "$ev3" and matrix_sent[1].reply_to == "$ev3"
    r = rows(store)
    assert r[("fix-landed", mm, "matrix:#reg:m.example")]["thread_root"] == "$ev3"
    assert {x["state"] for x in r.values()} == {"sent"}
    assert r[("confirmed", mm, "matrix:#reg:m.example")]["attempts"] == 4
    # nothing is ever sent twice
    n = len(log["sent"])
    assert deliver_pending(store, settings=s, adapter_factory=factory, ignore_schedule=True)["due"] == 0
    assert len(log["sent"]) == n
    irc_lines = [m.text for k, d, m in log["sent"] if k == "irc"]
    assert [d for k, d, m in log["sent"] if k == "irc"] == ["#mm", "#mm", "#fs"]
    assert irc_lines[0].startswith(f"confirmed #{mm}: ") and irc_lines[1].startswith(f"fix landed #{mm}: ")


def _dt(s):
    from datetime import datetime

    return datetime.fromisoformat(s)


def test_outbox_permanent_failure_max_attempts_and_age(store):
    from bot.notify.deliver import deliver_pending
    from bot.notify.outbox import enqueue_event
    from storage.store import utcnow

    build(store, MM)
    mm = rid_of(store, "n-mm@example.org")
    s = outbox_settings(max_attempts=2, max_age_hours=1)
    log: dict = {"script": {"irc": [PermanentError("server refused the message: 404 #mm Cannot send")],
                            "matrix": [TransientError("busy"), TransientError("busy")]}}
    factory = lambda account: FakeAdapter(account, log)  # noqa: E731
    enqueue_event(store, "confirmed", mm, settings=s)
    t0 = utcnow()
    deliver_pending(store, settings=s, adapter_factory=factory, now=t0)
    r = rows(store)
    assert r[("confirmed", mm, "irc:#mm")]["state"] == "failed"
    assert "404" in r[("confirmed", mm, "irc:#mm")]["last_error"]
    assert r[("confirmed", mm, "matrix:#reg:m.example")]["state"] == "queued"
    deliver_pending(store, settings=s, adapter_factory=factory, now=t0 + timedelta(seconds=100))
    m = rows(store)[("confirmed", mm, "matrix:#reg:m.example")]
    assert m["state"] == "failed" and m["attempts"] == 2 and "gave up after 2 attempts" in m["last_error"]
    # too old: dropped without sending
    enqueue_event(store, "fix-landed", mm, settings=s, now=t0 - timedelta(hours=2))
    st = deliver_pending(store, settings=s, adapter_factory=factory)
    assert st["expired"] == 2 and st["sent"] == 0
    assert {x["state"] for x in rows(store).values()} == {"failed"}


def test_outbox_lease_keeps_two_deliverers_apart(store):
    from bot.notify.deliver import Deliverer
    from bot.notify.outbox import enqueue_event

    build(store, MM)
    mm = rid_of(store, "n-mm@example.org")
    s = outbox_settings()
    log: dict = {}
    enqueue_event(store, "confirmed", mm, settings=s)

    class Slow(FakeAdapter):
        async def send(self, dest, msg):
            await asyncio.sleep(0.2)
            return await super().send(dest, msg)

    async def both():
        d1 = Deliverer(store, s, adapter_factory=lambda a: Slow(a, log))
        d2 = Deliverer(store, s, adapter_factory=lambda a: Slow(a, log))
        a, b = await asyncio.gather(d1.run_once(), d2.run_once())
        await d1.close()
        await d2.close()
        return a, b

    a, b = asyncio.run(both())
    assert a["sent"] + b["sent"] == 2 and len(log["sent"]) == 2


def test_scan_tracker_turns_status_changes_into_events(store):
    from bot.notify.outbox import scan_tracker
    from bot.tracker.records import set_status

    build(store, MM)
    mm = rid_of(store, "n-mm@example.org")
    s = outbox_settings()
    # the first scan of a database sees the history from its start: the report, received just
    # now (its Date: of 2024 is not believed), is announced -- not dropped under the cursor
    assert scan_tracker(store, settings=s) == {"events": 1, "queued": 2, "skipped": 0}
    set_status(store, mm, "confirmed", "lab")
    set_status(store, mm, "fixed", "tree")
    st = scan_tracker(store, settings=s)
    assert st == {"events": 2, "queued": 4, "skipped": 0}
    assert sorted(k[0] for k in rows(store)) == ["confirmed", "confirmed", "fix-landed", "fix-landed",
                                                "triaged", "triaged"]
    assert scan_tracker(store, settings=s)["queued"] == 0  # re-reading is harmless


def test_migration_creates_the_table(store):
    from sqlalchemy import inspect

    with store.engine.connect() as conn:
        cols = {c["name"] for c in inspect(conn).get_columns("notifications")}
    assert {"key", "event", "regression_id", "target", "state", "attempts", "next_attempt_at", "lease_until",
            "remote_id", "thread_root", "payload", "last_error"} <= cols


# -- the IRC adapter against a scripted server: SASL PLAIN, NickServ, flood limit, no secret in logs -----------
class ScriptedIrcd:
    def __init__(self, *, sasl=True):
        self.sasl = sasl
        self.lines: list[str] = []
        self.times: list[float] = []
        self.server = None

    async def start(self):
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def handle(self, reader, writer):
        def send(line):
            writer.write((line + "\r\n").encode())

        nick, capping, welcomed = "x", False, False
        while True:
            raw = await reader.readline()
            if not raw:
                return
            line = raw.decode().rstrip("\r\n")
            self.lines.append(line)
            self.times.append(time.monotonic())
            cmd, _, rest = line.partition(" ")
            cmd = cmd.upper()
            if cmd == "CAP" and rest.startswith("LS"):
                capping = True
                send(":srv CAP * LS :" + ("sasl=PLAIN,EXTERNAL" if self.sasl else "multi-prefix"))
            elif cmd == "CAP" and rest.startswith("REQ"):
                send(":srv CAP * ACK :" + rest[len("REQ "):].lstrip(":"))
            elif cmd == "AUTHENTICATE" and rest == "PLAIN":
                send("AUTHENTICATE +")
            elif cmd == "AUTHENTICATE":
                import base64

                ok = base64.b64decode(rest) == b"\0botacct\0sasl-Secret-pw"
                send(f":srv {'900 x x botacct :logged in' if ok else '904 x :failed'}")
                if ok:
                    send(":srv 903 x :SASL successful")
            elif cmd == "NICK":
                nick = rest.strip()
            elif cmd == "CAP" and rest.startswith("END"):
                capping = False
            elif cmd == "JOIN":
                send(f":{nick}!u@h JOIN {rest}")
            elif cmd == "PING":
                send(f":srv PONG srv {rest}")
            if not welcomed and not capping and nick != "x" and any(x.startswith("USER") for x in self.lines):
                welcomed = True
                send(f":srv 001 {nick} :welcome")
                send(f":srv 376 {nick} :end of motd")
            await writer.drain()


def test_irc_sasl_nickserv_flood_and_no_secrets_in_logs(monkeypatch, caplog):
    pytest.importorskip("pydle")
    from bot.notify.irc import IrcAdapter

    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("RT_SASL_PW", "sasl-Secret-pw")
    monkeypatch.setenv("RT_NS_PW", "nickserv-Secret-pw")

    async def go():
        ircd = ScriptedIrcd()
        port = await ircd.start()
        s = load_settings({"notify": {"irc": [{
            "server": "127.0.0.1", "port": port, "tls": False, "nick": "rtbot", "channels": ["#c"],
            "sasl_username": "botacct", "sasl_password_env": "RT_SASL_PW", "nickserv_password_env": "RT_NS_PW",
            "flood_burst": 2, "flood_rate": 10}]}})
        a = IrcAdapter(s.irc[0])
        await a.start(timeout=5)
        assert a._sasl_ok and a._auth_error is None
        t0 = time.monotonic()
        for i in range(6):
            await a.send("#c", OutMessage(text=f"line {i}"))
        took = time.monotonic() - t0
        await a.stop()
        ircd.server.close()
        return ircd, took

    ircd, took = asyncio.run(go())
    sent = [x for x in ircd.lines if x.startswith("PRIVMSG #c")]
    assert [x.split(" :", 1)[1] for x in sent] == [f"line {i}" for i in range(6)]
    assert "AUTHENTICATE PLAIN" in ircd.lines and "CAP END" in ircd.lines
    assert any(x.startswith("PRIVMSG NickServ :IDENTIFY nickserv-Secret-pw") for x in ircd.lines)
    # flood limit: burst 2, then 10 lines/s (JOIN took one token too): 6 lines need >= 0.4 s
    assert took >= 0.4
    for secret in ("sasl-Secret-pw", "nickserv-Secret-pw", "AGJvdGFjY3QAc2FzbC1TZWNyZXQtcHc="):
        assert secret not in caplog.text


def test_chat_rate_limit_survives_nick_changes(store):
    from bot.notify.responder import ChatResponder, rate_key

    assert rate_key("irc", "joe!~joe@host.example") == rate_key("irc", "Joe_2!~anything@HOST.example") == "host.example"
    assert rate_key("irc", "joe!joe@host.example") == "joe@host.example" != rate_key("irc", "x!ann@host.example")
    assert rate_key("matrix", "@joe:x.org") == "@joe:x.org"
    s = load_settings({"chat": {"user_burst": 2, "user_rate": 0.001, "channel_burst": 50}})
    r = ChatResponder(store, s)
    ask = lambda nick, **kw: asyncio.run(r(incoming("!regtriage help", sender=nick, **kw)))  # noqa: E731
    assert ask("joe", sender_id="joe!~joe@host.example") and ask("joe1", sender_id="joe1!~joe@host.example")
    for i in range(5):  # rotating the nick (and the unverified ident) does not refill the bucket
        assert ask(f"joe{i + 2}", sender_id=f"joe{i + 2}!~j{i}@host.example") is None
    assert ask("ann", sender_id="ann!~ann@other.example")  # another host has its own bucket
    # private messages: the "channel" is the person, not the nick
    for i in range(3):
        ask(f"p{i}", sender_id=f"p{i}!~p@pm.example", channel=f"p{i}")
    assert r.limiter.refused >= 6
