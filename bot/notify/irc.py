"""IRC adapter (pydle, asyncio): one connection to one server.

* connect with TLS (verified by default) or plain; server password (PASS), SASL PLAIN, or
  NickServ IDENTIFY after registration -- secrets from the environment or a file only, and
  never logged (pydle's own raw-line debug log is bypassed for what we send; our debug log
  masks PASS, AUTHENTICATE and IDENTIFY lines);
* join the configured channels and wait for the server to confirm each join;
* reconnect with exponential backoff and jitter while started (pydle's own reconnect is off);
* flood limit: every line we send takes a token from a token bucket (``flood_burst`` lines at
  once, then ``flood_rate`` per second);
* delivery check: IRC has no acknowledgement of PRIVMSG, so after the message lines the adapter
  sends ``PING <token>`` and waits for the matching PONG.  The server handles a client's lines
  in order, so the PONG means the message was processed; an error numeric for the channel
  before it (404 cannot send, 401/403 no such channel, 442 not on channel) fails the send.
  A connection lost before the PONG is a transient failure (the message may or may not have
  gone out; the outbox retries -- the one window in which IRC may show a message twice).
* chat: channel and private PRIVMSGs go to the ``on_command`` callbacks; CTCP, NOTICEs and
  our own lines are ignored.
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets as _secrets
from typing import TYPE_CHECKING

import pydle
from pydle.features.ircv3.sasl import SASLSupport

from bot.notify.base import (CommandCallback, Incoming, OutMessage, PermanentError, Sent, TransientError, describe,
                             log, scrub)
from bot.notify.chat import TokenBucket, irc_fold
from bot.notify.format import IRC_MAX_BYTES, cut

if TYPE_CHECKING:  # the notifier module builds this adapter
    from bot.notify.irc_notifier import IrcSettings

ilog = logging.getLogger("regtriage.notify.irc")

RFC_NICKLEN = 9  # RFC 1459/2812's nick length: what a server that has not said its NICKLEN yet surely takes


def nick_candidates(nick: str, alt_nicks: list[str] | tuple[str, ...] = (), nicklen: int | None = None) -> list[str]:
    """Nicks to register with, in order: the configured one, the configured alternatives, then
    the nick cut to the server's NICKLEN (RFC 1459's 9 before the server has said: ISUPPORT
    comes after registration) and cut further to make room for ``_``, ``__``, ``1`` .. ``9``."""
    n = max(1, int(nicklen or RFC_NICKLEN))
    out = [nick, *alt_nicks, nick[:n]]
    out += [nick[:n - len(sfx)] + sfx for sfx in ("_", "__", *(str(i) for i in range(1, 10)))]
    return [x for x in dict.fromkeys(out) if x]


PERMANENT_NUMERICS = {"401", "403", "405", "471", "473", "474", "475", "476"}
SEND_ERRORS = {"401", "403", "404", "442", "477", "489"}
JOIN_ERRORS = {"403", "405", "471", "473", "474", "475", "476", "477", "489"}
_SECRET_COMMANDS = ("PASS", "AUTHENTICATE", "PRIVMSG NICKSERV", "NS ", "NICKSERV")


class _PlainSASL(SASLSupport):
    """SASL PLAIN without the optional ``puresasl`` module (pydle 1.2 needs it otherwise)."""

    async def on_capability_sasl_available(self, value):
        if value:
            self._sasl_mechanisms = value.upper().split(",")
        return bool(self.sasl_username and self.sasl_password)

    async def on_capability_sasl_enabled(self):
        if self._sasl_mechanisms and "PLAIN" not in self._sasl_mechanisms:
            self._adapter._auth_error = "server does not offer SASL PLAIN"
            return False  # cap.FAILED
        await self._sasl_start("PLAIN")
        return True  # cap.NEGOTIATING

    async def _sasl_respond(self):
        import base64

        raw = b"\0".join(x.encode("utf-8") for x in (self.sasl_identity or "", self.sasl_username,
                                                      self.sasl_password))
        response = base64.b64encode(raw).decode("ascii")
        self._sasl_challenge = b""
        while len(response) >= 400:
            await self.rawmsg("AUTHENTICATE", response[:400])
            response = response[400:]
        await self.rawmsg("AUTHENTICATE", response or "+")

    async def on_raw_903(self, message):
        self._adapter._sasl_ok = True
        await super().on_raw_903(message)

    async def on_raw_904(self, message):
        self._adapter._auth_error = "SASL authentication failed (904)"
        await super().on_raw_904(message)

    async def on_raw_905(self, message):
        self._adapter._auth_error = "SASL authentication failed (905)"
        await super().on_raw_905(message)


class _Connection(pydle.connection.Connection):
    """pydle's connection, plus an extra CA file to verify the server against (tls_ca_file)."""

    ca_file: str | None = None

    def create_tls_context(self):
        ctx = super().create_tls_context()
        if self.tls_verify and self.ca_file:
            ctx.load_verify_locations(cafile=self.ca_file)
        return ctx


