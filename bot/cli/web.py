"""CLI command ``regtriage serve``: the read-only web dashboard and JSON API (bot.web.app).

Wire into the main group with ``register(main)`` (bot/cli/main.py).  The web stack (Starlette,
uvicorn) is imported inside the command only, so ``regtriage --help`` stays fast.
"""

from __future__ import annotations

import click


def register(main: click.Group) -> None:
    """Add ``serve`` to the ``regtriage`` click group."""

    @main.command("serve")
    @click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
    @click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="TCP port.")
    @click.option("--root-path", default="", help="URL prefix when served behind a reverse proxy (e.g. /regtriage).")
    @click.option("--log-level", default="info", show_default=True,
                  type=click.Choice(["critical", "error", "warning", "info", "debug"]))
    @click.pass_obj
    def serve_cmd(obj, host, port, root_path, log_level):
        """Serve the read-only dashboard: searchable list, a page per regression, an Atom feed
        (/feed.atom) and a JSON API (/api/regressions, /openapi.json)."""
        import uvicorn

        from bot.web.app import create_app

        app = create_app(obj.store, obj.config)
        click.echo(f"regtriage: serving on http://{host}:{port}{root_path}/ (Ctrl-C stops)", err=True)
        uvicorn.run(app, host=host, port=port, root_path=root_path.rstrip("/"), log_level=log_level,
                    proxy_headers=True, server_header=False)
