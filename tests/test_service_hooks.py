"""The service's optional parts (bot/service/hooks.py), driven through Service.pipeline_step on
SQLite and the real PostgreSQL: the lab scheduler reruns recent reports by policy, chat rerun
commands reach the lab, replies are drafted on the statuses configured, and mail that is
being backfilled (old) is tracked but never announced nor rerun."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest

from bot.config import Config
from bot.tracker.events import Event
from bot.sources.ingest import Ingester
from storage.lab_jobs import list_jobs
from bot.service.run import Service
from bot.service.hooks import LabActions, install_hooks, reply_policy
from bot.tracker.events import is_backfill
from bot.tracker.records import get_record, set_status
from tests.test_scheduler import fake_lab, lab_config, record  # noqa: F401 - the fake backend fixture


def store_mail(store, mid: str, date: datetime) -> None:
    # the list server's Received: says when the mail arrived (its age); Date: is only shown
    raw = (f"Received: from lists.example.org by mx.example.org; {format_datetime(date)}\n"
           f"From: Perf Tester <perf@example.org>\nTo: linux-mm@kvack.org\nSubject: [REGRESSION] dd slower\n"
           f"Message-ID: <{mid}>\nDate: {format_datetime(date)}\n\nReproducer:\n\n"
           "  dd if=/dev/zero of=/mnt/x bs=1M count=8\n\nwent from 100 MB/s to 80 MB/s on my x86_64 test box "
           "with 16G of memory.\n").encode()  # names hardware: the service reruns such reports on its own
    ing = Ingester(store)
    ing.add(raw, "test")
    ing.flush()
    ing.close()


def triaged_by(store, mid: str, age: timedelta) -> int:
    """A record that became triaged because of a mail ``age`` old."""
    store_mail(store, mid, datetime.now(timezone.utc) - age)
    # names some hardware, as the mail does: the service reruns on its own only such reports
    rid = record(store, status="reported", kind="performance",
                 hardware={"cpu": None, "arch": "x86_64", "memory": "16G", "storage": None})
    assert set_status(store, rid, "triaged", "extractor", "claim found", source="extractor", message_id=mid)
    return rid


def as_report(store, rid: int, mid: str) -> None:
    """Make ``mid`` the record's report (the mail a reply answers)."""
    from sqlalchemy import update

    import storage.tracker_schema as ts

    with store.engine.begin() as conn:
        conn.execute(update(ts.regressions).where(ts.regressions.c.id == rid).values(report_message_id=mid))


def service_for(store, tmp_path, **sections) -> Service:
    data = {**lab_config(auto_rerun=True), **sections}
    svc = Service(store, Config(home=tmp_path, db_url=store.url, data=data), web=False)
    install_hooks(svc)
    return svc


def test_recent_reports_are_rerun_backfilled_ones_are_not(store, tmp_path):
    svc = service_for(store, tmp_path)
    assert "lab" in svc.hooks["steps"] and "notify" not in svc.hooks["steps"]
    fresh = triaged_by(store, "fresh@example.org", timedelta(hours=1))
    old = triaged_by(store, "old@example.org", timedelta(days=400))
    out = svc.pipeline_step()
    assert out["events"] >= 2
    assert [j["machine"] for j in list_jobs(store, regression_id=fresh)] == ["m1"]
    assert get_record(store, fresh)["status"] == "rerun-scheduled"
    assert list_jobs(store, regression_id=old) == [] and get_record(store, old)["status"] == "triaged"
    # the events are consumed once: a second pass schedules nothing more
    svc.pipeline_step()
    assert len(list_jobs(store, regression_id=fresh)) == 1
    # the lab step is the scheduler's tick: the job runs on the (fake) backend to a verdict
    step, interval = svc.hooks["steps"]["lab"]
    for _ in range(3):
        step()
    assert get_record(store, fresh)["status"] == "confirmed"


def test_no_lab_no_lab_step(store, tmp_path):
    svc = Service(store, Config(home=tmp_path, db_url=store.url, data={}), web=False)
    install_hooks(svc)
    assert svc.hooks["steps"] == {} and "schedule_rerun" not in svc.hooks
    rid = triaged_by(store, "x@example.org", timedelta(hours=1))
    svc.pipeline_step()
    assert list_jobs(store, regression_id=rid) == []


def test_backfill_is_judged_by_the_received_time(store):
    rid = triaged_by(store, "a@example.org", timedelta(hours=100))
    hid = get_record(store, rid)["history"][-1]
    ev = Event("triaged", rid, _history_id(store, rid), "triaged")
    assert is_backfill(store, ev, 72) and not is_backfill(store, ev, 200)
    assert hid["message_id"] == "a@example.org"
    # a change without a mail (a verdict, a person) is never backfill
    set_status(store, rid, "confirmed", "regtriage-lab", "rerun confirmed")
    assert not is_backfill(store, Event("confirmed", rid, _history_id(store, rid), "confirmed"), 1)


def _history_id(store, rid: int) -> int:
    from sqlalchemy import func, select

    from storage.tracker_schema import regression_history as h

    with store.engine.connect() as conn:
        return conn.execute(select(func.max(h.c.id)).where(h.c.regression_id == rid)).scalar()


