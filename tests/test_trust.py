"""The trust model (bot/tracker/trust.py, README "Trust model"): who may move the tracker by mail, who may
start lab work, and which times are believed -- through the real ingest -> triage -> track
pipeline and the lab scheduler (fake backend), on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path

import pytest
from sqlalchemy import select

import storage.tracker_schema as ts
from bot.config import Config
from bot.tracker.events import Event
from bot.sources.ingest import Ingester
from bot.lab.budget import budget_used_minutes
from bot.lab.scheduling import auto_schedule, schedule_rerun
from bot.lab.settings import SchedulerError
from storage.lab_jobs import list_jobs
from bot.tracker.events import is_backfill
from bot.tracker.records import get_record, set_status, update_tracker
from bot.triage.runner import triage_pending
from bot.tracker.trust import TrustSettings, received_time
from tests.test_scheduler import fake_lab, lab_config, record  # noqa: F401 - the fake backend fixture

NOW = datetime.now(timezone.utc)
THORSTEN = "Thorsten Leemhuis <regressions@leemhuis.info>"
STRANGER = "Mallory <mallory@evil.example>"


def mail(mid, subject, body, frm, *, parent=None, date=None, received=None) -> bytes:
    head = ""
    if received is not None:
        head += f"Received: from mx.lists.example by lists.example; {format_datetime(received)}\n"
    head += (f"From: {frm}\nTo: linux-mm@kvack.org\nSubject: {subject}\nMessage-ID: <{mid}>\n"
             f"Date: {format_datetime(date or NOW - timedelta(hours=1))}\n")
    if parent:
        head += f"In-Reply-To: <{parent}>\nReferences: <{parent}>\n"
    return (head + "\n" + body).encode()


def ingest(store, *raws) -> None:
    ing = Ingester(store, workers=1)
    for raw in raws:
        ing.add(raw, "test")
    ing.flush()
    ing.close()
    triage_pending(store)


def cfg(store, **data) -> Config:
    return Config(home=Path("/nonexistent"), db_url=store.url, data=data)


REPORT = mail("r1@example.org", "usb audio dies after resume",
              "Hi, my USB headset produces no sound after suspend and resume since v6.8.\n",
              "User <u@example.org>")


def rec_of(store, mid):
    with store.engine.connect() as conn:
        return conn.execute(select(ts.regressions.c.id).where(ts.regressions.c.report_message_id == mid)).scalar()


def test_strangers_cannot_close_or_create_records_but_may_do_bookkeeping(store):
    trust = {"trust": {"trusted_senders": ["regressions@leemhuis.info"]}}
    ingest(store, REPORT, mail("t1@example.org", "Re: usb audio dies after resume",
                               "#regzbot ^introduced: abcdef123456\n", THORSTEN, parent="r1@example.org"))
    update_tracker(store, cfg(store, **trust))
    rid = rec_of(store, "r1@example.org")
    assert rid is not None and get_record(store, rid)["culprit_commit"] == "abcdef123456"
    forged = mail("m1@example.org", "Re: usb audio dies after resume", """All done here.

