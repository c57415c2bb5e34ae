"""The bot's replies to regression report threads: compose, policy, outbox, send.

``regtriage reply ID`` (bot/reply_cli.py) runs :func:`run_reply`; the pieces are usable on
their own:

* :func:`compose` -- pure: tracker entry + headers of the answered message + settings ->
  :class:`Composed` (an ``email.message.EmailMessage`` under ``email.policy.SMTP`` plus the
  recipients kept and dropped, and notes).
* :func:`check_recipients` -- the static policy (allow-listed lists, recipient count).
* :func:`write_outbox` -- dry run: the message into the ``outbox`` maildir.
* :func:`send_message` -- SMTP (stdlib smtplib): STARTTLS or implicit TLS, AUTH PLAIN/LOGIN.
* the ``replies`` table (storage/reply_schema.py): every draft, send, refusal and failure with
  its reason; the event key makes a sent reply unique; rate limits count sent rows.

The reply
---------
* ``Subject: Re: <subject of the answered message>`` -- leading reply prefixes (``Re:``,
  ``RE:``, ``Aw:``, ``Re[2]:`` ...) are folded into one ``Re:``.
* It answers the report message by default (``answer="report"``): a status reply belongs
  under the report, and ``#regzbot ^introduced: ...`` then points regzbot at the report
  (``^`` = the parent mail).  ``answer="latest"`` answers the newest stored message of the
  report's thread that is not the bot's own (no ``X-Regtriage-Record``, not
  ``Auto-Submitted``); the regzbot line then names the report by its lore URL.  A Message-ID
  answers that message, which must be in the report's thread or related to the record.
* ``In-Reply-To``: the answered message; ``References``: its References + its Message-ID,
  at most :data:`MAX_REFERENCES` ids (the thread root and the newest ones).
* Recipients: From of the answered message -> To; of its To + Cc only the mailing lists -> Cc
  (``[mail] reply_to = "author+list"``, the default; ``"all"``: every address, reply-all).
  Addresses are compared
  case-insensitively; the bot's own addresses and ``[mail] never_cc`` are removed; list
  addresses not on ``[mail] allowed_lists`` are DROPPED (not refused) and the reply says so
  in its notes -- a reply still reaches the people and the allowed lists.  ``--send`` refuses
  when no allowed list is left among the recipients.
* Body: plain text only (no HTML part), ``templates/reply.txt.j2`` (which includes
  ``entry.txt.j2``), every line wrapped at 72 columns except ``#regzbot`` command lines (regzbot
  reads one line per command) and single tokens longer than that (URLs).  ``Content-Type:
  text/plain; charset=utf-8``, ``Content-Transfer-Encoding: 8bit`` (quoted-printable when a line
  would exceed SMTP's 998 octets; re-encoded as quoted-printable when the server lacks
  8BITMIME).
* Headers: Date, Message-ID under the bot's domain, From, MIME-Version, ``Auto-Submitted:
  auto-generated``, ``X-Regtriage-Record: ID``.  Every mail-derived string placed in a header
  is cleaned of CR/LF and control characters first (and ``email.policy.SMTP`` refuses line
  breaks in header values anyway); addresses must be plain ASCII ``local@domain``.

Never the same reply twice: the event key is ``<record id>:<event kind>:<hash of the facts>``
(event kind: the record's status unless given).  A sent (or being sent) event is never sent
again; a second dry run of the same event says where the draft is unless ``force``.

Secrets: the SMTP password comes only from ``$REGTRIAGE_SMTP_PASSWORD`` or ``[mail]
password_file``; it is read when sending, kept out of every dataclass, log line, message and
database row (SMTP error texts are scrubbed of it), and never sent without TLS except to a
loopback relay.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import logging
import mailbox
import os
import re
import secrets
import smtplib
import ssl
import stat
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from email import policy as email_policy
from email.header import decode_header, make_header
from email.headerregistry import Address, HeaderRegistry, UnstructuredHeader
from email.message import EmailMessage
from email.utils import format_datetime, getaddresses, parseaddr
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from bot.config import ConfigError
from bot.tracker import STATUSES, clean_title, culprit_url
from bot.tracker_entry import WIDTH, clean_text, wrap_text

log = logging.getLogger("regtriage.reply")

EVENT_KINDS = STATUSES
MAX_REFERENCES = 20
MAX_MSGID = 250
MAX_SUBJECT = 900
SMTP_LINE = 998
PASSWORD_ENV = "REGTRIAGE_SMTP_PASSWORD"
USER_ENV = "REGTRIAGE_SMTP_USER"
DEFAULT_LIST_DOMAINS = ("vger.kernel.org", "lists.linux.dev", "kvack.org", "lists.infradead.org",
                        "lists.ozlabs.org", "lists.freedesktop.org", "lists.sourceforge.net",
                        "lists.linaro.org", "lists.openwall.com", "googlegroups.com", "lists.*")
REPLY_PREFIX = re.compile(r"^\s*(?:(?:re|aw|sv|antw|vs)\s*(?:\[\d+\])?\s*:\s*)+", re.I)
_ADDR = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]{1,64}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
                   r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_MSGID = re.compile(r"[!-;=?-~]{1,%d}@[!-;=?-~]{1,%d}" % (MAX_MSGID, MAX_MSGID))  # printable, no < > or space
_DOMAIN = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_HEX = re.compile(r"[0-9a-f]{7,40}")
_REF = re.compile(r"[\w.^~+-]{1,128}")
SYNTHETIC_SUFFIX = "@synthetic.regtriage.invalid"


class ReplyError(Exception):
    """The reply cannot be composed (no such record, nothing to answer ...)."""


PLACEHOLDER_FROM = "regtriage <regtriage@example.invalid>"  # `reply --stdout` without [mail] from


class SendError(Exception):
    """Sending failed; the message is safe to show (no secrets)."""


# -- settings -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MailSettings:
    """``[mail]`` (and ``[web] base_url``) of the config.  Holds no password.

    ``from`` (required; its domain names the Message-IDs unless ``msgid_domain``),
    ``envelope_from``, ``bot_addresses`` (more addresses of the bot: never cc'd, never answered),
    ``smtp_host`` (localhost), ``smtp_port`` (465 with ``ssl``, 587 with ``starttls``, else 25),
    ``starttls`` (true unless ``ssl``), ``ssl`` (false), ``ca_file``, ``timeout`` (30 s),
    ``helo``, ``user`` (or ``$REGTRIAGE_SMTP_USER``), ``password_file`` (the password itself
    only there or in ``$REGTRIAGE_SMTP_PASSWORD``; ``password`` in the file is an error),
    ``auth`` (auto | plain | login), ``allowed_lists`` (lists the bot may post to; empty: none),
    ``lists`` and ``list_domains`` (what counts as a list address; plus the answered mail's
    List-Post), ``never_cc``, ``thread_limit`` (1) replies per thread per
    ``thread_window_hours`` (24), ``hourly_limit`` (10) replies per hour in all
    (0 mutes the bot), ``max_recipients`` (30), ``outbox`` ($REGTRIAGE_HOME/outbox).
    """

    from_name: str
    from_addr: str
    msgid_domain: str
    envelope_from: str
    outbox: Path
    base_url: str | None = None
    smtp_host: str = "localhost"
    smtp_port: int = 587
    starttls: bool = True
    ssl: bool = False
    ca_file: str | None = None
    timeout: float = 30.0
    helo: str | None = None
    user: str | None = None
    password_file: str | None = None
    auth: str = "auto"  # auto | plain | login
    allowed_lists: tuple[str, ...] = ()
    lists: tuple[str, ...] = ()
    list_domains: tuple[str, ...] = DEFAULT_LIST_DOMAINS
    never_cc: tuple[str, ...] = ()
    bot_addresses: tuple[str, ...] = ()
    thread_limit: int = 1
    thread_window_hours: float = 24.0
    hourly_limit: int = 10
    max_recipients: int = 30
    reply_to: str = "author+list"  # author+list | all
    placeholder_from: bool = False  # ``from`` was not set: PLACEHOLDER_FROM stands in (--stdout only)

    @classmethod
    def from_config(cls, config, *, placeholder: bool = False) -> "MailSettings":
        """``placeholder``: without ``[mail] from``, use PLACEHOLDER_FROM (and say so in
        ``placeholder_from``) instead of refusing -- for a dry run that only prints."""
        mail = config.section("mail")
        web = config.section("web")
        where = f"[mail] in {config.path}" if config.path else "[mail]"
        if "password" in mail:
            raise ConfigError(f"{where}: do not put the SMTP password in the config file; use "
                              f"${PASSWORD_ENV} or [mail] password_file")

        def get(key, kind, default):
            v = mail.get(key, default)
            if v is None:
                return None
            if kind is float and isinstance(v, int) and not isinstance(v, bool):
                v = float(v)
            if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
                raise ConfigError(f"{where}: {key} must be a {kind.__name__}")
            return v

        def addr_list(key, default=()):
            v = mail.get(key, list(default))
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise ConfigError(f"{where}: {key} must be a list of strings")
            return tuple(x.strip().lower() for x in v if x.strip())

        sender = get("from", str, None)
        placeholder_from = False
        if not sender and placeholder:
            sender, placeholder_from = PLACEHOLDER_FROM, True
        if not sender:
            raise ConfigError(f"{where}: 'from' is not set (e.g. from = \"regtriage <regtriage@example.org>\")")
        name, addr = parseaddr(clean_text(sender))
        if not valid_address(addr):
            raise ConfigError(f"{where}: 'from' is not a usable address: {clean_text(sender)!r}")
        domain = get("msgid_domain", str, None) or addr.rsplit("@", 1)[1]
        if not _DOMAIN.fullmatch(domain):
            raise ConfigError(f"{where}: msgid_domain is not a domain name: {domain!r}")
        envelope = get("envelope_from", str, None) or addr
        if not valid_address(envelope):
            raise ConfigError(f"{where}: envelope_from is not a usable address")
        use_ssl = get("ssl", bool, False)
        starttls = get("starttls", bool, not use_ssl)
        port = get("smtp_port", int, 465 if use_ssl else (587 if starttls else 25))
        auth = (get("auth", str, "auto") or "auto").lower()
        if auth not in ("auto", "plain", "login"):
            raise ConfigError(f"{where}: auth must be auto, plain or login")
        base_url = web.get("base_url")
        if base_url is not None and (not isinstance(base_url, str) or not re.match(r"https?://\S+$", base_url)):
            raise ConfigError("[web] base_url must be an http(s) URL")
        outbox = get("outbox", str, None)
        user = os.environ.get(USER_ENV) or get("user", str, None)
        for key in ("thread_limit", "hourly_limit", "max_recipients"):
            if get(key, int, 1) < 0:
                raise ConfigError(f"{where}: {key} must not be negative")
        reply_to = get("reply_to", str, "author+list")
        if reply_to not in ("author+list", "all"):
            raise ConfigError(f'{where}: reply_to must be "author+list" or "all"')
        return cls(
            from_name=clean_text(name) or "regtriage", from_addr=addr.lower(), msgid_domain=domain.lower(),
            envelope_from=envelope.lower(),
            outbox=Path(outbox).expanduser() if outbox else Path(config.home) / "outbox",
            base_url=base_url.rstrip("/") if base_url else None,
            smtp_host=get("smtp_host", str, "localhost"), smtp_port=port, starttls=starttls, ssl=use_ssl,
            ca_file=get("ca_file", str, None), timeout=get("timeout", float, 30.0), helo=get("helo", str, None),
            user=user, password_file=get("password_file", str, None), auth=auth,
            allowed_lists=addr_list("allowed_lists"), lists=addr_list("lists"),
            list_domains=addr_list("list_domains", DEFAULT_LIST_DOMAINS), never_cc=addr_list("never_cc"),
            bot_addresses=addr_list("bot_addresses"),
            thread_limit=get("thread_limit", int, 1), thread_window_hours=get("thread_window_hours", float, 24.0),
            hourly_limit=get("hourly_limit", int, 10), max_recipients=get("max_recipients", int, 30),
            reply_to=reply_to, placeholder_from=placeholder_from)

    @property
    def own_addresses(self) -> set[str]:
        return {self.from_addr, self.envelope_from, *self.bot_addresses}


def smtp_password(settings: MailSettings) -> str | None:
    """The SMTP password: ``$REGTRIAGE_SMTP_PASSWORD``, else ``[mail] password_file`` (first
    line).  Never anything else; never logged."""
    env = os.environ.get(PASSWORD_ENV)
    if env:
        return env
    if not settings.password_file:
        return None
    path = Path(settings.password_file).expanduser()
    try:
        st = path.stat()
        if st.st_mode & stat.S_IROTH:
            raise ConfigError(f"[mail] password_file {path} is readable by everyone; chmod o-r it")
        with open(path, encoding="utf-8") as fh:
            line = fh.readline()
    except OSError as exc:
        raise ConfigError(f"[mail] password_file: cannot read {path}: {exc.strerror}") from None
    return line.rstrip("\r\n") or None


# -- the answered message ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Answered:
    """Headers of the message a reply answers (as written: RFC 2047 words still encoded)."""

    message_id: str
    subject: str
    from_: tuple[str, ...] = ()
    to: tuple[str, ...] = ()
    cc: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    list_post: tuple[str, ...] = ()
    auto_submitted: str | None = None
    regtriage_record: str | None = None

    @property
    def synthetic(self) -> bool:
        return self.message_id.endswith(SYNTHETIC_SUFFIX)


def answered_from_stored(msg: dict[str, Any]) -> Answered:
    """An :class:`Answered` from a stored message (``Store.get_message``)."""
    heads: dict[str, list[str]] = {}
    for name, value in msg.get("headers") or []:
        heads.setdefault(str(name).lower(), []).append(str(value))
    return Answered(message_id=msg["message_id"], subject=msg.get("subject") or "",
                    from_=tuple(heads.get("from", [])), to=tuple(heads.get("to", [])), cc=tuple(heads.get("cc", [])),
                    references=tuple(msg.get("refs") or []), list_post=tuple(heads.get("list-post", [])),
                    auto_submitted=(heads.get("auto-submitted") or [None])[0],
                    regtriage_record=(heads.get("x-regtriage-record") or [None])[0])


# -- composing --------------------------------------------------------------------------------------
def valid_address(addr: str | None) -> bool:
    return bool(addr) and len(addr) <= 254 and bool(_ADDR.fullmatch(addr)) and ".." not in addr


def valid_msgid(mid: str | None) -> bool:
    return bool(mid) and bool(_MSGID.fullmatch(mid)) and not mid.endswith(SYNTHETIC_SUFFIX)


def reply_subject(subject: str | None) -> str:
    """``Re: <subject>`` with any leading reply prefixes folded into one."""
    s = clean_text(subject)[:MAX_SUBJECT]
    rest = REPLY_PREFIX.sub("", s).strip()
    return f"Re: {rest or '(no subject)'}"


def _decode_words(text: str) -> str:
    if "=?" not in text:
        return text
    try:
        return str(make_header(decode_header(text)))
    except Exception:  # noqa: BLE001 - malformed encoded words: keep as written
        return text


def parse_addresses(headers: Iterable[str]) -> list[tuple[str, str]]:
    """(display name, address) pairs from address header values as written, parsed by the
    stdlib's RFC 5322 parser (``email.utils.getaddresses`` of Python < 3.11.10 misreads
    encoded words and quotes).  Display names are decoded and cleaned (one line, no control
    characters); an unparseable entry yields its address part for the caller to reject."""
    from email._header_value_parser import get_address_list

    out = []
    for h in headers:
        value = clean_text(str(h or ""))[:8000]  # unfolded; no CR/LF reaches the parser
        if not value:
            continue
        try:
            mailboxes = get_address_list(value)[0].all_mailboxes
            pairs = [(mb.display_name or "", mb.addr_spec or "") if mb.token_type == "mailbox"
                     else ("", f"invalid:{str(mb).strip()}") for mb in mailboxes]
        except Exception:  # noqa: BLE001 - the parser failed: keep only what looks like plain addresses
            pairs = [(_decode_words(n), a) for n, a in getaddresses([value])]
        out.extend((clean_text(n)[:200], clean_text(a)[:300]) for n, a in pairs)
    return out


def _domain_matches(domain: str, pattern: str) -> bool:
    if pattern.endswith(".*"):  # "lists.*": any domain starting with "lists."
        return domain.startswith(pattern[:-1])
    return domain == pattern or domain.endswith("." + pattern)


def list_post_addresses(values: Iterable[str]) -> set[str]:
    out = set()
    for v in values:
        for m in re.finditer(r"<mailto:([^>?]+)", v, re.I):
            out.add(m.group(1).strip().lower())
    return out


def is_list(addr: str, settings: MailSettings, extra_lists: Iterable[str] = ()) -> bool:
    a = addr.lower()
    if a in settings.allowed_lists or a in settings.lists or a in set(extra_lists):
        return True
    domain = a.rsplit("@", 1)[-1]
    return any(_domain_matches(domain, p) for p in settings.list_domains)


@dataclass
class Composed:
    msg: EmailMessage
    to: list[tuple[str, str]]
    cc: list[tuple[str, str]]
    dropped: list[dict[str, str]] = field(default_factory=list)  # {"address", "reason"}
    notes: list[str] = field(default_factory=list)
    event_kind: str = ""
    event_key: str = ""
    facts_hash: str = ""
    in_reply_to: str | None = None

    @property
    def message_id(self) -> str:
        return str(self.msg["Message-ID"]).strip("<> ")

    @property
    def recipients(self) -> list[str]:
        return [a for _, a in self.to + self.cc]

    def recipients_json(self) -> dict[str, Any]:
        return {"to": [a for _, a in self.to], "cc": [a for _, a in self.cc], "dropped": self.dropped}


def recipients(answered: Answered, settings: MailSettings,
               report_authors: Iterable[str] = ()) -> tuple[list, list, list]:
    """(to, cc, dropped).  From -> To; of its To + Cc, with ``[mail] reply_to = "author+list"``
    (the default) only the mailing lists -> Cc (the other addresses came from mail anyone can
    forge; the report's author, ``report_authors``, stays), with ``"all"`` every address -> Cc.  Deduplicated case-insensitively; the bot and
    ``never_cc`` removed; lists not allow-listed dropped."""
    own, never = settings.own_addresses, set(settings.never_cc)
    extra_lists = list_post_addresses(answered.list_post)
    seen: set[str] = set()
    dropped: list[dict[str, str]] = []

    def take(pairs):
        kept = []
        for name, addr in pairs:
            low = addr.lower()
            if not addr or low in seen:
                continue
            seen.add(low)
            if not valid_address(addr):
                dropped.append({"address": addr[:254], "reason": "not a plain ASCII address"})
            elif low in own:
                continue  # the bot itself: not worth a note
            elif low in never:
                dropped.append({"address": low, "reason": "on [mail] never_cc"})
            elif is_list(low, settings, extra_lists) and low not in settings.allowed_lists:
                dropped.append({"address": low, "reason": "mailing list not on [mail] allowed_lists"})
            else:
                kept.append((name, low))
        return kept

    to = take(parse_addresses(answered.from_))
    others = parse_addresses(answered.to + answered.cc)
    if settings.reply_to != "all":
        kept_others = []
        authors = {a.lower() for _, a in parse_addresses(report_authors)}
        for name, addr in others:
            low = addr.lower()
            if (low in seen or low in own or low in authors or not valid_address(addr)
                    or is_list(low, settings, extra_lists)):
                kept_others.append((name, addr))
            else:
                seen.add(low)
                dropped.append({"address": low, "reason": 'not the author nor a list ([mail] reply_to = "author+list")'})
        others = kept_others
    cc = take(others)
    if not to and cc:
        to = [cc.pop(0)]
    return to, cc, dropped


def facts_of(e: dict[str, Any]) -> dict[str, Any]:
    """What a reply states: a change here is a new event."""
    return {"title": e.get("title"), "status": e.get("status"), "kind": e.get("kind"),
            "subsystem": e.get("subsystem"), "culprit": (e.get("culprit") or {}).get("commit"),
            "good": (e.get("range") or {}).get("good"), "bad": (e.get("range") or {}).get("bad"),
            "metric": e.get("metric"), "change_percent": e.get("change_percent"),
            "duplicate_of": e.get("duplicate_of"), "fix": (e.get("fix") or {}).get("commit"),
            **({"rerun": e["reruns"][-1].get("id")} if e.get("reruns") else {})}  # a new rerun: a new reply


def event_of(e: dict[str, Any], kind: str | None = None) -> tuple[str, str, str]:
    """(event kind, facts hash, event key) of an entry."""
    kind = kind or e["status"]
    if kind not in EVENT_KINDS:
        raise ReplyError(f"unknown event kind {kind!r} (one of: {', '.join(EVENT_KINDS)})")
    blob = json.dumps(facts_of(e), sort_keys=True, ensure_ascii=False, default=str)
    digest = hashlib.sha256(blob.encode()).hexdigest()
    return kind, digest, f"{e['id']}:{kind}:{digest[:16]}"


def regzbot_lines(e: dict[str, Any], report_subject: str | None, *, answers_report: bool) -> list[str]:
    """``#regzbot ^introduced: <culprit or good..bad>`` (the form the kernel's regression
    tracker uses when replying to the report itself) or, answering another message,
    ``#regzbot introduced: <spec> <report URL>``; and, when the record's title is not the
    report's subject, ``#regzbot title: <title>``."""
    lines = []
    commit = (e.get("culprit") or {}).get("commit") or ""
    good, bad = (e.get("range") or {}).get("good"), (e.get("range") or {}).get("bad")
    spec = None
    if _HEX.fullmatch(commit):
        spec = commit
    elif good and bad and _REF.fullmatch(good) and _REF.fullmatch(bad):
        spec = f"{good}..{bad}"
    elif bad and _REF.fullmatch(bad):
        spec = bad
    report_url = (e.get("report") or {}).get("url")
    if spec and answers_report:
        lines.append(f"#regzbot ^introduced: {spec}")
    elif spec and report_url and re.match(r"https?://\S+$", report_url):
        lines.append(f"#regzbot introduced: {spec} {report_url}")
    title = clean_text(e.get("title"))
    if title and title != "(no subject)" and title != clean_title(report_subject):
        lines.append(f"#regzbot title: {title}")
    return lines