def test_chat_rerun_goes_to_the_lab_scheduler(store, tmp_path):
    rid = record(store)
    actions = LabActions(store, lab_config(), lab=True)
    assert actions.rerun(rid, "irc:boss!b@h") is True
    assert [j["state"] for j in list_jobs(store, regression_id=rid)] == ["queued"]
    assert actions.rerun(rid, "irc:boss!b@h") is False  # a job is already active: refused, not doubled
    assert len(list_jobs(store, regression_id=rid)) == 1
    # without a lab the request is only recorded on the record
    other = record(store)
    assert LabActions(store, {}, lab=False).rerun(other, "irc:boss!b@h") is True
    assert get_record(store, other)["status"] == "rerun-scheduled" and list_jobs(store, regression_id=other) == []


def test_reply_policy_is_validated(store, tmp_path):
    cfg = lambda **s: Config(home=None, db_url="", data={"service": s})  # noqa: E731
    assert reply_policy(cfg()) == (None, ("confirmed", "not-reproduced"))
    assert reply_policy(cfg(replies="draft", reply_on=["confirmed"])) == ("dry-run", ("confirmed",))
    for bad in ({"replies": "yes"}, {"replies": "send", "reply_on": ["bogus"]}, {"reply_on": "confirmed"}):
        with pytest.raises(ValueError):
            reply_policy(cfg(**bad))
    for bad in (0, -1, "72", True):
        with pytest.raises(ValueError, match="reply_max_age_hours"):
            service_for(store, tmp_path, service={"replies": "draft", "reply_max_age_hours": bad},
                        mail={"from": "regtriage <regtriage@example.org>"})
    # replies on, but no usable [mail]: the service refuses to start, naming the problem
    from bot.config import ConfigError

    with pytest.raises(ConfigError, match="from"):
        service_for(store, tmp_path, service={"replies": "send"})


def test_confirmed_record_gets_a_drafted_reply_once(store, tmp_path):
    outbox = tmp_path / "outbox"
    svc = service_for(store, tmp_path, service={"replies": "draft", "reply_on": ["confirmed"]},
                      mail={"from": "regtriage <regtriage@example.org>", "outbox": str(outbox),
                            "allowed_lists": ["linux-mm@kvack.org"]})
    rid = triaged_by(store, "report@example.org", timedelta(hours=2))
    as_report(store, rid, "report@example.org")
    svc.pipeline_step()  # triaged: no reply (not in reply_on); the lab schedules a rerun
    assert not outbox.exists() or not any(outbox.rglob("*"))
    step, _ = svc.hooks["steps"]["lab"]
    for _ in range(3):
        step()
    assert get_record(store, rid)["status"] == "confirmed"
    svc.pipeline_step()
    drafts = [p for p in outbox.rglob("*") if p.is_file()]
    assert len(drafts) == 1
    text = drafts[0].read_text()
    assert "In-Reply-To: <report@example.org>" in text and "confirmed" in text.lower()
    assert svc.counters.snapshot().get("reply:drafted") == 1
    # the same status again (e.g. a second confirming rerun) is the same event: no second draft
    set_status(store, rid, "inconclusive", "user")
    set_status(store, rid, "confirmed", "user")
    svc.pipeline_step()
    assert len([p for p in outbox.rglob("*") if p.is_file()]) == 1


@pytest.mark.parametrize("max_age,drafted", [({}, 1), ({"reply_max_age_hours": 1}, 0)], ids=["recent", "backfill"])
def test_status_caused_by_old_mail_gets_no_reply(store, tmp_path, max_age, drafted):
    """A record triaged because of a mail 2 h old: replied to by default (72 h), but with
    reply_max_age_hours = 1 that mail is backfill and the bot stays quiet."""
    outbox = tmp_path / "outbox"
    svc = service_for(store, tmp_path, service={"replies": "draft", "reply_on": ["triaged"], **max_age},
                      mail={"from": "regtriage <regtriage@example.org>", "outbox": str(outbox),
                            "allowed_lists": ["linux-mm@kvack.org"]})
    rid = triaged_by(store, "report@example.org", timedelta(hours=2))
    as_report(store, rid, "report@example.org")
    svc.pipeline_step()
    assert len([p for p in outbox.rglob("*") if p.is_file()] if outbox.exists() else []) == drafted


def test_startup_and_shutdown_hooks_run_and_failures_do_not_stop_the_service(store, tmp_path):
    svc = Service(store, Config(home=tmp_path, db_url=store.url, data={"service": {"tick": 0.05}}), web=False)
    install_hooks(svc)
    seen = []

    async def boom():
        raise RuntimeError("chat server unreachable")

    async def tick():
        seen.append("tick")
        if len(seen) >= 2:
            svc.request_stop()

    svc.hooks["startup"].append(boom)
    svc.hooks["shutdown"].append(lambda: seen.append("shutdown"))
    svc.hooks["steps"]["custom"] = (tick, 0.01)
    assert asyncio.run(asyncio.wait_for(svc.run(), 30)) == 0
    assert seen[-1] == "shutdown" and seen.count("tick") >= 2
    assert svc.counters.snapshot().get("custom:ok", 0) >= 2
