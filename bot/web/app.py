"""The read-only web dashboard and JSON API (``regtriage serve``): a Starlette ASGI app.

:func:`create_app` ``(store, config) -> app`` serves:

* ``GET /`` (also ``/regressions``): the list of regression records, searchable with the query
  box (the language of ``regtriage query``, :mod:`bot.tracker.query`) and filters (``status``,
  ``subsystem``, ``kind``, ``text``); ``limit``/``offset`` page through it.  Query and filters
  both apply (their intersection).
* ``GET /regressions/{id}``: one record: facts, culprit linked to the commit, evidence quoted
  and linked to the message on lore, related mail, rerun results with an SVG plot of the good
  vs bad samples (:func:`bot.web.svg.samples_svg`), and the timeline (history).
* ``GET /feed.atom``: Atom 1.0 feed of new regressions and of regressions confirmed by reruns.
* ``GET /api/regressions?q=&status=&subsystem=&kind=&text=&limit=&offset=``: a JSON list of
  tracker entries (:func:`bot.tracker.entry.build_entry`), the same list ``regtriage query
  --json`` prints for the same query; the total count is in ``X-Total-Count``, the next page in
  a ``Link: <...>; rel="next"`` header.
* ``GET /api/regressions/{id}``: one tracker entry.  ``GET /openapi.json``: OpenAPI 3.1.
* ``GET /healthz``: ``ok`` (503 when the database does not answer).
* ``/static/``: the CSS (``templates/web/static``).

Reruns: an entry's ``reruns`` list comes from the entry itself when it has any, else from the
``reruns`` source given to :func:`create_app` (default :func:`reruns_for`, which asks the lab
through ``bot.lab.reruns.reruns_for(store, rid)`` and returns [] while the lab does not provide
it).  Each rerun is ``{"id", "machine", "recipe", "metric", "higher_is_better", "verdict",
"change_percent", "ci": [lo, hi], "p_value", "samples": {"good": [...], "bad": [...]},
"order": ["good", "bad", ...], "finished"}``.

Safety: every mail-derived string is escaped (Jinja2 autoescape for .html templates; the feed
is built with ElementTree from cleaned text); links taken from data are http(s) only
(:func:`bot.tracker.entry.safe_url`); there is no script at all, and every response carries a
strict Content-Security-Policy (``default-src 'self'; img-src 'self' data:; style-src 'self'``)
with the CSS served as a static file.  The app only reads the database.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any, Callable
from urllib.parse import urlencode

from bot.msgid import lore_url
from bot.tracker.entry import TEMPLATES, safe_url

WEB_TEMPLATES = TEMPLATES / "web"
STATIC = WEB_TEMPLATES / "static"
CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]
DEFAULT_LIMIT, MAX_LIMIT = 50, 500
FEED_SIZE = 50
_XML_BAD = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_SUBSYSTEM_VALUE = re.compile(r"[A-Za-z0-9_.+*/,-]{1,255}")

RerunSource = Callable[[Any, int], list]


# -- data ------------------------------------------------------------------------------------
def reruns_for(store, rid: int) -> list[dict[str, Any]]:
    """Rerun results of a record, for the page, the API and the plot: the finished lab jobs
    (:func:`bot.lab.reruns.reruns_for`); [] while the lab tables do not exist yet."""
    from bot.lab.reruns import reruns_for as lab_reruns
    from storage.store import MISSING_TABLE_ERRORS

    try:
        return list(lab_reruns(store, rid) or [])
    except MISSING_TABLE_ERRORS:  # no lab tables yet: no reruns
        return []


class SearchError(ValueError):
    """A query or filter value that cannot be understood (the message says why)."""


def field_filter(status: str = "", subsystem: str = "", kind: str = "", text: str = ""):
    """A :class:`bot.tracker.query.Filter` from the list page's filter fields, or None when all are empty."""
    from bot.tracker.query import QueryError, parse_query

    status, subsystem, kind, text = (v.strip() for v in (status or "", subsystem or "", kind or "", text or ""))
    if not (status or subsystem or kind or text):
        return None
    toks = []
    try:
        if status and status not in ("any", "all"):
            if not re.fullmatch(r"[a-z,-]+", status):
                raise SearchError(f"unknown status {status!r}")
            toks.append(f"status:{status}")
        if subsystem:
            if not _SUBSYSTEM_VALUE.fullmatch(subsystem):
                raise SearchError(f"not a subsystem path: {subsystem!r}")
            toks.append(f"subsystem:{subsystem}")
        if kind and kind not in ("any", "all"):
            if not re.fullmatch(r"[a-z]+", kind):
                raise SearchError(f"unknown kind {kind!r}")
            toks.append(f"kind:{kind}")
        g = parse_query(" ".join(toks))
    except QueryError as exc:
        raise SearchError(str(exc)) from None
    if text:
        if len(text) > 500:
            raise SearchError("text too long")
        g.text.append(text)
    return g


