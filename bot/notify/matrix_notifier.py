"""The Matrix notifier (``[[notify.matrix]]``, targets ``matrix:#room:server``): its settings,
the plain-text and HTML bodies of an event, follow-ups threaded (m.thread), and its adapter
(bot/notify/matrix.py, matrix-nio; imported only when a connection is made).  Pure but for
:meth:`MatrixNotifier.adapter`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from bot.config import ConfigError
from bot.notify.format import matrix_bodies, matrix_test_bodies
from bot.notify.notifiers import Notifier
from bot.notify.settings import Secret, get_value, positive, refuse_inline_secrets, secret, str_list

_ROOM = re.compile(r"[#!][^\s:]+:[A-Za-z0-9.\-\[\]:]+")
_USER_ID = re.compile(r"@[a-z0-9._=\-/+]+:[A-Za-z0-9.\-\[\]:]+", re.I)


@dataclass
class MatrixSettings:
    name: str
    homeserver: str
    user_id: str
    rooms: list[str]
    device_id: str = "REGTRIAGE"
    access_token: Secret | None = None
    password: Secret | None = None
    threads: str = "auto"  # "auto" | "on" | "off"
    msgtype: str = "m.notice"
    request_timeout: float = 20
    kind: str = "matrix"

    @property
    def dests(self) -> list[str]:
        return self.rooms


def parse_matrix(t: dict[str, Any], where: str) -> MatrixSettings:
    """One ``[[notify.matrix]]`` table."""
    refuse_inline_secrets(t, where)
    hs = get_value(t, "homeserver", str, None, where)
    if not hs or urlparse(hs).scheme not in ("http", "https") or not urlparse(hs).netloc:
        raise ConfigError(f"{where}: homeserver must be an http(s) URL")
    user_id = get_value(t, "user_id", str, None, where)
    if not user_id or not _USER_ID.fullmatch(user_id):
        raise ConfigError(f"{where}: user_id must look like @name:server")
    rooms = str_list(t, "rooms", where, required=True)
    for r in rooms:
        if not _ROOM.fullmatch(r):
            raise ConfigError(f"{where}: {r!r} is not a room alias (#name:server) or id (!id:server)")
    token = secret(t, "access_token", where, "access token")
    password = secret(t, "password", where, "password")
    if not token and not password:
        raise ConfigError(f"{where}: needs access_token_env/access_token_file or password_env/password_file")
    threads = t.get("threads", "auto")
    if threads is True:
        threads = "on"
    elif threads is False:
        threads = "off"
    if threads not in ("auto", "on", "off"):
        raise ConfigError(f"{where}: threads must be true, false or \"auto\"")
    msgtype = get_value(t, "msgtype", str, "m.notice", where)
    if msgtype not in ("m.notice", "m.text"):
        raise ConfigError(f"{where}: msgtype must be m.notice or m.text")
    device_id = get_value(t, "device_id", str, "REGTRIAGE", where)
    if not re.fullmatch(r"[A-Za-z0-9_.\-]{1,64}", device_id):
        raise ConfigError(f"{where}: device_id must be letters, digits, _ . -")
    return MatrixSettings(name=get_value(t, "name", str, user_id, where), homeserver=hs.rstrip("/"), user_id=user_id,
                          rooms=rooms, device_id=device_id, access_token=token, password=password,
                          threads=threads, msgtype=msgtype,
                          request_timeout=positive(get_value(t, "request_timeout", float, 20.0, where),
                                                    "request_timeout", where))


class MatrixNotifier(Notifier):
    kind = "matrix"
    threads = True

    def parse(self, table: dict[str, Any], where: str) -> MatrixSettings:
        return parse_matrix(table, where)

    def payload(self, event: str, entry: dict[str, Any], base_url: str | None) -> dict[str, Any]:
        plain, html = matrix_bodies(event, entry, base_url)
        return {"text": plain, "html": html}

    def test_payload(self, target: str, when: str) -> dict[str, Any]:
        plain, html = matrix_test_bodies(target, when)
        return {"text": plain, "html": html}

    def adapter(self, account: MatrixSettings):
        from bot.notify.matrix import MatrixAdapter

        return MatrixAdapter(account)

    def admin(self, sender: str, entry: str) -> bool:
        """A Matrix user id (``@user:server``), exactly."""
        return entry.startswith("@") and entry == sender


__all__ = ["MatrixNotifier", "MatrixSettings", "parse_matrix"]
