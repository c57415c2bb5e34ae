"""Mail-derived text reaching a terminal or a page is inert (bot/textsafe.py): control characters,
escape sequences and bidi overrides are shown, never interpreted -- through the real CLI commands
on a hostile message, and the web pages."""

from __future__ import annotations

import json

import pytest

from bot.textsafe import SafeStream, json_text, neutralise_bidi, visible

ESC_TITLE = "\x1b]0;pwned\x07"  # sets the terminal window title
CLEAR = "\x1b[2J\x1b[H"  # clears the screen
LINK = "\x1b]8;;https://evil.example/\x1b\\lore.kernel.org\x1b]8;;\x1b\\"  # a disguised hyperlink
RLO = "\u202e"  # right-to-left override
ACTIVE = ("\x1b", "\x07", "\u202e", "\x9b", "\r")


def test_visible_helper():
    assert visible("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert visible("x\u202egnp.exe") == "x\\u202egnp.exe"
    assert visible("line1\nline2\ttab") == "line1\nline2\ttab"
    assert visible("over\rwrite\x9b31m\x7f") == "over\\rwrite\\x9b31m\\x7f"
    assert visible(visible("\x1b")) == "\\x1b"  # idempotent
    assert visible(None) == ""
    assert neutralise_bidi("a\u2066b\u200fc") == "a\\u2066b\\u200fc"
    doc = json_text(json.dumps({"s": "a\u202eb\x85c\u2028"}, ensure_ascii=False))
    assert json.loads(doc) == {"s": "a\u202eb\x85c\u2028"} and not any(c in doc for c in "\u202e\x85\u2028")


def test_safe_stream_keeps_the_raw_buffer(tmp_path):
    import io

    raw = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    s = SafeStream(raw)
    s.write("t\x1b[1mx\n")
    s.flush()
    s.buffer.write(b"\x1b raw bytes")
    raw.flush()
    assert raw.buffer.getvalue() == b"t\\x1b[1mx\n\x1b raw bytes"


HOSTILE = (f"From: {ESC_TITLE}Perf {RLO}Tester <perf@example.org>\n"
           f"To: linux-mm@kvack.org\n"
           f"Subject: =?utf-8?q?=1B]0;pwned=07_xfs=3A_aim7_throughput_-20=25_regression_since_v6.8_=E2=80=AE?=\n"
           f"Message-ID: <hostile-term@example.org>\n"
           f"Date: Mon, 04 Mar 2024 10:00:00 +0000\n\n"
           f"Hi,\n\nSince v6.8 aim7 throughput dropped 20% on xfs on my Xeon box; v6.7 is fine.{CLEAR}\n"
           f"The regression is caused by commit 54a6eb5c4765 ({LINK}).\n").encode()


@pytest.mark.parametrize("args", [
    ("threads",), ("threads", "--json"), ("show", "hostile-term@example.org"), ("show", "hostile-term@example.org", "--json"),
    ("claims", "--all"), ("claims", "--all", "--json"), ("regressions", "--all"), ("regressions", "--all", "--json"),
    ("query", "regressions"), ("query", "regressions", "--json"), ("quarantine",), ("quarantine", "--json"),
])
def test_cli_output_is_inert(cli, tmp_path, args):
    (tmp_path / "h.eml").write_bytes(HOSTILE)
    (tmp_path / "q.eml").write_bytes(b"")  # quarantined: its reason is shown
    r = cli("ingest", tmp_path / "h.eml", tmp_path / "q.eml")
    assert r.exit_code == 0, r.output
    r = cli(*args)
    assert r.exit_code == 0, r.output
    out = r.stdout + r.stderr
    for c in ACTIVE:
        assert c not in out, (args, repr(c), out[:2000])
    if args[0] in ("threads", "show", "claims"):
        assert "\\x1b" in out or "\\u001b" in out, out[:2000]
    if "--json" in args:
        json.loads(r.stdout)  # still valid JSON


def test_show_raw_is_still_byte_exact(cli, tmp_path):
    (tmp_path / "h.eml").write_bytes(HOSTILE)
    assert cli("ingest", tmp_path / "h.eml").exit_code == 0
    r = cli("show", "hostile-term@example.org", "--raw")
    assert r.stdout_bytes == HOSTILE


def test_web_neutralises_bidi_in_pages_api_and_feed(store):
    from starlette.testclient import TestClient

    from bot.config import Config
    from bot.web.app import create_app
    from tests.test_lab_matching import make_record

    title = f"xfs: slow {RLO}gnp.exe\u2066 since v6.8"
    rid = make_record(store, title=title, search_text=title.lower())
    client = TestClient(create_app(store, Config(home="/nonexistent", db_url=store.url, data={})))
    for path in ("/", f"/regressions/{rid}", f"/api/regressions/{rid}", "/api/regressions", "/feed.atom"):
        res = client.get(path)
        assert res.status_code == 200, (path, res.text[:500])
        assert RLO not in res.text and "\u2066" not in res.text, path
        assert "gnp.exe" in res.text, path
    assert client.get(f"/api/regressions/{rid}").json()["title"] == title  # the API's data is unchanged
