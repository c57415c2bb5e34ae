"""Notifiers: the kinds of place a notification can go (``irc``, ``matrix``, or one a deployment
adds, a webhook say), found by name in a registry.

A notifier kind is configured as ``[[notify.<kind>]]`` tables (one per connection) and its
targets are named ``<kind>:<dest>`` (or ``<kind>:<connection>/<dest>``).  It offers
(:class:`Notifier`)::

    account = notifier.parse(table, where)     # a validated [[notify.<kind>]] table (pure; no secret read)
    payload = notifier.payload(event, entry, base_url)   # {"text": ..., "html": ... (optional)}
    payload = notifier.test_payload(target, when)        # the same, for `notify --test`
    adapter = notifier.adapter(account)        # start / send / on_command / stop (bot/notify/base.py)
    notifier.threads                           # True: follow-ups on a record are threaded under its first message
    notifier.admin(sender, entry), notifier.rate_key(sender)   # chat commands read from its network

``account`` is any object with ``kind`` (the notifier's name), ``name`` (unique per kind; it
qualifies target names) and ``dests`` (its channels, rooms, endpoints ...).

The registry: the built-in notifiers (:data:`BUILTIN`), notifiers registered at run time
(:func:`register_notifier`), and notifiers other packages declare as entry points in the group
``regtriage.notifiers`` (``name = "module:Class"``, the class built without arguments), so a
deployment adds one without editing this project.  Built-ins are imported only when used.
"""

from __future__ import annotations

import importlib
import re
from importlib.metadata import entry_points
from typing import Any

ENTRY_POINT_GROUP = "regtriage.notifiers"
BUILTIN = {
    "irc": "bot.notify.irc_notifier:IrcNotifier",
    "matrix": "bot.notify.matrix_notifier:MatrixNotifier",
}
NAME_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_REGISTERED: dict[str, Any] = {}
_LOADED: dict[str, Any] = {}  # built-in and entry-point notifiers, built once


class UnknownNotifier(LookupError):
    """No notifier has this name."""


class Notifier:
    """The interface of a notifier kind (a plug-in may subclass it or just offer the same
    attributes).  Everything but :meth:`adapter` is pure."""

    kind = ""
    threads = False  # follow-ups posted under the first message sent about the record (OutMessage.thread_root)

    def parse(self, table: dict[str, Any], where: str) -> Any:
        """A ``[[notify.<kind>]]`` table, validated (``where`` names it in errors: raise
        bot.config.ConfigError), as settings with ``kind``, ``name`` and ``dests``."""
        raise NotImplementedError

    def payload(self, event: str, entry: dict[str, Any], base_url: str | None) -> dict[str, Any]:
        """What is stored in the outbox for ``event`` on a record (a tracker entry) and sent
        later: ``{"text": str, "html": str | None}``."""
        raise NotImplementedError

    def test_payload(self, target: str, when: str) -> dict[str, Any]:
        """The test message ``notify --test`` sends to ``target`` (same shape as :meth:`payload`)."""
        raise NotImplementedError

    def adapter(self, account: Any) -> Any:
        """An adapter for one connection (not started)."""
        raise NotImplementedError

    # chat commands read from this network (an adapter's on_command); a notifier that only sends keeps these
    def admin(self, sender: str, entry: str) -> bool:
        """Whether the ``[chat] admins`` entry ``entry`` is the sender (as ``Incoming.sender_id``)."""
        return False

    def rate_key(self, sender_id: str) -> str:
        """What the sender's chat rate limit is keyed by: something the sender cannot rotate."""
        return sender_id


def register_notifier(name: str, notifier: Any) -> None:
    """Make ``notifier`` (a :class:`Notifier`) the one called ``name``, before the built-in and
    entry-point ones."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ValueError(f"bad notifier name {name!r} (lower-case letters, digits, - and _)")
    _REGISTERED[name] = notifier


def unregister_notifier(name: str) -> None:
    _REGISTERED.pop(name, None)
    _LOADED.pop(name, None)


def _load(target: str):
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def notifier_names() -> list[str]:
    """Every notifier name the registry knows: the built-in ones first, in their order."""
    others = set(_REGISTERED) | {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return [*BUILTIN, *sorted(others - set(BUILTIN))]


def get_notifier(name: str) -> Any:
    """The notifier called ``name``; :class:`UnknownNotifier` when there is none."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name in _LOADED:
        return _LOADED[name]
    if name in BUILTIN:
        made = _load(BUILTIN[name])()
    else:
        found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
        if not found:
            raise UnknownNotifier(f"unknown notifier {name!r} (known: {', '.join(notifier_names())})")
        made = found[0].load()()
    _LOADED[name] = made
    return made


def make_adapter(account) -> Any:
    """The adapter of one configured connection, by its notifier (``account.kind``)."""
    return get_notifier(account.kind).adapter(account)


__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "Notifier", "UnknownNotifier", "get_notifier", "make_adapter",
           "notifier_names", "register_notifier", "unregister_notifier"]
