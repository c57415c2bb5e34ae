"""The IRC notifier (``[[notify.irc]]``, targets ``irc:#chan``): its settings, the one-line
message of an event, and its adapter (bot/notify/irc.py, pydle; imported only when a connection
is made).  Pure but for :meth:`IrcNotifier.adapter`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from bot.config import ConfigError
from bot.notify.chat import irc_fold
from bot.notify.format import irc_line, irc_test_line
from bot.notify.notifiers import Notifier
from bot.notify.settings import Secret, get_value, positive, refuse_inline_secrets, secret, str_list

_CHANNEL = re.compile(r"[#&+!][^\s,\x07\x00-\x1f]{1,199}")
_NICK = re.compile(r"[A-Za-z\[\]\\`_^{|}][A-Za-z0-9\[\]\\`_^{|}-]{0,29}")


@dataclass
class IrcSettings:
    name: str
    server: str
    port: int
    tls: bool
    tls_verify: bool
    nick: str
    username: str
    realname: str
    channels: list[str]
    sasl_username: str | None = None
    sasl_password: Secret | None = None
    nickserv_password: Secret | None = None
    server_password: Secret | None = None
    flood_burst: float = 4
    flood_rate: float = 0.5
    connect_timeout: float = 20
    reconnect_min: float = 2
    reconnect_max: float = 300
    notice: bool = False
    tls_ca_file: str | None = None
    alt_nicks: list[str] = field(default_factory=list)
    kind: str = "irc"

    @property
    def dests(self) -> list[str]:
        return self.channels


def parse_irc(t: dict[str, Any], where: str) -> IrcSettings:
    """One ``[[notify.irc]]`` table."""
    refuse_inline_secrets(t, where)
    server = get_value(t, "server", str, None, where)
    if not server or not re.fullmatch(r"[A-Za-z0-9.\-:\[\]]+", server):
        raise ConfigError(f"{where}: server must be a host name")
    tls = get_value(t, "tls", bool, True, where)
    port = get_value(t, "port", int, 6697 if tls else 6667, where)
    if not 0 < port < 65536:
        raise ConfigError(f"{where}: port out of range")
    nick = get_value(t, "nick", str, "regtriage", where)
    if not _NICK.fullmatch(nick):
        raise ConfigError(f"{where}: nick {nick!r} is not a valid IRC nick")
    alt_nicks = str_list(t, "alt_nicks", where) if "alt_nicks" in t else []
    for n in alt_nicks:
        if not _NICK.fullmatch(n):
            raise ConfigError(f"{where}: alt_nicks: {n!r} is not a valid IRC nick")
    channels = str_list(t, "channels", where, required=True)
    for c in channels:
        if not _CHANNEL.fullmatch(c):
            raise ConfigError(f"{where}: {c!r} is not an IRC channel name")
    name = get_value(t, "name", str, server, where)
    s = IrcSettings(
        name=name, server=server, port=port, tls=tls, tls_verify=get_value(t, "tls_verify", bool, True, where),
        nick=nick, username=get_value(t, "username", str, nick.lower(), where),
        realname=get_value(t, "realname", str, "regtriage regression bot", where), channels=channels,
        sasl_username=get_value(t, "sasl_username", str, None, where),
        sasl_password=secret(t, "sasl_password", where, "SASL password"),
        nickserv_password=secret(t, "nickserv_password", where, "NickServ password"),
        server_password=secret(t, "password", where, "server password"),
        flood_burst=positive(get_value(t, "flood_burst", float, 4.0, where), "flood_burst", where),
        flood_rate=positive(get_value(t, "flood_rate", float, 0.5, where), "flood_rate", where),
        connect_timeout=positive(get_value(t, "connect_timeout", float, 20.0, where), "connect_timeout", where),
        reconnect_min=positive(get_value(t, "reconnect_min", float, 2.0, where), "reconnect_min", where),
        reconnect_max=positive(get_value(t, "reconnect_max", float, 300.0, where), "reconnect_max", where),
        notice=get_value(t, "notice", bool, False, where), tls_ca_file=get_value(t, "tls_ca_file", str, None, where),
        alt_nicks=alt_nicks)
    if s.sasl_password and not s.sasl_username:
        s.sasl_username = nick
    if s.sasl_username and not s.sasl_password:
        raise ConfigError(f"{where}: sasl_username needs sasl_password_env or sasl_password_file")
    return s


class IrcNotifier(Notifier):
    kind = "irc"
    threads = False

    def parse(self, table: dict[str, Any], where: str) -> IrcSettings:
        return parse_irc(table, where)

    def payload(self, event: str, entry: dict[str, Any], base_url: str | None) -> dict[str, Any]:
        return {"text": irc_line(event, entry, base_url)}

    def test_payload(self, target: str, when: str) -> dict[str, Any]:
        return {"text": irc_test_line(target, when)}

    def adapter(self, account: IrcSettings):
        from bot.notify.irc import IrcAdapter

        return IrcAdapter(account)

    def admin(self, sender: str, entry: str) -> bool:
        """A ``nick!user@host`` mask (``*`` and ``?`` wildcards, IRC case folding) matching the hostmask."""
        return "!" in entry and "@" in entry and not entry.startswith("@") \
            and bool(_mask(irc_fold(entry)).fullmatch(irc_fold(sender)))

    def rate_key(self, sender_id: str) -> str:
        """``user@host`` of the hostmask; only the host when the ident is unverified (``~user``,
        which the client chooses freely)."""
        _, bang, userhost = sender_id.partition("!")
        if not bang or "@" not in userhost:
            return sender_id.lower()
        user, _, host = userhost.rpartition("@")
        return host.lower() if user.startswith("~") or not user else f"{user}@{host}".lower()


def _mask(pattern: str) -> re.Pattern[str]:
    out = []
    for ch in pattern:
        out.append(".*" if ch == "*" else "." if ch == "?" else re.escape(ch))
    return re.compile("".join(out), re.S)


__all__ = ["IrcNotifier", "IrcSettings", "parse_irc"]
