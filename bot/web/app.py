"""The read-only web dashboard and JSON API (``regtriage serve``): a Starlette ASGI app.

:func:`create_app` ``(store, config) -> app`` serves, each part from its module:

* the HTML pages (bot/web/pages.py): ``GET /`` (also ``/regressions``), the list of records,
  searchable (bot/web/search.py), and ``GET /regressions/{id}``, one record with its evidence
  and reruns (bot/web/record_view.py), rendered from ``templates/web`` (bot/web/render.py);
* a rerun's samples as CSV and SVG (bot/lab/rerun_web.py);
* ``GET /feed.atom``: Atom 1.0 feed of new regressions and of regressions confirmed by reruns
  (bot/web/feed.py);
* the JSON API (bot/web/api.py): ``GET /api/regressions?q=...``, ``GET /api/regressions/{id}``
  and ``GET /openapi.json`` (bot/web/openapi.py);
* ``GET /healthz``: ``ok`` (503 when the database does not answer);
* ``/static/``: the CSS (``templates/web/static``).

Reruns: an entry's ``reruns`` list comes from the entry itself when it has any, else from the
``reruns`` source given to :func:`create_app` (default
:func:`bot.web.record_view.reruns_for`, the lab's finished jobs).

Safety: every mail-derived string is escaped (Jinja2 autoescape for .html templates; the feed
is built with ElementTree from cleaned text); links taken from data are http(s) only
(:func:`bot.tracker.entry.safe_url`); there is no script at all, and every response carries a
strict Content-Security-Policy (``default-src 'self'; img-src 'self' data:; style-src 'self'``)
with the CSS served as a static file.  The app only reads the database.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from bot.config import load
from bot.lab.rerun_web import rerun_routes
from bot.web.api import JSONResponse, api_routes
from bot.web.feed import feed_routes
from bot.web.pages import error_page, page_routes, root_path
from bot.web.record_view import RerunSource, reruns_for
from bot.web.render import STATIC
from storage.store import Store

CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


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


def app_from_environment():
    """The app for each of ``regtriage serve --workers N``'s processes (a uvicorn factory):
    configuration and database from ``REGTRIAGE_CONFIG`` / ``REGTRIAGE_DB``, as the command
    that started them resolved them."""
    config = load()
    return create_app(Store(config.db_url), config)


def create_app(store, config=None, *, reruns: RerunSource | None = None):
    """The ASGI app over ``store`` (read only).  ``reruns(store, rid) -> list`` supplies rerun
    results for entries that have none of their own (default :func:`reruns_for`)."""
    source = reruns or reruns_for

    def healthz(request: Request):
        try:
            store.ping()
        except Exception:  # noqa: BLE001 - any database failure: not healthy
            return PlainTextResponse("database unavailable", status_code=503)
        return PlainTextResponse("ok")

    async def http_error(request: Request, exc: HTTPException):
        if request.url.path.startswith(root_path(request) + "/api/"):
            return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)
        return error_page(request, exc)

    routes = [
        *page_routes(store, reruns, source),
        *rerun_routes(store, source),  # a rerun's samples.csv and samples.svg (bot.lab.rerun_web)
        *feed_routes(store),
        *api_routes(store, reruns, source),
        Route("/healthz", healthz, methods=["GET", "HEAD"]),
        Mount("/static", app=StaticFiles(directory=str(STATIC)), name="static"),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(SecurityHeaders)],
                    exception_handlers={HTTPException: http_error})
    app.state.store = store
    app.state.config = config
    return app
