"""Message-IDs: one value type, parsed once at the edge (pure: no I/O).

Mail gives Message-IDs in several shapes: a header value (``<id@host>`` with comments or junk
around it), a References list, a ``#regzbot`` parameter or a ``Link:`` / ``Closes:`` trailer
(a lore, lkml or msgid.link URL, ``<id@host>`` or a bare ``id@host``), a public-inbox page URL.
:class:`MessageId` is the id itself, without angle brackets, as written; its constructors are
the only parsers, and :attr:`MessageId.lore_url` the only place a lore link is built
(percent-encoded, so an id with ``/``, ``?`` or ``#`` still points at itself).  Ids compare as
written; a reference retyped by a person (a commit's ``Link:``) is matched case-folded
(:attr:`MessageId.folded`).

The *stored key* of an id (:meth:`MessageId.key`) is the id itself, or a fixed-size hash for ids
no database column takes (longer than :data:`MAX_MSGID_BYTES` in UTF-8, NUL, unprintable).
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import quote, unquote, urlsplit

MSGID_TOKEN = re.compile(r"<([^<>\s]+)>")
MAX_MSGID_BYTES = 998  # RFC 5322 line limit; longer ids are stored under a hashed key
SYNTHETIC_DOMAIN = "synthetic.regtriage.invalid"  # ids made up for mail that had none
LONG_ID_DOMAIN = "long-id.regtriage.invalid"  # keys of ids too long or odd to store as they are

# hosts whose URLs name a message by its id: lore-style (/<list-or-r>/<id>/...), msgid.link
# style (/<id>) and marc.info (?i=<id>); any other URL names no message
LORE_HOSTS = frozenset({"lore.kernel.org", "lkml.kernel.org"})
MSGID_HOSTS = frozenset({"patch.msgid.link", "msgid.link"})
LORE = "https://lore.kernel.org/r/"
_URL_SAFE = "@!$&*+,;=:~._-"


class MessageId(str):
    """A Message-ID without angle brackets.  A ``str``, so it is stored, compared, hashed and
    put into JSON as the id itself; build one with :meth:`from_header` or :meth:`from_ref`."""

    __slots__ = ()

    @classmethod
    def from_header(cls, value: str | None) -> MessageId | None:
        """The id of a ``Message-ID`` / ``In-Reply-To`` header value: the first ``<...>``
        token, else the first word when it has an ``@``; None if there is none."""
        if not value:
            return None
        m = MSGID_TOKEN.search(value)
        if m:
            return cls(m.group(1))
        token = value.strip().split()
        if not token:
            return None
        candidate = token[0].strip("<>")
        return cls(candidate) if "@" in candidate else None

    @classmethod
    def from_ref(cls, value: str | None, *, bare: bool = True) -> MessageId | None:
        """The message a reference points at: a lore / lkml.kernel.org URL
        (``/r/<id>``, ``/<list>/<id>/T/#u``), ``patch.msgid.link/<id>``, ``msgid.link/<id>``,
        ``marc.info/?i=<id>``, ``<id@host>``, or (``bare``) a bare ``id@host``.
        Percent-encoding is undone; None when it names no message."""
        if not value:
            return None
        token = value.strip().split()
        if not token:
            return None
        v = token[0].strip("<>").strip()
        if v.lower().startswith(("http://", "https://")):
            return cls._from_url(v)
        if not bare and not value.lstrip().startswith("<"):
            return None
        if "@" in v and len(v) <= MAX_MSGID_BYTES:
            return cls(v)
        return None

    @classmethod
    def _from_url(cls, url: str) -> MessageId | None:
        try:
            parts = urlsplit(url)
            host = (parts.hostname or "").lower()
        except ValueError:
            return None
        segs = [unquote(s).strip().strip("<>") for s in parts.path.split("/") if s]
        if host in MSGID_HOSTS:
            seg = segs[0] if segs else None
        elif host in LORE_HOSTS or host.endswith(".kernel.org"):
            seg = next((s for s in segs if "@" in s), None)
        elif host == "marc.info":
            m = re.search(r"(?:^|&)i=([^&]+)", parts.query)
            seg = unquote(m.group(1)).strip("<>") if m else None
        else:
            return None
        return cls(seg) if seg and "@" in seg else None

    @classmethod
    def from_inbox_url(cls, link: str | None) -> MessageId | None:
        """The id a public-inbox page URL names, on any host: ``/<inbox>/<id>/`` or
        ``/<inbox>/<id>/raw`` (also ``T/``, ``t/``, ``t.mbox.gz``, ``t.atom``)."""
        if not link:
            return None
        try:
            path = urlsplit(link).path
        except ValueError:
            return None
        parts = [p for p in path.split("/") if p]
        if not parts:
            return None
        seg = parts[-1]
        if seg in ("raw", "T", "t", "t.mbox.gz", "t.atom") and len(parts) > 1:
            seg = parts[-2]
        mid = unquote(seg)
        return cls(mid) if mid else None

    @staticmethod
    def all_in(value: str | None, limit: int | None = None) -> list[MessageId]:
        """The ids of a ``References`` / ``In-Reply-To`` value, without repeats; with ``limit``,
        at most that many (the first and the last ``limit - 1``: the root and the parents)."""
        if not value:
            return []
        ids = list(dict.fromkeys(MessageId(m) for m in MSGID_TOKEN.findall(value)))
        if limit is not None and len(ids) > limit:
            ids = ids[:1] + ids[len(ids) - (limit - 1):]
        return ids

    @staticmethod
    def synthetic(raw: bytes) -> MessageId:
        """An id for mail that has none: a hash of its bytes, so a re-read finds the same one."""
        return MessageId(f"sha256-{hashlib.sha256(raw).hexdigest()[:40]}@{SYNTHETIC_DOMAIN}")

    @property
    def key(self) -> str:
        """The stored key: the id, or (too long for a column, NUL or unprintable characters) a
        fixed-size hash of it.  The same id always gives the same key."""
        if len(self) <= MAX_MSGID_BYTES // 4 and "\x00" not in self and self.isprintable():
            return str(self)  # the common case, without encoding
        clean = "\x00" not in self and self.isprintable()
        data = self.encode("utf-8", "surrogatepass")
        if clean and len(data) <= MAX_MSGID_BYTES:
            return str(self)
        return f"sha256-{hashlib.sha256(data).hexdigest()[:40]}@{LONG_ID_DOMAIN}"

    @property
    def synthetic_id(self) -> bool:
        """Made up by regtriage (the mail had no Message-ID): no list knows it."""
        return self.endswith("@" + SYNTHETIC_DOMAIN)

    @property
    def folded(self) -> str:
        """The id case-folded: how a reference retyped by a person (a ``Link:`` trailer in a
        commit) is matched against stored ids.  Stored ids themselves compare exactly."""
        return self.casefold()

    @property
    def lore_url(self) -> str:
        """``https://lore.kernel.org/r/<id>/``, percent-encoded."""
        return f"{LORE}{quote(str(self), safe=_URL_SAFE)}/"


def stored_key(value: str | None) -> str | None:
    """The stored key of the id in a header value (:meth:`MessageId.from_header`), or None."""
    mid = MessageId.from_header(value)
    return None if mid is None else mid.key


def lore_url(msgid: str | None) -> str:
    """The lore link of a stored id ("" for none)."""
    return MessageId(msgid).lore_url if msgid else ""