def search(store, q: str = "", *, status: str = "", subsystem: str = "", kind: str = "", text: str = "",
           limit: int = DEFAULT_LIMIT, offset: int = 0) -> tuple[list[dict[str, Any]], int, str]:
    """(record rows, total, how it was understood) for the query box ``q`` and the filter
    fields.  A query alone runs exactly as ``regtriage query`` does (:func:`bot.tracker.query.run_query`);
    with filters too, the result is what both select."""
    from bot.tracker.query import QueryError, parse_query, run_query

    try:
        f = parse_query(q) if q and q.strip() else None
    except QueryError as exc:
        raise SearchError(str(exc)) from None
    g = field_filter(status, subsystem, kind, text)
    if f is None or g is None:
        one = f if f is not None else g
        if one is None:
            from bot.tracker.query import Filter

            one = Filter()
        try:
            rows, total = run_query(store, one, limit=limit, offset=offset)
        except QueryError as exc:
            raise SearchError(str(exc)) from None
        return rows, total, one.describe()

    try:
        rows, total = run_query(store, f, g, limit=limit, offset=offset)
    except QueryError as exc:
        raise SearchError(str(exc)) from None
    return rows, total, f"{f.describe()} AND {g.describe()}"


def subsystems(store, limit: int = 500) -> list[str]:
    from storage.records import subsystems as stored_subsystems

    return stored_subsystems(store, limit)


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


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, infinity: not JSON) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def json_bytes(value: Any) -> bytes:
    """Strict JSON, UTF-8 (a lone surrogate from a broken mail header becomes U+FFFD)."""
    import json

    from bot.textsafe import json_text

    text = json.dumps(json_safe(value), ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=str)
    # controls and bidi overrides as \\uXXXX escapes: the same JSON, inert in a browser's raw view
    return json_text(_SURROGATE.sub("\ufffd", text)).encode("utf-8")


# -- formatting ------------------------------------------------------------------------------
def _href(url: Any) -> str:
    return safe_url(url) if isinstance(url, str) else ""


def _when(value: Any) -> str:
    if not value:
        return ""
    if isinstance(value, datetime):
        value = value.isoformat()
    s = str(value)
    return s[:16].replace("T", " ") if len(s) >= 16 else s


def _day(value: Any) -> str:
    if isinstance(value, datetime):
        return value.date().isoformat()
    return str(value or "")[:10]


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return v if math.isfinite(v) else None


def _change(value: Any) -> str:
    v = _finite(value)
    return "" if v is None else f"{v:+.1f}%"


def _num(value: Any) -> str:
    from bot.web.svg import _num as fmt

    v = _finite(value)
    return "" if v is None else fmt(v)


def _pvalue(value: Any) -> str:
    v = _finite(value)
    if v is None:
        return ""
    return "< 0.0001" if v < 1e-4 else f"{v:.4f}"


