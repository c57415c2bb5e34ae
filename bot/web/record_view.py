"""What a record's page and the API show besides the tracker entry itself: the evidence, each
quoted sentence once with the facts it supports and the message that set them (linked to lore),
and the lab's rerun results (``reruns``, for the page, the API and the plot).

Reruns: an entry's ``reruns`` list comes from the entry itself when it has any, else from a
``reruns`` source (default :func:`reruns_for`, the lab's finished jobs).  Each rerun is ``{"id",
"machine", "recipe", "metric", "higher_is_better", "verdict", "change_percent", "ci": [lo, hi],
"p_value", "samples": {"good": [...], "bad": [...]}, "order": ["good", "bad", ...], "finished"}``.
"""

from __future__ import annotations

from typing import Any, Callable

from bot.lab import reruns as lab
from bot.msgid import lore_url
from storage.store import MISSING_TABLE_ERRORS

RerunSource = Callable[[Any, int], list]


def reruns_for(store, rid: int) -> list[dict[str, Any]]:
    """Rerun results of a record, for the page, the API and the plot: the finished lab jobs
    (:func:`bot.lab.reruns.reruns_for`); [] while the lab tables do not exist yet."""
    try:
        return list(lab.reruns_for(store, rid) or [])
    except MISSING_TABLE_ERRORS:  # no lab tables yet: no reruns
        return []


# field of the evidence dict -> history field that the same fact set
_EVIDENCE_FIELD = {"culprit": "culprit_commit", "culprit_commit": "culprit_commit",
                   "culprit_subject": "culprit_subject", "good": "good", "bad": "bad",
                   "change_percent": "change_percent", "kind": "kind",
                   "metric": "metric", "subsystem": "subsystem", "title": "title",
                   "cpu": "hardware", "arch": "hardware", "memory": "hardware", "storage": "hardware",
                   "filesystem": "config", "benchmark": "config", "command": "config", "kernel_config": "config"}


def evidence_items(e: dict[str, Any]) -> list[dict[str, Any]]:
    """The entry's evidence as ``{"fields": [...], "quote", "message_id", "url"}``: each quoted
    sentence once, with the facts it supports and the message that set them (from the history;
    else the report), linked to lore."""
    set_by: dict[str, str] = {}
    for h in e.get("history") or []:
        if h.get("message_id"):
            set_by[h["field"]] = h["message_id"]  # last one wins: the message that set it
    report = (e.get("report") or {}).get("message_id")
    out: list[dict[str, Any]] = []
    seen: dict[tuple[str, str | None], dict[str, Any]] = {}
    for field, quote in (e.get("evidence") or {}).items():
        mid = set_by.get(_EVIDENCE_FIELD.get(field, field)) or report
        key = (str(quote), mid)
        if key in seen:
            seen[key]["fields"].append(str(field).replace("_", " "))
            continue
        url = lore_url(mid) if mid else (e.get("report") or {}).get("url")
        item = {"fields": [str(field).replace("_", " ")], "quote": quote, "message_id": mid, "url": url}
        seen[key] = item
        out.append(item)
    return out


RERUN_KEYS = ("id", "machine", "recipe", "metric", "higher_is_better", "verdict", "change_percent", "ci", "p_value",
              "samples", "order", "finished")


def with_reruns(store, e: dict[str, Any], source: RerunSource) -> dict[str, Any]:
    """The entry with its ``reruns`` filled from ``source`` when it has none of its own."""
    if not e.get("reruns"):
        e["reruns"] = list(source(store, e["id"]) or [])
    return e


def rerun_view(r: Any) -> dict[str, Any]:
    """A rerun for the page: every key present (None when missing), ``samples`` a dict of two lists."""
    r = dict(r) if isinstance(r, dict) else {}
    view = {k: r.get(k) for k in RERUN_KEYS}
    samples = r.get("samples") if isinstance(r.get("samples"), dict) else {}
    view["samples"] = {side: list(samples.get(side) or []) if isinstance(samples.get(side), (list, tuple)) else []
                       for side in ("good", "bad")}
    return {**r, **view}
