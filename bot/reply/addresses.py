"""Who a reply goes to: address syntax, what counts as a mailing list, the recipients policy
(``[mail] reply_to``, ``never_cc``, ``allowed_lists``), the static checks ``--send`` makes, and
whether a stored message was written by the bot.  Pure: no I/O."""

from __future__ import annotations

import re
from email.header import decode_header, make_header
from email.utils import getaddresses
from typing import TYPE_CHECKING, Any, Iterable

from bot.reply.answered import Answered, answered_from_stored
from bot.tracker.entry import clean_text

if TYPE_CHECKING:  # annotations only: settings and compose import this module
    from bot.reply.compose import Composed
    from bot.reply.settings import MailSettings

DEFAULT_LIST_DOMAINS = ("vger.kernel.org", "lists.linux.dev", "kvack.org", "lists.infradead.org",
                        "lists.ozlabs.org", "lists.freedesktop.org", "lists.sourceforge.net",
                        "lists.linaro.org", "lists.openwall.com", "googlegroups.com", "lists.*")
_ADDR = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]{1,64}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
                   r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def valid_address(addr: str | None) -> bool:
    return bool(addr) and len(addr) <= 254 and bool(_ADDR.fullmatch(addr)) and ".." not in addr


def _decode_words(text: str) -> str:
    if "=?" not in text:
        return text
    try:
        return str(make_header(decode_header(text)))
    except Exception:  # noqa: BLE001 - malformed encoded words: keep as written
        return text


def parse_addresses(headers: Iterable[str]) -> list[tuple[str, str]]:
    """(display name, address) pairs from address header values as written, parsed by the
    stdlib's RFC 5322 parser (``email.utils.getaddresses`` of Python < 3.11.10 misreads
    encoded words and quotes).  Display names are decoded and cleaned (one line, no control
    characters); an unparseable entry yields its address part for the caller to reject."""
    from email._header_value_parser import get_address_list

    out = []
    for h in headers:
        value = clean_text(str(h or ""))[:8000]  # unfolded; no CR/LF reaches the parser
        if not value:
            continue
        try:
            mailboxes = get_address_list(value)[0].all_mailboxes
            pairs = [(mb.display_name or "", mb.addr_spec or "") if mb.token_type == "mailbox"
                     else ("", f"invalid:{str(mb).strip()}") for mb in mailboxes]
        except Exception:  # noqa: BLE001 - the parser failed: keep only what looks like plain addresses
            pairs = [(_decode_words(n), a) for n, a in getaddresses([value])]
        out.extend((clean_text(n)[:200], clean_text(a)[:300]) for n, a in pairs)
    return out


def _domain_matches(domain: str, pattern: str) -> bool:
    if pattern.endswith(".*"):  # "lists.*": any domain starting with "lists."
        return domain.startswith(pattern[:-1])
    return domain == pattern or domain.endswith("." + pattern)


def list_post_addresses(values: Iterable[str]) -> set[str]:
    out = set()
    for v in values:
        for m in re.finditer(r"<mailto:([^>?]+)", v, re.I):
            out.add(m.group(1).strip().lower())
    return out


def is_list(addr: str, settings: MailSettings, extra_lists: Iterable[str] = ()) -> bool:
    a = addr.lower()
    if a in settings.allowed_lists or a in settings.lists or a in set(extra_lists):
        return True
    domain = a.rsplit("@", 1)[-1]
    return any(_domain_matches(domain, p) for p in settings.list_domains)


def recipients(answered: Answered, settings: MailSettings,
               report_authors: Iterable[str] = ()) -> tuple[list, list, list]:
    """(to, cc, dropped).  From -> To; of its To + Cc, with ``[mail] reply_to = "author+list"``
    (the default) only the mailing lists -> Cc (the other addresses came from mail anyone can
    forge; the report's author, ``report_authors``, stays), with ``"all"`` every address -> Cc.
    Deduplicated case-insensitively; the bot and ``never_cc`` removed; lists not allow-listed
    dropped."""
    own, never = settings.own_addresses, set(settings.never_cc)
    extra_lists = list_post_addresses(answered.list_post)
    seen: set[str] = set()
    dropped: list[dict[str, str]] = []

    def take(pairs):
        kept = []
        for name, addr in pairs:
            low = addr.lower()
            if not addr or low in seen:
                continue
            seen.add(low)
            if not valid_address(addr):
                dropped.append({"address": addr[:254], "reason": "not a plain ASCII address"})
            elif low in own:
                continue  # the bot itself: not worth a note
            elif low in never:
                dropped.append({"address": low, "reason": "on [mail] never_cc"})
            elif is_list(low, settings, extra_lists) and low not in settings.allowed_lists:
                dropped.append({"address": low, "reason": "mailing list not on [mail] allowed_lists"})
            else:
                kept.append((name, low))
        return kept

    to = take(parse_addresses(answered.from_))
    others = parse_addresses(answered.to + answered.cc)
    if settings.reply_to != "all":
        kept_others = []
        authors = {a.lower() for _, a in parse_addresses(report_authors)}
        for name, addr in others:
            low = addr.lower()
            if (low in seen or low in own or low in authors or not valid_address(addr)
                    or is_list(low, settings, extra_lists)):
                kept_others.append((name, addr))
            else:
                seen.add(low)
                dropped.append({"address": low, "reason": 'not the author nor a list ([mail] reply_to = "author+list")'})
        others = kept_others
    cc = take(others)
    if not to and cc:
        to = [cc.pop(0)]
    return to, cc, dropped


def check_recipients(c: Composed, settings: MailSettings) -> str | None:
    """Why ``--send`` must refuse this reply, or None."""
    if not c.recipients:
        return "no recipients left"
    if not settings.allowed_lists:
        return "[mail] allowed_lists is empty: the bot may not post to any list"
    if not any(a in settings.allowed_lists for a in c.recipients):
        return "none of the recipients is on [mail] allowed_lists"
    if settings.max_recipients and len(c.recipients) > settings.max_recipients:
        return f"{len(c.recipients)} recipients, more than [mail] max_recipients = {settings.max_recipients}"
    return None


def is_own(msg: dict[str, Any], settings: MailSettings) -> bool:
    """Whether a stored message was written by the bot (``X-Regtriage-Record``,
    ``Auto-Submitted``, or From one of its addresses): never answered."""
    a = answered_from_stored(msg)
    if a.regtriage_record is not None:
        return True
    if a.auto_submitted and a.auto_submitted.strip().lower() != "no":
        return True
    return any(addr.lower() in settings.own_addresses for _, addr in parse_addresses(a.from_))
