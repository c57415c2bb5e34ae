"""Who may move the tracker and the lab, and which times are believed (pure helpers + a little I/O).

The trust model (README.md, "Trust model"):

* ``#regzbot`` commands: the bookkeeping commands regzbot lets anyone use (``title``, ``link``,
  ``unlink``, ``monitor``, ``unmonitor``, ``ignore-activity``, ``poke``) are honoured from anyone.
  The commands that close a record or make one rerunnable -- :data:`PRIVILEGED_COMMANDS` --
  are honoured only from a sender on ``[trust] trusted_senders``; from anyone else they are
  refused, and the refusal is written into the record's history with the reason.
* robot reports: a report that reads like a test robot's (kernel test robot, LKP, 0-day,
  KernelCI, syzbot) counts as a robot's only when its From is on ``[trust] robot_senders``
  (default :data:`DEFAULT_ROBOTS`); a look-alike from another address is never rerun on its own.
* a mail's ``Date:`` is written by the sender: it is shown, never used to judge age.  The age of
  a mail is its *received* time (:func:`received_time`): the date of the topmost ``Received:``
  header (added by the last hop -- the list server -- not by the sender), never later than
  the time we ingested it; without a usable ``Received:``, the ingest time.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parseaddr, parsedate_to_datetime
from typing import Any, Iterable

# Commands that close a record or create / re-aim one so that it may be rerun in the lab.
PRIVILEGED_COMMANDS = frozenset({"introduced", "dup-of", "dup", "fix", "resolve", "inconclusive",
                                 "backburner", "unbackburn"})
# The addresses the robots mail from (From: header).  Patterns: ``*`` and ``?`` wildcards.
DEFAULT_ROBOTS = ("lkp@intel.com", "oliver.sang@intel.com", "syzbot@syzkaller.appspotmail.com",
                  "syzbot+*@syzkaller.appspotmail.com", "bot@kernelci.org")


class TrustError(ValueError):
    """A [trust] option cannot be used."""


def _addr_patterns(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise TrustError(f"[trust] {key} must be a list of addresses (wildcards * and ? allowed)")
    return tuple(x.strip().lower() for x in value if x.strip())


def address_of(from_header: str | None) -> str:
    """The lower-case address in a From: value ("" when none)."""
    if not from_header:
        return ""
    addr = parseaddr(str(from_header).replace("\r", " ").replace("\n", " "))[1]
    return addr.strip().lower() if "@" in addr else ""


def matches(addr: str, patterns: Iterable[str]) -> bool:
    a = (addr or "").lower()
    if not a:
        return False
    return any(fnmatch.fnmatchcase(a, p) if any(c in p for c in "*?[") else a == p for p in patterns)


@dataclass(frozen=True)
class TrustSettings:
    trusted_senders: tuple[str, ...] = ()
    robot_senders: tuple[str, ...] = DEFAULT_ROBOTS

    @classmethod
    def from_config(cls, config) -> "TrustSettings":
        if config is None:
            return cls()
        t = config.get("trust", {}) if isinstance(config, dict) else config.section("trust")
        if not isinstance(t, dict):
            raise TrustError("[trust] must be a table")
        return cls(trusted_senders=_addr_patterns(t.get("trusted_senders", []), "trusted_senders"),
                   robot_senders=_addr_patterns(t.get("robot_senders", list(DEFAULT_ROBOTS)), "robot_senders"))

    def trusted(self, from_header: str | None) -> bool:
        return matches(address_of(from_header), self.trusted_senders)

    def robot(self, from_header: str | None) -> bool:
        return matches(address_of(from_header), self.robot_senders)

    def may_command(self, name: str, from_header: str | None) -> bool:
        """May this sender's ``#regzbot <name>`` change the tracker?"""
        return name not in PRIVILEGED_COMMANDS or self.trusted(from_header)


# -- times ------------------------------------------------------------------------------------------
def _aware(dt: datetime | None) -> datetime | None:
    if dt is not None and dt.tzinfo is None:
        return dt.replace(tzinfo=timezone.utc)
    return dt


def _header_values(headers: Any, name: str) -> list[str]:
    """Values of header ``name`` in order, from stored headers (a list of [name, value] pairs)."""
    out = []
    for pair in headers or ():
        if isinstance(pair, (list, tuple)) and len(pair) == 2 and str(pair[0]).lower() == name:
            out.append(str(pair[1]))
    return out


def received_time(headers: Any, ingested_at: datetime | None) -> datetime | None:
    """When the mail reached the archive: the date of the topmost ``Received:`` header, clamped
    to ``ingested_at`` (a server clock ahead of ours, or a forged header, cannot make it newer
    than the moment we read it); ``ingested_at`` when there is no readable ``Received:``.
    The mail's own ``Date:`` is never consulted."""
    ingested = _aware(ingested_at)
    for value in _header_values(headers, "received")[:1]:
        _, sep, when = value.rpartition(";")
        if not sep:
            break
        try:
            dt = _aware(parsedate_to_datetime(" ".join(when.split())))
        except (TypeError, ValueError, IndexError, OverflowError):
            break
        if dt is None:
            break
        return min(dt, ingested) if ingested is not None else dt
    return ingested


def mail_received_at(store, message_id: str | None) -> datetime | None:
    """:func:`received_time` of a stored message (None: not stored)."""
    found = store.received_inputs(message_id) if message_id else None
    return None if found is None else received_time(*found)
