"""The tracker entry: one JSON document per regression, and its renderings.

:func:`build_entry` turns a record (bot.tracker.records.get_record) into the entry dict -- the one
structured format every output uses (CLI --json, mail, chat; HTML later).  :func:`render`
renders it through the Jinja2 templates in ``templates/``:

* ``entry.txt.j2``: plain text for mail, every line wrapped at 72 columns (a single token longer
  than that, such as a long URL, stays whole on its own line rather than being broken);
* ``entry.md.j2``: Markdown for chat.  Every value printed is escaped (Markdown and HTML control
  characters, line breaks) unless the template builds it with the ``link`` filter, which escapes
  the text and percent-encodes the URL itself -- mail-derived strings are never trusted.
"""

from __future__ import annotations

import re
import textwrap
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bot.msgid import lore_url
from bot.tracker.fields import CLOSED, culprit_url
from bot.tracker.records import get_record


def templates_dir() -> Path:
    """The Jinja2 templates: ``templates/`` beside the package in a source checkout (and an
    editable install), else where a wheel installs them (``<prefix>/share/regtriage/templates``,
    setup.cfg ``data_files``), found from the installed package's location."""
    import sysconfig

    package = Path(__file__).resolve().parents[1]  # bot/
    candidates = [package.parent / "templates"]
    for base in (package.parents[3] if len(package.parents) > 3 else None, sysconfig.get_path("data")):
        if base:
            candidates.append(Path(base) / "share" / "regtriage" / "templates")
    for c in candidates:
        if (c / "entry.txt.j2").is_file():
            return c
    return candidates[0]


TEMPLATES = templates_dir()
WIDTH = 72
ENTRY_KEYS = ("id", "title", "status", "kind", "subsystem", "culprit", "range", "metric", "change_percent",
              "hardware", "config", "numbers", "report", "related", "reruns", "history", "updated")

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def _iso(dt: datetime | None) -> str | None:
    return dt.isoformat() if dt else None


def build_entry(rec: dict[str, Any]) -> dict[str, Any]:
    """The tracker entry of a record as returned by :func:`bot.tracker.records.get_record`."""
    report_mid = rec.get("report_message_id")
    related = []
    for m in rec.get("messages") or []:
        if m["relation"] == "report":
            continue
        mid = m["message_id"]
        is_url = "://" in mid and "@" not in mid.split("://", 1)[0]
        related.append({"relation": m["relation"], "message_id": None if is_url else mid,
                        "url": m.get("url") or (mid if is_url else lore_url(mid)),
                        "subject": m.get("subject") or m.get("title"), "from": m.get("from_addr"),
                        "date": _iso(m.get("date")), "counts_as_activity": bool(m.get("activity", True))})
    culprit = None
    if rec.get("culprit_commit"):
        culprit = {"commit": rec["culprit_commit"], "subject": rec.get("culprit_subject"),
                   "url": culprit_url(rec["culprit_commit"])}
    fix = None
    if rec.get("fix_commit") or rec.get("fix_subject"):
        fix = {"commit": rec.get("fix_commit"), "subject": rec.get("fix_subject"), "tree": rec.get("fix_tree"),
               "url": culprit_url(rec["fix_commit"]) if rec.get("fix_commit") else None}
    history = [{"at": _iso(h["at"]), "field": h["field"], "old": h["old"], "new": h["new"], "actor": h["actor"],
                "message_id": h["message_id"], "source": h["source"], "note": h["note"]}
               for h in rec.get("history") or []]
    return {
        "id": rec["id"],
        "title": rec["title"],
        "status": rec["status"],
        "open": rec["status"] not in CLOSED,
        "kind": rec.get("kind"),
        "subsystem": rec.get("subsystem"),
        "culprit": culprit,
        "range": {"good": rec.get("good"), "bad": rec.get("bad")},
        "metric": rec.get("metric"),
        "change_percent": rec.get("change_percent"),
        "hardware": rec.get("hardware") or {},
        "config": rec.get("config") or {},
        "numbers": rec.get("numbers") or [],
        "report": {"message_id": report_mid,
                   "url": lore_url(report_mid) if report_mid else rec.get("report_url")},
        "related": related,
        "reruns": [],
        "history": history,
        "updated": _iso(rec.get("updated_at")),
        "created": _iso(rec.get("created_at")),
        "title_source": rec.get("title_source"),
        "duplicate_of": rec.get("duplicate_of"),
        "duplicates": list(rec.get("duplicates") or []),
        "fix": fix,
        "set_by": dict(rec.get("overrides") or {}),
        "evidence": rec.get("evidence") or {},
        "confidence": rec.get("confidence"),
    }


def entry(store, rid: int) -> dict[str, Any] | None:
    rec = get_record(store, rid)
    if not rec:
        return None
    e = build_entry(rec)
    e["reruns"] = _reruns(store, rid)
    e["bisections"] = _bisections(store, rid)
    return e


def _bisections(store, rid: int) -> list[dict[str, Any]]:
    """The record's lab bisections, newest first (bot.lab.bisection.summary); [] without the tables."""
    return _bisections_many(store, [rid]).get(rid, [])


