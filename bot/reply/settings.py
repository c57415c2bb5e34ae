"""``[mail]`` of the config as :class:`MailSettings` (checked when read), and the SMTP
password, read only when sending and kept out of every dataclass."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from email.utils import parseaddr
from pathlib import Path

from bot.config import ConfigError
from bot.reply.addresses import DEFAULT_LIST_DOMAINS, valid_address
from bot.tracker.entry import clean_text

PASSWORD_ENV = "REGTRIAGE_SMTP_PASSWORD"
USER_ENV = "REGTRIAGE_SMTP_USER"
PLACEHOLDER_FROM = "regtriage <regtriage@example.invalid>"  # `reply --stdout` without [mail] from
_DOMAIN = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


@dataclass(frozen=True)
class MailSettings:
    """``[mail]`` (and ``[web] base_url``) of the config.  Holds no password.

    ``from`` (required; its domain names the Message-IDs unless ``msgid_domain``),
    ``envelope_from``, ``bot_addresses`` (more addresses of the bot: never cc'd, never answered),
    ``smtp_host`` (localhost), ``smtp_port`` (465 with ``ssl``, 587 with ``starttls``, else 25),
    ``starttls`` (true unless ``ssl``), ``ssl`` (false), ``ca_file``, ``timeout`` (30 s),
    ``helo``, ``user`` (or ``$REGTRIAGE_SMTP_USER``), ``password_file`` (the password itself
    only there or in ``$REGTRIAGE_SMTP_PASSWORD``; ``password`` in the file is an error),
    ``auth`` (auto | plain | login), ``allowed_lists`` (lists the bot may post to; empty: none),
    ``lists`` and ``list_domains`` (what counts as a list address; plus the answered mail's
    List-Post), ``never_cc``, ``thread_limit`` (1) replies per thread per
    ``thread_window_hours`` (24), ``hourly_limit`` (10) replies per hour in all
    (0 mutes the bot), ``max_recipients`` (30), ``outbox`` ($REGTRIAGE_HOME/outbox).
    """

    from_name: str
    from_addr: str
    msgid_domain: str
    envelope_from: str
    outbox: Path
    base_url: str | None = None
    smtp_host: str = "localhost"
    smtp_port: int = 587
    starttls: bool = True
    ssl: bool = False
    ca_file: str | None = None
    timeout: float = 30.0
    helo: str | None = None
    user: str | None = None
    password_file: str | None = None
    auth: str = "auto"  # auto | plain | login
    allowed_lists: tuple[str, ...] = ()
    lists: tuple[str, ...] = ()
    list_domains: tuple[str, ...] = DEFAULT_LIST_DOMAINS
    never_cc: tuple[str, ...] = ()
    bot_addresses: tuple[str, ...] = ()
    thread_limit: int = 1
    thread_window_hours: float = 24.0
    hourly_limit: int = 10
    max_recipients: int = 30
    reply_to: str = "author+list"  # author+list | all
    placeholder_from: bool = False  # ``from`` was not set: PLACEHOLDER_FROM stands in (--stdout only)

    @classmethod
    def from_config(cls, config, *, placeholder: bool = False) -> "MailSettings":
        """``placeholder``: without ``[mail] from``, use PLACEHOLDER_FROM (and say so in
        ``placeholder_from``) instead of refusing -- for a dry run that only prints."""
        mail = config.section("mail")
        web = config.section("web")
        where = f"[mail] in {config.path}" if config.path else "[mail]"
        if "password" in mail:
            raise ConfigError(f"{where}: do not put the SMTP password in the config file; use "
                              f"${PASSWORD_ENV} or [mail] password_file")

        def get(key, kind, default):
            v = mail.get(key, default)
            if v is None:
                return None
            if kind is float and isinstance(v, int) and not isinstance(v, bool):
                v = float(v)
            if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
                raise ConfigError(f"{where}: {key} must be a {kind.__name__}")
            return v

        def addr_list(key, default=()):
            v = mail.get(key, list(default))
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise ConfigError(f"{where}: {key} must be a list of strings")
            return tuple(x.strip().lower() for x in v if x.strip())

        sender = get("from", str, None)
        placeholder_from = False
        if not sender and placeholder:
            sender, placeholder_from = PLACEHOLDER_FROM, True
        if not sender:
            raise ConfigError(f"{where}: 'from' is not set (e.g. from = \"regtriage <regtriage@example.org>\")")
        name, addr = parseaddr(clean_text(sender))
        if not valid_address(addr):
            raise ConfigError(f"{where}: 'from' is not a usable address: {clean_text(sender)!r}")
        domain = get("msgid_domain", str, None) or addr.rsplit("@", 1)[1]
        if not _DOMAIN.fullmatch(domain):
            raise ConfigError(f"{where}: msgid_domain is not a domain name: {domain!r}")
        envelope = get("envelope_from", str, None) or addr
        if not valid_address(envelope):
            raise ConfigError(f"{where}: envelope_from is not a usable address")
        use_ssl = get("ssl", bool, False)
        starttls = get("starttls", bool, not use_ssl)
        port = get("smtp_port", int, 465 if use_ssl else (587 if starttls else 25))
        auth = (get("auth", str, "auto") or "auto").lower()
        if auth not in ("auto", "plain", "login"):
            raise ConfigError(f"{where}: auth must be auto, plain or login")
        base_url = web.get("base_url")
        if base_url is not None and (not isinstance(base_url, str) or not re.match(r"https?://\S+$", base_url)):
            raise ConfigError("[web] base_url must be an http(s) URL")
        outbox = get("outbox", str, None)
        user = os.environ.get(USER_ENV) or get("user", str, None)
        for key in ("thread_limit", "hourly_limit", "max_recipients"):
            if get(key, int, 1) < 0:
                raise ConfigError(f"{where}: {key} must not be negative")
        reply_to = get("reply_to", str, "author+list")
        if reply_to not in ("author+list", "all"):
            raise ConfigError(f'{where}: reply_to must be "author+list" or "all"')
        return cls(
            from_name=clean_text(name) or "regtriage", from_addr=addr.lower(), msgid_domain=domain.lower(),
            envelope_from=envelope.lower(),
            outbox=Path(outbox).expanduser() if outbox else Path(config.home) / "outbox",
            base_url=base_url.rstrip("/") if base_url else None,
            smtp_host=get("smtp_host", str, "localhost"), smtp_port=port, starttls=starttls, ssl=use_ssl,
            ca_file=get("ca_file", str, None), timeout=get("timeout", float, 30.0), helo=get("helo", str, None),
            user=user, password_file=get("password_file", str, None), auth=auth,
            allowed_lists=addr_list("allowed_lists"), lists=addr_list("lists"),
            list_domains=addr_list("list_domains", DEFAULT_LIST_DOMAINS), never_cc=addr_list("never_cc"),
            bot_addresses=addr_list("bot_addresses"),
            thread_limit=get("thread_limit", int, 1), thread_window_hours=get("thread_window_hours", float, 24.0),
            hourly_limit=get("hourly_limit", int, 10), max_recipients=get("max_recipients", int, 30),
            reply_to=reply_to, placeholder_from=placeholder_from)

    @property
    def own_addresses(self) -> set[str]:
        return {self.from_addr, self.envelope_from, *self.bot_addresses}


def smtp_password(settings: MailSettings) -> str | None:
    """The SMTP password: ``$REGTRIAGE_SMTP_PASSWORD``, else ``[mail] password_file`` (first
    line).  Never anything else; never logged."""
    env = os.environ.get(PASSWORD_ENV)
    if env:
        return env
    if not settings.password_file:
        return None
    path = Path(settings.password_file).expanduser()
    try:
        st = path.stat()
        if st.st_mode & stat.S_IROTH:
            raise ConfigError(f"[mail] password_file {path} is readable by everyone; chmod o-r it")
        with open(path, encoding="utf-8") as fh:
            line = fh.readline()
    except OSError as exc:
        raise ConfigError(f"[mail] password_file: cannot read {path}: {exc.strerror}") from None
    return line.rstrip("\r\n") or None
