"""Notifiers are found through a registry: built-in names, run-time registrations and the
``regtriage.notifiers`` entry-point group, so a deployment adds one (here a webhook) from its
own package, and the outbox, the delivery and ``notify --test`` use it like IRC and Matrix."""

from __future__ import annotations

import asyncio
import json
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bot.config import ConfigError
from bot.notify.notifiers import (BUILTIN, ENTRY_POINT_GROUP, UnknownNotifier, get_notifier, make_adapter,
                                  notifier_names, register_notifier, unregister_notifier)
from bot.notify.settings import load_settings
from tests.test_notify import MM, build, rid_of

# A webhook notifier as another package would ship it: [[notify.webhook]] url = ..., endpoints = [...]
TOYHOOK = '''
import asyncio
import json
import urllib.error
import urllib.request

from bot.config import ConfigError
from bot.notify.base import PermanentError, Sent, TransientError
from bot.notify.notifiers import Notifier
from bot.notify.settings import get_value, str_list


class Hook:
    kind = "webhook"

    def __init__(self, name, url, dests):
        self.name, self.url, self.dests = name, url, dests


class HookAdapter:
    def __init__(self, account):
        self.account = account
        self.connected = False

    def on_command(self, callback):
        pass

    async def start(self, *, listen=False, wait=True, timeout=None):
        self.connected = True

    async def stop(self):
        self.connected = False

    def _post(self, body):
        req = urllib.request.Request(self.account.url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())

    async def send(self, dest, message):
        try:
            answer = await asyncio.to_thread(self._post, {"endpoint": dest, "text": message.text,
                                                          "idempotency_key": message.txn_id})
        except urllib.error.HTTPError as exc:
            raise (PermanentError if exc.code < 500 else TransientError)(f"HTTP {exc.code}") from None
        except OSError as exc:
            raise TransientError(str(exc)) from None
        return Sent(remote_id=answer["id"])


class WebhookNotifier(Notifier):
    kind = "webhook"

    def parse(self, table, where):
        url = get_value(table, "url", str, None, where)
        if not url or not url.startswith("http"):
            raise ConfigError(f"{where}: url must be an http(s) URL")
        return Hook(get_value(table, "name", str, url, where), url, str_list(table, "endpoints", where, required=True))

    def payload(self, event, entry, base_url):
        return {"text": f"{event} #{entry['id']}: {entry['title']}"}

    def test_payload(self, target, when):
        return {"text": f"test for {target} at {when}"}

    def adapter(self, account):
        return HookAdapter(account)
'''


@pytest.fixture
def toyhook(tmp_path, monkeypatch):
    """An installed distribution (a dist-info on sys.path, as pip leaves it) declaring
    ``[regtriage.notifiers] webhook = toyhook:WebhookNotifier``."""
    (tmp_path / "toyhook.py").write_text(TOYHOOK)
    dist = tmp_path / "toyhook-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toyhook\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nwebhook = toyhook:WebhookNotifier\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    unregister_notifier("webhook")  # forget the loaded notifier with its module


