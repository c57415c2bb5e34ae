"""``regtriage reply ID``: choose the message to answer, compose the reply, and print it, draft
it into the outbox or send it -- recording every draft, send, refusal and failure with its
reason (storage/replies.py), never sending the same event twice, within the rate limits."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import partial
from typing import Any

from bot.config import ConfigError
from bot.msgid import stored_key
from bot.reply.addresses import check_recipients, is_own
from bot.reply.answered import answered_from_stored
from bot.reply.compose import Composed, ReplyError, compose, event_of, message_bytes
from bot.reply.send import SendError, preflight, send_message, write_outbox
from bot.reply.settings import PLACEHOLDER_FROM, MailSettings, smtp_password
from bot.tracker.entry import clean_text, entry
from storage import replies as db
from storage.replies import NewReply

log = logging.getLogger("regtriage.reply")


# -- choosing the answered message ------------------------------------------------------------------
def choose_answered(store, e: dict[str, Any], answer: str, settings: MailSettings) -> tuple[dict, bool]:
    """The stored message to answer and whether it is the report: ``report``, ``latest`` (the
    newest message of the report's thread not written by the bot) or a Message-ID in the
    report's thread or related to the record."""
    report = (e.get("report") or {}).get("message_id")
    if answer == "report":
        msg = store.get_message(report) if report else None
        if msg is None:
            raise ReplyError(f"the report of #{e['id']} is not a stored message; answer a message of its "
                             "thread with --answer MSGID")
        if is_own(msg, settings):
            raise ReplyError("the report was written by the bot itself; not answering it")
        return msg, True
    root = db.thread_root(store, report)
    if answer == "latest":
        if root is None:
            raise ReplyError(f"no stored thread for #{e['id']}")
        for mid in db.thread_newest(store, root):
            msg = store.get_message(mid)
            if msg is not None and not is_own(msg, settings):
                return msg, mid == report
        raise ReplyError(f"no message in the thread of #{e['id']} to answer")
    mid = stored_key(answer) or answer.strip("<> ")
    related = {r.get("message_id") for r in e.get("related") or []} | {report}
    if mid not in related and (root is None or db.thread_root(store, mid) != root):
        raise ReplyError(f"<{clean_text(mid)}> is not in the thread of #{e['id']} nor related to it")
    msg = store.get_message(mid)
    if msg is None:
        raise ReplyError(f"<{clean_text(mid)}> is not a stored message")
    if is_own(msg, settings):
        raise ReplyError("that message was written by the bot itself; not answering it")
    return msg, mid == report


# -- rate limits ------------------------------------------------------------------------------------
def _replies(n: int) -> str:
    return f"{n} repl{'y' if n == 1 else 'ies'}"


def rate_limit_reason(settings: MailSettings, in_thread: int | None, in_hour: int) -> str | None:
    """Why a send is refused, given the replies sent to its thread within ``[mail]
    thread_window_hours`` (None: no thread) and in the last hour; or None."""
    if in_thread is not None and in_thread >= settings.thread_limit:
        return (f"rate limit: {_replies(in_thread)} to this thread in the last {settings.thread_window_hours:g} h "
                f"([mail] thread_limit = {settings.thread_limit})")
    if in_hour >= settings.hourly_limit:
        return f"rate limit: {_replies(in_hour)} sent in the last hour ([mail] hourly_limit = {settings.hourly_limit})"
    return None


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


@dataclass(frozen=True)
class _Event:
    """The event a reply is about, on record ``rid``."""

    rid: int
    kind: str
    digest: str
    key: str

    @property
    def base(self) -> dict[str, Any]:
        return {"record": self.rid, "event_key": self.key, "event_kind": self.kind}

    def row(self, c: Composed | None, *, status: str, mode: str, reason: str | None, thread_key: str | None,
            now: datetime, outbox_path: str | None = None) -> NewReply:
        return NewReply(regression_id=self.rid, event_key=self.key, event_kind=self.kind, facts_hash=self.digest,
                        status=status, mode=mode, reason=reason, message_id=c.message_id if c else None,
                        in_reply_to=c.in_reply_to if c else None, thread_key=thread_key,
                        recipients=c.recipients_json() if c else {}, created_at=now, outbox_path=outbox_path)


@dataclass
class _Draft:
    """A composed reply, with what run_reply reports and records about it."""

    c: Composed
    thread_key: str
    info: dict[str, Any]  # message_id, to, cc, dropped, notes (Outcome fields)
    policy_reason: str | None  # why --send must refuse it


def _already_done(store, ev: _Event, mode: str, force: bool) -> Outcome | None:
    """The outcome when the event was sent (or is being sent), or drafted for a dry run."""
    sent, draft = db.previous(store, ev.key)
    if sent is not None and not (force and mode != "send"):
        when = sent.sent_at or sent.created_at
        state = "was sent" if sent.status == "sent" else "is being sent (or its outcome is unknown)"
        return Outcome("already-sent", message=f"the reply to #{ev.rid} for event {ev.kind} {state}: "
                       f"<{sent.message_id}> on {when:%Y-%m-%d %H:%M} UTC; nothing to do",
                       message_id=sent.message_id, **ev.base)
    if draft is not None and mode == "dry-run" and not force:
        return Outcome("already-drafted", message=f"the reply to #{ev.rid} for event {ev.kind} is already drafted: "
                       f"{draft.outbox_path} (--force writes a new draft)", path=draft.outbox_path,
                       message_id=draft.message_id, **ev.base)
    return None


def _draft(store, e: dict[str, Any], ev: _Event, answer: str, settings: MailSettings, mode: str,
           now: datetime) -> _Draft:
    """Choose the answered message and compose the reply; a refusal to send is recorded."""
    try:
        msg, is_report = choose_answered(store, e, answer, settings)
    except ReplyError as exc:
        if mode == "send":
            db.record(store, ev.row(None, status="refused", mode="send", reason=str(exc), thread_key=None, now=now))
        raise
    report = store.get_message(e["report"]["message_id"]) if e["report"].get("message_id") else None
    answered = answered_from_stored(msg)
    c = compose(e, answered, settings, event_kind=ev.kind, report_subject=(report or msg).get("subject"),
                answers_report=is_report, now=now,
                report_authors=answered_from_stored(report).from_ if report is not None else ())
    info = {"message_id": c.message_id, "to": [a for _, a in c.to], "cc": [a for _, a in c.cc],
            "dropped": c.dropped, "notes": list(c.notes)}
    return _Draft(c, db.thread_root(store, answered.message_id) or answered.message_id, info,
                  check_recipients(c, settings))


def _print(d: _Draft, ev: _Event, settings: MailSettings) -> Outcome:
    if settings.placeholder_from:
        d.info["notes"].insert(0, f"[mail] from is not set: the sender shown is a placeholder, {PLACEHOLDER_FROM} "
                                  "(set [mail] from before drafting or sending)")
    if d.policy_reason:
        d.info["notes"].append(f"--send would refuse: {d.policy_reason}")
    return Outcome("printed", message=f"reply to #{ev.rid} for event {ev.kind}",
                   text=message_bytes(d.c.msg).decode("utf-8", "replace"), **ev.base, **d.info)


def _write_draft(store, d: _Draft, ev: _Event, settings: MailSettings, now: datetime) -> Outcome:
    if d.policy_reason:
        d.info["notes"].append(f"--send would refuse: {d.policy_reason}")
    path = write_outbox(d.c.msg, settings.outbox)
    db.record(store, ev.row(d.c, status="draft", mode="dry-run", reason="; ".join(d.info["notes"]) or None,
                            thread_key=d.thread_key, now=now, outbox_path=str(path)))
    return Outcome("drafted", message=f"reply to #{ev.rid} for event {ev.kind} drafted: {path}", path=str(path),
                   **ev.base, **d.info)


def _refused(store, d: _Draft, ev: _Event, reason: str, now: datetime) -> Outcome:
    db.record(store, ev.row(d.c, status="refused", mode="send", reason=reason, thread_key=d.thread_key, now=now))
    return Outcome("refused", message=f"not sent: {reason}", reason=reason, **ev.base, **d.info)


def _send(store, d: _Draft, ev: _Event, settings: MailSettings, now: datetime) -> Outcome:
    """``--send``: the static policy, the SMTP settings, the claim (once per event, rate
    limits), then SMTP; the row says how it ended."""
    c = d.c
    if d.policy_reason:
        log.info("reply to #%s refused: %s", ev.rid, d.policy_reason)
        return _refused(store, d, ev, d.policy_reason, now)
    try:
        password = smtp_password(settings)
        reason = preflight(settings, password)
    except ConfigError as exc:
        password, reason = None, str(exc)
    if reason:
        return _refused(store, d, ev, reason, now)
    row_id, reason = db.claim_send(store, ev.row(c, status="sending", mode="send", reason="; ".join(c.notes) or None,
                                                 thread_key=d.thread_key, now=now),
                                   thread_window=timedelta(hours=settings.thread_window_hours),
                                   judge=partial(rate_limit_reason, settings))
    if row_id is None:
        sent, _ = db.previous(store, ev.key)
        return Outcome("already-sent", message=f"the reply to #{ev.rid} for event {ev.kind} was already sent"
                       + (f": <{sent.message_id}>" if sent else ""), **ev.base)
    if reason:
        log.info("reply to #%s refused: %s", ev.rid, reason)
        return Outcome("refused", message=f"not sent: {reason}", reason=reason, **ev.base, **d.info)
    try:
        refused = send_message(c.msg, c.recipients, settings, password=password)
    except SendError as exc:
        reason = str(exc)
        db.finish_send(store, row_id, ok=False, reason=reason, now=datetime.now(timezone.utc))
        log.warning("reply to #%s failed: %s", ev.rid, reason)
        return Outcome("failed", message=f"send failed: {reason}", reason=reason, **ev.base, **d.info)
    finally:
        password = None  # noqa: F841 - drop the reference early
    partial_refusal = "; ".join(f"{a} refused ({m})" for a, m in refused.items()) or None
    notes = "; ".join(c.notes + ([partial_refusal] if partial_refusal else [])) or None
    db.finish_send(store, row_id, ok=True, reason=notes, now=datetime.now(timezone.utc))
    log.info("reply to #%s sent as <%s> to %d recipients", ev.rid, c.message_id, len(c.recipients))
    if partial_refusal:
        d.info["notes"].append(partial_refusal)
    return Outcome("sent", message=f"reply to #{ev.rid} for event {ev.kind} sent as <{c.message_id}> to "
                   f"{len(c.recipients) - len(refused)} recipients", **ev.base, **d.info)


def run_reply(store, config, rid: int, *, mode: str = "dry-run", force: bool = False, event: str | None = None,
              answer: str = "report", now: datetime | None = None) -> Outcome:
    """``regtriage reply``: ``mode`` is ``dry-run`` (outbox), ``stdout`` (print only, nothing
    recorded) or ``send``.  ``force`` re-does a dry run of an event already drafted or sent;
    it never sends twice."""
    if mode not in ("dry-run", "stdout", "send"):
        raise ValueError(mode)
    if force and mode == "send":
        raise ReplyError("--force only re-does a dry run: a reply is never sent twice")
    settings = MailSettings.from_config(config, placeholder=mode == "stdout")
    now = now or datetime.now(timezone.utc)
    e = entry(store, rid)
    if e is None:
        raise ReplyError(f"no regression record {rid}")
    ev = _Event(rid, *event_of(e, event))
    done = _already_done(store, ev, mode, force)
    if done is not None:
        return done
    d = _draft(store, e, ev, answer, settings, mode, now)
    if mode == "stdout":
        return _print(d, ev, settings)
    if mode == "dry-run":
        return _write_draft(store, d, ev, settings, now)
    return _send(store, d, ev, settings, now)
