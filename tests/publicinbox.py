"""A real public-inbox server on loopback, for tests (see shared docs/public-inbox.md).

``PublicInbox`` creates a v2 inbox in a temp dir, bulk-imports .eml files (tests/pi-bulk-import.pl,
the same code path as public-inbox-mda), serves it with ``public-inbox-httpd -W0`` on a socket the
fixture binds itself (passed through LISTEN_FDS, so a stop/restart keeps the same URL), delivers
live mail with ``public-inbox-mda --no-precheck`` and removes mail with ``public-inbox-learn rm``.

Also ``StubServer``: a tiny stdlib HTTP server answering garbage / 500 / slow responses.
"""

from __future__ import annotations

import email.utils
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
THREADS = HERE / "data" / "threads"
BULK = HERE / "pi-bulk-import.pl"
HTTPD_EXEC = ("import os, sys; fd = int(sys.argv[1]); os.dup2(fd, 3); fd != 3 and os.close(fd); "
              "os.environ['LISTEN_PID'] = str(os.getpid()); "
              "os.execvp('public-inbox-httpd', ['public-inbox-httpd', '-W0'])")
TOOLS = ("public-inbox-init", "public-inbox-httpd", "public-inbox-mda", "public-inbox-learn", "perl", "git")


def missing_tools() -> str | None:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return f"public-inbox not installed (missing {', '.join(missing)}; apt-get install public-inbox)"
    probe = subprocess.run(["perl", "-MPublicInbox::InboxWritable", "-e", "1"], capture_output=True)
    if probe.returncode != 0:
        return "public-inbox Perl modules not importable"
    return None


def require_public_inbox() -> None:
    reason = missing_tools()
    if reason:
        pytest.skip(reason)


def fresh(raw: bytes, when: float | None = None) -> bytes:
    """Give a message a current Received header so it sorts first in new.atom."""
    stamp = email.utils.formatdate(when if when is not None else time.time(), usegmt=True)
    return f"Received: from test by localhost; {stamp}\n".encode() + raw


