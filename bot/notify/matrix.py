"""Matrix adapter (matrix-nio, asyncio): one account on one homeserver.

* login: an access token (``access_token_env``/``_file``; the device comes from ``whoami``) or
  a password (``password_env``/``_file``) for the configured ``device_id`` -- always the same
  device, because homeservers scope transaction ids to the device: a message resent with the
  same transaction id (derived from the outbox key) after a crash or a restart is answered
  with the first event instead of being posted twice;
* join the configured rooms (aliases are resolved by the join);
* send ``m.room.message`` (``m.notice`` by default) with a plain-text ``body`` and an
  ``org.matrix.custom.html`` ``formatted_body``; follow-ups on a regression are posted in an
  ``m.thread`` under the first event about it (with the in-reply-to fallback), where the
  server supports threads (spec v1.4, or ``threads = true``);
* chat: a sync loop (started with ``listen=True``) hands ``m.text`` messages of other users in
  joined rooms to the ``on_command`` callbacks and posts their answers as ``m.notice``; the
  history before the start is skipped.  Reconnects with backoff while the server is down.

Secrets are never logged: nio sends the token in a header, and error texts are scrubbed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import re
from typing import TYPE_CHECKING, Any

from bot.notify.base import (CommandCallback, Incoming, OutMessage, PermanentError, Sent, TransientError, describe,
                             log, scrub)
from bot.notify.format import lines_to_matrix

if TYPE_CHECKING:  # the notifier module builds this adapter
    from bot.notify.matrix_notifier import MatrixSettings

mlog = logging.getLogger("regtriage.notify.matrix")

PERMANENT_ERRCODES = {"M_FORBIDDEN", "M_NOT_FOUND", "M_UNKNOWN_TOKEN", "M_MISSING_TOKEN", "M_BAD_JSON",
                      "M_NOT_JSON", "M_TOO_LARGE", "M_INVALID_PARAM", "M_UNSUPPORTED_ROOM_VERSION"}
SYNC_FILTER = {
    "presence": {"types": []},
    "account_data": {"types": []},
    "room": {"timeline": {"types": ["m.room.message"], "limit": 50},
             "state": {"lazy_load_members": True, "types": ["m.room.canonical_alias"]},
             "ephemeral": {"types": []}, "account_data": {"types": []}},
}


_SECRET_KEYS = {"access_token", "refresh_token", "password", "token", "new_password"}


def _redact(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: ("***" if k in _SECRET_KEYS and v else _redact(v)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_redact(x) for x in obj)
    if isinstance(obj, str):
        return re.sub(r"(\bsyt_|\bmct_|access_token=)[A-Za-z0-9_.\-]+", r"\1***", obj)
    return obj


class _RedactSecrets(logging.Filter):
    """matrix-nio logs whole responses at DEBUG (the login response holds the access token):
    secrets in them are masked before any handler sees the record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args:
            record.args = _redact(record.args) if isinstance(record.args, (tuple, dict)) else record.args
        if isinstance(record.msg, str):
            record.msg = _redact(record.msg)
        return True


def _install_log_filter() -> None:
    for name in ("nio", "nio.responses", "nio.client.async_client", "nio.client.base_client", "nio.http",
                 "nio.rooms"):
        lg = logging.getLogger(name)
        if not any(isinstance(f, _RedactSecrets) for f in lg.filters):
            lg.addFilter(_RedactSecrets())


_install_log_filter()


def _error_text(resp: Any) -> tuple[str, str | None]:
    code = getattr(resp, "status_code", None)
    msg = getattr(resp, "message", None) or str(resp)
    return f"{code or ''} {msg}".strip(), code


def _network_errors() -> tuple[type[BaseException], ...]:
    import aiohttp

    return (aiohttp.ClientError, asyncio.TimeoutError, TimeoutError, OSError)