def _mail_entry(e: dict[str, Any]) -> dict[str, Any]:
    """The entry as the mail shows it: commit links with 12-digit ids (kernel style, and the
    link fits in 72 columns)."""
    out = dict(e)
    c = e.get("culprit")
    if c and c.get("commit") and len(c["commit"]) > 12:
        out["culprit"] = {**c, "url": culprit_url(c["commit"][:12])}
    f = e.get("fix")
    if f and f.get("commit") and len(f["commit"]) > 12:
        out["fix"] = {**f, "url": culprit_url(f["commit"][:12])}
    return out


def _dedent_long(text: str, width: int = WIDTH) -> str:
    """A lone token longer than ``width`` (a URL) goes unindented on its own line."""
    return "\n".join(w.strip() if len(w) > width and " " not in w.strip() else w for w in text.split("\n"))


def wrap_paragraphs(text: str, width: int = WIDTH) -> str:
    """Prose: each paragraph (blank-line separated) re-flowed at ``width``, words never broken."""
    import textwrap

    paras = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text.strip("\n"))]
    out = [textwrap.fill(p, width=width, break_long_words=False, break_on_hyphens=False) for p in paras if p]
    return _dedent_long("\n\n".join(out)) + "\n"


def wrap_entry(text: str, width: int = WIDTH) -> str:
    """The tracker entry: :func:`bot.tracker_entry.wrap_text` (hanging indents)."""
    return _dedent_long(wrap_text(text, width))


