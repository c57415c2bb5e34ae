"""Parse one raw RFC 5322 message, defensively.

Mail is hostile input: this module never raises on bad mail.  Whatever it had to work around
(undecodable charsets, broken encoded-words, HTML-only bodies, missing headers, MIME defects)
is recorded in ``ParsedMessage.problems`` as a short human-readable reason.  Messages that are
not mail at all are reported through ``ParsedMessage.reject`` so the caller can quarantine them.
"""

from __future__ import annotations

import codecs
import email
import email.header
import email.parser
import email.utils
import hashlib
import html
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.message import Message

from bot.msgid import MessageId

HEADER_LINE = re.compile(rb"^[!-9;-~]+:", re.M)  # printable, no colon, then ':'
DEFAULT_MAX_BYTES = 32 * 1024 * 1024
MAX_BODY_CHARS = 2 * 1024 * 1024  # decoded text kept for extraction; the raw bytes are kept whole
MAX_HTML_CHARS = 2 * 1024 * 1024  # HTML converted to text (the HTML parser is slow on junk)
MAX_DECODED_HEADER = 16 * 1024  # characters of a header value run through RFC 2047 decoding
DEFAULT_MAX_REFERENCES = 64
# Codecs that codecs.lookup() accepts but that are not charsets of text (or that cannot decode
# arbitrary bytes): a charset= naming one is treated as unknown.
NOT_CHARSETS = {"idna", "punycode", "undefined", "unicode-escape", "raw-unicode-escape",
                "unicode-internal", "mbcs", "oem", "charmap"}


@dataclass
class ParsedMessage:
    message_id: str  # the key: the Message-ID, or a hash of it when longer than bot.msgid.MAX_MSGID_BYTES
    synthetic_id: bool
    subject: str
    from_addr: str
    date: datetime | None
    date_raw: str | None
    in_reply_to: str | None
    references: list[str]
    headers: list[tuple[str, str]]
    body: str
    sha256: str
    size: int
    problems: list[str] = field(default_factory=list)
    reject: str | None = None
    message_id_full: str | None = None  # the whole Message-ID when ``message_id`` is its hash

    @property
    def parent_id(self) -> str | None:
        """The direct parent per JWZ: last References entry, else In-Reply-To."""
        if self.references:
            return self.references[-1]
        return self.in_reply_to


OWN_MAIL_HEADER = "X-Regtriage-Record"  # set on every mail regtriage writes (bot.reply.compose)


def is_own_mail(headers) -> bool:
    """Mail written by regtriage itself: never read back as a claim or as commands."""
    return any(str(name).lower() == OWN_MAIL_HEADER.lower() for name, _ in headers or ())


def _decode_header(value: str, problems: list[str], name: str) -> str:
    if len(value) > MAX_DECODED_HEADER:
        problems.append(f"{name}: {len(value)} characters, cut to {MAX_DECODED_HEADER} (raw kept)")
        value = value[:MAX_DECODED_HEADER]
    if "=?" not in value:
        return " ".join(value.split()) if "\n" in value else value
    try:
        parts = email.header.decode_header(value)
        out = []
        for chunk, charset in parts:
            if isinstance(chunk, bytes):
                out.append(_decode_bytes(chunk, charset, problems, f"{name} header"))
            else:
                out.append(chunk)
        text = "".join(out)
        if not text.strip():
            problems.append(f"{name}: encoded-word decoded to nothing, kept as written")
            text = value
    except Exception as exc:  # malformed encoded-words
        problems.append(f"{name}: undecodable encoded-word ({exc.__class__.__name__})")
        text = value
    return " ".join(text.split())


def _header_str(raw_value, problems: list[str] | None = None, name: str = "header") -> str:
    """A raw header value as text.  The parser keeps 8-bit header bytes as surrogate escapes:
    they are UTF-8 (RFC 6532) when they decode as such, else latin-1 (with a problem noted)."""
    if not isinstance(raw_value, str):
        try:
            raw_value = str(raw_value)
        except Exception:  # noqa: BLE001 - hostile input
            return repr(raw_value)
    if raw_value.isascii() or not any("\udc80" <= ch <= "\udcff" for ch in raw_value):
        return raw_value
    data = raw_value.encode("utf-8", "surrogateescape")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        if problems is not None:
            problems.append(f"{name}: 8-bit header not valid UTF-8, decoded as latin-1")
        return data.decode("latin-1")
    except UnicodeEncodeError:  # lone surrogates that were not escapes
        return raw_value.encode("utf-8", "replace").decode("utf-8")


def text_codec(charset: str | None) -> str | None:
    """The codec to decode text in ``charset`` with, or None when the name is no charset that
    Python can decode arbitrary bytes of text with (unknown names, NUL in the name, and codecs
    such as zlib, base64, rot13, hex, uu, bz2, quopri, idna or undefined)."""
    cs = str(charset or "").strip().strip('"').strip().lower()
    if not cs or len(cs) > 64 or not cs.isprintable() or not cs.isascii():
        return None
    try:
        info = codecs.lookup(cs)
    except Exception:  # noqa: BLE001 - LookupError, ValueError (NUL), whatever a codec does
        return None
    if not getattr(info, "_is_text_encoding", True) or info.name in NOT_CHARSETS:
        return None
    return info.name


