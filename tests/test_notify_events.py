"""Notifications exactly once and never silently lost (bot.notify.outbox.announce): one
announcement per tracker transition (keyed by the history row), the same cursor semantics for
``regtriage run``'s event stream and ``notify --send-pending``, and everything not announced
kept as a ``skipped`` row with its reason -- on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path

from sqlalchemy import update

import storage.tracker_schema as ts
from bot.config import Config
from bot.notify.outbox import list_notifications, scan_tracker
from bot.notify.settings import load_settings
from bot.service.run import Service
from bot.service.hooks import install_hooks
from bot.tracker.records import set_status
from tests.test_notify import MM, build, rid_of

NOTIFY = {"web": {"base_url": "https://rt.example"},
          "notify": {"max_age_hours": 48,
                     "irc": [{"server": "irc.example", "tls": False, "channels": ["#mm"]}],
                     "route": [{"subsystem": "mm/", "targets": ["irc:#mm"]}]}}


def settings():
    return load_settings(NOTIFY)


def by_state(store):
    out: dict[str, list[str]] = {}
    for r in sorted(list_notifications(store, limit=1000), key=lambda r: r["id"]):
        out.setdefault(r["state"], []).append(r["event"])
    return out


def service(store, tmp_path):
    svc = Service(store, Config(home=tmp_path, db_url=store.url, data=dict(NOTIFY)), web=False)
    install_hooks(svc)
    return svc


def test_the_same_status_twice_is_announced_twice(store):
    build(store, MM)
    mm = rid_of(store, "n-mm@example.org")
    s = settings()
    scan_tracker(store, settings=s)
    set_status(store, mm, "confirmed", "lab", "rerun 1")
    set_status(store, mm, "triaged", "user", "reopened: the rerun used the wrong config")
    set_status(store, mm, "confirmed", "lab", "rerun 2")
    scan_tracker(store, settings=s)
    assert by_state(store) == {"queued": ["triaged", "confirmed", "triaged", "confirmed"]}
    assert scan_tracker(store, settings=s) == {"events": 0, "queued": 0, "skipped": 0}


def test_service_and_cli_announce_the_same_transitions_once(store, tmp_path):
    build(store, MM)
    mm = rid_of(store, "n-mm@example.org")
    set_status(store, mm, "confirmed", "lab")
    svc = service(store, tmp_path)
    # the first `run` on this database and the first `notify --send-pending` see the same backlog
    assert svc.pipeline_step()["events"] == 2
    assert by_state(store) == {"queued": ["triaged", "confirmed"]}
    first = scan_tracker(store, settings=settings())
    assert first["queued"] == 0 and first["events"] == 2  # the same transitions: nothing twice
    set_status(store, mm, "fixed", "tree")
    scan_tracker(store, settings=settings())  # the CLI first this time
    svc.pipeline_step()
    assert by_state(store) == {"queued": ["triaged", "confirmed", "fix-landed"]}


def test_old_mail_old_changes_and_closed_records_are_skipped_with_the_reason(store, tmp_path):
    now = datetime.now(timezone.utc)
    old = (f"Received: from lists.example by mx.example; {format_datetime(now - timedelta(days=30))}\n"
           .encode() + MM.replace(b"n-mm@example.org", b"old-mm@example.org"))
    build(store, old)
    s = settings()
    scan_tracker(store, settings=s)
    skipped = [r for r in list_notifications(store) if r["state"] == "skipped"]
    assert [r["event"] for r in skipped] == ["triaged"]
    assert "mail received more than 48 h ago" in skipped[0]["last_error"]
    # a transition older than max_age (history from before the notifier ran): skipped, not lost
    build(store, MM)
    mm = rid_of(store, "n-mm@example.org")
    with store.engine.begin() as conn:
        conn.execute(update(ts.regression_history).where(ts.regression_history.c.regression_id == mm)
                     .values(at=now - timedelta(days=5)))
    # ... and a "new regression" of a record closed by the time it is handled
    set_status(store, mm, "resolved", "user", "not a bug")
    svc = service(store, tmp_path)
    svc.pipeline_step()
    rows = {(r["regression_id"], r["event"]): r for r in list_notifications(store)}
    assert rows[(mm, "triaged")]["state"] == "skipped"
    assert "older than 48 h" in rows[(mm, "triaged")]["last_error"]
    # closed records: a fresh "triaged" for a record resolved since
    build(store, MM.replace(b"n-mm@example.org", b"new-mm@example.org"))
    new = rid_of(store, "new-mm@example.org")
    set_status(store, new, "resolved", "user", "duplicate report")
    scan_tracker(store, settings=s)
    row = {(r["regression_id"], r["event"]): r for r in list_notifications(store)}[(new, "triaged")]
    assert row["state"] == "skipped" and "since been closed (resolved)" in row["last_error"]
    # skipped rows are never delivered
    from bot.notify.deliver import Deliverer

    import asyncio
    stats = asyncio.run(Deliverer(store, s, adapter_factory=lambda a: None).run_once())
    assert stats["due"] == 0


def test_cli_lists_skipped(store, cli, tmp_path):
    import json

    build(store, MM)
    with store.engine.begin() as conn:
        conn.execute(update(ts.regression_history).values(at=datetime.now(timezone.utc) - timedelta(days=9)))
    cfg = Path(tmp_path) / "regtriage.toml"
    cfg.write_text('[notify]\nmax_age_hours = 48\n[[notify.irc]]\nserver = "irc.example"\ntls = false\n'
                   'channels = ["#mm"]\n[[notify.route]]\ntargets = ["irc:#mm"]\n')
    scan_tracker(store, settings=load_settings({"notify": {"max_age_hours": 48, "irc": NOTIFY["notify"]["irc"],
                                                           "route": [{"targets": ["irc:#mm"]}]}}))
    r = cli("notify", "--list", "--state", "skipped", "--json", "--config", cfg, db=store.url)
    assert r.exit_code == 0, r.output
    assert [x["event"] for x in json.loads(r.stdout)] == ["triaged"]
