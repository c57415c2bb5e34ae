"""The JSON API of the dashboard:

* ``GET /api/regressions?q=&status=&subsystem=&kind=&text=&limit=&offset=``: a JSON list of
  tracker entries (:func:`bot.tracker.entry.build_entry`), the same list ``regtriage query
  --json`` prints for the same query; the total count is in ``X-Total-Count``, the next page in
  a ``Link: <...>; rel="next"`` header.
* ``GET /api/regressions/{id}``: one tracker entry.  ``GET /openapi.json``: OpenAPI 3.1.

Strict JSON: no NaN or infinity (None instead), lone surrogates from broken mail headers as
U+FFFD, control and bidi characters escaped.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bot.textsafe import json_text
from bot.tracker.entry import entries, entry
from bot.web.openapi import openapi_document
from bot.web.record_view import RerunSource, with_reruns
from bot.web.search import SearchError, form, form_search

_SURROGATE = re.compile("[\ud800-\udfff]")


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
    try:  # json_safe walks the whole value: only when it has a NaN or an infinity to replace
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=str)
    except ValueError:
        text = json.dumps(json_safe(value), ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=str)
    # controls and bidi overrides as \\uXXXX escapes: the same JSON, inert in a browser's raw view
    return json_text(_SURROGATE.sub("\ufffd", text)).encode("utf-8")


class JSONResponse(Response):
    """Starlette's name, our encoder (:func:`json_bytes`)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return json_bytes(content)


def api_routes(store, reruns: RerunSource | None, source: RerunSource) -> list[Route]:
    """The API's routes over ``store``; ``reruns`` (when given) fills in the reruns of entries
    that have none from the lab, through ``source``."""
    def api_list(request: Request):
        fields = form(request.query_params)
        try:
            limit, offset, (rows, total, _) = form_search(store, request.query_params, fields, min_limit=0)
        except SearchError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        items = entries(store, [r["id"] for r in rows], rows=rows)  # the lab's reruns too; a fixed number of statements
        if reruns is not None:  # another source fills in what the lab has not
            items = [with_reruns(store, e, source) for e in items]
        headers = {"X-Total-Count": str(total)}
        if limit and offset + limit < total:
            keep = {k: v for k, v in fields.items() if v}
            nxt = str(request.url.replace(query=urlencode({**keep, "limit": limit, "offset": offset + limit})))
            headers["Link"] = f'<{nxt}>; rel="next"'
        return JSONResponse(items, headers=headers)

    def api_record(request: Request):
        rid = request.path_params["rid"]
        e = entry(store, rid)
        if e is None:
            return JSONResponse({"error": f"no regression record {rid}"}, status_code=404)
        return JSONResponse(with_reruns(store, e, source) if reruns is not None else e)

    def openapi(request: Request):
        return JSONResponse(openapi_document())

    return [Route("/api/regressions", api_list, methods=["GET", "HEAD"]),
            Route("/api/regressions/{rid:int}", api_record, methods=["GET", "HEAD"]),
            Route("/openapi.json", openapi, methods=["GET", "HEAD"])]