def _decode_bytes(data: bytes, charset: str | None, problems: list[str], where: str) -> str:
    """Text of ``data`` in ``charset``; never raises.  Whatever does not work falls back to
    UTF-8 (else latin-1) and is noted in ``problems``."""
    cs = str(charset or "").strip().strip('"').lower() or None
    if cs in ("unknown-8bit", "x-unknown", "unknown"):
        cs = None
    if cs:
        codec = text_codec(cs)
        shown = cs[:40].encode("ascii", "backslashreplace").decode("ascii")
        if codec is None:
            problems.append(f"{where}: unknown charset {shown!r}, decoded as utf-8 with replacement")
            return data.decode("utf-8", "replace")
        try:
            return data.decode(codec)
        except Exception:  # noqa: BLE001 - UnicodeDecodeError, and codecs that fail otherwise
            problems.append(f"{where}: bytes not valid {shown}, decoded with replacement")
            try:
                return data.decode(codec, errors="replace")
            except Exception:  # noqa: BLE001
                return data.decode("utf-8", "replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        if charset is None and data.isascii() is False:
            problems.append(f"{where}: 8-bit text without a charset, decoded as latin-1")
        return data.decode("latin-1")


HTML_SKIP = {"script", "style", "head"}
HTML_BREAKS = {"br", "p", "div", "tr", "li", "pre", "blockquote", "h1", "h2", "h3", "h4", "table"}
# One pass, linear in the input whatever it holds: every alternative stops at the next "<" or
# at the end, so unclosed tags and comments never make a rescan (html.parser is quadratic on
# such junk: 1 MB of "<" took 90 s).
HTML_TOKEN = re.compile(r"[^<]+|<+(?=<)|<!--.*?(?:-->|\Z)"
                        r"|<(/?)([A-Za-z][A-Za-z0-9:-]*)[^<>]*(?:>|(?=<)|\Z)"
                        r"|<[!?/][^<>]*(?:>|(?=<)|\Z)"
                        r"|<", re.S)


def html_to_text(markup: str) -> str:
    markup = markup[:MAX_HTML_CHARS]
    out: list[str] = []
    skip = 0
    for m in HTML_TOKEN.finditer(markup):
        tag = m.group(2)
        if tag is not None:
            tag = tag.lower()
            closing = bool(m.group(1))
            if tag in HTML_SKIP:
                skip = max(0, skip - 1) if closing else skip + 1
            elif tag in HTML_BREAKS and not skip:
                out.append("\n")
            continue
        text = m.group(0)
        if text.startswith("<") and len(text) > 1 and text[1] != "<":
            continue  # comment, declaration, processing instruction
        if not skip:
            out.append(text)
    text = html.unescape("".join(out))
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def _part_text(part: Message, problems: list[str]) -> str:
    try:
        payload = part.get_payload(decode=True)
    except Exception as exc:  # noqa: BLE001 - hostile input
        problems.append(f"body: payload could not be decoded ({exc.__class__.__name__})")
        payload = None
    if payload is None:
        try:
            inner = part.get_payload()
        except Exception:  # noqa: BLE001
            inner = None
        return _header_str(inner, problems, "body") if isinstance(inner, str) else ""
    try:
        charset = part.get_content_charset()
    except Exception as exc:  # noqa: BLE001 - RFC 2231 parameters in a bogus charset
        problems.append(f"body: unreadable charset parameter ({exc.__class__.__name__})")
        charset = None
    return _decode_bytes(payload, charset, problems, "body")


def _body_text(msg: Message, problems: list[str]) -> str:
    plain: list[str] = []
    html_parts: list[str] = []
    attachments = 0
    for part in msg.walk():
        if part.is_multipart():
            continue
        try:
            ctype = part.get_content_type()
        except Exception:  # noqa: BLE001 - hostile input
            ctype = "application/octet-stream"
        disposition = _header_str(part.get("Content-Disposition") or "").lower()
        if ctype == "text/plain" and "attachment" not in disposition:
            plain.append(_part_text(part, problems))
        elif ctype == "text/html" and "attachment" not in disposition:
            html_parts.append(_part_text(part, problems))
        elif ctype.startswith("text/x-") or (ctype == "text/plain"):
            # inline patches and logs sent as text attachments are part of the report
            plain.append(_part_text(part, problems))
        else:
            attachments += 1
    if attachments:
        problems.append(f"body: {attachments} non-text attachment(s) kept in raw only")
    if plain:
        return "\n".join(plain)
    if html_parts:
        problems.append("body: HTML only, converted to text")
        return "\n".join(html_to_text(h) for h in html_parts)
    return ""


def _parse_date(value: str | None, problems: list[str]) -> datetime | None:
    if not value:
        return None
    try:
        dt = email.utils.parsedate_to_datetime(value)
    except Exception:  # noqa: BLE001 - TypeError, ValueError, IndexError, OverflowError ...
        problems.append(f"Date: unparseable {value[:60]!r}")
        return None
    if dt is None:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
        problems.append("Date: no time zone, assumed UTC")
    try:
        return dt.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        problems.append(f"Date: out of range {value[:60]!r}")
        return None


def looks_like_mail(raw: bytes) -> bool:
    """At least one header line before the first blank line."""
    head = raw[:8192].lstrip(b"\r\n")
    end = head.find(b"\n\n")
    block = head if end < 0 else head[:end]
    return bool(HEADER_LINE.search(block))


def clean_text(value: str, problems: list[str] | None = None, where: str = "text") -> str:
    """Text any database column takes: NUL made visible (U+2400), lone surrogates replaced."""
    if "\x00" in value:
        if problems is not None:
            problems.append(f"{where}: NUL characters shown as \u2400")
        value = value.replace("\x00", "\u2400")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        if problems is not None:
            problems.append(f"{where}: undecodable characters replaced")
        value = value.encode("utf-8", "replace").decode("utf-8")
    return value


def _rejected(raw: bytes, sha: str, problems: list[str], reason: str) -> ParsedMessage:
    return ParsedMessage(MessageId.synthetic(raw).key, True, "", "", None, None, None, [], [], "",
                         sha, len(raw), problems, reason)


def parse_message(raw: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES,
                  max_references: int = DEFAULT_MAX_REFERENCES) -> ParsedMessage:
    """Parse raw bytes; never raises.  ``reject`` is set when the bytes should be quarantined."""
    sha = hashlib.sha256(raw).hexdigest()
    problems: list[str] = []
    reject = None
    if not raw.strip():
        reject = "empty message"
    elif len(raw) > max_bytes:
        reject = f"message too large: {len(raw)} bytes > limit {max_bytes}"
    elif not looks_like_mail(raw):
        reject = "not an RFC 5322 message: no header lines"
    if reject:
        return _rejected(raw, sha, problems, reject)
    try:
        return _parse(raw, sha, problems, max_references)
    except RecursionError:
        return _rejected(raw, sha, problems, "unparseable: MIME structure nested too deeply")
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never raise on mail
        return _rejected(raw, sha, problems, f"unparseable: {exc.__class__.__name__}: {str(exc)[:200]}")


def _parse(raw: bytes, sha: str, problems: list[str], max_references: int) -> ParsedMessage:
    msg = email.message_from_bytes(raw)
    for defect in msg.defects[:5]:
        problems.append(f"MIME defect: {defect.__class__.__name__}")

    headers: list[tuple[str, str]] = []
    for name, value in msg.raw_items():
        name = clean_text(_header_str(name))
        headers.append((name, clean_text(_header_str(value, problems, name), problems, name)))

    raw_first: dict[str, str] = {}
    for name, value in msg.raw_items():
        raw_first.setdefault(str(name).lower(), value)

    def first(name: str) -> str | None:
        v = raw_first.get(name.lower())
        return None if v is None else clean_text(_header_str(v, None, name))

    mid_raw = first("Message-ID")
    full = MessageId.from_header(mid_raw)
    mid = None if full is None else full.key
    synthetic = False
    if mid is None:
        problems.append("Message-ID: missing or malformed, synthetic id from content hash")
        mid = MessageId.synthetic(raw).key
        synthetic = True
    elif mid != full:
        problems.append(f"Message-ID: {len(full)} characters or unstorable characters, "
                        "stored under a hashed key (the whole id is kept)")
    subject_raw = first("Subject")
    if subject_raw is None:
        problems.append("Subject: missing")
    subject = clean_text(_decode_header(subject_raw or "", problems, "Subject"), problems, "Subject")
    from_addr = clean_text(_decode_header(first("From") or "", problems, "From"), problems, "From")
    date_raw = first("Date")
    date = _parse_date(date_raw, problems)
    references_raw = first("References")
    refs = [m.key for m in MessageId.all_in(references_raw)]
    if len(refs) > max_references:
        problems.append(f"References: {len(refs)} ids, kept the first and the last {max_references - 1}")
        refs = refs[:1] + refs[len(refs) - (max_references - 1):]
    irt_list = [m.key for m in MessageId.all_in(first("In-Reply-To"), limit=1)]
    irt = irt_list[0] if irt_list else None
    refs = [r for r in refs if r != mid]
    if irt == mid:
        irt = None
    body = _body_text(msg, problems)
    if len(body) > MAX_BODY_CHARS:
        problems.append(f"body: {len(body)} characters, text truncated to {MAX_BODY_CHARS} (raw kept)")
        body = body[:MAX_BODY_CHARS]
    body = clean_text(body, problems, "body")
    problems = [clean_text(p) for p in problems]
    return ParsedMessage(mid, synthetic, subject, from_addr, date, date_raw, irt, refs, headers,
                         body, sha, len(raw), problems, None,
                         message_id_full=clean_text(full) if full is not None and full != mid else None)
