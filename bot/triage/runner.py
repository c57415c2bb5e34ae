"""Triage step of the pipeline: run the extractor over stored messages that have not been
looked at, store each message's claim, and (re)merge the claim of every thread touched."""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from bot.sources.mail import is_own_mail
from storage.store import Store


def claim_record(message_id: str, claim) -> dict[str, Any]:
    import extractors

    data = claim.to_dict()
    data["facts"] = [f.to_dict() for f in claim.facts]
    keep = claim.is_regression or bool(claim.facts)
    return {"message_id": message_id, "is_regression": bool(claim.is_regression),
            "confidence": float(claim.confidence), "kind": claim.kind,
            "culprit": (claim.culprit_commit or None) and claim.culprit_commit[:64],
            "claim": data if keep else None,
            "extractor_version": getattr(extractors, "__version__", "0")}


def open_trees(config) -> Any:
    """KernelTrees for ``[kernel] repos`` in the config, or None when none are configured."""
    repos = config.section("kernel").get("repos") if config is not None else None
    if not repos:
        return None
    from bot.tracker.kernel_tree import KernelTrees

    return KernelTrees.from_config(repos)


def enrich_from_tree(data: dict[str, Any], trees) -> None:
    """Fill culprit facts from a kernel tree: full id, subject, first release, subsystem from
    MAINTAINERS.  The tree is authoritative over text hints; the evidence says so."""
    culprit = data.get("culprit")
    if trees is None or not culprit or not culprit.get("commit"):
        return
    info = trees.resolve(culprit["commit"])
    if info is None:
        return
    evidence = data.setdefault("evidence", {})
    culprit["sha"] = info.sha
    if not culprit.get("subject"):
        culprit["subject"] = info.subject
        evidence.setdefault("culprit_subject", f"kernel tree: {info.sha[:12]} (\"{info.subject}\")")
    data["kernel"] = {"sha": info.sha, "subject": info.subject, "author": info.author_name,
                      "date": info.author_date.isoformat(), "first_tag": info.first_tag,
                      "files": list(info.files)[:50], "trees": list(info.trees)}
    match = trees.commit_subsystem(info.sha)
    if match is not None:
        from extractors.subsystems import canonical

        data["subsystem"] = canonical(match.key)
        evidence["subsystem"] = f"MAINTAINERS: {match.section} ({match.kind}: {match.pattern})"


def merge_thread(store: Store, root_id: str, trees=None) -> dict[str, Any] | None:
    """Merge the claims of one thread (oldest first) and store the result."""
    import extractors
    from extractors.claim import Claim

    rows = store.thread_message_claims(root_id)
    if not any(r["is_regression"] for r in rows):
        store.save_thread_claim(root_id, None, False, 0.0, [])
        return None
    from extractors.claim import Fact

    used = [r for r in rows if r["claim"]]
    claims = []
    for r in used:
        c = Claim.from_dict(r["claim"])
        if r["claim"].get("facts"):
            c.facts = [Fact.from_dict(f) for f in r["claim"]["facts"]]
        claims.append(c)
    merged = extractors.merge_thread(claims)
    data = merged.to_dict()
    enrich_from_tree(data, trees)
    store.save_thread_claim(root_id, data, bool(merged.is_regression), float(merged.confidence),
                            [r["message_id"] for r in used])
    return data


log = logging.getLogger(__name__)

# below this many messages a batch is extracted in-process (a worker pool costs ~1 s to start)
PARALLEL_MIN = 64


def default_workers() -> int:
    """Extraction processes: every core, at most 4 (``[triage] workers`` overrides)."""
    return max(1, min(4, os.cpu_count() or 1))


def _extract_one(item: tuple[str, str | None, str]) -> dict[str, Any]:
    """One message's claim record; never raises (a bad message must not stop the batch)."""
    import extractors

    message_id, subject, body = item
    try:
        return claim_record(message_id, extractors.extract(subject, body))
    except Exception as exc:  # noqa: BLE001
        return no_claim_record(message_id, {"error": f"extractor failed: {exc.__class__.__name__}: {exc}"[:500]})


def no_claim_record(message_id: str, why: dict[str, str]) -> dict[str, Any]:
    """The claim record of a message the extractor did not judge (``why`` says so)."""
    import extractors

    return {"message_id": message_id, "is_regression": False, "confidence": 0.0, "kind": None,
            "culprit": None, "claim": why, "extractor_version": getattr(extractors, "__version__", "0")}


class Extraction:
    """Runs the extractor over batches, in a pool of worker processes when there is more than
    one core and enough mail to pay for it (the extractor is pure, so workers share nothing)."""

    def __init__(self, workers: int | None = None):
        self.workers = default_workers() if workers is None else max(1, int(workers))
        self._pool: ProcessPoolExecutor | None = None

    def run(self, items: list[tuple[str, str | None, str]]) -> list[dict[str, Any]]:
        if self.workers < 2 or len(items) < PARALLEL_MIN:
            return [_extract_one(i) for i in items]
        if self._pool is None:
            # forkserver: safe in a process that already runs threads (the service)
            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("forkserver"))
        chunk = max(1, len(items) // (self.workers * 8))
        try:
            return list(self._pool.map(_extract_one, items, chunksize=chunk))
        except BrokenProcessPool:
            # a worker died (killed, out of memory): this batch in-process, one message at a
            # time, and a fresh pool for the next
            log.warning("an extraction worker died; extracting this batch in-process")
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
            return [_extract_one(i) for i in items]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


def triage_pending(store: Store, *, batch: int = 500, trees=None, workers: int | None = None,
                   on_progress: Callable[[int], None] | None = None) -> dict[str, int]:
    """Extract every message without a claim; returns counts."""
    done = found = 0
    roots: set[str] = set()
    extraction = Extraction(workers)
    try:
        while True:
            rows = store.messages_without_claims(batch)
            if not rows:
                break
            own = {r["message_id"] for r in rows if is_own_mail(r.get("headers"))}
            extracted = iter(extraction.run([(r["message_id"], r["subject"], r["body"])
                                             for r in rows if r["message_id"] not in own]))
            records = []
            for r in rows:
                if r["message_id"] in own:
                    records.append(no_claim_record(r["message_id"], {"skipped": "regtriage's own mail"}))
                else:
                    records.append(next(extracted))
            store.save_claims(records)
            found += sum(1 for rec in records if rec["is_regression"])
            roots |= store.thread_keys([r["message_id"] for r in rows])
            done += len(rows)
            if on_progress:
                on_progress(done)
    finally:
        extraction.close()
    threads = sum(1 for root in sorted(roots) if merge_thread(store, root, trees) is not None)
    return {"extracted": done, "regression_messages": found, "regression_threads": threads}
