"""The notification and chat settings of the config, validated (pure: no network, no secrets read).

```toml
[notify]
retry_base = 30            # seconds before the first retry; doubles per attempt ...
retry_max = 3600           # ... up to this
max_attempts = 200         # then the notification is marked failed
max_age_hours = 72         # never send a notification older than this (marked failed)
lease = 120                # seconds a deliverer holds a row while sending it
send_timeout = 20          # seconds for one send (connect + deliver)
watch_tracker = true       # --send-pending turns tracker status changes into events

[[notify.irc]]
name = "oftc"              # optional; names the connection in "irc:oftc/#chan"
server = "irc.oftc.net"
port = 6697                # default 6697 with TLS, 6667 without
tls = true                 # default true
tls_verify = true
tls_ca_file = "/etc/regtriage/irc-ca.pem"   # optional: a private CA to verify the server with
nick = "regtriage"
channels = ["#mm-regressions"]
sasl_username = "regtriage"               # SASL PLAIN, password from:
sasl_password_env = "REGTRIAGE_IRC_SASL"  # or sasl_password_file
nickserv_password_env = "..."             # or nickserv_password_file: PRIVMSG NickServ IDENTIFY
flood_burst = 4            # token bucket: at most this many lines at once ...
flood_rate = 0.5           # ... then this many per second
reconnect_min = 2          # reconnect backoff, seconds (doubles, with jitter) ...
reconnect_max = 300        # ... up to this

[[notify.matrix]]
homeserver = "https://matrix.example.org"
user_id = "@regtriage:example.org"
access_token_env = "REGTRIAGE_MATRIX_TOKEN"   # or access_token_file, password_env, password_file
device_id = "REGTRIAGE"    # fixed device: transaction ids dedupe across logins
rooms = ["#regressions:example.org"]
threads = "auto"           # follow-ups in an m.thread: true, false, or auto (server >= v1.4)
msgtype = "m.notice"       # or m.text

[[notify.route]]
events = ["confirmed"]     # omit or ["*"] for every event
subsystem = "mm/"          # path prefix (or a list); omit for any
kind = "performance"       # optional (or a list)
targets = ["irc:#mm-regressions", "matrix:#regressions:example.org"]

[chat]
admins = ["nick!user@host.example", "@alice:example.org"]   # may rerun/resolve; IRC masks take * and ?
prefix = "!regtriage"      # also answered: "<bot nick>: ..." / "regtriage: ..."
max_lines = 5
max_line_length = 350
user_rate = 0.2            # per-user token bucket (requests per second) ...
user_burst = 3
channel_rate = 0.5         # ... and per channel
channel_burst = 6

[web]
base_url = "https://regtriage.example.org"   # links in messages and answers
```

Each ``[[notify.<kind>]]`` table is parsed by the notifier of that kind (bot/notify/notifiers.py:
irc and matrix built in, others from the ``regtriage.notifiers`` entry points), with the helpers
here (:func:`get_value`, :func:`str_list`, :func:`secret`, :func:`positive`).

Secrets (passwords, access tokens) only come from the environment or a file (not readable by
everyone); a secret written into the config file itself is an error.  :class:`Secret` only
says where the secret is; its ``repr`` never shows a value.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from bot.config import ConfigError
from bot.notify.notifiers import BUILTIN, ENTRY_POINT_GROUP, UnknownNotifier, get_notifier
from bot.notify.routing import EVENTS, Route, normalize_event, normalize_route_subsystem

SECRET_KEYS = ("password", "access_token", "sasl_password", "nickserv_password", "token")


@dataclass(frozen=True)
class Secret:
    """Where a secret is: an environment variable or a file.  Read only when needed."""

    env: str | None = None
    file: str | None = None
    what: str = "secret"

    def read(self) -> str:
        if self.env:
            value = os.environ.get(self.env)
            if value:
                return value.strip()
            if not self.file:
                raise ConfigError(f"{self.what}: ${self.env} is not set")
        if self.file:
            path = Path(self.file).expanduser()
            try:
                st = path.stat()
                if st.st_mode & stat.S_IROTH:
                    raise ConfigError(f"{self.what}: {path} is readable by everyone; chmod o-r it")
                lines = path.read_text(encoding="utf-8").strip().splitlines()
                value = lines[0].strip() if lines else ""
            except OSError as exc:
                raise ConfigError(f"{self.what}: cannot read {path}: {exc.strerror}") from None
            if not value:
                raise ConfigError(f"{self.what}: {path} is empty")
            return value
        raise ConfigError(f"{self.what}: no source configured")

    def __repr__(self) -> str:  # never a value
        return f"Secret(env={self.env!r}, file={self.file!r})"


@dataclass(frozen=True)
class TargetSpec:
    """One place messages go: an IRC channel on a server, a Matrix room on an account."""

    kind: str  # the notifier: irc, matrix, ...
    account: str  # the settings' name
    dest: str  # "#chan" or "#alias:server" / "!id:server"
    name: str  # canonical target name, as stored in the outbox


@dataclass
class ChatSettings:
    enabled: bool = True
    prefix: str = "!regtriage"
    admins: list[str] = field(default_factory=list)
    max_lines: int = 5
    max_line_length: int = 350
    user_rate: float = 0.2
    user_burst: float = 3
    channel_rate: float = 0.5
    channel_burst: float = 6


@dataclass
class NotifySettings:
    connections: list[Any] = field(default_factory=list)  # [[notify.<kind>]], by notifier (bot/notify/notifiers.py)
    routes: list[Route] = field(default_factory=list)
    chat: ChatSettings = field(default_factory=ChatSettings)
    base_url: str | None = None
    retry_base: float = 30
    retry_max: float = 3600
    max_attempts: int = 200
    max_age_hours: float = 72
    lease: float = 120
    send_timeout: float = 20
    watch_tracker: bool = True
    _targets: dict[str, TargetSpec] = field(default_factory=dict, repr=False)

    # -- targets --------------------------------------------------------------------------
    def accounts(self) -> list[Any]:
        """Every configured connection: the built-in notifiers' first (irc, matrix), each in
        config order."""
        return list(self.connections)

    def of_kind(self, kind: str) -> list[Any]:
        return [a for a in self.connections if a.kind == kind]

    @property
    def irc(self) -> list[Any]:
        return self.of_kind("irc")

    @property
    def matrix(self) -> list[Any]:
        return self.of_kind("matrix")

    def account(self, kind: str, name: str) -> Any:
        for a in self.accounts():
            if a.kind == kind and a.name == name:
                return a
        raise KeyError(f"{kind}:{name}")

    def targets(self) -> list[TargetSpec]:
        """Every configured channel and room, in config order."""
        return list(dict.fromkeys(self._targets.values()))

    def resolve_target(self, name: str) -> TargetSpec:
        """``irc:#chan``, ``irc:<name>/#chan``, ``matrix:#room:server``, ``matrix:<name>/!id:server``."""
        spec = self._targets.get(name.strip())
        if spec is None:
            known = ", ".join(t.name for t in self.targets()) or "none configured"
            raise ConfigError(f"unknown notification target {name!r} (configured: {known})")
        return spec

    def _index_targets(self) -> None:
        count: dict[tuple[str, str], int] = {}
        for a in self.accounts():
            for d in a.dests:
                count[(a.kind, d)] = count.get((a.kind, d), 0) + 1
        for a in self.accounts():
            for d in a.dests:
                qualified = f"{a.kind}:{a.name}/{d}"
                short = f"{a.kind}:{d}"
                canonical = short if count[(a.kind, d)] == 1 else qualified
                spec = TargetSpec(a.kind, a.name, d, canonical)
                self._targets.setdefault(qualified, spec)
                if count[(a.kind, d)] == 1:
                    self._targets[short] = spec