@lru_cache(maxsize=1)
def _reply_env():
    """The plain-text environment of bot.tracker_entry (values cleaned of line breaks and
    control characters, same filters), plus ``para`` and ``entry`` wrapping filters."""
    from bot.tracker_entry import _env

    env = _env("txt").overlay()
    env.filters = dict(env.filters)
    env.filters["para"] = wrap_paragraphs
    env.filters["entry"] = wrap_entry
    return env


def render_body(e: dict[str, Any], *, event_kind: str, link: str | None, regzbot: list[str],
                answers_report: bool, base_url: str | None = None) -> str:
    tpl = _reply_env().get_template("reply.txt.j2")
    text = tpl.render(e=_mail_entry(e), event=event_kind, link=link, regzbot=regzbot,
                      answers_report=answers_report, width=WIDTH, base_url=base_url)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n") + "\n"


class _IdListHeader(UnstructuredHeader):
    """In-Reply-To/References: folded between ids only, never RFC 2047-encoded (the stdlib
    would encode a Message-ID longer than a line, breaking threading).  Values are ASCII
    without line breaks (checked before they are set)."""

    def fold(self, *, policy):
        lines, cur = [], f"{self.name}:"
        for tok in str(self).split():
            if len(cur) + 1 + len(tok) > policy.max_line_length and cur != f"{self.name}:":
                lines.append(cur)
                cur = ""
            cur += " " + tok
        lines.append(cur)
        return policy.linesep.join(lines) + policy.linesep


