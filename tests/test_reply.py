"""The bot's mail replies (bot.reply, ``regtriage reply``): composed from records built through
the real ingest -> triage -> track pipeline, sent through a real SMTP server (aiosmtpd on
127.0.0.1, plain, STARTTLS with a self-signed certificate, implicit TLS; AUTH LOGIN and
PLAIN), and checked as they arrived: threading headers, reply-all recipients, the body,
dedupe, rate limits, the allow-list, header injection, and that the SMTP password never shows
up anywhere."""

from __future__ import annotations

import email
import json
import logging
import mailbox
import shutil
import socket
import ssl
import subprocess
from email import policy
from pathlib import Path

import pytest
from sqlalchemy import select

pytest.importorskip("aiosmtpd")

from aiosmtpd.controller import Controller  # noqa: E402
from aiosmtpd.smtp import AuthResult, LoginPassword  # noqa: E402

from bot.cli.main import main  # noqa: E402

if "reply" not in main.commands:  # until bot/cli/main.py wires it in
    from bot.cli.reply import register

    register(main)

BOT = "Regtriage Bot <regtriage@bot.example.org>"
PASSWORD = "s3cr3t-Pa55word-never-shown"
CULPRIT = "54a6eb5c4765aa573a030ceeba2c14e3d2ea5706"


# -- mail and records through the real pipeline ----------------------------------------------------
def mail(mid, subject, body, date, *, frm="Perf Tester <perf@example.org>", to=None, cc=None, parent=None,
         refs=None, extra=""):
    head = f"From: {frm}\nSubject: {subject}\nMessage-ID: <{mid}>\nDate: {date}\n"
    if to:
        head += f"To: {to}\n"
    if cc:
        head += f"Cc: {cc}\n"
    if parent:
        head += f"In-Reply-To: <{parent}>\nReferences: {' '.join(f'<{r}>' for r in (refs or [parent]))}\n"
    return (head + extra + "\n" + body).encode()


TO = f"linux-mm@kvack.org, {BOT}"
CC = ("Andrew Morton <akpm@linux-foundation.org>, linux-kernel@vger.kernel.org, LINUX-MM@KVACK.ORG, "
      "Secret Person <secret@corp.example>, =?utf-8?q?J=C3=B6rg_R=C3=B6del?= <joro@8bytes.example>")
A1 = mail("reg-a1@example.org", "[REGRESSION] page_fault1 throughput regression in will-it-scale since v6.8", """Hi,

Since v6.8 we see a 15% drop in will-it-scale page_fault1 throughput on an AMD EPYC 7763 box.
v6.7 is fine. I am bisecting now.
""", "Mon, 04 Mar 2024 10:00:00 +0000", to=TO, cc=CC)
A2 = mail("reg-a2@example.org", "Re: [REGRESSION] page_fault1 throughput regression in will-it-scale since v6.8",
          f"""The bisect finished. The first bad commit is:

commit {CULPRIT}
    mm: use zonelist_zone() to get zone

Reverting it on top of v6.8 restores the throughput.
""", "Tue, 05 Mar 2024 10:00:00 +0000", frm="Andrew Morton <akpm@linux-foundation.org>",
          to="Perf Tester <perf@example.org>", cc="linux-mm@kvack.org", parent="reg-a1@example.org")
B1 = mail("reg-b1@example.org", "hackbench latency regression since v6.9", """Hello,

Since v6.9 hackbench is 20% slower on my Xeon box. v6.8 is fine.
""", "Wed, 06 Mar 2024 10:00:00 +0000", frm="Bench <bench@example.net>", to="linux-mm@kvack.org")
C1 = mail("reg-c1@example.org", "fio randread IOPS regression since v6.10", """Hi all,

Since v6.10 fio randread IOPS dropped by 12% on an NVMe drive. v6.9 is fine.
""", "Thu, 07 Mar 2024 10:00:00 +0000", frm="Storage <io@example.com>", to="linux-mm@kvack.org")


def build(store, *raws):
    """Ingest, triage and track: the records the bot replies about."""
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
    import storage.tracker_schema as ts

    with store.engine.connect() as conn:
        rid = conn.execute(select(ts.regressions.c.id).where(ts.regressions.c.report_message_id == msgid)).scalar()
    assert rid is not None, f"no record for {msgid}"
    return rid


def reply_rows(store, rid=None):
    from storage.replies import list_replies

    return [r.as_dict() for r in reversed(list_replies(store, rid, 1000))]


def db_text(store) -> str:
    """Every row of every table, as text."""
    from sqlalchemy import inspect, text

    out = []
    with store.engine.connect() as conn:
        for name in inspect(conn).get_table_names():
            out += [repr(tuple(r)) for r in conn.execute(text(f'SELECT * FROM "{name}"'))]
    return "\n".join(out)