# -- parsing --------------------------------------------------------------------------------
def get_value(table: dict[str, Any], key: str, kind, default, where: str):
    value = table.get(key, default)
    if value is None:
        return None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if kind is int and isinstance(value, bool):
        raise ConfigError(f"{where}: {key} must be an integer")
    if not isinstance(value, kind):
        raise ConfigError(f"{where}: {key} must be {getattr(kind, '__name__', kind)}")
    return value


def str_list(table: dict[str, Any], key: str, where: str, *, required: bool = False) -> list[str]:
    value = table.get(key)
    if value is None:
        if required:
            raise ConfigError(f"{where}: {key} is required")
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{where}: {key} must be a list of strings")
    return [v.strip() for v in value]


def secret(table: dict[str, Any], base: str, where: str, what: str) -> Secret | None:
    env = get_value(table, f"{base}_env", str, None, where)
    path = get_value(table, f"{base}_file", str, None, where)
    if env and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", env):
        raise ConfigError(f"{where}: {base}_env must name an environment variable")
    return Secret(env or None, path or None, f"{where} {what}") if (env or path) else None


def refuse_inline_secrets(table: dict[str, Any], where: str) -> None:
    for key in SECRET_KEYS:
        if key in table:
            raise ConfigError(f"{where}: do not put {key} in the config file; use {key}_env (an "
                              f"environment variable) or {key}_file")