class _SubjectHeader(UnstructuredHeader):
    """Subject: plain ASCII is folded between words with the text starting on the header
    line (the stdlib may move all of it to a continuation line, which readers show with a
    leading blank); anything else (non-ASCII, a literal "=?") is left to the stdlib."""

    def fold(self, *, policy):
        text = str(self)
        if not text.isascii() or "=?" in text:
            return super().fold(policy=policy)
        return _IdListHeader.fold(self, policy=policy)


def _policy():
    reg = HeaderRegistry()
    reg.map_to_type("in-reply-to", _IdListHeader)
    reg.map_to_type("references", _IdListHeader)
    reg.map_to_type("subject", _SubjectHeader)
    return email_policy.SMTP.clone(header_factory=reg)


MAIL_POLICY = _policy()


def new_msgid(rid: int, domain: str, now: datetime | None = None) -> str:
    """``<regtriage.<record>.<UTC time>.<random>@<bot domain>>``."""
    now = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return f"<regtriage.{rid}.{now:%Y%m%d%H%M%S}.{secrets.token_hex(6)}@{domain}>"


def _references(answered: Answered) -> list[str]:
    ids = [r for r in dict.fromkeys(answered.references) if valid_msgid(r) and r != answered.message_id]
    if valid_msgid(answered.message_id):
        ids.append(answered.message_id)
    if len(ids) > MAX_REFERENCES:  # the root, then the newest
        ids = ids[:1] + ids[-(MAX_REFERENCES - 1):]
    return ids


