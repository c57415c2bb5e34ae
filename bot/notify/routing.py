"""Which targets an event goes to (pure).

Events (canonical names; aliases accepted in the config and the API):

=================  ========================================================================
``triaged``        a new regression was tracked and triaged (new, triage, new-regression)
``rerun-scheduled``  a rerun was scheduled (rerun, rerun_scheduled)
``confirmed``      the rerun confirmed it
``not-reproduced`` the rerun did not reproduce it (not_reproduced)
``inconclusive``   the rerun was inconclusive
``improved``       the rerun found the "bad" kernel significantly better
``fix-landed``     a fix was found in a kernel tree (fix, fixed, fix-pending, fix_landed)
=================  ========================================================================

A route matches an event on a record when the event is one of its ``events`` (none listed:
every event), the record's subsystem starts with one of its ``subsystem`` prefixes at a path
boundary (``mm/`` matches ``mm`` and ``mm/slab``, never ``mmc``; core-kernel areas by their
short name: ``kernel/sched`` and ``sched`` are the same), and its kind is one of ``kind``.
An event goes to the union of the targets of all matching routes, each once.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Iterable

EVENTS = ("triaged", "rerun-scheduled", "confirmed", "not-reproduced", "inconclusive", "improved", "fix-landed")
TEST_EVENT = "test"

EVENT_ALIASES = {
    "new": "triaged", "new-regression": "triaged", "triage": "triaged", "tracked": "triaged",
    "rerun": "rerun-scheduled", "rerun-scheduled": "rerun-scheduled", "scheduled": "rerun-scheduled",
    "reproduced": "confirmed", "unreproduced": "not-reproduced",
    "fix": "fix-landed", "fixed": "fix-landed", "fix-pending": "fix-landed", "fix-landed": "fix-landed",
}

# tracker status (new value of a status history row) -> event
STATUS_EVENTS = {"triaged": "triaged", "rerun-scheduled": "rerun-scheduled", "confirmed": "confirmed",
                 "not-reproduced": "not-reproduced", "inconclusive": "inconclusive", "improved": "improved",
                 "fix-pending": "fix-landed", "fixed": "fix-landed"}

LABELS = {"triaged": "new regression", "rerun-scheduled": "rerun scheduled", "confirmed": "confirmed",
          "not-reproduced": "not reproduced", "inconclusive": "inconclusive",
          "improved": "improved (the bad kernel was better)", "fix-landed": "fix landed",
          TEST_EVENT: "test"}


def normalize_event(name: str) -> str:
    """Canonical event name; ValueError for an unknown one."""
    n = re.sub(r"[\s_]+", "-", str(name).strip().lower())
    n = EVENT_ALIASES.get(n, n)
    if n not in EVENTS:
        raise ValueError(f"unknown event {name!r} (one of: {', '.join(EVENTS)})")
    return n


def normalize_route_subsystem(value: str) -> str:
    """``mm/`` -> ``mm``; ``kernel/sched/`` -> ``sched`` (as records name core-kernel areas)."""
    from bot.tracker.fields import normalize_subsystem

    v = normalize_subsystem(value)
    if not v:
        raise ValueError(f"empty subsystem {value!r}")
    return v


def subsystem_matches(prefix: str, subsystem: str | None) -> bool:
    """``prefix`` (normalised) covers ``subsystem`` at a path-component boundary."""
    if not subsystem:
        return False
    from bot.tracker.fields import normalize_subsystem

    s = normalize_subsystem(subsystem) or ""
    return s == prefix or s.startswith(prefix + "/")


@dataclass
class Route:
    events: tuple[str, ...] | None  # None: every event
    subsystems: tuple[str, ...] | None  # None: any subsystem (also records without one)
    kinds: tuple[str, ...] | None  # None: any kind
    targets: tuple[str, ...]

    def matches(self, event: str, subsystem: str | None, kind: str | None) -> bool:
        if event == TEST_EVENT:
            return False
        if self.events is not None and event not in self.events:
            return False
        if self.subsystems is not None and not any(subsystem_matches(p, subsystem) for p in self.subsystems):
            return False
        if self.kinds is not None and (kind or "").lower() not in self.kinds:
            return False
        return True


def route_event(routes: Iterable[Route], event: str, entry: dict[str, Any]) -> list[str]:
    """The targets (canonical names, each once, in route order) of ``event`` on a record
    (a tracker entry, or any dict with ``subsystem`` and ``kind``)."""
    event = normalize_event(event)
    out: list[str] = []
    for r in routes:
        if r.matches(event, entry.get("subsystem"), entry.get("kind")):
            out += [t for t in r.targets if t not in out]
    return out


def idempotency_key(event: str, rid: int | None, ref: str, target: str, instance: str = "") -> str:
    """One notification per (event, record, ref, target): sha256 hex.  ``instance``: a random
    id of the database (record ids repeat across databases, transaction ids must not)."""
    raw = "\x1f".join((instance, event, "" if rid is None else str(int(rid)), ref or "", target))
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def txn_id(key: str) -> str:
    """The Matrix transaction id of a notification: derived from its key, so a resend of the
    same notification (after a crash, by any process logged in as the same device) is the
    same transaction and the homeserver answers with the first event instead of posting again."""
    return "regtriage." + key[:40]