_Base = pydle.featurize(_PlainSASL, pydle.features.TLSSupport, pydle.features.ISUPPORTSupport,
                        pydle.features.RFC1459Support)


class _Client(_Base):
    RECONNECT_ON_ERROR = False  # the adapter reconnects, with its own backoff
    READ_TIMEOUT = 180

    def __init__(self, adapter: "IrcAdapter", *args, **kwargs) -> None:
        self._adapter = adapter
        super().__init__(*args, **kwargs)
        self.logger = logging.getLogger("regtriage.notify.irc.pydle")

    # never let pydle log what we send (PASS, AUTHENTICATE, IDENTIFY carry secrets)
    async def _send(self, input):
        if not isinstance(input, (bytes, str)):
            input = str(input)
        if isinstance(input, str):
            text = input
            input = input.encode(self.encoding)
        else:
            text = input.decode(self.encoding, "replace")
        if ilog.isEnabledFor(logging.DEBUG):
            up = text.upper()
            shown = text if not any(up.startswith(c) for c in _SECRET_COMMANDS) else text.split(" ", 1)[0] + " ***"
            ilog.debug(">> %s", scrub(shown.rstrip(), self._adapter._secrets))
        if not self.connected:
            raise ConnectionResetError("not connected")
        try:
            await self.connection.send(input)
        except asyncio.TimeoutError:
            await self.disconnect(expected=False)
            raise

    async def _connect(self, hostname, port, reconnect=False, password=None,
                       encoding=pydle.protocol.DEFAULT_ENCODING, channels=None, tls=False, tls_verify=True,
                       source_address=None):
        """As pydle's TLSSupport._connect, with :class:`_Connection` (and verification on by default)."""
        self.password = password
        if not reconnect or not self.connection:
            self._autojoin_channels = channels or []
            self.connection = _Connection(hostname, port, source_address=source_address, tls=tls,
                                          tls_verify=tls_verify)
            self.connection.ca_file = self._adapter.s.tls_ca_file
            self.encoding = encoding
        await self.connection.connect()

    async def _create_user(self, nickname):  # pydle 1.2 awaits it, but only WHOX makes it async
        super()._create_user(nickname)

    async def on_connect(self):
        await super().on_connect()
        self._adapter._registered.set()

    async def on_disconnect(self, expected):
        self._adapter._on_disconnect(self)

    async def on_raw_432(self, message):  # erroneous nickname (too long for the server, bad characters)
        await self._adapter._nick_refused(self, "432", [str(p) for p in message.params])

    async def on_raw_433(self, message):  # nickname in use
        await self._adapter._nick_refused(self, "433", [str(p) for p in message.params])

    async def on_raw_376(self, message):  # end of MOTD; some servers send no 375 first
        if getattr(self, "motd", None) is None:
            self.motd = ""
        await super().on_raw_376(message)

    async def on_raw_pong(self, message):
        self._adapter._on_pong(message.params)

    async def on_join(self, channel, user):
        if self.is_same_nick(self.nickname, user):
            self._adapter._on_joined(channel)

    async def on_part(self, channel, user, message=None):
        if self.is_same_nick(self.nickname, user):
            self._adapter._on_left(channel)

    async def on_kick(self, channel, target, by, reason=None):
        if self.is_same_nick(self.nickname, target):
            self._adapter._on_left(channel)

    async def on_raw(self, message):
        cmd = str(message.command).zfill(3) if isinstance(message.command, int) else str(message.command)
        if cmd in SEND_ERRORS or cmd in JOIN_ERRORS:
            self._adapter._on_error_numeric(cmd, [str(p) for p in message.params])
        await super().on_raw(message)

    async def on_unknown(self, message):  # ngircd's 379 and friends: not worth a warning
        ilog.debug("unhandled: %s %s", message.command, message.params)

    async def on_message(self, target, by, message):
        await self._adapter._on_message(self, target, by, message)