def compose(e: dict[str, Any], answered: Answered, settings: MailSettings, *, event_kind: str | None = None,
            report_subject: str | None = None, answers_report: bool = True, now: datetime | None = None,
            message_id: str | None = None, report_authors: Iterable[str] = ()) -> Composed:
    """The reply (pure: no I/O).  ``e``: the tracker entry; ``answered``: the message replied
    to; ``report_subject``: the report's subject (for ``#regzbot title``; default the
    answered subject); ``report_authors``: the report's From (kept when another message is answered)."""
    kind, digest, key = event_of(e, event_kind)
    to, cc, dropped = recipients(answered, settings, report_authors)
    notes = [f"dropped {d['address']}: {d['reason']}" for d in dropped]
    link = f"{settings.base_url}/regressions/{int(e['id'])}" if settings.base_url else None
    if link is None:
        notes.append("no [web] base_url configured: the reply has no link to the record")
    rz = regzbot_lines(e, report_subject if report_subject is not None else answered.subject,
                       answers_report=answers_report)
    if not any(x.startswith(("#regzbot introduced:", "#regzbot ^introduced:")) for x in rz):
        notes.append("no culprit or version range known: no '#regzbot introduced:' line")
    body = render_body(e, event_kind=kind, link=link, regzbot=rz, answers_report=answers_report,
                       base_url=settings.base_url)

    msg = EmailMessage(policy=MAIL_POLICY)
    msg["From"] = Address(display_name=settings.from_name, addr_spec=settings.from_addr)
    if to:
        msg["To"] = [Address(display_name=n, addr_spec=a) for n, a in to]
    if cc:
        msg["Cc"] = [Address(display_name=n, addr_spec=a) for n, a in cc]
    msg["Subject"] = reply_subject(answered.subject)
    msg["Date"] = format_datetime((now or datetime.now(timezone.utc)).astimezone(timezone.utc))
    msg["Message-ID"] = (f"<{message_id.strip('<>')}>" if message_id
                         else new_msgid(int(e["id"]), settings.msgid_domain, now))
    in_reply_to = answered.message_id if valid_msgid(answered.message_id) else None
    if in_reply_to:
        msg["In-Reply-To"] = f"<{in_reply_to}>"
    else:
        notes.append("the answered message has no usable Message-ID: no In-Reply-To")
    refs = _references(answered)
    if refs:
        msg["References"] = " ".join(f"<{r}>" for r in refs)
    too_long = any(len(line.encode()) > SMTP_LINE - 2 for line in body.split("\n"))
    msg.set_content(body, subtype="plain", charset="utf-8", cte="quoted-printable" if too_long else "8bit")
    msg["Auto-Submitted"] = "auto-generated"
    msg["X-Regtriage-Record"] = str(int(e["id"]))
    return Composed(msg=msg, to=to, cc=cc, dropped=dropped, notes=notes, event_kind=kind, event_key=key,
                    facts_hash=digest, in_reply_to=in_reply_to)


def check_recipients(c: Composed, settings: MailSettings) -> str | None:
    """Why ``--send`` must refuse this reply, or None."""
    if not c.recipients:
        return "no recipients left"
    if not settings.allowed_lists:
        return "[mail] allowed_lists is empty: the bot may not post to any list"
    if not any(a in settings.allowed_lists for a in c.recipients):
        return "none of the recipients is on [mail] allowed_lists"
    if settings.max_recipients and len(c.recipients) > settings.max_recipients:
        return f"{len(c.recipients)} recipients, more than [mail] max_recipients = {settings.max_recipients}"
    return None


def message_bytes(msg: EmailMessage, linesep: str = "\n") -> bytes:
    return msg.as_bytes(policy=msg.policy.clone(linesep=linesep))


# -- outbox -----------------------------------------------------------------------------------------
def write_outbox(msg: EmailMessage, outbox: Path) -> Path:
    """Store the message in the ``outbox`` maildir (``new/``); returns the file's path."""
    Path(outbox).parent.mkdir(parents=True, exist_ok=True)
    md = mailbox.Maildir(str(outbox), create=True)
    key = md.add(message_bytes(msg))
    path = Path(outbox) / "new" / key
    if not path.is_file():  # pragma: no cover - mailbox always delivers to new/ for plain bytes
        raise ReplyError(f"outbox: {path} missing after delivery")
    return path


