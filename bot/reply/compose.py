"""The reply as an RFC 5322 message (pure: no I/O): the event it is about, its subject, its
plain-text body (``templates/reply.txt.j2``, with the ``#regzbot`` lines), its headers, and
the ``email.message.EmailMessage`` under ``email.policy.SMTP``."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email import policy as email_policy
from email.headerregistry import Address, HeaderRegistry, UnstructuredHeader
from email.message import EmailMessage
from email.utils import format_datetime
from functools import lru_cache
from typing import Any, Iterable

from bot.reply.addresses import recipients
from bot.reply.answered import Answered, valid_msgid
from bot.reply.settings import MailSettings
from bot.tracker.entry import WIDTH, clean_text, wrap_text
from bot.tracker.fields import STATUSES, clean_title, culprit_url

EVENT_KINDS = STATUSES
MAX_REFERENCES = 20
MAX_SUBJECT = 900
SMTP_LINE = 998
REPLY_PREFIX = re.compile(r"^\s*(?:(?:re|aw|sv|antw|vs)\s*(?:\[\d+\])?\s*:\s*)+", re.I)
_HEX = re.compile(r"[0-9a-f]{7,40}")
_REF = re.compile(r"[\w.^~+-]{1,128}")


class ReplyError(Exception):
    """The reply cannot be composed (no such record, nothing to answer ...)."""


def reply_subject(subject: str | None) -> str:
    """``Re: <subject>`` with any leading reply prefixes folded into one."""
    s = clean_text(subject)[:MAX_SUBJECT]
    rest = REPLY_PREFIX.sub("", s).strip()
    return f"Re: {rest or '(no subject)'}"


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
    """The tracker entry: :func:`bot.tracker.entry.wrap_text` (hanging indents)."""
    return _dedent_long(wrap_text(text, width))


@lru_cache(maxsize=1)
def _reply_env():
    """The plain-text environment of bot.tracker.entry (values cleaned of line breaks and
    control characters, same filters), plus ``para`` and ``entry`` wrapping filters."""
    from bot.tracker.entry import template_env

    env = template_env("txt").overlay()
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


def message_bytes(msg: EmailMessage, linesep: str = "\n") -> bytes:
    return msg.as_bytes(policy=msg.policy.clone(linesep=linesep))