@pytest.fixture
def hook_server():
    """A webhook receiver on loopback: records the JSON bodies posted to it."""
    got: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            body = json.dumps({"id": f"hook-{len(got)}"}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", got
    server.shutdown()
    server.server_close()


def test_builtin_notifiers_resolve_to_their_classes():
    from bot.notify.irc_notifier import IrcNotifier
    from bot.notify.matrix_notifier import MatrixNotifier

    assert list(BUILTIN) == ["irc", "matrix"] and notifier_names()[:2] == ["irc", "matrix"]
    assert isinstance(get_notifier("irc"), IrcNotifier) and isinstance(get_notifier("matrix"), MatrixNotifier)
    assert get_notifier("matrix").threads and not get_notifier("irc").threads
    with pytest.raises(UnknownNotifier, match="unknown notifier 'pager'"):
        get_notifier("pager")
    # a table no notifier is known for is an error, not a connection silently never used
    with pytest.raises(ConfigError, match=r"\[\[notify.pager\]\]: unknown notifier 'pager'"):
        load_settings({"notify": {"pager": [{"url": "http://x"}]}})


def test_a_notifier_from_another_package_delivers_through_the_outbox(toyhook, hook_server, store):
    from bot.notify.deliver import deliver_pending, send_test
    from bot.notify.outbox import enqueue_event, list_notifications

    url, got = hook_server
    assert "webhook" in notifier_names()
    s = load_settings({"notify": {
        "irc": [{"server": "irc.example", "tls": False, "channels": ["#mm"]}],
        "webhook": [{"name": "ops", "url": url, "endpoints": ["alerts"]}],
        "route": [{"events": ["confirmed"], "targets": ["webhook:alerts"]}]}})
    assert [t.name for t in s.targets()] == ["irc:#mm", "webhook:alerts"]
    assert type(s.account("webhook", "ops")).__name__ == "Hook"
    assert type(make_adapter(s.account("webhook", "ops"))).__name__ == "HookAdapter"

    build(store, MM)
    rid = rid_of(store, "n-mm@example.org")
    made = enqueue_event(store, "confirmed", rid, settings=s)
    assert [m["target"] for m in made] == ["webhook:alerts"]
    st = deliver_pending(store, settings=s)  # the registry's adapter: a real POST
    assert (st["due"], st["sent"], st["failed"]) == (1, 1, 0), st
    assert got[0]["endpoint"] == "alerts" and got[0]["text"].startswith(f"confirmed #{rid}: ")
    assert got[0]["idempotency_key"].startswith("regtriage.")
    row, = list_notifications(store)
    assert (row["state"], row["target"], row["remote_id"]) == ("sent", "webhook:alerts", "hook-1")

    only_hook = load_settings({"notify": {"webhook": [{"url": url, "endpoints": ["alerts", "pager"]}]}})
    results = asyncio.run(send_test(only_hook))
    assert [(r["target"], r["ok"]) for r in results] == [("webhook:alerts", True), ("webhook:pager", True)]
    assert [g["endpoint"] for g in got[1:]] == ["alerts", "pager"] and got[1]["text"].startswith("test for webhook:alerts")


def test_chat_rules_come_from_the_network_s_notifier(toyhook):
    """Who is an admin and what a rate limit is keyed by: the notifier of the line's network.  A
    notifier that only sends (the webhook) keeps the defaults: nobody is an admin through it."""
    from bot.notify.chat import is_admin
    from bot.notify.responder import rate_key

    assert not is_admin("webhook", "ops", ["ops"]) and rate_key("webhook", " ops ") == "ops"
    assert not is_admin("pager", "ops", ["ops"]) and rate_key("pager", "ops") == "ops"  # no such notifier

    class Chatty(type(get_notifier("webhook"))):
        def admin(self, sender, entry):
            return entry == "team:" + sender

        def rate_key(self, sender_id):
            return sender_id.upper()

    register_notifier("chatty", Chatty())
    try:
        assert is_admin("chatty", "ann", ["bob", " team:ann "]) and not is_admin("chatty", "ann", ["ann"])
        assert rate_key("chatty", "ann") == "ANN"
    finally:
        unregister_notifier("chatty")


def test_a_registered_notifier_wins_and_can_be_removed():
    irc = get_notifier("irc")

    class Quiet(type(irc)):
        def payload(self, event, entry, base_url):
            return {"text": "quiet"}

    register_notifier("irc", Quiet())
    try:
        assert get_notifier("irc").payload("confirmed", {"id": 1}, None) == {"text": "quiet"}
    finally:
        unregister_notifier("irc")
    assert get_notifier("irc").payload("confirmed", {"id": 1, "title": "t"}, None)["text"].startswith("confirmed #1")
    with pytest.raises(ValueError):
        register_notifier("Bad Name", Quiet())