# -- sending ----------------------------------------------------------------------------------------
def _secret_forms(user: str | None, password: str | None) -> list[str]:
    if not password:
        return []
    forms = [password, base64.b64encode(password.encode()).decode()]
    if user:
        forms.append(base64.b64encode(f"{user}\0{user}\0{password}".encode()).decode())
        forms.append(base64.b64encode(f"\0{user}\0{password}".encode()).decode())
    return [f for f in forms if f]


def scrub(text: str, hidden: Iterable[str]) -> str:
    for s in sorted(hidden, key=len, reverse=True):
        text = text.replace(s, "***")
    return text


def _describe(exc: BaseException) -> str:
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        parts = [f"{a}: {c} {m.decode('utf-8', 'replace') if isinstance(m, bytes) else m}"
                 for a, (c, m) in list(exc.recipients.items())[:5]]
        return "all recipients refused: " + "; ".join(parts)
    if isinstance(exc, smtplib.SMTPResponseException):
        text = exc.smtp_error.decode("utf-8", "replace") if isinstance(exc.smtp_error, bytes) else str(exc.smtp_error)
        return f"{exc.__class__.__name__}: {exc.smtp_code} {text}"
    return f"{exc.__class__.__name__}: {exc}"


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _qp_copy(msg: EmailMessage) -> EmailMessage:
    """The same message with a quoted-printable body (for servers without 8BITMIME)."""
    out = EmailMessage(policy=msg.policy)
    for k, v in msg.items():
        if k.lower() not in ("content-type", "content-transfer-encoding", "mime-version"):
            out[k] = v
    out.set_content(msg.get_content(), subtype="plain", charset="utf-8", cte="quoted-printable")
    return out


def preflight(settings: MailSettings, password: str | None) -> str | None:
    """Why the SMTP settings must not be used, or None (checked before anything is sent)."""
    if settings.user and not password:
        return f"[mail] user is set but there is no password (${PASSWORD_ENV} or [mail] password_file)"
    if password and not settings.user:
        return f"an SMTP password is set but no user ([mail] user or ${USER_ENV})"
    if settings.user and not (settings.ssl or settings.starttls) and not _loopback(settings.smtp_host):
        return "refusing to send the SMTP password without TLS: set [mail] starttls = true or ssl = true"
    return None


def send_message(msg: EmailMessage, rcpts: list[str], settings: MailSettings, *,
                 password: str | None = None) -> dict[str, str]:
    """Send over SMTP; returns the recipients the server refused (others were accepted).
    Raises :class:`SendError` with a message free of secrets."""
    reason = preflight(settings, password)
    if reason:
        raise SendError(reason)
    hidden = _secret_forms(settings.user, password)
    helo = settings.helo or settings.msgid_domain
    try:
        ctx = ssl.create_default_context(cafile=settings.ca_file) if (settings.ssl or settings.starttls) else None
        if settings.ssl:
            conn = smtplib.SMTP_SSL(settings.smtp_host, settings.smtp_port, local_hostname=helo,
                                    timeout=settings.timeout, context=ctx)
        else:
            conn = smtplib.SMTP(settings.smtp_host, settings.smtp_port, local_hostname=helo, timeout=settings.timeout)
        with conn:
            conn.ehlo()
            if settings.starttls and not settings.ssl:
                if not conn.has_extn("starttls"):
                    raise SendError("the server does not offer STARTTLS ([mail] starttls = true)")
                conn.starttls(context=ctx)
                conn.ehlo()
            if settings.user:
                try:
                    if settings.auth == "auto":
                        conn.login(settings.user, password)
                    else:
                        conn.user, conn.password = settings.user, password
                        method = conn.auth_plain if settings.auth == "plain" else conn.auth_login
                        conn.auth(settings.auth.upper(), method)
                finally:
                    conn.password = None
            options = []
            body_8bit = msg.get("Content-Transfer-Encoding", "").lower() == "8bit" and not msg.get_content().isascii()
            if body_8bit:
                if conn.has_extn("8bitmime"):
                    options.append("BODY=8BITMIME")
                else:
                    msg = _qp_copy(msg)
            refused = conn.sendmail(settings.envelope_from, rcpts, message_bytes(msg, "\r\n"), mail_options=options)
    except SendError:
        raise
    except (smtplib.SMTPException, OSError, ssl.SSLError, ValueError) as exc:
        raise SendError(scrub(_describe(exc), hidden)[:500]) from None
    return {a: scrub(_describe(smtplib.SMTPResponseException(c, m)), hidden) for a, (c, m) in (refused or {}).items()}


# -- database ---------------------------------------------------------------------------------------
def _rs():
    import storage.reply_schema as rs

    return rs


def _aware(dt):
    if dt is not None and dt.tzinfo is None:
        return dt.replace(tzinfo=timezone.utc)
    return dt


def _row(r) -> dict[str, Any]:
    d = dict(r)
    d["created_at"], d["sent_at"] = _aware(d["created_at"]), _aware(d["sent_at"])
    return d


def previous(store, event_key: str) -> tuple[dict | None, dict | None]:
    """(the sent/sending row, the newest draft) of an event."""
    from sqlalchemy import select

    t = _rs().replies
    with store.engine.connect() as conn:
        sent = conn.execute(select(t).where(t.c.sent_key == event_key)).mappings().first()
        draft = conn.execute(select(t).where(t.c.event_key == event_key, t.c.status == "draft")
                             .order_by(t.c.id.desc()).limit(1)).mappings().first()
    return (_row(sent) if sent else None), (_row(draft) if draft else None)


def list_replies(store, rid: int | None = None, limit: int = 50) -> list[dict[str, Any]]:
    from sqlalchemy import select

    t = _rs().replies
    q = select(t).order_by(t.c.id.desc()).limit(limit)
    if rid is not None:
        q = q.where(t.c.regression_id == rid)
    with store.engine.connect() as conn:
        return [_row(r) for r in conn.execute(q).mappings()]


