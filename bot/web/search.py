"""Searching the records for the list page and the list API: the query box (the language of
``regtriage query``, :mod:`bot.tracker.query`) and the filter fields (``status``, ``subsystem``,
``kind``, ``text``), both applied; ``limit``/``offset`` page through the result.  A value that
cannot be understood is a :class:`SearchError` saying why (a 400 answer).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from bot.tracker.query import Filter, QueryError, parse_query, run_query
from storage.records import subsystems as stored_subsystems

DEFAULT_LIMIT, MAX_LIMIT = 50, 500
FORM_FIELDS = ("q", "status", "subsystem", "kind", "text")
_SUBSYSTEM_VALUE = re.compile(r"[A-Za-z0-9_.+*/,-]{1,255}")


class SearchError(ValueError):
    """A query or filter value that cannot be understood (the message says why)."""


def field_filter(status: str = "", subsystem: str = "", kind: str = "", text: str = ""):
    """A :class:`bot.tracker.query.Filter` from the list page's filter fields, or None when all are empty."""
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
    try:
        f = parse_query(q) if q and q.strip() else None
    except QueryError as exc:
        raise SearchError(str(exc)) from None
    g = field_filter(status, subsystem, kind, text)
    if f is None or g is None:
        one = f if f is not None else g
        if one is None:
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
    """The subsystems the list page offers in its filter (the most used first)."""
    return stored_subsystems(store, limit)



def int_param(value: str | None, default: int, name: str, lo: int, hi: int | None = None) -> int:
    if value is None or value == "":
        return default
    try:
        v = int(value)
    except ValueError:
        raise SearchError(f"{name}: needs a whole number, not {value!r}") from None
    if v < lo or (hi is not None and v > hi):
        raise SearchError(f"{name}: must be between {lo} and {hi}" if hi is not None else f"{name}: must be >= {lo}")
    return v



def form(query_params) -> dict[str, str]:
    """The search fields of a request's query string (missing ones empty)."""
    return {k: query_params.get(k, "") for k in FORM_FIELDS}


def form_search(store, query_params, fields: dict[str, str], *, min_limit: int):
    """(limit, offset, :func:`search` result) of a list request's paging and search fields."""
    limit = int_param(query_params.get("limit"), DEFAULT_LIMIT, "limit", min_limit, MAX_LIMIT)
    offset = int_param(query_params.get("offset"), 0, "offset", 0)
    return limit, offset, search(store, fields["q"], status=fields["status"], subsystem=fields["subsystem"],
                                 kind=fields["kind"], text=fields["text"], limit=limit, offset=offset)


def page_links(fields: dict[str, Any], limit: int, offset: int, total: int, path: str) -> tuple[str | None, str | None]:
    """(previous page, next page) URLs of a list page, keeping its search fields."""
    keep = {k: v for k, v in fields.items() if v}
    if limit != DEFAULT_LIMIT:
        keep["limit"] = limit
    prev_url = next_url = None
    if offset > 0:
        back = {"offset": offset - limit} if offset - limit > 0 else {}
        prev_url = path + "?" + urlencode({**keep, **back})
    if limit and offset + limit < total:
        next_url = path + "?" + urlencode({**keep, "offset": offset + limit})
    return prev_url, next_url