def _ci(value: Any) -> str:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        lo, hi = _finite(value[0]), _finite(value[1])
        if lo is not None and hi is not None:
            return f"{lo:+.1f}% to {hi:+.1f}%"
    return ""


def _short(commit: Any) -> str:
    return str(commit or "")[:12]


def _plain(value: Any) -> str:
    """A value of the facts table: dicts and lists as ``k: v`` text, never markup."""
    if value is None:
        return ""
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_plain(v)}" for k, v in value.items() if v not in (None, "", [], {}))
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v) for v in value if v not in (None, ""))
    return str(value)


@lru_cache(maxsize=1)
def _env():
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
    from markupsafe import Markup

    from bot.web.svg import samples_svg

    env = Environment(loader=FileSystemLoader(str(WEB_TEMPLATES)),
                      autoescape=select_autoescape(enabled_extensions=("html", "xml"), default_for_string=True,
                                                   default=True),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(href=_href, when=_when, day=_day, change=_change, num=_num, pvalue=_pvalue, ci=_ci,
                       short=_short, plain=_plain, lore=lore_url)
    env.globals["samples_svg"] = lambda rerun: Markup(samples_svg(rerun))
    return env


def render(name: str, **ctx) -> str:
    """A page; bidi embeddings/overrides/isolates/marks (only mail can bring them: the templates
    have none) are written out as ``\\u202e`` text so they cannot reorder what the page shows."""
    from bot.textsafe import neutralise_bidi

    return neutralise_bidi(_env().get_template(name).render(**ctx))


# -- feed --------------------------------------------------------------------------------------
def _xml(value: Any) -> str:
    from bot.tracker.entry import clean_text

    from bot.textsafe import neutralise_bidi

    return neutralise_bidi(_XML_BAD.sub("", clean_text(value)))


def feed_events(store, size: int = FEED_SIZE) -> list[dict[str, Any]]:
    """New records and confirmations, newest first: ``{"kind": "new"|"confirmed", "at",
    "published", "record": row, "history_id"}``."""
    from storage.records import feed_rows

    new, first, confirmed = feed_rows(store, size)
    events = []
    for x in new:
        events.append({"kind": "new", "at": first.get(x["id"]) or x["created_at"], "published": x["created_at"],
                       "record": x, "history_id": None})
    for x in confirmed:
        events.append({"kind": "confirmed", "at": x["at"], "published": x["at"], "record": x,
                       "history_id": x["history_id"]})
    events.sort(key=lambda ev: (ev["at"] or datetime.min.replace(tzinfo=timezone.utc), ev["kind"]), reverse=True)
    return events[:size]


def atom_feed(store, base_url: str) -> bytes:
    """The Atom 1.0 document (UTF-8 bytes); ``base_url`` ends with a slash."""
    import xml.etree.ElementTree as ET

    atom = "http://www.w3.org/2005/Atom"
    ET.register_namespace("", atom)

    def el(parent, tag, text=None, **attrs):
        node = ET.SubElement(parent, f"{{{atom}}}{tag}", {k: v for k, v in attrs.items() if v is not None})
        if text is not None:
            node.text = _xml(text)
        return node

    def stamp(dt: datetime | None) -> str:
        dt = dt or datetime.now(timezone.utc)
        return dt.astimezone(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")

    events = feed_events(store)
    feed = ET.Element(f"{{{atom}}}feed")
    el(feed, "id", "tag:regtriage,2024:feed/regressions")
    el(feed, "title", "regtriage: new and confirmed regressions")
    el(feed, "updated", stamp(events[0]["at"] if events else None))
    author = el(feed, "author")
    el(author, "name", "regtriage")
    el(feed, "link", rel="self", href=base_url + "feed.atom", type="application/atom+xml")
    el(feed, "link", rel="alternate", href=base_url, type="text/html")
    el(feed, "generator", "regtriage")
    for ev in events:
        rec = ev["record"]
        rid = int(rec["id"])
        entry = el(feed, "entry")
        title = rec["title"] or "(no subject)"
        if ev["kind"] == "new":
            el(entry, "id", f"tag:regtriage,2024:regression/{rid}/new")
            el(entry, "title", f"New regression #{rid}: {title}")
        else:
            el(entry, "id", f"tag:regtriage,2024:regression/{rid}/confirmed/{int(ev['history_id'])}")
            el(entry, "title", f"Confirmed regression #{rid}: {title}")
        el(entry, "updated", stamp(ev["at"]))
        el(entry, "published", stamp(ev["published"] or ev["at"]))
        el(entry, "link", rel="alternate", type="text/html", href=f"{base_url}regressions/{rid}")
        el(entry, "category", term=_xml(rec["status"]))
        facts = [f"status: {rec['status']}"]
        for label, key in (("kind", "kind"), ("subsystem", "subsystem"), ("metric", "metric")):
            if rec.get(key):
                facts.append(f"{label}: {rec[key]}")
        if rec.get("culprit_commit"):
            c = f"culprit: {_short(rec['culprit_commit'])}"
            if rec.get("culprit_subject"):
                c += f' ("{rec["culprit_subject"]}")'
            facts.append(c)
        if _change(rec.get("change_percent")):
            facts.append(f"change: {_change(rec['change_percent'])}")
        if rec.get("created_at"):
            facts.append(f"reported: {_day(rec['created_at'])}")
        if rec.get("duplicate_of"):
            facts.append(f"duplicate of #{int(rec['duplicate_of'])}")
        el(entry, "summary", "; ".join(facts), type="text")
    return b'<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(feed, encoding="utf-8", xml_declaration=False)


# -- OpenAPI -----------------------------------------------------------------------------------
def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 description of the JSON API."""
    from bot.tracker.query import CLOSED, KINDS, STATUSES

    s = {"type": "string"}
    ns = {"type": ["string", "null"]}
    nn = {"type": ["number", "null"]}
    link = {"type": ["object", "null"], "properties": {"commit": ns, "subject": ns, "url": ns, "tree": ns}}
    rerun = {
        "type": "object",
        "description": "A confirmation rerun in the lab: samples of both builds and the verdict.",
        "properties": {
            "id": {"type": ["integer", "string"]}, "machine": ns, "recipe": ns, "metric": ns,
            "higher_is_better": {"type": ["boolean", "null"]},
            "verdict": {"type": ["string", "null"], "enum": ["confirmed", "improved", "not-reproduced", "inconclusive", None]},
            "change_percent": nn,
            "ci": {"type": ["array", "null"], "items": {"type": "number"}, "minItems": 2, "maxItems": 2,
                   "description": "confidence interval of the % change"},
            "p_value": nn,
            "samples": {"type": "object", "properties": {"good": {"type": "array", "items": {"type": "number"}},
                                                         "bad": {"type": "array", "items": {"type": "number"}}}},
            "order": {"type": "array", "items": {"enum": ["good", "bad"]},
                      "description": "which build each run used, in run order"},
            "finished": ns,
        },
    }
    regression = {
        "type": "object",
        "description": "A tracker entry (bot.tracker.entry.build_entry): the same document as "
                       "`regtriage query --json`.",
        "required": ["id", "title", "status", "open", "kind", "subsystem", "culprit", "range", "metric",
                     "change_percent", "hardware", "config", "numbers", "report", "related", "reruns",
                     "history", "updated"],
        "properties": {
            "id": {"type": "integer"}, "title": s,
            "status": {"type": "string", "enum": list(STATUSES)},
            "open": {"type": "boolean", "description": f"status not in {', '.join(CLOSED)}"},
            "kind": {"type": ["string", "null"], "enum": [*KINDS, None]},
            "subsystem": ns, "culprit": link,
            "range": {"type": "object", "properties": {"good": ns, "bad": ns}},
            "metric": ns, "change_percent": nn,
            "hardware": {"type": "object"}, "config": {"type": "object"},
            "numbers": {"type": "array", "items": {"type": "object"}},
            "report": {"type": "object", "properties": {"message_id": ns, "url": ns}},
            "related": {"type": "array", "items": {"type": "object", "properties": {
                "relation": s, "message_id": ns, "url": ns, "subject": ns, "from": ns, "date": ns,
                "counts_as_activity": {"type": "boolean"}}}},
            "reruns": {"type": "array", "items": {"$ref": "#/components/schemas/Rerun"}},
            "bisections": {"type": "array", "items": {"type": "object"}},  # bot.lab.bisection.summary
            "history": {"type": "array", "items": {"type": "object", "properties": {
                "at": ns, "field": s, "old": ns, "new": ns, "actor": ns, "message_id": ns, "source": ns,
                "note": ns}}},
            "updated": ns, "created": ns, "title_source": ns,
            "duplicate_of": {"type": ["integer", "null"]},
            "duplicates": {"type": "array", "items": {"type": "integer"}},
            "fix": link, "set_by": {"type": "object"}, "evidence": {"type": "object",
                                                                     "additionalProperties": {"type": "string"}},
            "confidence": nn,
        },
    }
    error = {"type": "object", "required": ["error"], "properties": {"error": s}}

    def param(name, desc, schema=None, where="query"):
        return {"name": name, "in": where, "required": where == "path", "description": desc,
                "schema": schema or {"type": "string"}}

    err = {"description": "error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "regtriage", "version": _version(),
                 "description": "Read-only API of the regtriage regression tracker for Linux kernel mailing lists."},
        "paths": {
            "/api/regressions": {"get": {
                "operationId": "listRegressions",
                "summary": "Search regression records",
                "description": "`q` is the query language of `regtriage query` (natural language and filters "
                               "such as `status:open subsystem:mm/ kind:performance culprit:54a6eb5c since:v6.8 "
                               "text:zonelist`); the other parameters narrow the result further.  Most recently "
                               "updated first.  The body equals `regtriage query --json` for the same `q`.",
                "parameters": [
                    param("q", "query (natural language and/or filter language)"),
                    param("status", "open, closed, all, or a status (comma-separated)"),
                    param("subsystem", "path prefix, e.g. mm/ or fs/xfs"),
                    param("kind", "performance or functional", {"type": "string", "enum": list(KINDS)}),
                    param("text", "substring of title, culprit subject or metric"),
                    param("limit", "page size", {"type": "integer", "minimum": 0, "maximum": MAX_LIMIT,
                                                 "default": DEFAULT_LIMIT}),
                    param("offset", "records to skip", {"type": "integer", "minimum": 0, "default": 0}),
                ],
                "responses": {
                    "200": {"description": "tracker entries",
                            "headers": {"X-Total-Count": {"description": "records matching",
                                                          "schema": {"type": "integer"}},
                                        "Link": {"description": "next page (rel=next)", "schema": {"type": "string"}}},
                            "content": {"application/json": {"schema": {
                                "type": "array", "items": {"$ref": "#/components/schemas/Regression"}}}}},
                    "400": err,
                }}},
            "/api/regressions/{id}": {"get": {
                "operationId": "getRegression",
                "summary": "One regression record",
                "parameters": [param("id", "record id", {"type": "integer"}, "path")],
                "responses": {"200": {"description": "the tracker entry", "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/Regression"}}}}, "404": err},
            }},
            "/feed.atom": {"get": {"operationId": "feed", "summary": "Atom feed of new and confirmed regressions",
                                   "responses": {"200": {"description": "Atom 1.0",
                                                         "content": {"application/atom+xml": {"schema": s}}}}}},
            "/healthz": {"get": {"operationId": "health", "summary": "Liveness: ok when the database answers",
                                 "responses": {"200": {"description": "ok", "content": {"text/plain": {"schema": s}}},
                                               "503": {"description": "database unavailable"}}}},
        },
        "components": {"schemas": {"Regression": regression, "Rerun": rerun, "Error": error}},
    }


def _version() -> str:
    from bot import __version__

    return __version__


# -- the app -----------------------------------------------------------------------------------
class SecurityHeaders:
    """ASGI middleware: CSP and friends on every HTTP response."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                message = dict(message)
                message["headers"] = list(message.get("headers", [])) + [
                    (k, v) for k, v in SECURITY_HEADERS if k not in names]
            await send(message)

        return await self.app(scope, receive, send_with_headers)


def _int_param(value: str | None, default: int, name: str, lo: int, hi: int | None = None) -> int:
    if value is None or value == "":
        return default
    try:
        v = int(value)
    except ValueError:
        raise SearchError(f"{name}: needs a whole number, not {value!r}") from None
    if v < lo or (hi is not None and v > hi):
        raise SearchError(f"{name}: must be between {lo} and {hi}" if hi is not None else f"{name}: must be >= {lo}")
    return v


def app_from_environment():
    """The app for each of ``regtriage serve --workers N``'s processes (a uvicorn factory):
    configuration and database from ``REGTRIAGE_CONFIG`` / ``REGTRIAGE_DB``, as the command
    that started them resolved them."""
    from bot.config import load
    from storage.store import Store

    config = load()
    return create_app(Store(config.db_url), config)


def create_app(store, config=None, *, reruns: RerunSource | None = None):
    """The ASGI app over ``store`` (read only).  ``reruns(store, rid) -> list`` supplies rerun
    results for entries that have none of their own (default :func:`reruns_for`)."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    class JSONResponse(Response):  # noqa: N801 - Starlette's name, our encoder
        media_type = "application/json"

        def render(self, content: Any) -> bytes:
            return json_bytes(content)

    from bot.lab.rerun_web import rerun_routes
    from bot.tracker.entry import entries, entry
    from bot.tracker.query import CLOSED, KINDS, STATUSES

    source = reruns or reruns_for

    def page(name: str, request: Request, status_code: int = 200, **ctx) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        html = render(name, root=root, statuses=STATUSES, closed=CLOSED, kinds=KINDS, **ctx)
        return HTMLResponse(html, status_code=status_code)

    def params(request: Request) -> dict[str, Any]:
        qp = request.query_params
        return {"q": qp.get("q", ""), "status": qp.get("status", ""), "subsystem": qp.get("subsystem", ""),
                "kind": qp.get("kind", ""), "text": qp.get("text", "")}

    def page_links(request: Request, form: dict[str, Any], limit: int, offset: int, total: int, path: str):
        keep = {k: v for k, v in form.items() if v}
        if limit != DEFAULT_LIMIT:
            keep["limit"] = limit
        prev_url = next_url = None
        if offset > 0:
            back = {"offset": offset - limit} if offset - limit > 0 else {}
            prev_url = path + "?" + urlencode({**keep, **back})
        if limit and offset + limit < total:
            next_url = path + "?" + urlencode({**keep, "offset": offset + limit})
        return prev_url, next_url

    def form_search(request: Request, form: dict, *, min_limit: int):
        """(limit, offset, search result) of a list request's paging and filter fields."""
        limit = _int_param(request.query_params.get("limit"), DEFAULT_LIMIT, "limit", min_limit, MAX_LIMIT)
        offset = _int_param(request.query_params.get("offset"), 0, "offset", 0)
        return limit, offset, search(store, form["q"], status=form["status"], subsystem=form["subsystem"],
                                     kind=form["kind"], text=form["text"], limit=limit, offset=offset)

    def list_page(request: Request):
        form = params(request)
        error = None
        rows, total, understood = [], 0, ""
        limit = offset = 0
        try:
            limit, offset, (rows, total, understood) = form_search(request, form, min_limit=1)
        except SearchError as exc:
            error = str(exc)
        root = request.scope.get("root_path", "").rstrip("/")
        prev_url, next_url = page_links(request, form, limit, offset, total, root + "/")
        return page("list.html", request, status_code=400 if error else 200, rows=rows, total=total,
                    understood=understood, error=error, form=form, offset=offset, prev_url=prev_url,
                    next_url=next_url, known_subsystems=subsystems(store))

    def record_page(request: Request):
        rid = request.path_params["rid"]
        e = entry(store, rid)
        if e is None:
            raise HTTPException(404, f"no regression record {rid}")
        if reruns is not None:  # the entry has the lab's reruns already
            with_reruns(store, e, source)
        return page("regression.html", request, e=e, evidence=evidence_items(e),
                    reruns=[rerun_view(r) for r in e["reruns"]])

    def api_list(request: Request):
        form = params(request)
        try:
            limit, offset, (rows, total, _) = form_search(request, form, min_limit=0)
        except SearchError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        items = entries(store, [r["id"] for r in rows], rows=rows)  # the lab's reruns too; a fixed number of statements
        if reruns is not None:  # another source fills in what the lab has not
            items = [with_reruns(store, e, source) for e in items]
        headers = {"X-Total-Count": str(total)}
        if limit and offset + limit < total:
            keep = {k: v for k, v in form.items() if v}
            nxt = str(request.url.replace(query=urlencode({**keep, "limit": limit, "offset": offset + limit})))
            headers["Link"] = f'<{nxt}>; rel="next"'
        return JSONResponse(items, headers=headers)

    def api_record(request: Request):
        rid = request.path_params["rid"]
        e = entry(store, rid)
        if e is None:
            return JSONResponse({"error": f"no regression record {rid}"}, status_code=404)
        return JSONResponse(with_reruns(store, e, source) if reruns is not None else e)

    def feed(request: Request):
        base = str(request.base_url)
        if not base.endswith("/"):
            base += "/"
        return Response(atom_feed(store, base), media_type="application/atom+xml; charset=utf-8")

    def openapi(request: Request):
        return JSONResponse(openapi_document())

    def healthz(request: Request):
        try:
            store.ping()
        except Exception:  # noqa: BLE001 - any database failure: not healthy
            return PlainTextResponse("database unavailable", status_code=503)
        return PlainTextResponse("ok")

    def to_list(request: Request):
        root = request.scope.get("root_path", "").rstrip("/")
        query = request.url.query
        return RedirectResponse(root + "/" + ("?" + query if query else ""), status_code=308)

    async def http_error(request: Request, exc: HTTPException):
        if request.url.path.startswith(request.scope.get("root_path", "").rstrip("/") + "/api/"):
            return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)
        return page("error.html", request, status_code=exc.status_code, code=exc.status_code,
                    message=str(exc.detail))

    routes = [
        Route("/", list_page, methods=["GET", "HEAD"]),
        Route("/regressions", to_list, methods=["GET", "HEAD"]),
        Route("/regressions/{rid:int}", record_page, methods=["GET", "HEAD"]),
        *rerun_routes(store, source),  # a rerun's samples.csv and samples.svg (bot.lab.rerun_web)
        Route("/feed.atom", feed, methods=["GET", "HEAD"]),
        Route("/api/regressions", api_list, methods=["GET", "HEAD"]),
        Route("/api/regressions/{rid:int}", api_record, methods=["GET", "HEAD"]),
        Route("/openapi.json", openapi, methods=["GET", "HEAD"]),
        Route("/healthz", healthz, methods=["GET", "HEAD"]),
        Mount("/static", app=StaticFiles(directory=str(STATIC)), name="static"),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(SecurityHeaders)],
                    exception_handlers={HTTPException: http_error})
    app.state.store = store
    app.state.config = config
    return app