def _values(rid: int, c: Composed | None, *, status: str, mode: str, reason: str | None, thread_key: str | None,
            now: datetime, event: tuple[str, str, str] | None = None, **extra) -> dict[str, Any]:
    kind, digest, key = (c.event_kind, c.facts_hash, c.event_key) if c else event
    return {"regression_id": rid, "event_key": key, "event_kind": kind, "facts_hash": digest, "status": status,
            "mode": mode, "reason": reason[:2000] if reason else None,
            "message_id": c.message_id if c else None, "in_reply_to": c.in_reply_to if c else None,
            "thread_key": thread_key, "recipients": c.recipients_json() if c else {}, "created_at": now, **extra}


def record(store, values: dict[str, Any]) -> int:
    from sqlalchemy import insert

    with store.engine.begin() as conn:
        return conn.execute(insert(_rs().replies).values(**values)).inserted_primary_key[0]


def claim_send(store, values: dict[str, Any], settings: MailSettings, now: datetime) -> tuple[int | None, str | None]:
    """Insert the ``sending`` row (its ``sent_key`` unique: a concurrent or earlier send of the
    same event loses) and apply the rate limits in the same transaction.  Returns (row id,
    None) to go ahead, (None, "duplicate") when the event is taken, or (row id, reason) when a
    rate limit refused it (the row then says ``refused``)."""
    from sqlalchemy import func, insert, select, text, update
    from sqlalchemy.exc import IntegrityError

    t = _rs().replies
    try:
        with store.engine.begin() as conn:
            if conn.dialect.name == "postgresql":  # serialise the counting; SQLite: the insert's write lock
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": 7_482_520})
            row_id = conn.execute(insert(t).values(**{**values, "status": "sending",
                                                      "sent_key": values["event_key"]})).inserted_primary_key[0]
            active = t.c.status.in_(("sending", "sent"))
            reason = None
            if values.get("thread_key"):
                since = now - timedelta(hours=settings.thread_window_hours)
                n = conn.execute(select(func.count()).select_from(t).where(
                    active, t.c.thread_key == values["thread_key"], t.c.created_at > since, t.c.id != row_id)).scalar()
                if n >= settings.thread_limit:
                    reason = (f"rate limit: {n} repl{'y' if n == 1 else 'ies'} to this thread in the last "
                              f"{settings.thread_window_hours:g} h ([mail] thread_limit = {settings.thread_limit})")
            if reason is None:
                n = conn.execute(select(func.count()).select_from(t).where(
                    active, t.c.created_at > now - timedelta(hours=1), t.c.id != row_id)).scalar()
                if n >= settings.hourly_limit:
                    reason = (f"rate limit: {n} repl{'y' if n == 1 else 'ies'} sent in the last hour "
                              f"([mail] hourly_limit = {settings.hourly_limit})")
            if reason:
                conn.execute(update(t).where(t.c.id == row_id).values(status="refused", sent_key=None, reason=reason))
            return row_id, reason
    except IntegrityError:
        return None, "duplicate"


def finish_send(store, row_id: int, *, ok: bool, reason: str | None, now: datetime) -> None:
    from sqlalchemy import update

    t = _rs().replies
    vals = {"status": "sent", "sent_at": now} if ok else {"status": "failed", "sent_key": None}
    with store.engine.begin() as conn:
        conn.execute(update(t).where(t.c.id == row_id).values(reason=reason[:2000] if reason else None, **vals))


# -- choosing the answered message ------------------------------------------------------------------
def _thread_root(store, mid: str | None) -> str | None:
    if not mid:
        return None
    from sqlalchemy import select

    from storage import schema

    t = schema.thread_nodes
    with store.engine.connect() as conn:
        return conn.execute(select(t.c.root_id).where(t.c.message_id == mid)).scalar()


def _is_own(msg: dict[str, Any], settings: MailSettings) -> bool:
    a = answered_from_stored(msg)
    if a.regtriage_record is not None:
        return True
    if a.auto_submitted and a.auto_submitted.strip().lower() != "no":
        return True
    return any(addr.lower() in settings.own_addresses for _, addr in parse_addresses(a.from_))


def choose_answered(store, e: dict[str, Any], answer: str, settings: MailSettings) -> tuple[dict, bool]:
    """The stored message to answer and whether it is the report: ``report``, ``latest`` (the
    newest message of the report's thread not written by the bot) or a Message-ID in the
    report's thread or related to the record."""
    from sqlalchemy import select

    from bot.mail import normalize_msgid
    from storage import schema

    report = (e.get("report") or {}).get("message_id")
    if answer == "report":
        msg = store.get_message(report) if report else None
        if msg is None:
            raise ReplyError(f"the report of #{e['id']} is not a stored message; answer a message of its "
                             "thread with --answer MSGID")
        if _is_own(msg, settings):
            raise ReplyError("the report was written by the bot itself; not answering it")
        return msg, True
    root = _thread_root(store, report)
    if answer == "latest":
        if root is None:
            raise ReplyError(f"no stored thread for #{e['id']}")
        m, t = schema.messages, schema.thread_nodes
        with store.engine.connect() as conn:
            ids = conn.execute(select(m.c.message_id).select_from(m.join(t, t.c.message_id == m.c.message_id))
                               .where(t.c.root_id == root).order_by(m.c.date.desc().nulls_last(), m.c.id.desc())
                               .limit(200)).scalars().all()
        for mid in ids:
            msg = store.get_message(mid)
            if msg is not None and not _is_own(msg, settings):
                return msg, mid == report
        raise ReplyError(f"no message in the thread of #{e['id']} to answer")
    mid = normalize_msgid(answer) or answer.strip("<> ")
    related = {r.get("message_id") for r in e.get("related") or []} | {report}
    if mid not in related and (root is None or _thread_root(store, mid) != root):
        raise ReplyError(f"<{clean_text(mid)}> is not in the thread of #{e['id']} nor related to it")
    msg = store.get_message(mid)
    if msg is None:
        raise ReplyError(f"<{clean_text(mid)}> is not a stored message")
    if _is_own(msg, settings):
        raise ReplyError("that message was written by the bot itself; not answering it")
    return msg, mid == report


# -- the command ------------------------------------------------------------------------------------
@dataclass
class Outcome:
    status: str  # drafted | printed | sent | already-sent | already-drafted | refused | failed
    record: int
    event_key: str
    event_kind: str
    message: str  # one line for humans
    path: str | None = None
    message_id: str | None = None
    text: str | None = None  # the message (--stdout)
    to: list[str] = field(default_factory=list)
    cc: list[str] = field(default_factory=list)
    dropped: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.status not in ("refused", "failed")

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "text"}


