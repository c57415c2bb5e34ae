"""CLI command ``regtriage serve``: the read-only web dashboard and JSON API (bot/web/).

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
    @click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64),
                  help="Server processes (one per core serves the most requests; each opens the database).")
    @click.pass_obj
    def serve_cmd(obj, host, port, root_path, log_level, workers):
        """Serve the read-only dashboard: searchable list, a page per regression, an Atom feed
        (/feed.atom) and a JSON API (/api/regressions, /openapi.json)."""
        import os

        import uvicorn

        from bot.web.app import create_app

        opts = dict(host=host, port=port, root_path=root_path.rstrip("/"), log_level=log_level, proxy_headers=True,
                    server_header=False)
        click.echo(f"regtriage: serving on http://{host}:{port}{root_path}/ with {workers} process"
                   f"{'es' if workers > 1 else ''} (Ctrl-C stops)", err=True)
        if workers == 1:
            uvicorn.run(create_app(obj.store, obj.config), **opts)
            return
        # worker processes build their own app (and database connections) from what this
        # command resolved
        os.environ["REGTRIAGE_DB"] = obj.config.db_url
        if obj.config.path is not None:
            os.environ["REGTRIAGE_CONFIG"] = str(obj.config.path)
        import socket

        from uvicorn.supervisors import Multiprocess

        config = uvicorn.Config("bot.web.app:app_from_environment", factory=True, workers=workers, **opts)
        sock = config.bind_socket()  # what uvicorn.run does for workers > 1, and then:
        # uvicorn makes the shared socket with protocol 0, so asyncio does not set TCP_NODELAY on
        # the connections it accepts (it checks for IPPROTO_TCP) and each response waited ~40 ms
        # for a delayed ACK (Nagle); Linux hands the listener's TCP_NODELAY down to them
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        Multiprocess(config, sockets=[sock]).run()