#regzbot resolve: fixed by a BIOS update
#regzbot title: renamed by a stranger
#regzbot fix: 0123456789ab
#regzbot introduced: fedcba987654
#regzbot inconclusive: nobody cares
""", STRANGER, parent="r1@example.org")
    # a stranger's own "report" with a culprit named by command: no record from the command
    fresh = mail("m2@example.org", "my own report", "#regzbot introduced: 1111111111aa ^\n", STRANGER,
                 parent="r1@example.org")
    ingest(store, forged, fresh)
    stats = update_tracker(store, cfg(store, **trust))
    rec = get_record(store, rid)
    assert rec["status"] not in ("resolved", "fix-pending", "fixed", "inconclusive")
    assert rec["culprit_commit"] == "abcdef123456" and rec["fix_commit"] is None
    assert rec["title"] == "renamed by a stranger"  # bookkeeping: anyone, as with regzbot
    refused = [h for h in rec["history"] if h["field"] == "command-refused"]
    assert sorted(h["new"].split(":")[0] for h in refused) == [
        "#regzbot fix", "#regzbot inconclusive", "#regzbot introduced", "#regzbot introduced", "#regzbot resolve"]
    assert all("trusted_senders" in h["note"] and h["actor"] == STRANGER for h in refused)
    assert stats["commands_refused"] == 5
    # without any [trust] table nobody is trusted: the same command from Thorsten is refused too
    ingest(store, mail("t2@example.org", "Re: usb audio dies after resume", "#regzbot resolve: dup\n", THORSTEN,
                       parent="r1@example.org"))
    update_tracker(store, cfg(store))
    assert get_record(store, rid)["status"] != "resolved"
    # ... and the allow-listed sender closes it
    ingest(store, mail("t3@example.org", "Re: usb audio dies after resume", "#regzbot resolve: BIOS bug\n",
                       THORSTEN, parent="r1@example.org"))
    update_tracker(store, cfg(store, **trust))
    assert get_record(store, rid)["status"] == "resolved"


def test_trust_patterns():
    t = TrustSettings.from_config({"trust": {"trusted_senders": ["*@leemhuis.info", "Boss@Example.org"]}})
    assert t.trusted("Thorsten <regressions@leemhuis.info>") and t.trusted("boss@example.org")
    assert not t.trusted("x@leemhuis.info.evil.example") and not t.trusted("") and not t.trusted("no address")
    assert t.robot("kernel test robot <oliver.sang@intel.com>") and t.robot("syzbot+abc123@syzkaller.appspotmail.com")
    assert not t.robot("kernel test robot <lkp@intel.com.evil.example>")
    assert t.may_command("title", "anyone@x.org") and not t.may_command("resolve", "anyone@x.org")
    with pytest.raises(ValueError):
        TrustSettings.from_config({"trust": {"trusted_senders": "everyone"}})


# -- times ----------------------------------------------------------------------------------------
def test_received_time_not_date_decides_age():
    ingested = NOW
    top = f"from vger.kernel.org by lore; {format_datetime(NOW - timedelta(days=10))}"
    forged_lower = f"from evil by evil; {format_datetime(NOW)}"
    headers = [["Received", top], ["Received", forged_lower], ["Date", format_datetime(NOW)]]
    assert abs(received_time(headers, ingested) - (NOW - timedelta(days=10))) < timedelta(seconds=1)
    # a topmost Received in the future (a wrong clock) is clamped to when we read the mail
    future = [["Received", f"from x by y; {format_datetime(NOW + timedelta(days=3))}"]]
    assert received_time(future, ingested) == ingested
    assert received_time([["Received", "garbage without a date"]], ingested) == ingested
    assert received_time([], ingested) == ingested


def _status_event(store, rid, mid, status="triaged") -> Event:
    set_status(store, rid, status, "extractor", "claim found", source="extractor", message_id=mid)
    with store.engine.connect() as conn:
        hid = conn.execute(select(ts.regression_history.c.id).where(ts.regression_history.c.regression_id == rid)
                           .order_by(ts.regression_history.c.id.desc())).scalar()
    return Event(status, rid, hid, status)


def test_a_forged_date_neither_hides_nor_revives_mail(store):
    # received 10 days ago by the list, Date: forged to "now": old (a backfill), whatever Date says
    old = mail("old@example.org", "[REGRESSION] dd slower", "dd went from 100 MB/s to 80 MB/s\n", STRANGER,
               date=NOW, received=NOW - timedelta(days=10))
    # Date: forged 400 days back but received just now (no Received header: our ingest time): new
    new = mail("new@example.org", "[REGRESSION] dd slower", "dd went from 100 MB/s to 80 MB/s\n", STRANGER,
               date=NOW - timedelta(days=400))
    ingest(store, old, new)
    a = _status_event(store, record(store, status="reported"), "old@example.org")
    b = _status_event(store, record(store, status="reported"), "new@example.org")
    assert is_backfill(store, a, 72)
    assert not is_backfill(store, b, 72)


# -- lab --------------------------------------------------------------------------------------------
# the service reruns on its own only reports that name some hardware (a report naming none
# matches no machine: every machine would only be a stand-in)
HW = {"cpu": None, "arch": "x86_64", "memory": "8G", "storage": None}

def test_daily_lab_budget_caps_automatic_and_chat_reruns(store):
    c = lab_config(("m1", "m2", "m3"), auto_rerun=True, daily_budget_minutes=250,
                   timeouts={"boot_s": 60, "batch_s": 600, "total_s": 7200})
    first = auto_schedule(store, c, record(store, kind="performance", hardware=HW))
    second = auto_schedule(store, c, record(store, kind="performance", hardware=HW))
    assert first["state"] == "queued" and second["state"] == "queued"
    assert budget_used_minutes(store) == pytest.approx(240)
    third = record(store, kind="performance", hardware=HW)
    assert auto_schedule(store, c, third) is None  # 240 + 120 > 250
    notes = [h["note"] for h in get_record(store, third)["history"] if h["field"] == "rerun"]
    assert notes and "daily lab budget" in notes[0] and "250" in notes[0]
    with pytest.raises(SchedulerError, match="daily lab budget"):
        schedule_rerun(store, c, third, requested_by="chat irc:alice!a@h")
    assert list_jobs(store, regression_id=third) == []
    # the operator at the command line is not capped (the time still counts)
    assert schedule_rerun(store, c, third)["state"] == "queued"
    with pytest.raises(SchedulerError, match="daily_budget_minutes"):
        schedule_rerun(store, lab_config(daily_budget_minutes=-1), record(store), requested_by="auto")


def test_robot_lookalikes_are_not_rerun_on_their_own(store):
    body = ("Hello,\n\nFYI, we noticed a -13.6% regression of aim7.jobs_per_min on commit 54a6eb5c4765.\n\n"
            "kernel test robot\n")
    subject = "[linus:master] [mm]  54a6eb5c47:  aim7.jobs_per_min -13.6% regression"
    ingest(store, mail("fake-robot@example.org", subject, body, "kernel test robot <lkp@intel.com.evil.example>"),
           mail("real-robot@example.org", subject, body, "kernel test robot <oliver.sang@intel.com>"),
           mail("person@example.org", "[REGRESSION] dd slower", "dd 100 -> 80 MB/s\n", "P <p@example.org>"))
    c = lab_config(auto_rerun=True)
    fake = record(store, kind="performance", hardware=HW, report_message_id="fake-robot@example.org")
    real = record(store, kind="performance", hardware=HW, report_message_id="real-robot@example.org")
    person = record(store, kind="performance", hardware=HW, report_message_id="person@example.org")
    assert auto_schedule(store, c, fake) is None
    notes = [h["note"] for h in get_record(store, fake)["history"] if h["field"] == "rerun"]
    assert "robot_senders" in notes[0] and "lkp@intel.com.evil.example" in notes[0]
    assert auto_schedule(store, c, real)["state"] == "queued"
    assert auto_schedule(store, c, person)["state"] == "queued"  # the service's own triage, within budget
    # auto_rerun_from = "trusted": only robots and allow-listed people
    strict = {**lab_config(("m2",), auto_rerun=True, auto_rerun_from="trusted"),
              "trust": {"trusted_senders": ["boss@example.org"]}}
    other = record(store, kind="performance", hardware=HW, report_message_id="person@example.org")
    assert auto_schedule(store, strict, other) is None
    assert "auto_rerun_from" in [h["note"] for h in get_record(store, other)["history"] if h["field"] == "rerun"][0]