def _bisections_many(store, ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """{id: lab bisections, newest first} in one statement; {} without the bisection tables."""
    from bot.lab.bisection import summary
    from storage.bisections import for_records
    from storage.store import MISSING_TABLE_ERRORS

    try:
        found = for_records(store, ids)
    except MISSING_TABLE_ERRORS:  # an older database: no bisections
        return {}
    return {rid: [summary(b) for b in bs] for rid, bs in found.items()}


def _reruns(store, rid: int) -> list[dict[str, Any]]:
    """Finished lab reruns of the record (bot.lab.reruns); [] without the lab's tables."""
    try:
        from bot.lab.reruns import reruns_for
    except ImportError:
        return []
    try:
        return reruns_for(store, rid)
    except Exception as exc:  # noqa: BLE001 - no lab tables (older database): no reruns
        from storage.store import MISSING_TABLE_ERRORS

        if isinstance(exc, MISSING_TABLE_ERRORS):
            return []
        raise


def entries(store, ids, *, rows=None) -> list[dict[str, Any]]:
    """The entries of several records, in the order of ``ids`` (unknown ids left out), read in
    a fixed number of statements however many there are (five: records with their duplicates,
    messages, history, reruns, bisections; four when ``rows``, their record rows as a query
    returned them, are given)."""
    from bot.tracker.records import get_records

    ids = [int(i) for i in ids]
    recs = get_records(store, ids, rows=rows)
    found = [i for i in ids if i in recs]
    reruns = _reruns_many(store, found)
    bisections = _bisections_many(store, found)
    out = []
    for rid in ids:
        if rid in recs:
            e = build_entry(recs[rid])
            e["reruns"] = reruns.get(rid, [])
            e["bisections"] = bisections.get(rid, [])
            out.append(e)
    return out


def _reruns_many(store, ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """{id: finished lab reruns} (bot.lab.reruns); {} without the lab's tables."""
    if not ids:
        return {}
    try:
        from bot.lab.reruns import reruns_for_many
    except ImportError:
        return {}
    try:
        return reruns_for_many(store, ids)
    except Exception as exc:  # noqa: BLE001 - no lab tables (older database): no reruns
        from storage.store import MISSING_TABLE_ERRORS

        if isinstance(exc, MISSING_TABLE_ERRORS):
            return {}
        raise


# -- rendering -------------------------------------------------------------------------------------
class MdSafe(str):
    """Markdown produced by our own filters: printed as is."""


def clean_text(value: Any) -> str:
    """Mail-derived string for plain text: no control/bidi characters, one line."""
    if value is None:
        return ""
    s = _CONTROL.sub("", str(value).replace("\r", " ").replace("\n", " ").replace("\t", " "))
    return re.sub(r" {2,}", " ", s).strip()


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>])")


def md_escape(value: Any) -> str:
    """Escape a string for Markdown (CommonMark and chat flavours): HTML entities for & < >,
    a backslash before every Markdown punctuation character, no line breaks or control
    characters."""
    if isinstance(value, MdSafe):
        return value
    s = clean_text(value)
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", s)


def safe_url(url: str | None) -> str:
    """A URL made safe inside Markdown ``(...)`` / text: only http(s), percent-encoded."""
    if not url or not re.match(r"https?://", url, re.I):
        return ""
    return quote(url, safe=":/@!$&*+,;=~._-?#%")


def _md_link(text: Any, url: str | None) -> MdSafe:
    u = safe_url(url)
    t = md_escape(text)
    return MdSafe(f"[{t}]({u})" if u else t)


def _md_code(value: Any) -> MdSafe:
    s = clean_text(value).replace("`", "'")
    return MdSafe(f"`{s}`" if s else "")


def _finalize_md(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, MdSafe) else md_escape(value)


def _finalize_txt(value: Any) -> str:
    return clean_text(value) if value is not None else ""


def _fmt_change(value: Any) -> str:
    if value is None:
        return ""
    try:
        return f"{float(value):+.1f}%"
    except (TypeError, ValueError):
        return str(value)


def _short_date(value: str | None) -> str:
    return (value or "")[:10]


@lru_cache(maxsize=4)
def template_env(kind: str):
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=False, trim_blocks=True,
                      lstrip_blocks=True, keep_trailing_newline=True, undefined=StrictUndefined,
                      finalize=_finalize_md if kind == "md" else _finalize_txt)
    env.filters["change"] = _fmt_change
    env.filters["day"] = _short_date
    env.filters["clean"] = clean_text
    from bot.lab import verdict_report

    env.globals["rerun_summaries"] = verdict_report.summaries
    env.globals["rerun_latest"] = verdict_report.latest
    env.globals["rerun_link"] = verdict_report.link
    env.globals["samples_csv"] = verdict_report.samples_csv
    if kind == "md":
        env.filters["link"] = _md_link
        env.filters["code"] = _md_code
        env.filters["md"] = lambda v: MdSafe(md_escape(v))
    return env


def wrap_text(text: str, width: int = WIDTH) -> str:
    """Wrap every line at ``width``; continuation lines keep the line's indentation plus two
    (or align after a "label: " prefix of up to 14 columns).  Words are never broken, so a
    single token longer than ``width`` (a URL) stays whole on its own line."""
    out: list[str] = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line.rstrip())
            continue
        indent = len(line) - len(line.lstrip(" "))
        m = re.match(r"( *)([A-Za-z][\w -]{0,12}: +)", line)
        hang = len(m.group(0)) if m else indent + 2
        if hang > width // 3:
            hang = indent + 2
        w = textwrap.TextWrapper(width=width, initial_indent=" " * indent, subsequent_indent=" " * hang,
                                 break_long_words=False, break_on_hyphens=False)
        out.extend(w.wrap(line.strip(" ")) or [""])
    return "\n".join(out)


def render(e: dict[str, Any], fmt: str = "txt", base_url: str | None = None) -> str:
    """Render an entry: ``txt`` (mail, wrapped at 72) or ``md`` (chat); ``base_url``: the
    dashboard, for the links to reruns' samples and plots."""
    if fmt not in ("txt", "md"):
        raise ValueError(f"unknown format {fmt!r}")
    tpl = template_env(fmt).get_template(f"entry.{fmt}.j2")
    text = tpl.render(e=e, width=WIDTH, base_url=base_url)
    return wrap_text(text) if fmt == "txt" else text