class MatrixAdapter:
    kind = "matrix"

    def __init__(self, settings: MatrixSettings) -> None:
        self.s = settings
        self.name = settings.name
        self.client = None
        self._callbacks: list[CommandCallback] = []
        self._rooms: dict[str, str] = {}  # configured dest -> room id
        self._aliases: dict[str, str] = {}  # room id -> configured dest
        self._room_errors: dict[str, str] = {}
        self._threads: bool | None = None
        self._secrets: list[str] = []
        self._logged_in = False
        self._listen_task: asyncio.Task | None = None
        self._handlers: set[asyncio.Task] = set()
        self._stopping = False
        self._lock: asyncio.Lock | None = None
        self.last_error: str | None = None
        self.synced = asyncio.Event()  # the listener has skipped the history and is live
        self._history_until = 0  # newest server timestamp seen in the first sync (ms)
        self._seen: dict[str, None] = {}  # event ids handed to the callbacks (bounded, in order)

    # -- public API ---------------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        return self._logged_in

    @property
    def threads(self) -> bool:
        return bool(self._threads)

    def on_command(self, callback: CommandCallback) -> None:
        self._callbacks.append(callback)

    async def start(self, *, listen: bool = False, wait: bool = True, timeout: float | None = None) -> None:
        """Log in and join the rooms; ``listen``: also run the sync loop for chat commands.
        Raises :class:`TransientError` (server unreachable) or :class:`PermanentError` (bad
        credentials) when ``wait``; otherwise a failed login is retried on the next send."""
        self._stopping = False
        self._lock = self._lock or asyncio.Lock()
        try:
            await asyncio.wait_for(self._ensure_login(), timeout or self.s.request_timeout * 2)
        except asyncio.TimeoutError:
            self.last_error = "timeout"
            if wait:
                raise TransientError(f"{self.s.homeserver}: timed out logging in") from None
        except Exception:
            if wait:
                raise
        if listen and (self._listen_task is None or self._listen_task.done()):
            self._listen_task = asyncio.create_task(self._listen(), name=f"matrix:{self.name}")

    async def stop(self) -> None:
        self._stopping = True
        task, self._listen_task = self._listen_task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        for t in list(self._handlers):
            t.cancel()
        client, self.client = self.client, None
        self._logged_in = False
        if client is not None:
            try:
                await client.close()
            except Exception:  # noqa: BLE001
                pass

    async def send(self, dest: str, message: OutMessage) -> Sent:
        await self._ensure_login()
        room_id = await self._room_id(dest)
        content: dict[str, Any] = {"msgtype": self.s.msgtype, "body": message.text}
        if message.html:
            content["format"] = "org.matrix.custom.html"
            content["formatted_body"] = message.html
        root = None
        if message.thread_root and self._threads:
            root = message.thread_root
            content["m.relates_to"] = {"rel_type": "m.thread", "event_id": root, "is_falling_back": True,
                                       "m.in_reply_to": {"event_id": message.reply_to or root}}
        event_id = await self._room_send(room_id, content, message.txn_id)
        return Sent(remote_id=event_id, thread_root=root)

    async def say(self, room_id: str, lines: list[str]) -> None:
        """Chat answers: one m.notice with the lines (plain and HTML with links)."""
        plain, html = lines_to_matrix(lines)
        content = {"msgtype": "m.notice", "body": plain, "format": "org.matrix.custom.html", "formatted_body": html}
        try:
            await self._room_send(room_id, content, None)
        except Exception as exc:  # noqa: BLE001 - an answer that cannot be sent is dropped
            log.warning("matrix %s: cannot answer in %s: %s", self.name, room_id, describe(exc))

    def room_ids(self) -> dict[str, str]:
        return dict(self._rooms)

    # -- login, rooms ---------------------------------------------------------------------------
    def _new_client(self):
        from nio import AsyncClient, AsyncClientConfig

        cfg = AsyncClientConfig(max_timeouts=0, max_limit_exceeded=3, request_timeout=self.s.request_timeout,
                                store_sync_tokens=False, encryption_enabled=False)
        return AsyncClient(self.s.homeserver, self.s.user_id, device_id=self.s.device_id, config=cfg)

    async def _ensure_login(self) -> None:
        if self._logged_in and self.client is not None:
            return
        self._lock = self._lock or asyncio.Lock()
        async with self._lock:
            if self._logged_in and self.client is not None:
                return
            try:
                await self._login()
            except (TransientError, PermanentError) as exc:
                self.last_error = str(exc)
                raise
            except _network_errors() as exc:
                self.last_error = scrub(describe(exc), self._secrets)
                raise TransientError(f"{self.s.homeserver}: {self.last_error}") from None

    async def _login(self) -> None:
        from nio import LoginResponse, WhoamiResponse

        client = self.client or self._new_client()
        self.client = client
        if self.s.access_token:
            token = self.s.access_token.read()
            self._secrets = [token]
            client.access_token = token
            resp = await client.whoami()
            if not isinstance(resp, WhoamiResponse):
                text, code = _error_text(resp)
                client.access_token = None
                err = PermanentError if code in ("M_UNKNOWN_TOKEN", "M_MISSING_TOKEN", "M_FORBIDDEN") else TransientError
                raise err(f"{self.s.homeserver}: access token refused: {scrub(text, self._secrets)}")
            if resp.user_id != self.s.user_id:
                raise PermanentError(f"the access token belongs to {resp.user_id}, not {self.s.user_id}")
            client.restore_login(resp.user_id, resp.device_id or self.s.device_id, token)
        else:
            password = self.s.password.read()
            self._secrets = [password]
            resp = await client.login(password, device_name="regtriage")
            if not isinstance(resp, LoginResponse):
                text, code = _error_text(resp)
                err = PermanentError if code in ("M_FORBIDDEN", "M_USER_DEACTIVATED", "M_INVALID_USERNAME") \
                    else TransientError
                raise err(f"{self.s.homeserver}: login as {self.s.user_id} failed: {scrub(text, self._secrets)}")
            self._secrets.append(resp.access_token)
        if self._threads is None:
            self._threads = await self._supports_threads()
        for dest in self.s.rooms:
            try:
                await self._join(dest)
            except PermanentError as exc:
                log.warning("matrix %s: cannot join %s: %s", self.name, dest, exc)
        self._logged_in = True
        log.info("matrix %s: logged in as %s (device %s)", self.name, client.user_id, client.device_id)

    async def _supports_threads(self) -> bool:
        if self.s.threads != "auto":
            return self.s.threads == "on"
        try:
            resp = await self.client.send("GET", "/_matrix/client/versions")
            data = json.loads(await resp.text())
            resp.release()
        except Exception:  # noqa: BLE001 - no answer: no threads
            return False
        vs = []
        for v in data.get("versions") or []:
            try:
                major, minor = v.lstrip("vr").split(".")[:2]
                vs.append((int(major), int(minor)))
            except ValueError:
                continue
        return any(v >= (1, 4) for v in vs)

    async def _join(self, dest: str) -> str:
        from nio import JoinResponse

        if dest in self._rooms:
            return self._rooms[dest]
        resp = await self.client.join(dest)
        if not isinstance(resp, JoinResponse):
            text, code = _error_text(resp)
            self._room_errors[dest] = text
            err = PermanentError if code in PERMANENT_ERRCODES else TransientError
            raise err(f"cannot join {dest}: {scrub(text, self._secrets)}")
        self._rooms[dest] = resp.room_id
        self._aliases[resp.room_id] = dest
        self._room_errors.pop(dest, None)
        return resp.room_id

    async def _room_id(self, dest: str) -> str:
        if dest in self._rooms:
            return self._rooms[dest]
        try:
            return await self._join(dest)
        except _network_errors() as exc:
            raise TransientError(f"{self.s.homeserver}: {describe(exc)}") from None

    async def _room_send(self, room_id: str, content: dict[str, Any], txn_id: str | None) -> str:
        from nio import RoomSendResponse

        try:
            resp = await self.client.room_send(room_id, "m.room.message", content, tx_id=txn_id,
                                               ignore_unverified_devices=True)
        except _network_errors() as exc:
            raise TransientError(f"{self.s.homeserver}: {scrub(describe(exc), self._secrets)}") from None
        if isinstance(resp, RoomSendResponse):
            return resp.event_id
        text, code = _error_text(resp)
        if code in ("M_UNKNOWN_TOKEN", "M_MISSING_TOKEN"):
            self._logged_in = False  # log in again on the next try
            raise TransientError(f"{self.s.homeserver}: token no longer valid: {text}")
        if code in PERMANENT_ERRCODES:
            if code == "M_FORBIDDEN" and room_id in self._aliases:
                self._rooms.pop(self._aliases[room_id], None)  # not in the room (any more): rejoin next time
                raise TransientError(f"not allowed to post in {self._aliases[room_id]}: {text}")
            raise PermanentError(f"the server refused the message: {scrub(text, self._secrets)}")
        raise TransientError(f"the server refused the message: {scrub(text, self._secrets)}")

    # -- chat ------------------------------------------------------------------------------------
    async def _listen(self) -> None:
        from nio import SyncResponse

        import copy
        import secrets

        since = None
        attempt = 0
        # Synapse caches sync responses for a while (sync_response_cache_duration) keyed by user,
        # device, token and filter: a restarted listener would get the previous one's initial
        # sync and its old token, and then answer old messages.  A filter of our own per start.
        sync_filter = copy.deepcopy(SYNC_FILTER)
        sync_filter["room"]["timeline"]["not_types"] = [f"org.regtriage.listener.{secrets.token_hex(6)}"]
        while not self._stopping:
            try:
                await self._ensure_login()
                resp = await self.client.sync(timeout=10000 if since else 0, since=since,
                                              sync_filter=sync_filter, full_state=False)
                if not isinstance(resp, SyncResponse):
                    text, code = _error_text(resp)
                    if code in ("M_UNKNOWN_TOKEN", "M_MISSING_TOKEN"):
                        self._logged_in = False
                    raise TransientError(text)
                if since is not None:
                    self._handle_sync(resp)
                else:
                    self._history_until = max([self._history_until] + self._timestamps(resp))
                since = resp.next_batch
                attempt = 0
                self.synced.set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - keep listening; back off
                self.last_error = scrub(describe(exc), self._secrets)
                log.info("matrix %s: sync failed: %s", self.name, self.last_error)
                delay = min(60.0, 0.5 * 2 ** min(attempt, 8)) * random.uniform(0.7, 1.0)
                attempt += 1
                await asyncio.sleep(delay)

    @staticmethod
    def _timestamps(resp) -> list[int]:
        return [int(getattr(ev, "server_timestamp", 0) or 0) for info in resp.rooms.join.values()
                for ev in info.timeline.events]

    def _handle_sync(self, resp) -> None:
        from nio import RoomMessageText

        me = self.client.user_id
        localpart = me.split(":", 1)[0].lstrip("@")
        for room_id, info in resp.rooms.join.items():
            for ev in info.timeline.events:
                if not isinstance(ev, RoomMessageText) or ev.sender == me:
                    continue
                # never answer history: a sync after a server restart (or a limited timeline)
                # may hand back events from before the listener started, or ones seen already
                if int(getattr(ev, "server_timestamp", 0) or 0) <= self._history_until:
                    continue
                if ev.event_id in self._seen:
                    continue
                self._seen[ev.event_id] = None
                while len(self._seen) > 2000:
                    self._seen.pop(next(iter(self._seen)))
                if (ev.source.get("content") or {}).get("msgtype") != "m.text":
                    continue  # never answer notices (other bots)
                inc = Incoming(network="matrix", account=self.name, channel=room_id, sender=ev.sender,
                               sender_id=ev.sender, text=ev.body or "", private=False,
                               names=tuple(dict.fromkeys((localpart, "regtriage"))),
                               room_alias=self._aliases.get(room_id))
                task = asyncio.create_task(self._dispatch(inc))
                self._handlers.add(task)
                task.add_done_callback(self._handlers.discard)

    async def _dispatch(self, inc: Incoming) -> None:
        for cb in list(self._callbacks):
            try:
                lines = await cb(inc)
            except Exception:  # noqa: BLE001
                log.exception("matrix %s: command handler failed", self.name)
                continue
            if lines:
                await self.say(inc.channel, lines)


__all__ = ["MatrixAdapter"]
