"""Web dashboard throughput at 100,000 records, over real HTTP (targets: the JSON API >= 150
requests/s, the HTML search >= 100/s).

    .venv/bin/python bench/web.py                      # SQLite, 100k records, serve --workers 2, 10 s per URL
    .venv/bin/python bench/web.py --records 20000 --seconds 5 --clients 4
    .venv/bin/python bench/web.py --pg postgresql+psycopg://postgres@127.0.0.1:5432/test

The database is filled as ``bench/query.py`` fills it (realistic statuses, subsystems, culprits,
dates); ``regtriage serve`` runs as its own process (uvicorn, as deployed) and ``--clients``
threads, each with one keep-alive connection, ask for each URL in turn for ``--seconds``.
Reported per URL: requests/s and the median and 95th-percentile latency.
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import quote

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from query import fill, pg_reachable, pg_schema  # noqa: E402  (bench/query.py)

QUERY = "open regressions in mm/"
URLS = [
    ("JSON API search", f"/api/regressions?q={quote(QUERY)}", 150),
    ("HTML search", f"/?q={quote(QUERY)}", 100),
    ("JSON API, filters", "/api/regressions?status=open&kind=performance&subsystem=fs/xfs", 150),
    ("health check", "/healthz", None),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(db_url: str, home: str, workers: int) -> tuple[subprocess.Popen, int]:
    port = free_port()
    # this tree's code, whatever the installed (perhaps editable, perhaps elsewhere) package is
    env = {**os.environ, "REGTRIAGE_HOME": home, "PYTHONPATH": str(HERE.parent)}
    proc = subprocess.Popen([str(Path(sys.executable).parent / "regtriage"), "--db", db_url, "serve",
                             "--port", str(port), "--log-level", "warning", "--workers", str(workers)], env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                return proc, port
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("regtriage serve did not come up")


def hammer(port: int, path: str, seconds: float, clients: int) -> tuple[float, list[float]]:
    latencies: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine = []
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            conn.request("GET", path)
            resp = conn.getresponse()
            resp.read()
            if resp.status != 200:
                raise SystemExit(f"{path}: HTTP {resp.status}")
            mine.append(time.perf_counter() - t0)
        with lock:
            latencies.extend(mine)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(latencies) / (time.perf_counter() - t0), latencies


def run(db_url: str, label: str, args) -> bool:
    from storage.store import Store

    store = Store(db_url)
    fill_s = fill(store, args.records)
    store.close()
    print(f"\n{label}: {args.records} records in {fill_s:.1f} s; serve --workers {args.workers}, "
          f"{args.clients} clients, {args.seconds:.0f} s per URL")
    with tempfile.TemporaryDirectory() as home:
        proc, port = serve(db_url, home, args.workers)
        ok = True
        try:
            print(f"  {'req/s':>7}  {'median ms':>9}  {'p95 ms':>7}  target  url")
            for name, path, target in URLS:
                hammer(port, path, 1.0, 1)  # warm-up
                rate, lat = hammer(port, path, args.seconds, args.clients)
                lat.sort()
                med, p95 = statistics.median(lat) * 1000, lat[int(0.95 * (len(lat) - 1))] * 1000
                good = target is None or rate >= target
                ok &= good
                print(f"  {rate:7.1f}  {med:9.1f}  {p95:7.1f}  {target or '-':>6}  {path}  ({name})"
                      + ("" if good else "  <-- under target"))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2, help="regtriage serve --workers (default: one per core here)")
    ap.add_argument("--pg", default=None, help="also measure on this PostgreSQL (a fresh schema, dropped after)")
    args = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as d:
        ok &= run(f"sqlite:///{d}/bench.sqlite3", "SQLite", args)
    if args.pg and pg_reachable(args.pg):
        with pg_schema(args.pg) as url:
            ok &= run(url, "PostgreSQL", args)
    print("\nall targets met" if ok else "\nsome targets missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
