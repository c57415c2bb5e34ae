"""Ingest pipeline: raw bytes from any source -> parsed -> stored (or quarantined) in batches.

Every source (files, lore over HTTP, public-inbox git epochs) hands raw messages to an
``Ingester``.  It parses them (bot.sources.mail never raises), batches them and writes each batch in one
transaction together with the source's cursor, so a crash loses nothing and a rerun resumes.

Parsing is the dominant cost of a bulk backfill.  With ``parallel=True`` (bulk sources: file
ingest, git epochs) the Ingester parses each batch in worker processes while the main process
writes the previous one (a two-stage pipeline); batches are still written strictly in order, so
cursors never run ahead of stored data.  The workers are forked when the Ingester is created,
so create it before opening pipes to other processes (a forked worker would hold them open).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from bot.sources.limits import DEFAULT_LIMITS, IngestLimits
from bot.sources.mail import parse_message
from storage.store import Outcome, Store, write_refused

log = logging.getLogger(__name__)


def _parse_many(raws: list[bytes], max_bytes: int, max_references: int = 64) -> list[Any]:
    return [parse_message(raw, max_bytes=max_bytes, max_references=max_references) for raw in raws]


def _joined(parts: list[list[Any]]) -> list[Any]:
    return [p for part in parts for p in part]


class Ingester:
    def __init__(self, store: Store, *, batch_size: int = 500, max_bytes: int | None = None,
                 on_outcome: Callable[[Outcome], None] | None = None, parallel: bool = False,
                 workers: int | None = None, limits: IngestLimits = DEFAULT_LIMITS) -> None:
        """``workers``: parse processes (None: 2 when ``parallel`` and the machine has 2+ cores;
        0 or 1: parse in this process).  ``max_bytes`` overrides ``limits.max_message_bytes``."""
        self.store = store
        self.batch_size = batch_size
        self.limits = limits
        self.max_bytes = limits.max_message_bytes if max_bytes is None else max_bytes
        self.max_references = limits.max_references
        self._wkw: dict[str, Any] = {}  # passed to write_batch (only what differs from its defaults)
        if limits.quarantine_prefix_bytes != DEFAULT_LIMITS.quarantine_prefix_bytes:
            self._wkw["quarantine_prefix"] = limits.quarantine_prefix_bytes
        self.on_outcome = on_outcome
        self.stats = {"messages": 0, "stored": 0, "duplicates": 0, "quarantined": 0}
        self.stored_ids: list[str] = []
        # raw, origin, forced reject, extra (problems, sha256 and size of the whole)
        self._queue: list[tuple[bytes, str, str | None, Any]] = []
        self._inflight: tuple[list[tuple[bytes, str, str | None, Any]], Any, Any] | None = None
        self._pool = None
        if workers is None:
            workers = min(os.cpu_count() or 1, 2) if parallel else 0
        if workers > 1:
            import multiprocessing

            self._pool = multiprocessing.get_context("fork").Pool(workers)

    # -- feeding -----------------------------------------------------------------------------
    def add(self, raw: bytes, origin: str, reject: str | None = None, *,
            problems: list[str] | None = None, sha256: str | None = None, size: int | None = None) -> None:
        """Queue one message.  ``reject`` quarantines it outright with that reason (e.g. a
        source that knows the bytes are a truncated tail).  ``problems`` are noted on the
        message; ``sha256`` and ``size`` describe the whole input when ``raw`` is a prefix."""
        extra = (problems, sha256, size) if (problems or sha256 or size is not None) else None
        self._queue.append((raw, origin, reject, extra))
        if len(self._queue) >= self.batch_size:
            self._dispatch()

    def checkpoint(self, cursor: tuple[str, Any]) -> None:
        """Record the source's progress: the cursor is written in the same transaction as the
        last message added before this call, without waiting for it (unlike ``flush``)."""
        self._dispatch(cursor)

    def _dispatch(self, cursor: tuple[str, Any] | None = None) -> None:
        """Hand the queued batch to a worker and write the previous one meanwhile."""
        batch, self._queue = self._queue, []
        if self._pool is None:
            self._write(batch, self._parse_local(batch), cursor)
            return
        raws = [raw for raw, _, reject, _ in batch if reject is None]
        half = (len(raws) + 1) // 2  # one half per worker
        args = (self.max_bytes, self.max_references)
        future = self._pool.starmap_async(_parse_many, [(raws[:half], *args), (raws[half:], *args)])
        previous, self._inflight = self._inflight, (batch, future, cursor)
        if previous is not None:
            self._write(previous[0], _joined(previous[1].get()), previous[2])

    def _parse_local(self, batch) -> list[Any]:
        return _parse_many([raw for raw, _, reject, _ in batch if reject is None], self.max_bytes,
                           self.max_references)

    # -- writing -----------------------------------------------------------------------------
    def flush(self, cursor: tuple[str, Any] | None = None) -> list[Outcome]:
        """Write everything queued (and the cursor) to the database; the cursor goes in the
        same transaction as the last messages."""
        outcomes: list[Outcome] = []
        if self._inflight is not None:
            batch, future, pending_cursor = self._inflight
            self._inflight = None
            outcomes += self._write(batch, _joined(future.get()), pending_cursor)
        if self._queue or cursor is not None:
            batch, self._queue = self._queue, []
            outcomes += self._write(batch, self._parse_local(batch), cursor)
        return outcomes

    def _write(self, batch, parsed_list, cursor) -> list[Outcome]:
        parsed, rejected = [], []
        it = iter(parsed_list)
        for raw, origin, reject, extra in batch:
            problems, sha, size = extra or (None, None, None)
            if reject is not None:
                rejected.append((raw, origin, reject, None, sha, size))
                continue
            p = next(it)
            if p.reject is None:
                if problems:
                    p.problems.extend(problems)
                parsed.append((p, origin, raw))
            else:
                rejected.append((raw, origin, p.reject, None, sha, size))
        try:
            outcomes = self.store.write_batch(parsed, rejected, cursor, **self._wkw)
        except Exception as exc:  # noqa: BLE001 - sorted by _refusal
            if not write_refused(exc) or len(parsed) + len(rejected) == 0:
                raise
            log.warning("batch refused by the database (%s); writing its messages one by one",
                        exc.__class__.__name__)
            outcomes = self._write_one_by_one(parsed, rejected, cursor)
        for o in outcomes:
            self.stats["messages"] += 1
            if o.status == "stored":
                self.stats["stored"] += 1
                self.stored_ids.append(o.message_id)
            elif o.status == "duplicate":
                self.stats["duplicates"] += 1
            else:
                self.stats["quarantined"] += 1
            if self.on_outcome:
                self.on_outcome(o)
        return outcomes

    def _write_one_by_one(self, parsed, rejected, cursor) -> list[Outcome]:
        """One transaction per message; one the database refuses is quarantined with the
        reason, so it never costs its neighbours.  The cursor goes with the last write."""
        items = [("p", x) for x in parsed] + [("r", x) for x in rejected]
        outcomes: list[Outcome] = []
        for n, (kind, x) in enumerate(items):
            last = cursor if n == len(items) - 1 else None
            try:
                if kind == "p":
                    outcomes += self.store.write_batch([x], [], last, **self._wkw)
                else:
                    outcomes += self.store.write_batch([], [x], last, **self._wkw)
                continue
            except Exception as exc:  # noqa: BLE001
                if not write_refused(exc):
                    raise
                reason = f"database refused the message: {exc.__class__.__name__}: {str(exc).splitlines()[0][:200]}"
            if kind == "p":
                p, origin, raw = x
                q = (raw, origin, reason, None, None, None)
            else:
                q = (x[0], x[1], f"{x[2]}; {reason}", None, *x[4:6])
            outcomes += self.store.write_batch([], [q], last, **self._wkw)
        return outcomes

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool = None

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass

    @property
    def pending(self) -> int:
        return len(self._queue) + (len(self._inflight[0]) if self._inflight else 0)