def run_reply(store, config, rid: int, *, mode: str = "dry-run", force: bool = False, event: str | None = None,
              answer: str = "report", now: datetime | None = None) -> Outcome:
    """``regtriage reply``: ``mode`` is ``dry-run`` (outbox), ``stdout`` (print only, nothing
    recorded) or ``send``.  ``force`` re-does a dry run of an event already drafted or sent;
    it never sends twice."""
    from bot.tracker_entry import entry

    if mode not in ("dry-run", "stdout", "send"):
        raise ValueError(mode)
    if force and mode == "send":
        raise ReplyError("--force only re-does a dry run: a reply is never sent twice")
    settings = MailSettings.from_config(config, placeholder=mode == "stdout")
    now = now or datetime.now(timezone.utc)
    e = entry(store, rid)
    if e is None:
        raise ReplyError(f"no regression record {rid}")
    kind, digest, key = event_of(e, event)
    base = {"record": rid, "event_key": key, "event_kind": kind}
    sent, draft = previous(store, key)
    if sent is not None and not (force and mode != "send"):
        when = sent["sent_at"] or sent["created_at"]
        state = "was sent" if sent["status"] == "sent" else "is being sent (or its outcome is unknown)"
        return Outcome("already-sent", message=f"the reply to #{rid} for event {kind} {state}: <{sent['message_id']}> "
                       f"on {when:%Y-%m-%d %H:%M} UTC; nothing to do", message_id=sent["message_id"], **base)
    if draft is not None and mode == "dry-run" and not force:
        return Outcome("already-drafted", message=f"the reply to #{rid} for event {kind} is already drafted: "
                       f"{draft['outbox_path']} (--force writes a new draft)", path=draft["outbox_path"],
                       message_id=draft["message_id"], **base)

    try:
        msg, is_report = choose_answered(store, e, answer, settings)
    except ReplyError as exc:
        if mode == "send":  # a refusal to send is recorded, with its reason
            record(store, _values(rid, None, status="refused", mode="send", reason=str(exc), thread_key=None,
                                  now=now, event=(kind, digest, key)))
        raise
    report = store.get_message(e["report"]["message_id"]) if e["report"].get("message_id") else None
    answered = answered_from_stored(msg)
    c = compose(e, answered, settings, event_kind=kind, report_subject=(report or msg).get("subject"),
                answers_report=is_report, now=now,
                report_authors=answered_from_stored(report).from_ if report is not None else ())
    thread_key = _thread_root(store, answered.message_id) or answered.message_id
    info = {"message_id": c.message_id, "to": [a for _, a in c.to], "cc": [a for _, a in c.cc],
            "dropped": c.dropped, "notes": list(c.notes)}
    policy_reason = check_recipients(c, settings)

    if mode == "stdout":
        if settings.placeholder_from:
            info["notes"].insert(0, f"[mail] from is not set: the sender shown is a placeholder, {PLACEHOLDER_FROM} "
                                    "(set [mail] from before drafting or sending)")
        if policy_reason:
            info["notes"].append(f"--send would refuse: {policy_reason}")
        return Outcome("printed", message=f"reply to #{rid} for event {kind}", text=message_bytes(c.msg).decode(
            "utf-8", "replace"), **base, **info)
    if mode == "dry-run":
        if policy_reason:
            info["notes"].append(f"--send would refuse: {policy_reason}")
        path = write_outbox(c.msg, settings.outbox)
        record(store, _values(rid, c, status="draft", mode="dry-run", reason="; ".join(info["notes"]) or None,
                              thread_key=thread_key, now=now, outbox_path=str(path)))
        return Outcome("drafted", message=f"reply to #{rid} for event {kind} drafted: {path}", path=str(path),
                       **base, **info)

    # --send
    if policy_reason:
        record(store, _values(rid, c, status="refused", mode="send", reason=policy_reason, thread_key=thread_key,
                              now=now))
        log.info("reply to #%s refused: %s", rid, policy_reason)
        return Outcome("refused", message=f"not sent: {policy_reason}", reason=policy_reason, **base, **info)
    try:
        password = smtp_password(settings)
        reason = preflight(settings, password)
    except ConfigError as exc:
        password, reason = None, str(exc)
    if reason:
        record(store, _values(rid, c, status="refused", mode="send", reason=reason, thread_key=thread_key, now=now))
        return Outcome("refused", message=f"not sent: {reason}", reason=reason, **base, **info)
    row_id, reason = claim_send(store, _values(rid, c, status="sending", mode="send",
                                               reason="; ".join(c.notes) or None, thread_key=thread_key, now=now),
                                settings, now)
    if row_id is None:
        sent, _ = previous(store, key)
        return Outcome("already-sent", message=f"the reply to #{rid} for event {kind} was already sent"
                       + (f": <{sent['message_id']}>" if sent else ""), **base)
    if reason:
        log.info("reply to #%s refused: %s", rid, reason)
        return Outcome("refused", message=f"not sent: {reason}", reason=reason, **base, **info)
    try:
        refused = send_message(c.msg, c.recipients, settings, password=password)
    except SendError as exc:
        reason = str(exc)
        finish_send(store, row_id, ok=False, reason=reason, now=datetime.now(timezone.utc))
        log.warning("reply to #%s failed: %s", rid, reason)
        return Outcome("failed", message=f"send failed: {reason}", reason=reason, **base, **info)
    finally:
        password = None  # noqa: F841 - drop the reference early
    partial = "; ".join(f"{a} refused ({m})" for a, m in refused.items()) or None
    notes = "; ".join(c.notes + ([partial] if partial else [])) or None
    finish_send(store, row_id, ok=True, reason=notes, now=datetime.now(timezone.utc))
    log.info("reply to #%s sent as <%s> to %d recipients", rid, c.message_id, len(c.recipients))
    if partial:
        info["notes"].append(partial)
    return Outcome("sent", message=f"reply to #{rid} for event {kind} sent as <{c.message_id}> to "
                   f"{len(c.recipients) - len(refused)} recipients", **base, **info)
