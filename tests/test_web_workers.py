"""``regtriage serve --workers 2``: several server processes, each building the app from the
configuration the command resolved, answer over real HTTP from the same database."""

import http.client
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from storage.store import Store


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_with_two_worker_processes(tmp_path):
    db = f"sqlite:///{tmp_path / 'rt.sqlite3'}"
    Store(db).close()  # the schema, made once before the workers start
    port = _free_port()
    exe = str(Path(sys.executable).parent / "regtriage")
    env = dict(os.environ, REGTRIAGE_HOME=str(tmp_path / "home"),
               PYTHONPATH=str(Path(__file__).resolve().parent.parent))  # this tree's code
    env.pop("REGTRIAGE_DB", None)
    env.pop("REGTRIAGE_CONFIG", None)
    proc = subprocess.Popen([exe, "--db", db, "serve", "--port", str(port), "--workers", "2", "--log-level", "warning"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                    assert r.read() == b"ok"
                    break
            except OSError:
                assert proc.poll() is None, proc.stdout.read().decode(errors="replace")
                assert time.monotonic() < deadline, "serve --workers 2 did not come up"
                time.sleep(0.3)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/regressions?q=open", timeout=10) as r:
            assert r.status == 200 and json.loads(r.read()) == []
        # responses are not held back by Nagle's algorithm (TCP_NODELAY on the connections the
        # workers accept): without it each keep-alive request waited for a 40 ms delayed ACK
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        took = []
        for _ in range(10):
            t0 = time.perf_counter()
            conn.request("GET", "/healthz")
            assert conn.getresponse().read() == b"ok"
            took.append(time.perf_counter() - t0)
        conn.close()
        assert sorted(took)[len(took) // 2] < 0.030, took  # (the first one is quick either way)
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert len(children) >= 2, children  # the supervisor's server processes
    finally:
        os.killpg(proc.pid, 15)
        out = proc.communicate(timeout=30)[0].decode(errors="replace")
    assert "with 2 processes" in out
