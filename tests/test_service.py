"""`regtriage run` as people run it: a real process against a real public-inbox server,
stopped with SIGTERM and restarted; leases between workers; events from the history."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.publicinbox import THREADS, PublicInbox, fresh, missing_tools
from tests.test_chat_servers import ircd  # noqa: F401 - the real ngircd fixture

REPORT = """From: Perf Tester <perf@example.org>
To: test@example.org
Subject: [REGRESSION] ext4: fsync latency up 40% between v6.7 and v6.8
Message-ID: <svc-report-1@example.org>
Date: {date}

Hi,

after moving from v6.7 to v6.8, fio fsync latency on ext4 went up from 120 usecs to
168 usecs on our Intel(R) Xeon(R) Gold 6230 box.
I bisected it to commit 1a2b3c4d5e6f ("ext4: rework the fsync path").
"""


def http_get(url: str, timeout: float = 5) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def wait_for(pred, timeout: float, what: str, interval: float = 0.3):
    end = time.time() + timeout
    while time.time() < end:
        value = pred()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def pi():
    reason = missing_tools()
    if reason:
        pytest.skip(reason)
    inbox = PublicInbox()
    inbox.bulk_import(sorted(THREADS.glob("*.eml")))
    inbox.start()
    yield inbox
    inbox.close()


def start_run(tmp_path: Path, db: str, port_file: Path | None = None) -> subprocess.Popen:
    env = dict(os.environ, REGTRIAGE_HOME=str(tmp_path / "home"), REGTRIAGE_DB=db,
               REGTRIAGE_SMTP_PASSWORD="never-log-this-secret")
    log = open(tmp_path / "run.log", "ab")
    return subprocess.Popen([sys.executable, "-m", "bot.cli.main", "--config", str(tmp_path / "regtriage.toml"),
                             "run", "--port", "0", "--log-json"],
                            env=env, stdout=log, stderr=log, cwd=str(tmp_path))


def served_url(tmp_path: Path, after: int = 0) -> str:
    def find():
        lines = (tmp_path / "run.log").read_text(errors="replace").splitlines()[after:]
        for line in lines:
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if doc.get("msg") == "serving":
                return doc["url"]
        return None
    return wait_for(find, 30, "the dashboard to listen")


def cli_json(tmp_path: Path, db: str, *args) -> object:
    env = dict(os.environ, REGTRIAGE_HOME=str(tmp_path / "home"), REGTRIAGE_DB=db)
    out = subprocess.run([sys.executable, "-m", "bot.cli.main", *args, "--json"], env=env, capture_output=True,
                         text=True, check=True, cwd=str(tmp_path))
    return json.loads(out.stdout)


def test_run_polls_triages_serves_and_stops_cleanly(pi, tmp_path):
    db = f"sqlite:///{tmp_path / 'rt.sqlite3'}"
    (tmp_path / "regtriage.toml").write_text('[service]\npoll_interval = 1\ntick = 0.3\n'
                                             '[lore]\ntimeout = 5\n')
    env = dict(os.environ, REGTRIAGE_HOME=str(tmp_path / "home"), REGTRIAGE_DB=db)
    subprocess.run([sys.executable, "-m", "bot.cli.main", "subscribe", pi.base], env=env, check=True,
                   cwd=str(tmp_path), capture_output=True)
    proc = start_run(tmp_path, db)
    try:
        base = served_url(tmp_path)
        assert http_get(base + "healthz")[0] == 200
        # the first poll ingests what the feed lists
        wait_for(lambda: len(cli_json(tmp_path, db, "threads")) >= 2, 60, "the first poll")
        # a report delivered to the running inbox becomes a regression record
        pi.deliver(fresh(REPORT.format(date=time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime()))
                         .encode()))
        rec = wait_for(lambda: [r for r in cli_json(tmp_path, db, "query", "status:open", "text:fsync")], 60,
                       "the report to become a record")[0]
        assert rec["culprit"]["commit"] == "1a2b3c4d5e6f" and rec["subsystem"] == "fs/ext4"
        status, metrics = http_get(base + "metrics")
        assert status == 200
        assert "regtriage_messages_ingested_total" in metrics and "regtriage_poll_lag_seconds{" in metrics
        assert 'regtriage_regressions{status="triaged"}' in metrics
        api = json.loads(http_get(base + "api/regressions?q=text:fsync")[1])
        assert [r["id"] for r in api] == [rec["id"]]
        messages_before = len(cli_json(tmp_path, db, "threads"))
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    assert rc == 0
    log = (tmp_path / "run.log").read_text(errors="replace").splitlines()
    docs = [json.loads(line) for line in log if line.startswith("{")]
    assert docs and any(d["msg"] == "stopped" for d in docs)
    assert "never-log-this-secret" not in "\n".join(log)

    # a restart resumes: nothing is ingested twice, the record is not duplicated
    n_log = len(log)
    proc = start_run(tmp_path, db)
    try:
        served_url(tmp_path, after=n_log)
        time.sleep(3)  # several poll/pipeline ticks
        assert len(cli_json(tmp_path, db, "threads")) == messages_before
        assert len(cli_json(tmp_path, db, "query", "status:all", "text:fsync")) == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_leases_one_winner_expiry_and_release(store):
    winners = []
    barrier = threading.Barrier(6)

    def contend(i):
        barrier.wait()
        if store.try_lease("sub:1", f"w{i}", 60) is not None:
            winners.append(i)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1
    assert store.try_lease("sub:1", "late", 60) is None
    # an expired lease can be taken over; the old holder's release then does nothing
    stamp = store.try_lease("sub:1", "taker", 0)
    assert stamp is not None
    store.release_lease("sub:1", stamp)
    assert store.try_lease("sub:1", "again", 60) is not None


def test_events_from_history_once(store):
    from bot.tracker.events import consume_events, event_for
    from storage.tracker_schema import regression_history, regressions
    from storage.store import utcnow

    assert event_for("status", "reported", "triaged") == "triaged"
    assert event_for("status", "rerun-scheduled", "confirmed") == "confirmed"
    assert event_for("status", "triaged", "fix-pending") == "fix-landed"
    assert event_for("status", "fix-pending", "fixed") is None
    assert event_for("title", "a", "b") is None
    now = utcnow()
    with store.engine.begin() as conn:
        rid = conn.execute(regressions.insert().values(
            title="t", status="triaged", created_at=now, updated_at=now, hardware={}, config={}, numbers=[],
            evidence={}, overrides={})).inserted_primary_key[0]
        for old, new in (("reported", "triaged"), ("triaged", "rerun-scheduled"), ("rerun-scheduled", "confirmed")):
            conn.execute(regression_history.insert().values(regression_id=rid, at=now, field="status", old=old,
                                                            new=new, source="user"))
    seen = []
    assert consume_events(store, seen.append) == 3
    assert [e.kind for e in seen] == ["triaged", "rerun-scheduled", "confirmed"]
    assert consume_events(store, seen.append) == 0  # the cursor moved: nothing twice
    assert len({e.key for e in seen}) == 3


# -- the whole bot: mail in, chat out --------------------------------------------------------------
NOTIFY_CONFIG = """
[service]
poll_interval = 1
tick = 0.3
[lore]
timeout = 5
[web]
base_url = "https://regtriage.example.org"
[notify]
retry_base = 1
retry_max = 2
send_timeout = 8
[[notify.irc]]
name = "test"
server = "127.0.0.1"
port = {port}
tls = false
nick = "rtbot"
channels = ["#fs-regressions", "#mm-regressions"]
flood_burst = 50
flood_rate = 100
reconnect_min = 0.2
reconnect_max = 1
[[notify.route]]
events = ["triaged"]
subsystem = "fs/"
targets = ["irc:#fs-regressions"]
[[notify.route]]
events = ["triaged"]
subsystem = "mm/"
targets = ["irc:#mm-regressions"]
[chat]
prefix = "!regtriage"
user_rate = 50
user_burst = 50
channel_rate = 50
channel_burst = 50
"""


def test_run_announces_a_new_report_in_irc_once(pi, tmp_path, ircd):
    """`regtriage run` against a real public-inbox and a real ngircd: a report delivered to the
    inbox is polled, triaged, tracked and announced in the channel its route names (not in the
    other one); the old threads of the first poll are tracked but not announced; a chat query
    is answered from the same process; a restart announces nothing again."""
    from tests.test_chat_servers import IrcUser  # noqa: PLC0415

    db = f"sqlite:///{tmp_path / 'rt.sqlite3'}"
    (tmp_path / "regtriage.toml").write_text(NOTIFY_CONFIG.format(port=ircd.port))
    env = dict(os.environ, REGTRIAGE_HOME=str(tmp_path / "home"), REGTRIAGE_DB=db)
    subprocess.run([sys.executable, "-m", "bot.cli.main", "subscribe", pi.base], env=env, check=True,
                   cwd=str(tmp_path), capture_output=True)
    maint = IrcUser(ircd.port, "maint")
    maint.join("#fs-regressions", "#mm-regressions")
    proc = start_run(tmp_path, db)
    try:
        served_url(tmp_path)
        wait_for(lambda: len(cli_json(tmp_path, db, "threads")) >= 2, 60, "the first poll")
        wait_for(lambda: cli_json(tmp_path, db, "query", "status:all"), 60, "records from the old threads")
        pi.deliver(fresh(REPORT.format(date=time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime()))
                         .encode()))
        rec = wait_for(lambda: [r for r in cli_json(tmp_path, db, "query", "status:open", "text:fsync")], 60,
                       "the report to become a record")[0]
        said = maint.wait_for(lambda: [t for t in maint.messages("#fs-regressions", sender="rtbot")
                                       if f"#{rec['id']}" in t or f"/regressions/{rec['id']}" in t], 60)
        assert said, maint.got
        assert "fsync" in said[0] and f"https://regtriage.example.org/regressions/{rec['id']}" in said[0]
        # the backlog of the first poll (mail days or years old) was tracked, not announced
        assert len(maint.messages("#fs-regressions", sender="rtbot")) == 1
        assert maint.messages("#mm-regressions", sender="rtbot") == []
        # chat commands are answered by the running bot
        maint.say("#fs-regressions", f"!regtriage show {rec['id']}")
        answer = maint.wait_for(lambda: [t for t in maint.messages("#fs-regressions", sender="rtbot")[1:]
                                         if "1a2b3c4d5e6f" in t or "fsync" in t], 20)
        assert answer, maint.got
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    assert rc == 0
    n_said = len(maint.messages("#fs-regressions", sender="rtbot"))
    n_log = len((tmp_path / "run.log").read_text(errors="replace").splitlines())
    proc = start_run(tmp_path, db)
    try:
        served_url(tmp_path, after=n_log)
        time.sleep(4)  # several pipeline and delivery passes, time to reconnect
        assert len(maint.messages("#fs-regressions", sender="rtbot")) == n_said
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        maint.close()
