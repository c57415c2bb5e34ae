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
from html.parser import HTMLParser

MSGID_TOKEN = re.compile(r"<([^<>\s]+)>")
HEADER_LINE = re.compile(rb"^[!-9;-~]+:", re.M)  # printable, no colon, then ':'
SYNTHETIC_DOMAIN = "synthetic.regtriage.invalid"
DEFAULT_MAX_BYTES = 32 * 1024 * 1024
MAX_BODY_CHARS = 2 * 1024 * 1024  # decoded text kept for extraction; the raw bytes are kept whole


@dataclass
class ParsedMessage:
    message_id: str
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

    @property
    def parent_id(self) -> str | None:
        """The direct parent per JWZ: last References entry, else In-Reply-To."""
        if self.references:
            return self.references[-1]
        return self.in_reply_to


OWN_MAIL_HEADER = "X-Regtriage-Record"  # set on every mail regtriage writes (bot.reply)


def is_own_mail(headers) -> bool:
    """Mail written by regtriage itself: never read back as a claim or as commands."""
    return any(str(name).lower() == OWN_MAIL_HEADER.lower() for name, _ in headers or ())


def normalize_msgid(value: str | None) -> str | None:
    """Message-ID without angle brackets and surrounding junk; None if there is none."""
    if not value:
        return None
    m = MSGID_TOKEN.search(value)
    if m:
        return m.group(1)
    token = value.strip().split()
    if not token:
        return None
    candidate = token[0].strip("<>")
    return candidate if "@" in candidate and len(candidate) <= 998 else None


def msgid_list(value: str | None) -> list[str]:
    if not value:
        return []
    return MSGID_TOKEN.findall(value)


def synthetic_msgid(raw: bytes) -> str:
    return f"sha256-{hashlib.sha256(raw).hexdigest()[:40]}@{SYNTHETIC_DOMAIN}"


def _decode_header(value: str, problems: list[str], name: str) -> str:
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


def _header_str(raw_value) -> str:
    """compat32 returns str, or Header for 8-bit raw headers; never fail."""
    if isinstance(raw_value, str):
        return raw_value
    try:
        return str(raw_value)
    except Exception:
        return repr(raw_value)


def _decode_bytes(data: bytes, charset: str | None, problems: list[str], where: str) -> str:
    cs = (charset or "").strip().strip('"').lower() or None
    if cs in ("unknown-8bit", "x-unknown", "unknown"):
        cs = None
    if cs:
        try:
            codecs.lookup(cs)
        except LookupError:
            problems.append(f"{where}: unknown charset {cs[:40]!r}, decoded as utf-8 with replacement")
            cs = None
        else:
            try:
                return data.decode(cs)
            except UnicodeDecodeError:
                problems.append(f"{where}: bytes not valid {cs}, decoded with replacement")
                return data.decode(cs, errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        if charset is None and data.isascii() is False:
            problems.append(f"{where}: 8-bit text without a charset, decoded as latin-1")
        return data.decode("latin-1")


class _TextExtractor(HTMLParser):
    SKIP = {"script", "style", "head"}
    BREAKS = {"br", "p", "div", "tr", "li", "pre", "blockquote", "h1", "h2", "h3", "h4", "table"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.skip += 1
        elif tag in self.BREAKS:
            self.out.append("\n")

    def handle_endtag(self, tag):
        if tag in self.SKIP and self.skip:
            self.skip -= 1
        elif tag in self.BREAKS:
            self.out.append("\n")

    def handle_data(self, data):
        if not self.skip:
            self.out.append(data)


def html_to_text(markup: str) -> str:
    parser = _TextExtractor()
    try:
        parser.feed(markup)
        parser.close()
    except Exception:
        return html.unescape(re.sub(r"<[^>]*>", " ", markup))
    text = "".join(parser.out)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def _part_text(part: Message, problems: list[str]) -> str:
    try:
        payload = part.get_payload(decode=True)
    except Exception as exc:
        problems.append(f"body: payload could not be decoded ({exc.__class__.__name__})")
        payload = None
    if payload is None:
        inner = part.get_payload()
        return inner if isinstance(inner, str) else ""
    return _decode_bytes(payload, part.get_content_charset(), problems, "body")


def _body_text(msg: Message, problems: list[str]) -> str:
    plain: list[str] = []
    html_parts: list[str] = []
    attachments = 0
    for part in msg.walk():
        if part.is_multipart():
            continue
        ctype = part.get_content_type()
        disposition = (part.get("Content-Disposition") or "").lower()
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
    except (TypeError, ValueError, IndexError, OverflowError):
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


def parse_message(raw: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES) -> ParsedMessage:
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
        return ParsedMessage(synthetic_msgid(raw), True, "", "", None, None, None, [], [], "",
                             sha, len(raw), problems, reject)
    try:
        msg = email.message_from_bytes(raw)
    except Exception as exc:  # the stdlib parser is lenient; be safe anyway
        return ParsedMessage(synthetic_msgid(raw), True, "", "", None, None, None, [], [], "",
                             sha, len(raw), problems, f"unparseable: {exc.__class__.__name__}: {exc}")
    for defect in msg.defects[:5]:
        problems.append(f"MIME defect: {defect.__class__.__name__}")

    headers: list[tuple[str, str]] = []
    for name, value in msg.items():
        headers.append((name, _header_str(value)))

    def first(name: str) -> str | None:
        v = msg.get(name)
        return None if v is None else _header_str(v)

    mid_raw = first("Message-ID")
    mid = normalize_msgid(mid_raw)
    synthetic = False
    if mid is None:
        problems.append("Message-ID: missing or malformed, synthetic id from content hash")
        mid = synthetic_msgid(raw)
        synthetic = True
    subject_raw = first("Subject")
    if subject_raw is None:
        problems.append("Subject: missing")
    subject = _decode_header(subject_raw or "", problems, "Subject")
    from_addr = _decode_header(first("From") or "", problems, "From")
    date_raw = first("Date")
    date = _parse_date(date_raw, problems)
    refs = msgid_list(first("References"))
    irt_list = msgid_list(first("In-Reply-To"))
    irt = irt_list[0] if irt_list else None
    refs = [r for r in dict.fromkeys(refs) if r != mid]
    if irt == mid:
        irt = None
    body = _body_text(msg, problems)
    if len(body) > MAX_BODY_CHARS:
        problems.append(f"body: {len(body)} characters, text truncated to {MAX_BODY_CHARS} (raw kept)")
        body = body[:MAX_BODY_CHARS]
    return ParsedMessage(mid, synthetic, subject, from_addr, date, date_raw, irt, refs, headers,
                         body, sha, len(raw), problems, None)
