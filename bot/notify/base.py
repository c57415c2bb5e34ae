"""What the adapters (bot.notify.irc, bot.notify.matrix, and those of notifiers other packages
add: bot/notify/notifiers.py) have in common.

An adapter keeps one connection to one server account and offers (all async)::

    await a.start(listen=False)   connect, authenticate, join; listen=True also reads chat
    await a.send(dest, message)   -> Sent; raises TransientError (retry later) or PermanentError
    a.on_command(callback)        callback(Incoming) -> list of answer lines (or None)
    await a.stop()

``start`` raises :class:`TransientError` if the first connection attempt fails; a started
adapter keeps reconnecting in the background (with backoff) until ``stop``, and
``start(listen=True, wait=False)`` never raises: it keeps trying in the background.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Iterable

log = logging.getLogger("regtriage.notify")


class DeliveryError(Exception):
    """A message was not delivered.  ``permanent``: retrying will not help."""

    permanent = False


class TransientError(DeliveryError):
    """Server down, connection lost, timeout: retry later."""


class PermanentError(DeliveryError):
    """Unknown channel/room, forbidden, rejected: retrying will not help."""

    permanent = True


@dataclass
class OutMessage:
    text: str  # the IRC line / the Matrix plain-text body
    html: str | None = None  # Matrix formatted_body (org.matrix.custom.html)
    txn_id: str | None = None  # Matrix transaction id (derived from the idempotency key)
    thread_root: str | None = None  # Matrix: event id of the thread root (m.thread)
    reply_to: str | None = None  # Matrix: latest event in the thread (in-reply-to fallback)


@dataclass
class Sent:
    remote_id: str | None = None  # the Matrix event id
    thread_root: str | None = None


@dataclass
class Incoming:
    """A chat line that may be a command for the bot."""

    network: str  # the notifier's name: irc, matrix, ...
    account: str
    channel: str  # IRC channel (or the sender's nick for a private message); Matrix room id
    sender: str  # IRC nick / Matrix user id (what answers address)
    sender_id: str  # IRC nick!user@host / Matrix user id (what the allow-list checks)
    text: str
    private: bool = False
    names: tuple[str, ...] = field(default_factory=tuple)  # what the bot answers to ("regtriage", its nick)
    room_alias: str | None = None


CommandCallback = Callable[[Incoming], Awaitable[list[str] | None]]


def scrub(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret (and its obvious encodings) replaced by ``***``."""
    import base64

    out = str(text)
    for s in secrets:
        if not s or len(s) < 3:
            continue
        for form in (s, base64.b64encode(s.encode()).decode()):
            out = out.replace(form, "***")
    return out


def describe(exc: BaseException) -> str:
    """A one-line description of an exception for last_error (no traceback)."""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = exc.__class__.__name__
    if isinstance(exc, DeliveryError):
        return msg or name
    return f"{name}: {msg}" if msg else name
