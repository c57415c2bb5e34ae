"""Answers to chat commands, and the interface for the state-changing ones.

:class:`ChatResponder` is the ``on_command`` callback of the adapters: it parses the line
(bot.notify.chat), applies the per-user and per-channel rate limits, checks the allow-list
for ``rerun``/``resolve``, runs the query or reads the record, and returns the answer lines
(at most ``[chat] max_lines``, each at most ``max_line_length``).  Database work runs in a
worker thread so the chat connections keep answering PINGs.

:class:`ChatActions` is what ``rerun`` and ``resolve`` call.  :class:`TrackerActions` is the
implementation used now: ``resolve`` -> :func:`bot.tracker.records.set_status` (``resolved``),
``rerun`` -> a placeholder that records the request in the history as the status
``rerun-scheduled``; the lab scheduler will implement ``rerun`` for real behind the same
interface.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable, Protocol

from bot.notify.base import Incoming
from bot.notify.chat import Command, RateLimiter, is_admin, parse_command
from bot.notify.format import cut, help_answer, one_line, query_answer, show_answer
from bot.notify.notifiers import UnknownNotifier, get_notifier
from bot.notify.settings import NotifySettings

log = logging.getLogger("regtriage.notify.chat")


class ChatActions(Protocol):
    """State-changing chat commands.  ``actor``: ``irc:nick!user@host`` or ``matrix:@user:server``.
    Both return False when nothing changed; raise KeyError for an unknown record."""

    def resolve(self, rid: int, actor: str, note: str | None) -> bool: ...

    def rerun(self, rid: int, actor: str) -> bool: ...


class TrackerActions:
    def __init__(self, store) -> None:
        self.store = store

    def resolve(self, rid: int, actor: str, note: str | None) -> bool:
        from bot.tracker.records import set_status

        return set_status(self.store, rid, "resolved", actor, note or "resolved from chat")

    def rerun(self, rid: int, actor: str) -> bool:
        # placeholder until the lab scheduler takes rerun requests: the request is recorded
        from bot.tracker.records import set_status

        return set_status(self.store, rid, "rerun-scheduled", actor, "rerun requested from chat")


def rate_key(network: str, sender_id: str | None) -> str:
    """What a user's rate limit is keyed by: something a nick change cannot rotate (the
    network's notifier says what: :meth:`bot.notify.notifiers.Notifier.rate_key`).  Matrix: the
    user id.  IRC: ``user@host`` of the hostmask; when the ident is unverified (``~user``, which
    the client chooses freely) only the host."""
    sid = (sender_id or "").strip()
    try:
        return get_notifier(network).rate_key(sid)
    except UnknownNotifier:
        return sid


class ChatResponder:
    def __init__(self, store, settings: NotifySettings, actions: ChatActions | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.s = settings
        self.chat = settings.chat
        self.actions = actions if actions is not None else TrackerActions(store)
        self.limiter = RateLimiter(self.chat.user_rate, self.chat.user_burst, self.chat.channel_rate,
                                   self.chat.channel_burst, clock=clock)
        self.answered = 0
        self.refused = 0

    async def __call__(self, msg: Incoming) -> list[str] | None:
        if not self.chat.enabled:
            return None
        cmd = parse_command(msg.text, prefix=self.chat.prefix, names=msg.names)
        if cmd is None:
            return None
        who = rate_key(msg.network, msg.sender_id)
        user_key = f"{msg.network}:{msg.account}:{who}"
        # a private conversation is its own "channel": keyed by the same identity, not the nick
        chan_key = f"{msg.network}:{msg.account}:{('query ' + who) if msg.private else msg.channel.lower()}"
        if not self.limiter.allow(user_key, chan_key):
            log.info("chat: rate limit: %s in %s", one_line(msg.sender), one_line(msg.channel))
            return None
        lines = await asyncio.to_thread(self.answer, msg, cmd)
        self.answered += 1
        return self._limit(lines)

    def _limit(self, lines: list[str]) -> list[str]:
        n, width = self.chat.max_lines, self.chat.max_line_length
        out = [cut(one_line(x), width) for x in lines if x]
        if len(out) > n:  # answers are built to fit; this is the last guard
            out = out[:n - 1] + [cut(f"and {len(out) - n + 1} more lines", width)]
        return out

    # -- the answers (sync: runs in a worker thread) ----------------------------------------------
    def answer(self, msg: Incoming, cmd: Command) -> list[str]:
        width = self.chat.max_line_length
        base = self.s.base_url
        if cmd.name == "help":
            return help_answer(self.chat.prefix, None, base, width)
        if cmd.name == "usage":
            return [cmd.error or "usage: help"]
        if cmd.changes_state:
            return self._change(msg, cmd)
        if cmd.name == "show":
            from bot.tracker.entry import entry

            e = entry(self.store, cmd.rid)
            if e is None:
                return [f"no regression #{cmd.rid}"]
            return show_answer(e, base, width)
        from bot.tracker.query import QueryError, parse_query, run_query

        try:
            f = parse_query(cmd.args)
            rows, total = run_query(self.store, f, limit=self.chat.max_lines)
        except QueryError as exc:
            return [cut(f"cannot understand that query: {one_line(exc)}", width)]
        return query_answer(rows, total, f.describe(), cmd.args, base_url=base, max_lines=self.chat.max_lines,
                            max_len=width)

    def _change(self, msg: Incoming, cmd: Command) -> list[str]:
        who = one_line(msg.sender)
        if not is_admin(msg.network, msg.sender_id, self.chat.admins):
            self.refused += 1
            log.warning("chat: refused %s #%s from %s", cmd.name, cmd.rid, one_line(msg.sender_id))
            return [f"{who}: sorry, {cmd.name} is only for allow-listed users; anyone may query, show and help."]
        actor = f"{msg.network}:{msg.sender_id}"
        try:
            if cmd.name == "resolve":
                changed = self.actions.resolve(cmd.rid, actor, cmd.args or None)
                done = "resolved" if changed else "was already resolved"
            else:
                changed = self.actions.rerun(cmd.rid, actor)
                done = "rerun requested" if changed else "a rerun was already requested"
        except KeyError:
            return [f"no regression #{cmd.rid}"]
        except Exception as exc:  # noqa: BLE001 - tell the user, keep the bot up
            log.exception("chat: %s #%s failed", cmd.name, cmd.rid)
            return [cut(f"{who}: {cmd.name} #{cmd.rid} failed: {one_line(exc)}", self.chat.max_line_length)]
        log.info("chat: %s #%s by %s", cmd.name, cmd.rid, one_line(msg.sender_id))
        from bot.notify.format import record_link

        link = record_link(self.s.base_url, None, cmd.rid) or ""
        return [f"#{cmd.rid}: {done} by {who} {link}".strip()]
