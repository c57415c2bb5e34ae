"""The HTML pages of the dashboard:

* ``GET /`` (also ``/regressions``, redirected): the list of regression records, searchable with
  the query box and the filter fields (bot/web/search.py); ``limit``/``offset`` page through it.
* ``GET /regressions/{id}``: one record: facts, culprit linked to the commit, evidence quoted
  and linked to the message on lore, related mail, rerun results with an SVG plot of the good
  vs bad samples (:func:`bot.web.svg.samples_svg`), and the timeline (history).
* the error page of any HTTP error outside ``/api/``.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse
from starlette.routing import Route

from bot.tracker.entry import entry
from bot.tracker.query import CLOSED, KINDS, STATUSES
from bot.web.record_view import RerunSource, evidence_items, rerun_view, with_reruns
from bot.web.render import render
from bot.web.search import SearchError, form, form_search, page_links, subsystems


def root_path(request: Request) -> str:
    """Where the app is mounted (``""`` at the top of the site)."""
    return request.scope.get("root_path", "").rstrip("/")


def page(name: str, request: Request, status_code: int = 200, **ctx) -> HTMLResponse:
    """The template ``name`` rendered as a page of the site."""
    html = render(name, root=root_path(request), statuses=STATUSES, closed=CLOSED, kinds=KINDS, **ctx)
    return HTMLResponse(html, status_code=status_code)


def error_page(request: Request, exc: HTTPException) -> HTMLResponse:
    return page("error.html", request, status_code=exc.status_code, code=exc.status_code, message=str(exc.detail))


def page_routes(store, reruns: RerunSource | None, source: RerunSource) -> list[Route]:
    """The list and record pages over ``store``; ``reruns`` (when given) fills in the reruns of
    a record that has none from the lab, through ``source``."""
    def list_page(request: Request):
        fields = form(request.query_params)
        error = None
        rows, total, understood = [], 0, ""
        limit = offset = 0
        try:
            limit, offset, (rows, total, understood) = form_search(store, request.query_params, fields, min_limit=1)
        except SearchError as exc:
            error = str(exc)
        prev_url, next_url = page_links(fields, limit, offset, total, root_path(request) + "/")
        return page("list.html", request, status_code=400 if error else 200, rows=rows, total=total,
                    understood=understood, error=error, form=fields, offset=offset, prev_url=prev_url,
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

    def to_list(request: Request):
        query = request.url.query
        return RedirectResponse(root_path(request) + "/" + ("?" + query if query else ""), status_code=308)

    return [Route("/", list_page, methods=["GET", "HEAD"]),
            Route("/regressions", to_list, methods=["GET", "HEAD"]),
            Route("/regressions/{rid:int}", record_page, methods=["GET", "HEAD"])]
