"""bot.sources.mail: hostile input is parsed or rejected with a recorded reason, never raises."""

import base64

from bot.msgid import MessageId, stored_key
from bot.sources.mail import parse_message


def msg(headers: str, body: str = "hello\n") -> bytes:
    return (headers.strip("\n") + "\n\n" + body).encode("utf-8")


def test_message_id_normalised_and_refs_parsed():
    p = parse_message(msg("""
From: A <a@example.com>
Subject: Re: x
Message-ID:   <abc@example.com>  (comment)
In-Reply-To: <parent@example.com>
References: <root@example.com>
 <parent@example.com>
Date: Mon, 01 Jan 2024 10:00:00 +0100
"""))
    assert p.message_id == "abc@example.com" and not p.synthetic_id
    assert p.references == ["root@example.com", "parent@example.com"]
    assert p.parent_id == "parent@example.com"
    assert p.date.isoformat() == "2024-01-01T09:00:00+00:00"
    assert p.problems == []


def test_missing_message_id_gets_stable_synthetic_id():
    raw = msg("From: a@example.com\nSubject: no id")
    a, b = parse_message(raw), parse_message(raw)
    assert a.synthetic_id and a.message_id == b.message_id == MessageId.synthetic(raw)
    assert parse_message(raw + b"x").message_id != a.message_id
    assert any("Message-ID" in r for r in a.problems)


def test_normalize_msgid_variants():
    assert stored_key("<a@b>") == "a@b"
    assert stored_key(" a@b ") == "a@b"
    assert stored_key("") is None
    assert stored_key("garbage") is None


def test_unknown_charset_recorded_and_decoded():
    raw = (b"From: a@example.com\nSubject: x\nMessage-ID: <c@x>\nContent-Type: text/plain; charset=x-bogus\n\n"
           b"caf\xc3\xa9 regression\n")
    p = parse_message(raw)
    assert "regression" in p.body
    assert any("unknown charset" in r for r in p.problems)


def test_invalid_bytes_for_declared_charset():
    raw = b"From: a@x\nSubject: s\nMessage-ID: <d@x>\nContent-Type: text/plain; charset=utf-8\n\n\xff\xfe ok\n"
    p = parse_message(raw)
    assert "ok" in p.body and any("not valid utf-8" in r for r in p.problems)


def test_encoded_word_subject_and_broken_encoded_word():
    p = parse_message(msg("From: a@x\nMessage-ID: <e@x>\nSubject: =?utf-8?q?R=C3=A9gression_ext4?="))
    assert p.subject == "Régression ext4"
    p2 = parse_message(msg("From: a@x\nMessage-ID: <f@x>\nSubject: =?bogus-cs?b?!!!?="))
    assert p2.subject == "=?bogus-cs?b?!!!?=" and p2.problems  # kept as written, with reasons


def test_base64_and_quoted_printable_bodies():
    b64 = base64.b64encode("throughput dropped 12% after commit deadbeef\n".encode()).decode()
    p = parse_message(msg("From: a@x\nMessage-ID: <g@x>\nSubject: s\nContent-Transfer-Encoding: base64\n"
                          "Content-Type: text/plain; charset=utf-8", b64))
    assert "deadbeef" in p.body
    q = parse_message(msg("From: a@x\nMessage-ID: <h@x>\nSubject: s\nContent-Transfer-Encoding: quoted-printable\n"
                          "Content-Type: text/plain; charset=utf-8", "caf=C3=A9 =3D soft=\nbreak\n"))
    assert "café = softbreak" in q.body


def test_html_only_converted_with_reason():
    p = parse_message(msg("From: a@x\nMessage-ID: <i@x>\nSubject: s\nContent-Type: text/html; charset=utf-8",
                          "<html><head><style>x{}</style></head><body><p>boot fails on v6.8</p>"
                          "<script>alert(1)</script></body></html>"))
    assert "boot fails on v6.8" in p.body and "alert" not in p.body and "<p>" not in p.body
    assert any("HTML only" in r for r in p.problems)


def test_multipart_with_attachment():
    raw = msg("""
From: a@x
Message-ID: <j@x>
Subject: s
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="BB"
""", """--BB
Content-Type: text/plain; charset=us-ascii

see attached config
--BB
Content-Type: application/octet-stream
Content-Disposition: attachment; filename=config.gz
Content-Transfer-Encoding: base64

H4sIAAAAAAAAA0tMTAIAn3M1fAQAAAA=
--BB--
""")
    p = parse_message(raw)
    assert "see attached config" in p.body
    assert any("attachment" in r for r in p.problems)


def test_rejections():
    assert parse_message(b"").reject == "empty message"
    assert "too large" in parse_message(msg("From: a@x\nSubject: s", "x" * 2000), max_bytes=1000).reject
    assert "no header lines" in parse_message(b"\x00\x01 binary junk without headers").reject


def test_bad_date_and_missing_subject():
    p = parse_message(msg("From: a@x\nMessage-ID: <k@x>\nDate: yesterday-ish"))
    assert p.date is None and any("Date" in r for r in p.problems)
    assert any("Subject: missing" in r for r in p.problems)


def test_self_reference_is_dropped():
    p = parse_message(msg("From: a@x\nSubject: s\nMessage-ID: <l@x>\nIn-Reply-To: <l@x>\nReferences: <l@x>"))
    assert p.parent_id is None
