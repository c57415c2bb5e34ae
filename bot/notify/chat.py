"""Chat commands (pure): parsing, the admin allow-list, rate limits.

What the bot answers, in a channel or room where it sits (and in a private IRC message)::

    !regtriage open mm/                  a query (bot.tracker.query: natural language and filters)
    regtriage: open regressions in mm/   the same, addressed to the bot by name
    !regtriage show 12                   one record
    !regtriage help
    !regtriage rerun 12                  allow-listed users only ([chat] admins)
    !regtriage resolve 12 [note]         allow-listed users only

Anything after the prefix that is not one of the command words is a query.  Nothing else is
ever answered (the bot's own lines never start with the prefix), so two bots cannot loop.

Allow-list entries: IRC ``nick!user@host`` masks (``*`` and ``?`` wildcards, compared with
IRC case folding) and Matrix user ids (``@user:server``, exact).  An IRC mask is only as good
as the host part: prefer cloaked or fixed hosts and ``user`` without ``~`` (identd).
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Iterable

from bot.notify.notifiers import UnknownNotifier, get_notifier

COMMANDS = ("help", "show", "rerun", "resolve")
STATE_CHANGING = ("rerun", "resolve")
MAX_INPUT = 400  # characters of a chat line that are read at all


@dataclass(frozen=True)
class Command:
    name: str  # query | help | show | rerun | resolve | usage
    args: str = ""  # the query text, or the note of resolve
    rid: int | None = None
    error: str | None = None  # for "usage": what was wrong

    @property
    def changes_state(self) -> bool:
        return self.name in STATE_CHANGING


_ID = re.compile(r"#?(\d{1,9})")


def parse_command(text: str, *, prefix: str = "!regtriage", names: Iterable[str] = ("regtriage",)) -> Command | None:
    """The command in a chat line, or None when the line is not addressed to the bot.

    Addressed: starts with ``prefix`` (case-insensitive) followed by a blank or the end, or
    with one of ``names`` followed by ``:`` or ``,`` (``regtriage: open mm/``)."""
    if not text:
        return None
    line = text.strip()[:MAX_INPUT]
    rest = None
    low = line.lower()
    p = prefix.lower()
    if low == p or low.startswith(p + " ") or low.startswith(p + "\t"):
        rest = line[len(prefix):]
    else:
        for n in names:
            if not n:
                continue
            m = re.match(re.escape(n) + r"\s*[:,]\s*", line, re.I)
            if m:
                rest = line[m.end():]
                break
    if rest is None:
        return None
    rest = " ".join(rest.split())  # one line, single blanks
    if not rest:
        return Command("help")
    word, _, tail = rest.partition(" ")
    w = word.lower()
    if w in ("help", "?", "-h", "--help"):
        return Command("help")
    if w in ("show", "rerun", "resolve"):
        m = _ID.fullmatch(tail.split(" ", 1)[0]) if tail else None
        if not m:
            usage = {"show": "show ID", "rerun": "rerun ID", "resolve": "resolve ID [note]"}[w]
            return Command("usage", error=f"usage: {prefix} {usage}")
        note = tail.split(" ", 1)[1].strip() if " " in tail else ""
        return Command(w, args=note[:200], rid=int(m.group(1)))
    return Command("query", args=rest[:300])


# -- allow-list --------------------------------------------------------------------------------
def irc_fold(s: str) -> str:
    """RFC 1459 case mapping: A-Z [ ] \\ ~ fold to a-z { } | ^."""
    return s.lower().translate(str.maketrans("[]\\~", "{}|^"))


def is_admin(network: str, sender: str | None, admins: Iterable[str]) -> bool:
    """``sender``: ``nick!user@host`` on IRC, ``@user:server`` on Matrix; whether an entry of
    ``admins`` matches is the network's notifier's rule (:meth:`bot.notify.notifiers.Notifier.admin`;
    none: no admins)."""
    if not sender:
        return False
    try:
        notifier = get_notifier(network)
    except UnknownNotifier:
        return False
    return any(notifier.admin(sender, a.strip()) for a in admins)
    for a in admins:
        a = a.strip()
        if network == "matrix":
            if a.startswith("@") and a == sender:
                return True
        elif network == "irc":
            if "!" in a and "@" in a and not a.startswith("@"):
                if _glob(irc_fold(a)).fullmatch(irc_fold(sender)):
                    return True
    return False


# -- rate limits ---------------------------------------------------------------------------------
class TokenBucket:
    """``burst`` tokens, refilled at ``rate`` per second."""

    def __init__(self, rate: float, burst: float, now: float | None = None) -> None:
        self.rate = float(rate)
        self.burst = float(burst)
        self.tokens = float(burst)
        self.stamp = time.monotonic() if now is None else now

    def _refill(self, now: float) -> None:
        if now > self.stamp:
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = max(self.stamp, now)

    def peek(self, cost: float = 1.0, now: float | None = None) -> bool:
        self._refill(time.monotonic() if now is None else now)
        return self.tokens >= cost

    def take(self, cost: float = 1.0, now: float | None = None) -> bool:
        if not self.peek(cost, now):
            return False
        self.tokens -= cost
        return True

    def wait_time(self, cost: float = 1.0, now: float | None = None) -> float:
        """Seconds until ``cost`` tokens are there (0 if now)."""
        self._refill(time.monotonic() if now is None else now)
        return 0.0 if self.tokens >= cost else (cost - self.tokens) / self.rate

    @property
    def full(self) -> bool:
        return self.tokens >= self.burst


class RateLimiter:
    """Per-user and per-channel token buckets: a request passes only when both have a token
    (and then takes one from each).  Buckets are kept for at most ``max_keys`` keys."""

    def __init__(self, user_rate: float, user_burst: float, channel_rate: float, channel_burst: float, *,
                 clock: Callable[[], float] = time.monotonic, max_keys: int = 10000) -> None:
        self.user = (user_rate, user_burst)
        self.channel = (channel_rate, channel_burst)
        self.clock = clock
        self.max_keys = max_keys
        self._buckets: OrderedDict[tuple[str, str], TokenBucket] = OrderedDict()
        self.refused = 0

    def _bucket(self, kind: str, key: str, now: float) -> TokenBucket:
        k = (kind, key)
        b = self._buckets.get(k)
        if b is None:
            rate, burst = self.user if kind == "user" else self.channel
            b = TokenBucket(rate, burst, now)
            self._buckets[k] = b
            while len(self._buckets) > self.max_keys:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(k)
        return b

    def allow(self, user: str, channel: str, now: float | None = None) -> bool:
        now = self.clock() if now is None else now
        u = self._bucket("user", user, now)
        c = self._bucket("channel", channel, now)
        if u.peek(1, now) and c.peek(1, now):
            u.take(1, now)
            c.take(1, now)
            return True
        self.refused += 1
        return False