class PublicInbox:
    def __init__(self, name: str = "test", address: str = "test@example.org") -> None:
        require_public_inbox()
        self.name, self.address = name, address
        self.tmp = Path(tempfile.mkdtemp(prefix="pi-"))
        self.env = dict(os.environ, PI_CONFIG=str(self.tmp / "config"),
                        PI_EMERGENCY=str(self.tmp / "emergency"), HOME=str(self.tmp))
        self.env.pop("LISTEN_FDS", None)
        self.env.pop("LISTEN_PID", None)
        (self.tmp / "config").write_text("[publicinboxmda]\n\tspamcheck = none\n")
        self.inboxdir = self.tmp / "inboxes" / name
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        subprocess.run(["public-inbox-init", "-V2", "-j1", name, str(self.inboxdir),
                        f"http://127.0.0.1/{name}", address], env=self.env, check=True,
                       capture_output=True)

    # -- content --------------------------------------------------------------------------
    def bulk_import(self, paths) -> str:
        out = subprocess.run(["perl", str(BULK), self.name, *map(str, paths)], env=self.env,
                             check=True, capture_output=True, text=True)
        return out.stdout.strip()

    def deliver(self, raw: bytes, *, hup: bool = True) -> None:
        subprocess.run(["public-inbox-mda", "--no-precheck"], input=raw, check=True,
                       env=dict(self.env, ORIGINAL_RECIPIENT=self.address), capture_output=True)
        emergency = self.tmp / "emergency" / "new"
        if emergency.is_dir() and any(emergency.iterdir()):
            raise RuntimeError("public-inbox-mda put the message in the emergency Maildir")
        if hup:
            self.hup()

    def remove(self, raw: bytes) -> None:
        subprocess.run(["public-inbox-learn", "rm"], input=raw, check=True, env=self.env,
                       capture_output=True)
        self.hup()

    def hup(self) -> None:
        """Make a running httpd drop its cached Xapian handles (search sees new mail)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGHUP)
            time.sleep(0.3)

    # -- server ---------------------------------------------------------------------------
    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/{self.name}/"

    def start(self) -> "PublicInbox":
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port or 0))
        sock.listen(128)
        self.port = sock.getsockname()[1]
        fd = sock.fileno()
        self.log = open(self.tmp / "httpd.stderr", "ab")
        # systemd socket activation: the socket must be fd 3 and LISTEN_PID the server's pid.
        # (A preexec_fn dup2 would be undone: Popen closes fd 3 after preexec_fn runs.)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HTTPD_EXEC, str(fd)],
            env=dict(self.env, LISTEN_FDS="1"), pass_fds=(fd,), stdout=subprocess.DEVNULL,
            stderr=self.log)
        sock.close()  # the server holds it now; connections queue until it accepts
        deadline = time.time() + 15
        while True:
            try:
                with urllib.request.urlopen(self.base + "new.atom", timeout=5) as r:
                    r.read()
                return self
            except Exception:
                if self.proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError((self.tmp / "httpd.stderr").read_text(errors="replace"))
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class StubServer:
    """Loopback HTTP server with a fixed behaviour: ``garbage``, ``500``, ``slow``, ``html``, or
    ``routes``: ``{path: (status, headers, body)}`` (an ``ETag`` header is honoured with 304)."""

    def __init__(self, mode: str, delay: float = 3.0, routes: dict | None = None) -> None:
        self.mode, self.delay, self.hits, self.routes = mode, delay, [], routes or {}
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802
                stub.hits.append((self.path, dict(self.headers)))
                headers: dict = {}
                if stub.mode == "routes":
                    status, headers, body = stub.routes.get(self.path, (404, {}, b"not found\n"))
                    ctype = headers.get("Content-Type", "text/plain")
                    etag = headers.get("ETag")
                    if etag and self.headers.get("If-None-Match") == etag:
                        status, body = 304, b""
                elif stub.mode == "500":
                    body, status, ctype = b"internal error\n", 500, "text/plain"
                elif stub.mode == "slow":
                    time.sleep(stub.delay)
                    body, status, ctype = b"<feed/>", 200, "application/atom+xml"
                elif stub.mode == "html":
                    body, status, ctype = b"<html><body>hello</body></html>", 200, "text/html"
                else:
                    body, status, ctype = b"\x00\x01garbage{{{ not xml <<<", 200, "application/atom+xml"
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    for k, v in headers.items():
                        if k != "Content-Type":
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

            def log_message(self, *args):
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                # a client that stops reading (a download cut at a limit) resets the connection
                if not isinstance(sys.exc_info()[1], ConnectionError):
                    super().handle_error(request, client_address)

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/list/"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def make_epoch(repo: Path, events: list[tuple[str, bytes]]) -> None:
    """Write a public-inbox-style epoch with git fast-import: one commit per event, the tree
    holding only ``m`` ("add") or ``d`` ("del").  Appends when the repository exists."""
    if not repo.exists():
        subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    have = subprocess.run(["git", "--git-dir", str(repo), "rev-parse", "-q", "--verify",
                           "refs/heads/master"], capture_output=True).returncode == 0
    stream = bytearray()
    for i, (kind, raw) in enumerate(events):
        ts = 1704103200 + i
        name = b"m" if kind == "add" else b"d"
        stream += (b"commit refs/heads/master\n"
                   + f"author test <test@example.org> {ts} +0000\n".encode()
                   + f"committer test <test@example.org> {ts} +0000\n".encode()
                   + b"data 3\nmsg\n"
                   + (b"from refs/heads/master^0\n" if i == 0 and have else b"")
                   + b"deleteall\n"
                   + b"M 100644 inline " + name + b"\n" + b"data %d\n" % len(raw) + raw + b"\n")
    subprocess.run(["git", "--git-dir", str(repo), "fast-import", "--quiet"], input=bytes(stream),
                   check=True)


@contextmanager
def cli_env(cli, tmp_path: Path, config: str):
    """(run, store): run(*args) -> parsed JSON of a CLI command on a private SQLite db
    configured with ``config``; run(..., ok=False) returns the raw click result."""
    from storage.store import Store

    (tmp_path / "regtriage.toml").write_text(config)
    db = f"sqlite:///{tmp_path / 'rt.sqlite3'}"

    def run(*args, ok=True):
        res = cli(*args, db=db)
        if ok:
            assert res.exit_code == 0, res.output
            return json.loads(res.output)
        return res

    store = Store(db)
    try:
        yield run, store
    finally:
        store.close()