def positive(value, key: str, where: str, *, zero: bool = False):
    if value is None or value < 0 or (value == 0 and not zero):
        raise ConfigError(f"{where}: {key} must be {'>= 0' if zero else '> 0'}")
    return value


def _parse_route(t: dict[str, Any], i: int) -> Route:
    where = f"[[notify.route]] #{i + 1}"
    if not isinstance(t, dict):
        raise ConfigError(f"{where} must be a table")
    unknown = set(t) - {"events", "event", "subsystem", "subsystems", "kind", "kinds", "targets", "target"}
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    events = str_list(t, "events", where) + str_list(t, "event", where)
    norm_events: tuple[str, ...] | None = None
    if events and "*" not in events:
        try:
            norm_events = tuple(dict.fromkeys(normalize_event(e) for e in events))
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    subs = str_list(t, "subsystem", where) + str_list(t, "subsystems", where)
    subsystems = tuple(dict.fromkeys(normalize_route_subsystem(s) for s in subs)) if subs and "*" not in subs else None
    kinds = str_list(t, "kind", where) + str_list(t, "kinds", where)
    from bot.tracker.query import KIND_WORDS, KINDS

    norm_kinds = None
    if kinds and "*" not in kinds:
        nk = []
        for k in kinds:
            v = KIND_WORDS.get(k.lower(), k.lower())
            if v not in KINDS:
                raise ConfigError(f"{where}: unknown kind {k!r} (one of {', '.join(KINDS)})")
            nk.append(v)
        norm_kinds = tuple(dict.fromkeys(nk))
    targets = str_list(t, "targets", where) + str_list(t, "target", where)
    if not targets:
        raise ConfigError(f"{where}: targets is required")
    return Route(events=norm_events, subsystems=subsystems, kinds=norm_kinds, targets=tuple(targets))


