"""One Message-ID value type (bot/msgid.py): every shape mail gives an id in parses to the
same value, and the lore link is built from it, percent-encoded."""

import pytest

from bot.msgid import LONG_ID_DOMAIN, MessageId, lore_url, stored_key

ID = "20240601.123-4-a/b+c@example.org"

SHAPES = [
    ("header", lambda: MessageId.from_header(f"  <{ID}> (comment)")),
    ("references", lambda: MessageId.all_in(f"<root@x> <{ID}>")[-1]),
    ("lore /r/", lambda: MessageId.from_ref("https://lore.kernel.org/r/20240601.123-4-a%2Fb+c@example.org/")),
    ("lore list T", lambda: MessageId.from_ref("https://lore.kernel.org/linux-mm/20240601.123-4-a%2Fb%2Bc@example.org/T/#u")),
    ("msgid.link", lambda: MessageId.from_ref("<https://patch.msgid.link/20240601.123-4-a%2Fb+c@example.org>")),
    ("regzbot bare", lambda: MessageId.from_ref(ID)),
    ("angle", lambda: MessageId.from_ref(f"<{ID}>")),
    ("inbox page", lambda: MessageId.from_inbox_url("http://127.0.0.1:8080/test/20240601.123-4-a%2Fb+c@example.org/raw")),
]


@pytest.mark.parametrize("shape,parse", SHAPES, ids=[s for s, _ in SHAPES])
def test_every_shape_parses_to_the_same_id(shape, parse):
    mid = parse()
    assert isinstance(mid, MessageId)
    assert mid == ID  # exact, case kept: ids compare as written


def test_ids_keep_their_case():
    assert MessageId.from_header("<ABC@Example.ORG>") == "ABC@Example.ORG"
    assert MessageId.from_header("<ABC@Example.ORG>") != "abc@example.org"


def test_lore_url_is_percent_encoded_and_round_trips():
    url = MessageId(ID).lore_url
    assert url == "https://lore.kernel.org/r/20240601.123-4-a%2Fb+c@example.org/"
    assert MessageId.from_ref(url) == ID
    hostile = MessageId('x"><script>?#@y')
    assert "<" not in hostile.lore_url and "#" not in hostile.lore_url and "?" not in hostile.lore_url
    assert MessageId.from_ref(hostile.lore_url) == hostile
    assert lore_url(None) == "" and lore_url("") == ""


def test_links_that_name_no_message():
    assert MessageId.from_ref("https://bugzilla.kernel.org/show_bug.cgi?id=1") is None
    assert MessageId.from_ref("https://example.com/r/a@b/") is None
    assert MessageId.from_ref("https://lore.kernel.org/linux-mm/") is None
    assert MessageId.from_ref("a@b", bare=False) is None  # a Link: trailer must be a link
    assert MessageId.from_header("garbage") is None and MessageId.from_header(None) is None


def test_stored_key_hashes_only_unstorable_ids():
    assert stored_key(f"<{ID}>") == ID
    long = "a" * 2000 + "@b"
    key = MessageId(long).key
    assert key.endswith("@" + LONG_ID_DOMAIN) and key == MessageId(long).key
    assert MessageId("a\x00b@c").key.endswith("@" + LONG_ID_DOMAIN)


def test_references_without_repeats_and_bounded():
    refs = " ".join(f"<m{i}@x>" for i in range(10)) + " <m3@x>"
    assert MessageId.all_in(refs) == [f"m{i}@x" for i in range(10)]
    assert MessageId.all_in(refs, limit=3) == ["m0@x", "m8@x", "m9@x"]


def test_synthetic_ids_are_stable_and_marked():
    a, b = MessageId.synthetic(b"body"), MessageId.synthetic(b"body")
    assert a == b and a.synthetic_id and not MessageId(ID).synthetic_id