class IrcAdapter:
    kind = "irc"

    def __init__(self, settings: IrcSettings) -> None:
        self.s = settings
        self.name = settings.name
        self._client: _Client | None = None
        self._callbacks: list[CommandCallback] = []
        self._bucket = TokenBucket(settings.flood_rate, settings.flood_burst)
        self._send_lock: asyncio.Lock | None = None
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._listen = False
        self._ready = asyncio.Event()
        self._attempt_failed = asyncio.Event()
        self._registered = asyncio.Event()
        self._disconnected = asyncio.Event()
        self._joined: dict[str, str] = {}  # folded -> as the server spelled it
        self._join_waiters: dict[str, asyncio.Future] = {}
        self._join_errors: dict[str, str] = {}
        self._pongs: dict[str, asyncio.Future] = {}
        self._send_errors: list[tuple[str, list[str]]] = []
        self._secrets: list[str] = []
        self._auth_error: str | None = None
        self._sasl_ok = False
        self._handlers: set[asyncio.Task] = set()
        self.last_error: str | None = None
        self._problem: str | None = None  # what went wrong in the attempt under way (e.g. nick refused)
        self._nicks: list[str] = []
        self._connecting = False
        self.connects = 0

    # -- public API -------------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        return self._ready.is_set()

    @property
    def problem(self) -> str | None:
        """The real cause of the current or last failure to connect, if known."""
        return self._problem or self.last_error

    @property
    def nick(self) -> str:
        return (self._client.nickname if self._client and self._client.nickname else None) or self.s.nick

    def on_command(self, callback: CommandCallback) -> None:
        self._callbacks.append(callback)

    async def start(self, *, listen: bool = False, wait: bool = True, timeout: float | None = None) -> None:
        """Connect (in the background, reconnecting until :meth:`stop`).  ``wait``: return when
        the connection is ready, raise :class:`TransientError` if the first attempt fails."""
        self._listen = self._listen or listen
        self._send_lock = self._send_lock or asyncio.Lock()
        if self._task is None or self._task.done():
            self._stopping = False
            self._attempt_failed.clear()
            self._task = asyncio.create_task(self._supervise(), name=f"irc:{self.name}")
        if wait:
            await self.wait_ready(timeout if timeout is not None else self.s.connect_timeout + 5)

    async def wait_ready(self, timeout: float) -> None:
        if self._ready.is_set():
            return
        if self._task is not None and not self._connecting and self.last_error:
            # waiting out the reconnect backoff: fail now rather than hold up the caller
            raise TransientError(f"not connected to {self.s.server}:{self.s.port}: {self.last_error}")
        self._attempt_failed.clear()
        waits = [asyncio.ensure_future(self._ready.wait()), asyncio.ensure_future(self._attempt_failed.wait())]
        try:
            await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        if not self._ready.is_set():
            why = self._problem or self.last_error or f"no answer within {timeout:g} s"
            raise TransientError(f"cannot connect to {self.s.server}:{self.s.port}: {why}")

    async def stop(self) -> None:
        self._stopping = True
        task, self._task = self._task, None
        client = self._client
        if client is not None and client.connected:
            try:
                await asyncio.wait_for(client.quit("regtriage stopping"), 3)
            except Exception:  # noqa: BLE001 - best effort
                pass
            try:
                await client.disconnect(expected=True)
            except Exception:  # noqa: BLE001
                pass
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        for t in list(self._handlers):
            t.cancel()
        self._ready.clear()

    async def send(self, dest: str, message: OutMessage) -> Sent:
        """Send ``message.text`` (one line per text line) to channel ``dest``; return once the
        server has processed it (PING/PONG), raise on failure."""
        if not self._ready.is_set():
            if self._task is None:
                await self.start(wait=False)
            await self.wait_ready(self.s.connect_timeout)
        folded = irc_fold(dest)
        if folded not in self._joined:
            await self._join(dest)
        lines = [cut(x, IRC_MAX_BYTES) for x in message.text.replace("\r", "").split("\n") if x.strip()]
        if not lines:
            raise PermanentError("empty message")
        await self._deliver(dest, lines)
        return Sent()

    async def say(self, dest: str, lines: list[str]) -> None:
        """Chat answers: lines to a channel or nick, flood-limited, not confirmed."""
        if not self._ready.is_set():
            return
        for line in lines:
            await self._line("NOTICE" if self.s.notice else "PRIVMSG", dest, cut(line, IRC_MAX_BYTES))

    # -- connection ---------------------------------------------------------------------------
    def _read_secrets(self) -> dict[str, str | None]:
        out = {"server": None, "sasl": None, "nickserv": None}
        if self.s.server_password:
            out["server"] = self.s.server_password.read()
        if self.s.sasl_password:
            out["sasl"] = self.s.sasl_password.read()
        if self.s.nickserv_password:
            out["nickserv"] = self.s.nickserv_password.read()
        self._secrets = [v for v in out.values() if v]
        return out

    async def _supervise(self) -> None:
        attempt = 0
        while not self._stopping:
            try:
                self._connecting = True
                try:
                    await self._connect_once()
                finally:
                    self._connecting = False
                attempt = 0
                self.connects += 1
                self._attempt_failed.clear()
                await self._disconnected.wait()
                if not self._stopping:
                    self.last_error = "disconnected"
                    log.warning("irc %s: disconnected, reconnecting", self.name)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure: back off and retry
                self.last_error = scrub(describe(exc), self._secrets)
                log.info("irc %s: connect failed: %s", self.name, self.last_error)
            self._ready.clear()
            self._attempt_failed.set()
            self._fail_waiters(TransientError(self.last_error or "disconnected"))
            await self._drop_client()
            if self._stopping:
                break
            delay = min(self.s.reconnect_max, self.s.reconnect_min * (2 ** min(attempt, 16)))
            delay *= random.uniform(0.7, 1.0)
            attempt += 1
            await asyncio.sleep(delay)

    async def _drop_client(self) -> None:
        client, self._client = self._client, None
        if client is not None and client.connected:
            try:
                await client.disconnect(expected=True)
            except Exception:  # noqa: BLE001
                pass

    async def _connect_once(self) -> None:
        secrets = self._read_secrets()
        self._registered.clear()
        self._disconnected.clear()
        self._joined.clear()
        self._join_errors.clear()
        self._auth_error = None
        self._sasl_ok = False
        self._problem = None
        nick = self.s.nick
        self._nicks = nick_candidates(nick, self.s.alt_nicks)[1:]  # what to try after a 432/433
        client = _Client(self, nick, fallback_nicknames=[], username=self.s.username,
                         realname=self.s.realname, sasl_username=self.s.sasl_username,
                         sasl_password=secrets["sasl"])
        self._client = client
        await asyncio.wait_for(client.connect(self.s.server, self.s.port, tls=self.s.tls,
                                              tls_verify=self.s.tls_verify, password=secrets["server"]),
                               self.s.connect_timeout)
        waits = [asyncio.ensure_future(self._registered.wait()), asyncio.ensure_future(self._disconnected.wait())]
        try:
            await asyncio.wait(waits, timeout=self.s.connect_timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        if not self._registered.is_set():
            raise TransientError(self._problem or ("the server closed the connection during registration"
                                                   if self._disconnected.is_set()
                                                   else "no welcome from the server (registration timed out)"))
        if self._auth_error:
            log.warning("irc %s: %s; continuing unauthenticated", self.name, self._auth_error)
        if secrets["nickserv"]:
            await client.rawmsg("PRIVMSG", "NickServ", f"IDENTIFY {secrets['nickserv']}")
        for chan in self.s.channels:
            try:
                await self._join(chan, client)
            except PermanentError as exc:
                log.warning("irc %s: cannot join %s: %s", self.name, chan, exc)
        self._ready.set()
        log.info("irc %s: connected to %s:%s as %s", self.name, self.s.server, self.s.port, client.nickname)

    async def _join(self, chan: str, client: _Client | None = None) -> None:
        client = client or self._client
        if client is None or not client.connected:
            raise TransientError("not connected")
        folded = irc_fold(chan)
        if folded in self._joined:
            return
        self._join_errors.pop(folded, None)
        fut = asyncio.get_running_loop().create_future()
        self._join_waiters[folded] = fut
        try:
            await self._line("JOIN", chan, client=client)
            await asyncio.wait_for(fut, self.s.connect_timeout)
        except asyncio.TimeoutError:
            raise TransientError(f"no answer to JOIN {chan}") from None
        finally:
            self._join_waiters.pop(folded, None)

    def _fail_waiters(self, exc: Exception) -> None:
        for fut in list(self._join_waiters.values()) + list(self._pongs.values()):
            if not fut.done():
                fut.set_exception(exc)

    # -- events from the client ---------------------------------------------------------------
    def _on_disconnect(self, client) -> None:
        if client is self._client:
            self._ready.clear()
            self._disconnected.set()
            self._fail_waiters(TransientError("connection lost"))

    async def _nick_refused(self, client, code: str, params: list[str]) -> None:
        """432/433 while registering: the next candidate nick (alt_nicks, then cut to fit), or,
        when none is left, give up this attempt naming the server's answer."""
        tried = params[1] if len(params) > 1 else "?"
        text = params[-1] if len(params) > 2 else ""
        what = "erroneous nickname (too long or invalid here)" if code == "432" else "nickname in use"
        if client.registered:
            log.warning("irc %s: nick change to %s refused: %s %s", self.name, tried, code, text)
            return
        self._problem = f"nick {tried!r} refused by the server: {code} {what}" + (f" ({text})" if text else "")
        if self._nicks:
            nxt = self._nicks.pop(0)
            log.info("irc %s: %s; trying %s", self.name, self._problem, nxt)
            await client.set_nickname(nxt)
            return
        self._problem = f"no usable nick: {self._problem}; set [[notify.irc]] alt_nicks"
        log.warning("irc %s: %s", self.name, self._problem)
        await client.disconnect(expected=False)

    def _on_pong(self, params: list) -> None:
        for p in params:
            fut = self._pongs.get(str(p))
            if fut is not None and not fut.done():
                fut.set_result(True)

    def _on_joined(self, channel: str) -> None:
        folded = irc_fold(channel)
        self._joined[folded] = channel
        fut = self._join_waiters.get(folded)
        if fut is not None and not fut.done():
            fut.set_result(True)

    def _on_left(self, channel: str) -> None:
        self._joined.pop(irc_fold(channel), None)

    def _on_error_numeric(self, cmd: str, params: list[str]) -> None:
        chan = params[1] if len(params) > 1 else ""
        text = f"{cmd} {' '.join(params[1:])}".strip()
        folded = irc_fold(chan)
        fut = self._join_waiters.get(folded)
        if cmd in JOIN_ERRORS and fut is not None and not fut.done():
            err = PermanentError if cmd in PERMANENT_NUMERICS else TransientError
            fut.set_exception(err(f"cannot join {chan}: {text}"))
        self._send_errors.append((cmd, params))

    async def _on_message(self, client: _Client, target: str, by: str, message: str) -> None:
        if not self._listen or not self._callbacks or client is not self._client:
            return
        if not by or client.is_same_nick(by, client.nickname) or message.startswith("\x01"):
            return
        private = not client.is_channel(target)
        mask = client._format_user_mask(by)
        inc = Incoming(network="irc", account=self.name, channel=by if private else target, sender=by,
                       sender_id=mask, text=message, private=private,
                       names=tuple(dict.fromkeys((client.nickname or self.s.nick, "regtriage"))))
        task = asyncio.create_task(self._dispatch(inc))
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)

    async def _dispatch(self, inc: Incoming) -> None:
        for cb in list(self._callbacks):
            try:
                lines = await cb(inc)
            except Exception:  # noqa: BLE001 - a failing handler must not kill the connection
                log.exception("irc %s: command handler failed", self.name)
                continue
            if lines:
                await self.say(inc.channel, lines)

    # -- sending -------------------------------------------------------------------------------
    async def _throttle(self) -> None:
        while True:
            wait = self._bucket.wait_time()
            if wait <= 0 and self._bucket.take():
                return
            await asyncio.sleep(max(wait, 0.01))

    async def _line(self, command: str, *params: str, client: _Client | None = None) -> None:
        client = client or self._client
        if client is None or not client.connected:
            raise TransientError("not connected")
        await self._throttle()
        try:
            await client.rawmsg(command, *params)
        except (OSError, asyncio.TimeoutError, AttributeError) as exc:
            raise TransientError(f"connection lost while sending: {describe(exc)}") from None

    async def _deliver(self, dest: str, lines: list[str]) -> None:
        assert self._send_lock is not None
        async with self._send_lock:
            token = "rt" + _secrets.token_hex(6)
            fut = asyncio.get_running_loop().create_future()
            self._pongs[token] = fut
            mark = len(self._send_errors)
            try:
                for line in lines:
                    await self._line("NOTICE" if self.s.notice else "PRIVMSG", dest, line)
                client = self._client
                if client is None or not client.connected:
                    raise TransientError("connection lost while sending")
                await client.rawmsg("PING", token)
                try:
                    await asyncio.wait_for(fut, self.s.connect_timeout)
                except asyncio.TimeoutError:
                    raise TransientError("no PONG from the server after sending") from None
            finally:
                self._pongs.pop(token, None)
            folded = irc_fold(dest)
            errors = [(c, p) for c, p in self._send_errors[mark:] if len(p) > 1 and irc_fold(p[1]) == folded]
            del self._send_errors[:]
            if errors:
                cmd, params = errors[0]
                text = f"{cmd} {' '.join(params[1:])}"
                if cmd in PERMANENT_NUMERICS:
                    raise PermanentError(f"server refused the message: {text}")
                self._joined.pop(folded, None)  # rejoin on the next try
                raise TransientError(f"server refused the message: {text}")


__all__ = ["IrcAdapter"]