def _url(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not re.match(r"https?://\S+$", value):
        raise ConfigError(f"{where} must be an http(s) URL")
    return value.rstrip("/")


def _parse_connections(notify: dict[str, Any]) -> list[Any]:
    """The ``[[notify.<kind>]]`` tables, each parsed by its notifier: the built-in kinds first
    (in their order), then the others in config order.  A table no notifier is known for
    (a typo, a plug-in not installed) is an error rather than silently never used."""
    tables = [k for k, v in notify.items() if k != "route" and (isinstance(v, (list, dict)) or k in BUILTIN)]
    out: list[Any] = []
    for kind in [k for k in BUILTIN if k in tables] + [k for k in tables if k not in BUILTIN]:
        try:
            notifier = get_notifier(kind)
        except UnknownNotifier as exc:
            raise ConfigError(f"[[notify.{kind}]]: {exc}; a notifier another package provides must be "
                              f"installed (entry point group {ENTRY_POINT_GROUP})") from None
        items = notify[kind]
        if isinstance(items, dict):
            items = [items]
        if not isinstance(items, list):
            raise ConfigError(f"[[notify.{kind}]] must be an array of tables")
        for i, t in enumerate(items):
            where = f"[[notify.{kind}]] #{i + 1}"
            if not isinstance(t, dict):
                raise ConfigError(f"{where} must be a table")
            out.append(notifier.parse(t, where))
    return out


def _parse_routes(routes: Any, s: NotifySettings) -> list[Route]:
    """The ``[[notify.route]]`` tables, their targets resolved to canonical names."""
    if isinstance(routes, dict):
        routes = [routes]
    if not isinstance(routes, list):
        raise ConfigError("[[notify.route]] must be an array of tables")
    out = []
    for i, t in enumerate(routes):
        r = _parse_route(t, i)
        resolved = []
        for name in r.targets:
            try:
                resolved.append(s.resolve_target(name).name)
            except ConfigError as exc:
                raise ConfigError(f"[[notify.route]] #{i + 1}: {exc}") from None
        r.targets = tuple(dict.fromkeys(resolved))
        out.append(r)
    return out


def _parse_chat(chat: Any) -> ChatSettings:
    """``[chat]``: who may change records from chat, how the bot is addressed, rate limits."""
    if not isinstance(chat, dict):
        raise ConfigError("[chat] must be a table")
    where = "[chat]"
    admins = str_list(chat, "admins", where)
    prefix = get_value(chat, "prefix", str, "!regtriage", where)
    if not prefix.strip() or re.search(r"\s", prefix):
        raise ConfigError("[chat] prefix must be one word")
    return ChatSettings(
        enabled=get_value(chat, "enabled", bool, True, where), prefix=prefix, admins=admins,
        max_lines=int(positive(get_value(chat, "max_lines", int, 5, where), "max_lines", where)),
        max_line_length=max(80, int(positive(get_value(chat, "max_line_length", int, 350, where), "max_line_length",
                                              where))),
        user_rate=positive(get_value(chat, "user_rate", float, 0.2, where), "user_rate", where),
        user_burst=positive(get_value(chat, "user_burst", float, 3.0, where), "user_burst", where),
        channel_rate=positive(get_value(chat, "channel_rate", float, 0.5, where), "channel_rate", where),
        channel_burst=positive(get_value(chat, "channel_burst", float, 6.0, where), "channel_burst", where))


def load_settings(config) -> NotifySettings:
    """The settings from a :class:`bot.config.Config` (or anything with ``.section()``), or
    from a plain dict of the whole config file."""
    if isinstance(config, dict):
        section = lambda name: config.get(name, {}) or {}  # noqa: E731
    elif config is None:
        section = lambda name: {}  # noqa: E731
    else:
        section = config.section
    notify = section("notify")
    if not isinstance(notify, dict):
        raise ConfigError("[notify] must be a table")
    chat = section("chat")
    web = section("web")
    where = "[notify]"
    s = NotifySettings(
        base_url=_url(web.get("base_url"), "[web] base_url"),
        retry_base=positive(get_value(notify, "retry_base", float, 30.0, where), "retry_base", where),
        retry_max=positive(get_value(notify, "retry_max", float, 3600.0, where), "retry_max", where),
        max_attempts=positive(get_value(notify, "max_attempts", int, 200, where), "max_attempts", where),
        max_age_hours=positive(get_value(notify, "max_age_hours", float, 72.0, where), "max_age_hours", where),
        lease=positive(get_value(notify, "lease", float, 120.0, where), "lease", where),
        send_timeout=positive(get_value(notify, "send_timeout", float, 20.0, where), "send_timeout", where),
        watch_tracker=get_value(notify, "watch_tracker", bool, True, where),
    )
    s.connections = _parse_connections(notify)
    names = [(a.kind, a.name) for a in s.accounts()]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ConfigError("two [[notify.*]] connections share the name " + ", ".join(f"{k}:{n}" for k, n in sorted(dup))
                          + "; give them distinct name = \"...\"")
    s._index_targets()
    s.routes = _parse_routes(notify.get("route", []), s)
    s.chat = _parse_chat(chat)
    return s


def settings_from(config, settings: NotifySettings | None = None) -> NotifySettings:
    """``settings`` when given, else ``config`` when it is already the settings, else
    :func:`load_settings` of it (for the functions that take either)."""
    if settings is not None:
        return settings
    if isinstance(config, NotifySettings):
        return config
    return load_settings(config)


__all__ = ["EVENTS", "ChatSettings", "NotifySettings", "Route", "Secret", "TargetSpec", "get_value", "load_settings",
           "positive", "refuse_inline_secrets", "secret", "str_list"]
