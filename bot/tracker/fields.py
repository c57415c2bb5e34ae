"""The fields of a regression record (pure): statuses, sources and relations, and the helpers
that derive record fields from a claim (titles, version keys, search text, culprit matching)."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any
from urllib.parse import quote

STATUSES = ("reported", "triaged", "rerun-scheduled", "confirmed", "not-reproduced", "inconclusive",
            "fix-pending", "fixed", "duplicate", "resolved", "backburner", "improved")
# "inconclusive" (a rerun that could not decide) stays open: the regression is still unexplained
CLOSED = ("fixed", "resolved", "duplicate")
OPEN = tuple(s for s in STATUSES if s not in CLOSED)
RELATIONS = ("report", "reply", "link", "monitor", "duplicate")
SOURCES = ("extractor", "regzbot", "kernel-tree", "user", "lab")  # lab: a rerun's verdict
CURSOR = "tracker"
FIX_CURSOR = "tracker:fixes"
CLAIM_MARGIN = timedelta(seconds=120)  # re-read claims this much older than the last run
MIN_CULPRIT_MATCH = 7

# fields a thread claim fills (record column -> how to get it from the claim dict)
CLAIM_FIELDS = ("kind", "culprit_commit", "culprit_subject", "good", "bad", "subsystem", "metric",
                "change_percent", "hardware", "config", "numbers", "evidence", "confidence")
# claim fields whose presence means "facts extracted" (-> triaged)
FACT_FIELDS = ("culprit_commit", "good", "bad", "metric", "change_percent")
QUIET = ("confidence", "evidence", "overrides", "title_source")  # changed without a history row

HEXID_RE = re.compile(r"[0-9a-f]{6,40}")  # kernel mail abbreviates to 6+ hex digits (e.g. "de1414")
URL_RE = re.compile(r"https?://[^\s<>\"')\]]+", re.I)
DUP_CUE = re.compile(r"\bdup(?:licate)?s?\b|\bsame (?:issue|problem|regression|bug|report)\b|"
                      r"\balready (?:been )?reported\b", re.I)
REPLY_PREFIX = re.compile(r"^\s*(?:(?:re|fwd?|aw|sv)\s*(?:\[\d+\])?\s*:\s*)+", re.I)


# -- small helpers ------------------------------------------------------------------------------
def culprit_url(commit: str | None) -> str | None:
    if not commit:
        return None
    return f"https://git.kernel.org/torvalds/c/{quote(commit, safe='')}"


def version_key(ref: str | None, *, cycle: bool = False) -> str | None:
    """Sortable string for a kernel release tag (``v6.8-rc1 < v6.8 < v6.8.1 < v6.9-rc1``), None
    for anything else.  ``cycle``: the start of that release's development cycle (``v6.8``
    -> before ``v6.8-rc1``), used by ``since:v6.8``."""
    from bot.tracker.kernel_tree import release_tag_key

    if not ref:
        return None
    ref = ref.strip()
    if re.fullmatch(r"\d+\.\d+(?:\.\d+)*(?:-rc\d+)?", ref):
        ref = "v" + ref
    key = release_tag_key(ref)
    if key is None:
        return None
    nums, final, rc = key
    if cycle and final == 1 and nums[2:] == (0, 0):
        final, rc = 0, 0
    return "%03d.%03d.%03d.%03d.%d.%03d" % (nums + (final, rc))


def clean_title(subject: str | None) -> str:
    s = REPLY_PREFIX.sub("", subject or "").strip()
    s = re.sub(r"\s+", " ", s)
    return s[:300] or "(no subject)"


def search_text(title: str | None, culprit_subject: str | None = None, metric: str | None = None) -> str:
    """What ``text:`` queries search: lower-cased, fields separated by a newline."""
    return "\n".join(x for x in (title, culprit_subject, metric) if x).lower()


def normalize_subsystem(value: str | None) -> str | None:
    from extractors.subsystems import canonical

    value = canonical(value)
    if not value:
        return None
    v = value.strip().strip("/").lower()
    v = re.sub(r"/+", "/", v)
    return v or None


def culprits_match(a: str | None, b: str | None) -> bool:
    """Same culprit: equal ids, or the shorter (>= 7 hex digits) is a prefix of the longer."""
    if not a or not b:
        return False
    a, b = a.lower(), b.lower()
    if a == b:
        return True
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return len(short) >= MIN_CULPRIT_MATCH and bool(HEXID_RE.fullmatch(short)) and long_.startswith(short)


def jsonish(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dict):  # only what is known: {"cpu": "X", "arch": null} -> {"cpu": "X"}
        return json.dumps({k: v for k, v in value.items() if v not in (None, "", [], {})}, sort_keys=True,
                          ensure_ascii=False)
    if isinstance(value, list):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return str(value)


def has_facts(rec: dict[str, Any]) -> bool:
    return any(rec.get(f) not in (None, "", [], {}) for f in FACT_FIELDS)


def empty_hardware() -> dict[str, Any]:
    return {"cpu": None, "arch": None, "memory": None, "storage": None}


def empty_config() -> dict[str, Any]:
    return {"filesystem": None, "benchmark": None, "command": None, "kernel_config": []}


def fields_from_claim(claim: dict[str, Any]) -> dict[str, Any]:
    """Record columns from a (merged, possibly tree-enriched) thread claim dict."""
    culprit = claim.get("culprit") or {}
    commit = culprit.get("commit")
    commit = commit.lower()[:64] if isinstance(commit, str) and HEXID_RE.fullmatch(commit.lower()) else None
    kernel = claim.get("kernel") or {}
    out = {
        "kind": claim.get("kind"),
        "culprit_commit": commit,
        "culprit_subject": culprit.get("subject") if commit else None,
        "good": (claim.get("good") or None) and str(claim["good"])[:128],
        "bad": (claim.get("bad") or None) and str(claim["bad"])[:128],
        "subsystem": normalize_subsystem(claim.get("subsystem")),
        "metric": claim.get("metric"),
        "change_percent": claim.get("change_percent"),
        "hardware": dict(claim.get("hardware") or empty_hardware()),
        "config": dict(claim.get("config") or empty_config()),
        "numbers": list(claim.get("numbers") or []),
        "evidence": dict(claim.get("evidence") or {}),
        "confidence": claim.get("confidence"),
    }
    out["_first_tag"] = kernel.get("first_tag")
    return out