# -- a real SMTP server ------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sink:
    """aiosmtpd handler: keeps what arrived, with the session's TLS and AUTH state."""

    def __init__(self):
        self.messages = []
        self.auth_mechanisms = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append({"mail_from": envelope.mail_from, "rcpt_tos": list(envelope.rcpt_tos),
                              "data": envelope.original_content, "mail_options": list(envelope.mail_options),
                              "tls": server.transport.get_extra_info("ssl_object") is not None,
                              "authenticated": bool(session.authenticated)})
        return "250 OK"

    def authenticator(self, server, session, envelope, mechanism, auth_data):
        self.auth_mechanisms.append(mechanism)
        ok = (isinstance(auth_data, LoginPassword) and auth_data.login == b"bot"
              and auth_data.password == PASSWORD.encode())
        return AuthResult(success=ok, handled=False)

    def parsed(self, i=-1):
        return email.message_from_bytes(self.messages[i]["data"], policy=policy.default)


@pytest.fixture(scope="session")
def tls_cert(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 (cryptography if installed, else openssl)."""
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    try:
        import datetime
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        k = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
        now = datetime.datetime.now(datetime.timezone.utc)
        c = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(k.public_key())
             .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
             .not_valid_after(now + datetime.timedelta(days=2))
             .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
             .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
             .sign(k, hashes.SHA256()))
        cert.write_bytes(c.public_bytes(serialization.Encoding.PEM))
        key.write_bytes(k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()))
    except ImportError:
        if not shutil.which("openssl"):
            pytest.skip("neither the cryptography package nor openssl is available")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


@pytest.fixture
def smtpd(tls_cert):
    """Start aiosmtpd servers on 127.0.0.1: smtpd() plain, smtpd(starttls=True, auth=True),
    smtpd(implicit_tls=True, auth=True).  Returns (port, Sink); stopped after the test."""
    started = []

    def start(*, starttls=False, implicit_tls=False, auth=False):
        sink = Sink()
        kw = {}
        if starttls or implicit_tls:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(str(tls_cert[0]), str(tls_cert[1]))
            if implicit_tls:
                kw["ssl_context"] = ctx
            else:
                kw.update(tls_context=ctx, require_starttls=True)
        if auth:
            # aiosmtpd 1.4 counts only STARTTLS as TLS for auth_require_tls; implicit TLS is checked below
            kw.update(authenticator=sink.authenticator, auth_required=True, auth_require_tls=not implicit_tls)
        port = free_port()
        ctl = Controller(sink, hostname="127.0.0.1", port=port, **kw)
        ctl.start()
        started.append(ctl)
        return port, sink

    yield start
    for ctl in started:
        ctl.stop()


def write_config(path: Path, port: int | None = None, *, web=True, **mail):
    settings = {"from": BOT, "smtp_host": "127.0.0.1", "smtp_port": port or 25, "starttls": False,
                "allowed_lists": ["linux-mm@kvack.org"], "never_cc": ["secret@corp.example"], **mail}
    lines = ["[mail]"] + [f"{k} = {json.dumps(v)}" for k, v in settings.items() if v is not None]
    if web:
        lines += ["", "[web]", 'base_url = "https://regtriage.example.org"']
    path.write_text("\n".join(lines) + "\n")
    return path


def addrs(msg, name):
    return sorted(a.addr_spec.lower() for a in (msg[name].addresses if msg[name] else ()))


# -- end to end ----------------------------------------------------------------------------------------
def test_default_reply_goes_to_the_author_and_the_lists_only(store, tmp_path):
    from bot.config import load
    from bot.reply.run import run_reply

    build(store, A1, A2)
    rid = rid_of(store, "reg-a1@example.org")
    out = run_reply(store, load(str(write_config(tmp_path / "regtriage.toml")), store.url), rid, mode="stdout")
    assert out.ok, out.message
    assert out.to == ["perf@example.org"] and out.cc == ["linux-mm@kvack.org"]
    why = {d["address"]: d["reason"] for d in out.dropped}
    assert why["akpm@linux-foundation.org"] == why["joro@8bytes.example"] == \
        'not the author nor a list ([mail] reply_to = "author+list")'
    assert "mailing list not on [mail] allowed_lists" in why["linux-kernel@vger.kernel.org"]
    with pytest.raises(Exception, match="reply_to"):
        load(str(write_config(tmp_path / "bad.toml", reply_to="everyone")), store.url) and \
            run_reply(store, load(str(tmp_path / "bad.toml"), store.url), rid, mode="stdout")


def test_send_reply_through_smtp(store, db_url, cli, tmp_path, smtpd):
    build(store, A1, A2)
    rid = rid_of(store, "reg-a1@example.org")
    port, sink = smtpd()
    write_config(tmp_path / "regtriage.toml", port, reply_to="all")  # reply-all (the default: test below)

    r = cli("reply", rid, "--send", db=db_url)
    assert r.exit_code == 0, r.output
    assert "sent as <regtriage." in r.stdout
    assert "dropped linux-kernel@vger.kernel.org: mailing list not on [mail] allowed_lists" in r.stderr
    assert len(sink.messages) == 1
    got = sink.messages[0]
    msg = sink.parsed()

    # threading
    assert msg["Subject"] == "Re: [REGRESSION] page_fault1 throughput regression in will-it-scale since v6.8"
    assert msg["In-Reply-To"] == "<reg-a1@example.org>"
    assert msg["References"] == "<reg-a1@example.org>"
    # reply-all: From -> To, To + Cc -> Cc; no bot, no never_cc, no list outside the allow-list, no dupes
    assert addrs(msg, "To") == ["perf@example.org"]
    assert addrs(msg, "Cc") == ["akpm@linux-foundation.org", "joro@8bytes.example", "linux-mm@kvack.org"]
    assert any(a.display_name == "Jörg Rödel" for a in msg["Cc"].addresses)
    assert sorted(got["rcpt_tos"]) == sorted(addrs(msg, "To") + addrs(msg, "Cc"))
    assert got["mail_from"] == "regtriage@bot.example.org"
    # headers
    assert msg["From"].addresses[0].addr_spec == "regtriage@bot.example.org"
    assert msg["Message-ID"].strip("<>").endswith("@bot.example.org")
    assert msg["Date"] and msg["MIME-Version"] == "1.0"
    assert msg.get_content_type() == "text/plain" and msg.get_content_charset() == "utf-8"
    assert msg["Content-Transfer-Encoding"] in ("8bit", "7bit", "quoted-printable")
    assert msg["Auto-Submitted"] == "auto-generated"
    assert msg["X-Regtriage-Record"] == str(rid)
    assert not msg.is_multipart() and "html" not in got["data"].decode("utf-8", "replace").lower()
    for name in ("Bcc", "Resent-To", "Reply-To"):
        assert msg[name] is None
    # body
    body = msg.get_content()
    lines = body.splitlines()
    assert all(len(line) <= 72 for line in lines), [x for x in lines if len(x) > 72]
    assert f"#regzbot ^introduced: {CULPRIT}" in lines
    assert f"https://regtriage.example.org/regressions/{rid}" in body
    assert f"[regression #{rid}]" in body and "Culprit:" in body
    assert "-- " in lines

    # recorded as sent; a second send of the same event does nothing
    rows = reply_rows(store, rid)
    assert [(x["status"], x["mode"]) for x in rows] == [("sent", "send")]
    assert rows[0]["message_id"] == msg["Message-ID"].strip("<>") and rows[0]["in_reply_to"] == "reg-a1@example.org"
    assert rows[0]["recipients"]["dropped"] == [
        {"address": "linux-kernel@vger.kernel.org", "reason": "mailing list not on [mail] allowed_lists"},
        {"address": "secret@corp.example", "reason": "on [mail] never_cc"}]
    r2 = cli("reply", rid, "--send", db=db_url)
    assert r2.exit_code == 0 and "was sent" in r2.stdout and "nothing to do" in r2.stdout
    assert len(sink.messages) == 1
    # a dry run of a sent event says so too; --force redoes the dry run only
    r3 = cli("reply", rid, db=db_url)
    assert r3.exit_code == 0 and "was sent" in r3.stdout
    assert cli("reply", rid, "--send", "--force", db=db_url).exit_code != 0
    r4 = cli("reply", rid, "--force", db=db_url)
    assert r4.exit_code == 0 and Path(r4.stdout.strip()).is_file(), r4.output
    assert len(sink.messages) == 1
    assert [x["status"] for x in reply_rows(store, rid)] == ["sent", "draft"]


def test_answer_latest_references_chain(store, db_url, cli, tmp_path, smtpd):
    build(store, A1, A2)
    rid = rid_of(store, "reg-a1@example.org")
    port, sink = smtpd()
    write_config(tmp_path / "regtriage.toml", port)
    r = cli("reply", rid, "--send", "--answer", "latest", db=db_url)
    assert r.exit_code == 0, r.output
    msg = sink.parsed()
    assert msg["In-Reply-To"] == "<reg-a2@example.org>"
    assert msg["References"].split() == ["<reg-a1@example.org>", "<reg-a2@example.org>"]
    assert addrs(msg, "To") == ["akpm@linux-foundation.org"]
    assert addrs(msg, "Cc") == ["linux-mm@kvack.org", "perf@example.org"]
    # not the report: regzbot is pointed at the report by its URL
    assert f"#regzbot introduced: {CULPRIT} https://lore.kernel.org/r/reg-a1@example.org/" in msg.get_content().splitlines()


def test_rate_limits_recorded(store, db_url, cli, tmp_path, smtpd):
    build(store, A1, A2, B1, C1)
    a, b, c = (rid_of(store, m) for m in ("reg-a1@example.org", "reg-b1@example.org", "reg-c1@example.org"))
    port, sink = smtpd()
    write_config(tmp_path / "regtriage.toml", port, hourly_limit=2)

    assert cli("reply", a, "--send", db=db_url).exit_code == 0
    # a new event for the same thread within 24 h: refused by the per-thread limit
    r = cli("reply", a, "--send", "--event", "confirmed", db=db_url)
    assert r.exit_code == 1
    assert "rate limit: 1 reply to this thread in the last 24 h" in r.stderr
    assert cli("reply", b, "--send", db=db_url).exit_code == 0
    # a third thread, but two replies went out in the last hour
    r = cli("reply", c, "--send", db=db_url)
    assert r.exit_code == 1 and "rate limit: 2 replies sent in the last hour" in r.stderr
    assert len(sink.messages) == 2

    rows = reply_rows(store)
    assert [(x["regression_id"], x["status"]) for x in rows] == [(a, "sent"), (a, "refused"), (b, "sent"),
                                                                 (c, "refused")]
    assert "thread_limit = 1" in rows[1]["reason"] and "hourly_limit = 2" in rows[3]["reason"]
    assert all(x["sent_key"] is None for x in rows if x["status"] == "refused")
    listed = json.loads(cli("replies", "--json", db=db_url).stdout)
    assert {x["status"] for x in listed} == {"sent", "refused"}
    # refused events are not "sent": once the limits allow it, the event goes out
    write_config(tmp_path / "regtriage.toml", port, hourly_limit=10)
    assert cli("reply", c, "--send", db=db_url).exit_code == 0
    assert len(sink.messages) == 3


def test_allow_list_refusal(store, db_url, cli, tmp_path, smtpd):
    build(store, A1, A2)
    rid = rid_of(store, "reg-a1@example.org")
    port, sink = smtpd()
    write_config(tmp_path / "regtriage.toml", port, allowed_lists=["netdev@vger.kernel.org"])
    r = cli("reply", rid, "--send", db=db_url)
    assert r.exit_code == 1
    assert "not sent: none of the recipients is on [mail] allowed_lists" in r.stderr
    assert "dropped linux-mm@kvack.org: mailing list not on [mail] allowed_lists" in r.stderr
    assert sink.messages == []
    rows = reply_rows(store, rid)
    assert [(x["status"], x["reason"]) for x in rows] == [("refused", "none of the recipients is on [mail] allowed_lists")]
    # no allow-list at all: refused as well
    write_config(tmp_path / "regtriage.toml", port, allowed_lists=[])
    r = cli("reply", rid, "--send", db=db_url)
    assert r.exit_code == 1 and "allowed_lists is empty" in r.stderr
    assert sink.messages == []
    assert [x["status"] for x in reply_rows(store, rid)] == ["refused", "refused"]


@pytest.mark.parametrize("mechanism", ["login", "plain"])
def test_starttls_auth_password_never_shown(store, cli, tmp_path, smtpd, tls_cert, monkeypatch, caplog, mechanism):
    caplog.set_level(logging.DEBUG, logger="regtriage")
    build(store, A1, A2)
    rid = rid_of(store, "reg-a1@example.org")
    port, sink = smtpd(starttls=True, auth=True)
    write_config(tmp_path / "regtriage.toml", port, starttls=True, ca_file=str(tls_cert[0]), user="bot",
                 auth=mechanism)
    monkeypatch.setenv("REGTRIAGE_SMTP_PASSWORD", "wrong-" + PASSWORD)
    db = store.url

    bad = cli("reply", rid, "--send", db=db)  # the server refuses the password
    assert bad.exit_code == 1 and "send failed: SMTPAuthenticationError: 535" in bad.stderr
    assert sink.messages == []
    monkeypatch.setenv("REGTRIAGE_SMTP_PASSWORD", PASSWORD)
    ok = cli("reply", rid, "--send", db=db)
    assert ok.exit_code == 0, ok.output
    assert len(sink.messages) == 1
    assert sink.messages[0]["tls"] and sink.messages[0]["authenticated"]
    assert set(sink.auth_mechanisms) == {mechanism.upper()}
    assert [x["status"] for x in reply_rows(store, rid)] == ["failed", "sent"]

    listing = cli("replies", rid, db=db)
    outputs = [bad.output, bad.stderr, ok.output, ok.stderr, listing.output]
    logs = "\n".join(rec.getMessage() for rec in caplog.records if not rec.name.startswith("mail.log"))
    assert "sent as <" in logs
    import base64

    for secret in (PASSWORD, base64.b64encode(PASSWORD.encode()).decode(),
                   base64.b64encode(f"\0bot\0{PASSWORD}".encode()).decode()):
        for text in outputs + [logs, json.dumps(reply_rows(store), default=str)]:
            assert secret not in text
    assert PASSWORD not in db_text(store)
    if db.startswith("sqlite:///"):
        store.engine.dispose()
        assert PASSWORD.encode() not in Path(db[len("sqlite:///"):]).read_bytes()
    for f in tmp_path.rglob("*"):
        if f.is_file() and f.suffix not in (".pem",):
            assert PASSWORD.encode() not in f.read_bytes(), f


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
def test_implicit_tls_and_password_file(store, cli, tmp_path, smtpd, tls_cert, monkeypatch):
    build(store, A1, A2)
    rid = rid_of(store, "reg-a1@example.org")
    port, sink = smtpd(implicit_tls=True, auth=True)
    pw = tmp_path / "smtp-password"
    pw.write_text(PASSWORD + "\n")
    pw.chmod(0o644)
    monkeypatch.delenv("REGTRIAGE_SMTP_PASSWORD", raising=False)
    monkeypatch.setenv("REGTRIAGE_SMTP_USER", "bot")
    write_config(tmp_path / "regtriage.toml", port, ssl=True, ca_file=str(tls_cert[0]), password_file=str(pw))
    r = cli("reply", rid, "--send", db=store.url)
    assert r.exit_code == 1 and "readable by everyone" in r.stderr and PASSWORD not in r.output
    pw.chmod(0o600)
    r = cli("reply", rid, "--send", db=store.url)
    assert r.exit_code == 0, r.output
    assert sink.messages[0]["tls"] and sink.messages[0]["authenticated"], sink.messages[0]
    assert [x["status"] for x in reply_rows(store, rid)] == ["refused", "sent"]
    # a password in the config file itself is refused outright (and not echoed)
    write_config(tmp_path / "regtriage.toml", port, ssl=True, password=PASSWORD)
    r = cli("reply", rid, db=store.url)
    assert r.exit_code != 0 and "do not put the SMTP password in the config file" in r.output
    assert PASSWORD not in r.output


def test_hostile_headers_add_no_header(store, cli, tmp_path, smtpd):
    evil = mail("evil-1@example.org",
                "=?utf-8?q?page=5Ffault1_throughput_regression_since_v6.8=0D=0ABcc:_victim@evil.example?=",
                "Hi,\n\nSince v6.8 we see a 15% drop in will-it-scale page_fault1 throughput on an AMD EPYC 7763"
                " box.\nv6.7 is fine.\n", "Mon, 04 Mar 2024 10:00:00 +0000",
                frm="=?utf-8?q?Perf=0D=0ABcc:_victim2@evil.example=0D=0A?= <perf@example.org>",
                to="linux-mm@kvack.org, \"Evil\r\n Bcc: victim3@evil.example\" <evil@example.org>",
                cc="=?utf-8?q?x=0ABcc=3A_victim4@evil.example?= <x@example.org>, bogus<>address, "
                   "\"semi;colon\" <a;b@example.org>")
    build(store, evil)
    rid = rid_of(store, "evil-1@example.org")
    port, sink = smtpd()
    write_config(tmp_path / "regtriage.toml", port, reply_to="all")  # every address parsed into the reply
    r = cli("reply", rid, "--send", db=store.url)
    assert r.exit_code == 0, r.output
    got = sink.messages[0]
    raw = got["data"]
    head = raw.split(b"\r\n\r\n", 1)[0]
    names = [line.split(b":", 1)[0].lower() for line in head.split(b"\r\n") if line and line[:1] not in b" \t"]
    assert sorted(names) == sorted([b"from", b"to", b"cc", b"subject", b"date", b"message-id", b"in-reply-to",
                                    b"references", b"content-type", b"content-transfer-encoding", b"mime-version",
                                    b"auto-submitted", b"x-regtriage-record"])
    assert b"bcc" not in names
    assert not any("evil.example" in a for a in got["rcpt_tos"])
    msg = sink.parsed()
    assert msg["Subject"] == "Re: page_fault1 throughput regression since v6.8 Bcc: victim@evil.example"
    assert addrs(msg, "To") == ["perf@example.org"]
    assert "evil@example.org" in addrs(msg, "Cc") and "x@example.org" in addrs(msg, "Cc")
    for a in msg["To"].addresses + msg["Cc"].addresses:
        assert "\r" not in a.display_name and "\n" not in a.display_name


def test_dry_run_outbox_and_stdout(store, cli, tmp_path, home):
    build(store, A1, A2)
    rid = rid_of(store, "reg-a1@example.org")
    write_config(tmp_path / "regtriage.toml", web=False)
    outbox = home / "outbox"

    r = cli("reply", rid, db=store.url)
    assert r.exit_code == 0, r.output
    path = Path(r.stdout.strip())
    assert path.parent == outbox / "new" and path.is_file()
    assert "no [web] base_url configured" in r.stderr
    assert len(list(mailbox.Maildir(str(outbox), create=False))) == 1
    msg = email.message_from_bytes(path.read_bytes(), policy=policy.default)
    assert msg["Subject"].startswith("Re: [REGRESSION] page_fault1")
    assert msg["In-Reply-To"] == "<reg-a1@example.org>"
    assert b"\r\n" not in path.read_bytes()
    assert [(x["status"], x["outbox_path"]) for x in reply_rows(store, rid)] == [("draft", str(path))]

    again = cli("reply", rid, db=store.url)
    assert again.exit_code == 0 and "already drafted" in again.stdout and str(path) in again.stdout
    assert len(list(mailbox.Maildir(str(outbox), create=False))) == 1

    out = cli("reply", rid, "--stdout", db=store.url)
    assert out.exit_code == 0
    printed = email.message_from_string(out.stdout, policy=policy.default)
    assert printed["Subject"] == msg["Subject"] and printed["X-Regtriage-Record"] == str(rid)
    assert f"#regzbot ^introduced: {CULPRIT}" in printed.get_content()
    assert len(list(mailbox.Maildir(str(outbox), create=False))) == 1
    assert len(reply_rows(store, rid)) == 1

    forced = cli("reply", rid, "--force", "--json", db=store.url)
    data = json.loads(forced.stdout)
    assert data["status"] == "drafted" and data["path"] != str(path)
    assert len(list(mailbox.Maildir(str(outbox), create=False))) == 2
    assert cli("reply", rid, "--send", "--stdout", db=store.url).exit_code == 2
    assert cli("reply", "999", db=store.url).exit_code == 1


def test_stdout_dry_run_needs_no_mail_from(store, cli, tmp_path, home):
    """`reply ID --stdout` prints the reply with a placeholder sender, and says so, when
    [mail] from is not set; drafting and sending still refuse without it."""
    from bot.reply.settings import PLACEHOLDER_FROM

    build(store, A1, A2)
    rid = rid_of(store, "reg-a1@example.org")
    write_config(tmp_path / "regtriage.toml", **{"from": None})
    out = cli("reply", rid, "--stdout", db=store.url)
    assert out.exit_code == 0, out.output
    printed = email.message_from_string(out.stdout, policy=policy.default)
    assert printed["From"] == PLACEHOLDER_FROM and printed["Subject"].startswith("Re: [REGRESSION] page_fault1")
    assert "@example.invalid>" in printed["Message-ID"]
    assert "[mail] from is not set" in out.stderr and "placeholder" in out.stderr
    as_json = json.loads(cli("reply", rid, "--stdout", "--json", db=store.url).stdout)
    assert any("placeholder" in n for n in as_json["notes"])
    assert reply_rows(store, rid) == []  # nothing recorded
    drafted = cli("reply", rid, db=store.url)
    assert drafted.exit_code != 0 and "'from' is not set" in drafted.output
    assert reply_rows(store, rid) == []


# -- compose: the pure function ---------------------------------------------------------------------
def _settings(**mail):
    from bot.config import Config
    from bot.reply.settings import MailSettings

    data = {"mail": {"from": BOT, "allowed_lists": ["linux-mm@kvack.org"], **mail},
            "web": {"base_url": "https://regtriage.example.org/"}}
    return MailSettings.from_config(Config(home=Path("/nonexistent"), db_url="sqlite://", data=data))


def _entry(**kw):
    e = {"id": 7, "title": "page_fault1 regression", "status": "triaged", "kind": "performance", "subsystem": "mm",
         "culprit": None, "range": {"good": "v6.7", "bad": "v6.8"}, "metric": None, "change_percent": -15.0,
         "hardware": {}, "config": {}, "numbers": [], "open": True,
         "report": {"message_id": "r@example.org", "url": "https://lore.kernel.org/r/r@example.org/"},
         "related": [], "history": [], "updated": "2024-03-05T10:00:00+00:00", "created": "2024-03-04T10:00:00+00:00",
         "duplicate_of": None, "duplicates": [], "fix": None, "set_by": {}, "evidence": {}}
    e.update(kw)
    return e


def test_compose_subject_references_and_injection():
    from bot.reply.answered import Answered
    from bot.reply.compose import compose, message_bytes, reply_subject

    assert reply_subject("Re: Re: RE: foo") == "Re: foo"
    assert reply_subject("Aw: Re[2]: foo") == "Re: foo"
    assert reply_subject("Fwd: foo") == "Re: Fwd: foo"
    assert reply_subject("") == "Re: (no subject)"

    long_id = "DM6PR11MB4107E0A3F9A8D5B2C1F0A2A3DC962" + "x" * 40 + "@DM6PR11MB4107.namprd11.prod.outlook.com"
    refs = tuple(f"ref{i}@example.org" for i in range(30)) + ("bad\r\nBcc: x@evil.example", "no-at-sign")
    a = Answered(message_id=long_id, subject="Re: Re: page_fault1 regression\r\nBcc: victim@evil.example",
                 from_=("Perf \"Tester\" <perf@example.org>",),
                 to=("linux-mm@kvack.org, Regtriage Bot <REGTRIAGE@bot.example.org>",),
                 cc=("perf@EXAMPLE.org, netdev@vger.kernel.org, Hostile <evil@example.org>\r\nBcc: v@evil.example",),
                 references=refs)
    c = compose(_entry(), a, _settings())
    raw = message_bytes(c.msg, "\r\n")
    parsed = email.message_from_bytes(raw, policy=policy.default)
    assert parsed["Subject"] == "Re: page_fault1 regression Bcc: victim@evil.example"
    assert parsed["Bcc"] is None and b"\r\nBcc:" not in raw
    assert parsed["In-Reply-To"] == f"<{long_id}>"  # a Message-ID longer than a line is not RFC 2047-encoded
    ids = parsed["References"].split()
    assert len(ids) == 20 and ids[0] == "<ref0@example.org>" and ids[-1] == f"<{long_id}>"
    assert ids[1] == "<ref12@example.org>" and b"=?" not in raw.split(b"\r\n\r\n")[0].split(b"References:")[1]
    assert addrs(parsed, "To") == ["perf@example.org"]
    assert "regtriage@bot.example.org" not in addrs(parsed, "Cc")
    assert {"address": "netdev@vger.kernel.org", "reason": "mailing list not on [mail] allowed_lists"} in c.dropped
    assert all(len(line) <= 998 for line in raw.split(b"\r\n"))
    body = parsed.get_content()
    assert "#regzbot ^introduced: v6.7..v6.8" in body.splitlines()
    assert "#regzbot title: page_fault1 regression" in body.splitlines()  # the subject differs
    assert "https://regtriage.example.org/regressions/7" in body


def test_compose_wrapping_title_and_event_key():
    from bot.reply.answered import Answered
    from bot.reply.compose import compose, event_of

    e = _entry(title="A much clearer title", culprit={"commit": CULPRIT, "subject": "x " * 60, "url": ""},
               numbers=[{"label": "throughput " * 12, "value": 1, "unit": None, "stdev": None, "n": None}])
    a = Answered(message_id="r@example.org", subject="perf drop", from_=("p@example.org",), to=("linux-mm@kvack.org",))
    same = compose(e, Answered(message_id="r@example.org", subject="Re: A much clearer  title", from_=("p@x.org",)),
                   _settings())
    assert "#regzbot title:" not in same.msg.get_content()  # the title is the subject
    c = compose(e, a, _settings(), answers_report=True)
    lines = c.msg.get_content().splitlines()
    assert all(len(x) <= 72 for x in lines), [x for x in lines if len(x) > 72]
    assert f"#regzbot ^introduced: {CULPRIT}" in lines and "#regzbot title: A much clearer title" in lines
    assert "https://git.kernel.org/torvalds/c/54a6eb5c4765" in lines[lines.index(next(x for x in lines
                                                                                     if "Culprit:" in x)) + 3] \
        or any(x.strip() == "https://git.kernel.org/torvalds/c/54a6eb5c4765" for x in lines)
    # the event key: same facts -> same key; other facts or another event kind -> another key
    k1 = event_of(e)[2]
    assert event_of(dict(e, history=[{"x": 1}], related=[{"y": 2}], updated="later"))[2] == k1
    assert event_of(dict(e, range={"good": "v6.6", "bad": "v6.8"}))[2] != k1
    assert event_of(e, "confirmed")[2] != k1 and k1.startswith("7:triaged:")


def test_non_ascii_body_8bitmime(store, cli, tmp_path, smtpd):
    raw = mail("umlaut-1@example.org",
               "=?utf-8?q?Dateisystem-Durchsatz:_fio_randwrite_regression_since_v6.10_(Gr=C3=B6=C3=9Fe_4k)?=",
               "Hi,\n\nSince v6.10 fio randwrite throughput dropped by 18% on my NVMe drive. v6.9 is fine.\n",
               "Fri, 08 Mar 2024 10:00:00 +0000", frm="=?utf-8?q?J=C3=BCrgen?= <j@example.de>",
               to="linux-mm@kvack.org")
    build(store, raw)
    rid = rid_of(store, "umlaut-1@example.org")
    port, sink = smtpd()
    write_config(tmp_path / "regtriage.toml", port)
    r = cli("reply", rid, "--send", db=store.url)
    assert r.exit_code == 0, r.output
    got = sink.messages[0]
    assert "BODY=8BITMIME" in got["mail_options"]
    msg = sink.parsed()
    assert msg["Content-Transfer-Encoding"] == "8bit"
    assert "(Größe" in msg.get_content() and "(Größe 4k)" in msg["Subject"]
    assert msg["To"].addresses[0].display_name == "Jürgen"


def test_qp_when_a_line_is_too_long_for_smtp():
    from bot.reply.answered import Answered
    from bot.reply.compose import compose, message_bytes
    from bot.reply.send import _qp_copy

    long_mid = "x" * 990 + "@example.org"
    e = _entry(title="Größe", related=[{"relation": "link", "message_id": None, "url": "https://example.org/" + "y" * 1100,
                                        "subject": None, "from": None, "date": None, "counts_as_activity": True}])
    a = Answered(message_id=long_mid, subject="Größe", from_=("p@example.org",), to=("linux-mm@kvack.org",))
    c = compose(e, a, _settings())
    assert c.msg["Content-Transfer-Encoding"] == "quoted-printable"
    assert c.msg["In-Reply-To"] is None  # a Message-ID beyond 250 characters is not echoed
    raw = message_bytes(c.msg, "\r\n")
    assert max(len(x) for x in raw.split(b"\r\n")) <= 998
    assert "y" * 1100 in c.msg.get_content()
    short = compose(_entry(title="Größe"), Answered(message_id="r@example.org", subject="x", from_=("p@x.org",)),
                    _settings())
    qp = _qp_copy(short.msg)
    assert qp["Content-Transfer-Encoding"] == "quoted-printable" and qp.get_content() == short.msg.get_content()
    assert qp["Message-ID"] == short.msg["Message-ID"] and qp["X-Regtriage-Record"] == "7"


def test_plaintext_auth_refused_before_connecting():
    from bot.reply.send import SendError, send_message

    s = _settings(smtp_host="mail.example.org", starttls=False, user="bot")
    with pytest.raises(SendError, match="without TLS") as exc:
        send_message(None, ["a@example.org"], s, password=PASSWORD)
    assert PASSWORD not in str(exc.value)
    with pytest.raises(SendError, match="no password"):
        send_message(None, ["a@example.org"], _settings(user="bot"), password=None)


def test_plaintext_auth_refusal_recorded(store, cli, tmp_path, monkeypatch):
    build(store, A1, A2)
    rid = rid_of(store, "reg-a1@example.org")
    monkeypatch.setenv("REGTRIAGE_SMTP_PASSWORD", PASSWORD)
    write_config(tmp_path / "regtriage.toml", smtp_host="smtp.invalid", user="bot")  # starttls = false
    r = cli("reply", rid, "--send", db=store.url)
    assert r.exit_code == 1 and "refusing to send the SMTP password without TLS" in r.stderr
    assert PASSWORD not in r.output
    rows = reply_rows(store, rid)
    assert [x["status"] for x in rows] == ["refused"] and "without TLS" in rows[0]["reason"]


def test_never_answers_the_bot_itself(store, cli, tmp_path, smtpd):
    own = mail("bot-1@bot.example.org", "Re: [REGRESSION] page_fault1 throughput regression in will-it-scale since v6.8",
               "An earlier reply of the bot.\n", "Wed, 06 Mar 2024 10:00:00 +0000", frm=BOT, to="linux-mm@kvack.org",
               parent="reg-a2@example.org", refs=["reg-a1@example.org", "reg-a2@example.org"],
               extra="X-Regtriage-Record: 1\nAuto-Submitted: auto-generated\n")
    build(store, A1, A2, own)
    rid = rid_of(store, "reg-a1@example.org")
    port, sink = smtpd()
    write_config(tmp_path / "regtriage.toml", port)
    r = cli("reply", rid, "--stdout", "--answer", "latest", db=store.url)  # skips the bot's own mail
    assert r.exit_code == 0 and "In-Reply-To: <reg-a2@example.org>" in r.stdout
    r = cli("reply", rid, "--send", "--answer", "bot-1@bot.example.org", db=store.url)
    assert r.exit_code == 1 and "written by the bot itself" in r.output
    assert sink.messages == []
    assert [(x["status"], x["reason"]) for x in reply_rows(store, rid)] == [
        ("refused", "that message was written by the bot itself; not answering it")]


def test_migration_creates_replies_table(store):
    from sqlalchemy import inspect

    cols = {c["name"] for c in inspect(store.engine).get_columns("replies")}
    assert {"event_key", "status", "reason", "sent_key", "thread_key", "recipients"} <= cols
    assert store.revision() >= "0004"


def test_own_reply_read_back_changes_nothing(store, cli, tmp_path, home):
    """The bot's reply, once it comes back from the list, is neither a claim nor a command."""
    from bot.sources.ingest import Ingester
    from bot.tracker.records import get_record, update_tracker
    from bot.triage.runner import triage_pending

    build(store, A1, A2)
    rid = rid_of(store, "reg-a1@example.org")
    write_config(tmp_path / "regtriage.toml", web=False)
    path = Path(cli("reply", rid, db=store.url).stdout.strip())
    before = get_record(store, rid)
    raw = path.read_bytes()
    assert b"#regzbot ^introduced:" in raw
    ing = Ingester(store, workers=1)
    ing.add(raw, "list")
    ing.flush()
    triage_pending(store)
    update_tracker(store, None, fixes=False)
    after = get_record(store, rid)
    assert after["culprit_commit"] == before["culprit_commit"]
    assert after.get("overrides") == before.get("overrides")  # no "set by the bot" override
    assert len(after["history"]) == len(before["history"])
    mid = email.message_from_bytes(raw, policy=policy.default)["Message-ID"].strip("<>")
    assert store.message_claim(mid)["claim"] == {"skipped": "regtriage's own mail"}
