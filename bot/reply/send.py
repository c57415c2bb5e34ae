"""Getting a composed reply out: the ``outbox`` maildir (dry run) and SMTP (stdlib smtplib:
STARTTLS or implicit TLS, AUTH PLAIN/LOGIN), with every error text scrubbed of the password."""

from __future__ import annotations

import base64
import ipaddress
import mailbox
import smtplib
import ssl
from email.message import EmailMessage
from pathlib import Path
from typing import Iterable

from bot.reply.compose import ReplyError, message_bytes
from bot.reply.settings import PASSWORD_ENV, USER_ENV, MailSettings


class SendError(Exception):
    """Sending failed; the message is safe to show (no secrets)."""


def write_outbox(msg: EmailMessage, outbox: Path) -> Path:
    """Store the message in the ``outbox`` maildir (``new/``); returns the file's path."""
    Path(outbox).parent.mkdir(parents=True, exist_ok=True)
    md = mailbox.Maildir(str(outbox), create=True)
    key = md.add(message_bytes(msg))
    path = Path(outbox) / "new" / key
    if not path.is_file():  # pragma: no cover - mailbox always delivers to new/ for plain bytes
        raise ReplyError(f"outbox: {path} missing after delivery")
    return path


# -- sending ----------------------------------------------------------------------------------------
def _secret_forms(user: str | None, password: str | None) -> list[str]:
    if not password:
        return []
    forms = [password, base64.b64encode(password.encode()).decode()]
    if user:
        forms.append(base64.b64encode(f"{user}\0{user}\0{password}".encode()).decode())
        forms.append(base64.b64encode(f"\0{user}\0{password}".encode()).decode())
    return [f for f in forms if f]


def scrub(text: str, hidden: Iterable[str]) -> str:
    for s in sorted(hidden, key=len, reverse=True):
        text = text.replace(s, "***")
    return text


def _describe(exc: BaseException) -> str:
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        parts = [f"{a}: {c} {m.decode('utf-8', 'replace') if isinstance(m, bytes) else m}"
                 for a, (c, m) in list(exc.recipients.items())[:5]]
        return "all recipients refused: " + "; ".join(parts)
    if isinstance(exc, smtplib.SMTPResponseException):
        text = exc.smtp_error.decode("utf-8", "replace") if isinstance(exc.smtp_error, bytes) else str(exc.smtp_error)
        return f"{exc.__class__.__name__}: {exc.smtp_code} {text}"
    return f"{exc.__class__.__name__}: {exc}"


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _qp_copy(msg: EmailMessage) -> EmailMessage:
    """The same message with a quoted-printable body (for servers without 8BITMIME)."""
    out = EmailMessage(policy=msg.policy)
    for k, v in msg.items():
        if k.lower() not in ("content-type", "content-transfer-encoding", "mime-version"):
            out[k] = v
    out.set_content(msg.get_content(), subtype="plain", charset="utf-8", cte="quoted-printable")
    return out


def preflight(settings: MailSettings, password: str | None) -> str | None:
    """Why the SMTP settings must not be used, or None (checked before anything is sent)."""
    if settings.user and not password:
        return f"[mail] user is set but there is no password (${PASSWORD_ENV} or [mail] password_file)"
    if password and not settings.user:
        return f"an SMTP password is set but no user ([mail] user or ${USER_ENV})"
    if settings.user and not (settings.ssl or settings.starttls) and not _loopback(settings.smtp_host):
        return "refusing to send the SMTP password without TLS: set [mail] starttls = true or ssl = true"
    return None


def send_message(msg: EmailMessage, rcpts: list[str], settings: MailSettings, *,
                 password: str | None = None) -> dict[str, str]:
    """Send over SMTP; returns the recipients the server refused (others were accepted).
    Raises :class:`SendError` with a message free of secrets."""
    reason = preflight(settings, password)
    if reason:
        raise SendError(reason)
    hidden = _secret_forms(settings.user, password)
    helo = settings.helo or settings.msgid_domain
    try:
        ctx = ssl.create_default_context(cafile=settings.ca_file) if (settings.ssl or settings.starttls) else None
        if settings.ssl:
            conn = smtplib.SMTP_SSL(settings.smtp_host, settings.smtp_port, local_hostname=helo,
                                    timeout=settings.timeout, context=ctx)
        else:
            conn = smtplib.SMTP(settings.smtp_host, settings.smtp_port, local_hostname=helo, timeout=settings.timeout)
        with conn:
            conn.ehlo()
            if settings.starttls and not settings.ssl:
                if not conn.has_extn("starttls"):
                    raise SendError("the server does not offer STARTTLS ([mail] starttls = true)")
                conn.starttls(context=ctx)
                conn.ehlo()
            if settings.user:
                try:
                    if settings.auth == "auto":
                        conn.login(settings.user, password)
                    else:
                        conn.user, conn.password = settings.user, password
                        method = conn.auth_plain if settings.auth == "plain" else conn.auth_login
                        conn.auth(settings.auth.upper(), method)
                finally:
                    conn.password = None
            options = []
            body_8bit = msg.get("Content-Transfer-Encoding", "").lower() == "8bit" and not msg.get_content().isascii()
            if body_8bit:
                if conn.has_extn("8bitmime"):
                    options.append("BODY=8BITMIME")
                else:
                    msg = _qp_copy(msg)
            refused = conn.sendmail(settings.envelope_from, rcpts, message_bytes(msg, "\r\n"), mail_options=options)
    except SendError:
        raise
    except (smtplib.SMTPException, OSError, ssl.SSLError, ValueError) as exc:
        raise SendError(scrub(_describe(exc), hidden)[:500]) from None
    return {a: scrub(_describe(smtplib.SMTPResponseException(c, m)), hidden) for a, (c, m) in (refused or {}).items()}
