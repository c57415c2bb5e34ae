"""The regression tracker (bot.tracker.records): records from thread claims and #regzbot commands, the
status lifecycle, de-duplication, related messages, history, fixes from kernel trees, the
tracker entry and its templates, and the CLI -- on SQLite and PostgreSQL, through the real
ingest -> triage -> track pipeline."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sqlalchemy import func, select

import storage.tracker_schema as ts
from bot.config import Config
from bot.tracker.fields import OPEN
from bot.tracker.records import get_record, set_status
from bot.tracker.records import update_tracker as _update_tracker

TRUST_ALL = {"trust": {"trusted_senders": ["*"]}}


def update_tracker(store, config=None, **kw):
    """These tests are about what commands mean: every sender is trusted here (tests/test_trust.py
    tests the allow-list)."""
    if config is None:
        config = Config(home=Path("/nonexistent"), db_url=store.url, data=TRUST_ALL)
    else:
        config.data.setdefault("trust", TRUST_ALL["trust"])
    return _update_tracker(store, config, **kw)

CULPRIT = "54a6eb5c4765aa573a030ceeba2c14e3d2ea5706"


def mail(mid, subject, body, date, frm="Perf Tester <perf@example.org>", parent=None, refs=None):
    head = f"From: {frm}\nSubject: {subject}\nMessage-ID: <{mid}>\nDate: {date}\n"
    if parent:
        head += f"In-Reply-To: <{parent}>\nReferences: {' '.join(f'<{r}>' for r in (refs or [parent]))}\n"
    return (head + "\n" + body).encode()


A1 = mail("reg-a1@example.org", "page_fault1 throughput regression in will-it-scale since v6.8", """Hi,

Since v6.8 we see a 15% drop in will-it-scale page_fault1 throughput on an AMD EPYC 7763 box.
v6.7 is fine. I am bisecting now.
""", "Mon, 04 Mar 2024 10:00:00 +0000")
A2 = mail("reg-a2@example.org", "Re: page_fault1 throughput regression in will-it-scale since v6.8",
          f"""The bisect finished. The first bad commit is:

commit {CULPRIT}
    mm: use zonelist_zone() to get zone

Reverting it on top of v6.8 restores the throughput.
""", "Tue, 05 Mar 2024 10:00:00 +0000", parent="reg-a1@example.org")
B1 = mail("reg-b1@example.org", "[REGRESSION] kernel build 10% slower on v6.8", """Hello,

Kernel builds got 10% slower with v6.8 compared to v6.7 on my Ryzen box.
The regression is caused by commit 54a6eb5c4765 ("mm: use zonelist_zone() to get zone").
""", "Sun, 10 Mar 2024 10:00:00 +0000", frm="Builder <b@example.org>")
THORSTEN = "Thorsten Leemhuis <regressions@leemhuis.info>"
C1 = mail("c1@example.org", "usb audio dies after resume",
          "Hi, my USB headset produces no sound after suspend and resume. Any idea?\n",
          "Mon, 11 Mar 2024 10:00:00 +0000", frm="User <u@example.org>")
C2 = mail("c2@example.org", "Re: usb audio dies after resume", """> Hi, my USB headset produces no sound after suspend and resume.
> #regzbot resolve: quoted, must not apply

Thanks for the report, let me add it to the tracking.

#regzbot ^introduced: abcdef123456
#regzbot title: usb: audio dies after resume
""", "Mon, 11 Mar 2024 12:00:00 +0000", frm=THORSTEN, parent="c1@example.org")


def ingest(store, *raws):
    from bot.sources.ingest import Ingester
    from bot.triage.runner import triage_pending

    ing = Ingester(store, workers=1)
    for raw in raws:
        ing.add(raw, "test")
    ing.flush()
    return triage_pending(store)


def rec_by_report(store, msgid):
    with store.engine.connect() as conn:
        rid = conn.execute(select(ts.regressions.c.id).where(ts.regressions.c.report_message_id == msgid)).scalar()
    assert rid is not None, f"no record for {msgid}"
    return get_record(store, rid)


def related(rec, relation=None):
    return {m["message_id"] for m in rec["messages"] if relation is None or m["relation"] == relation}


def history(rec, field=None):
    return [h for h in rec["history"] if field is None or h["field"] == field]


def count(store, table):
    with store.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table)).scalar()


# -- records from thread claims ----------------------------------------------------------------------
def test_report_refined_by_bisect_then_duplicate_by_culprit(store):
    ingest(store, A1)
    update_tracker(store)
    a = rec_by_report(store, "reg-a1@example.org")
    assert a["title"] == "page_fault1 throughput regression in will-it-scale since v6.8"
    assert a["kind"] == "performance" and a["good"] == "v6.7" and a["bad"] == "v6.8"
    assert a["status"] == "triaged"  # range known: facts extracted
    assert a["culprit_commit"] is None and a["created_at"].isoformat().startswith("2024-03-04T10:00")

    ingest(store, A2)  # the bisect result refines the claim
    update_tracker(store)
    a = rec_by_report(store, "reg-a1@example.org")
    assert a["culprit_commit"].startswith("54a6eb5c4765")
    assert related(a, "reply") == {"reg-a2@example.org"} and related(a, "report") == {"reg-a1@example.org"}
    set_culprit = history(a, "culprit_commit")
    assert len(set_culprit) == 1 and set_culprit[0]["message_id"] == "reg-a2@example.org"
    assert set_culprit[0]["source"] == "extractor"

    ingest(store, B1)  # another thread, same culprit (abbreviated): a duplicate link, not a merge
    update_tracker(store)
    a, b = rec_by_report(store, "reg-a1@example.org"), rec_by_report(store, "reg-b1@example.org")
    assert b["status"] == "duplicate" and b["duplicate_of"] == a["id"]
    assert b["title"] == "[REGRESSION] kernel build 10% slower on v6.8"  # kept, with its own facts
    assert a["status"] == "triaged" and a["duplicates"] == [b["id"]]
    assert "reg-b1@example.org" in related(a, "duplicate")
    assert count(store, ts.regressions) == 2


def test_no_record_for_threads_without_regression(store):
    ingest(store, mail("chat@example.org", "[PATCH] mm: tidy a comment", "Fix a typo.\n",
                       "Mon, 04 Mar 2024 09:00:00 +0000"))
    stats = update_tracker(store)
    assert stats["created"] == 0 and count(store, ts.regressions) == 0


def test_different_culprits_are_not_duplicates(store):
    from bot.triage.runner import merge_thread

    ingest(store, mail("x1@example.org", "thing one", "hello\n", "Mon, 04 Mar 2024 09:00:00 +0000"),
           mail("y1@example.org", "thing two", "hello\n", "Mon, 04 Mar 2024 09:00:00 +0000"))
    for mid, culprit in (("x1@example.org", "54a6eb5c4765"), ("y1@example.org", "54a6eb5d0000")):
        write_claim(store, mid, culprit=culprit)
        merge_thread(store, mid)
    update_tracker(store)
    assert {rec_by_report(store, m)["status"] for m in ("x1@example.org", "y1@example.org")} == {"triaged"}


def write_claim(store, mid, **fields):
    """A claim independent of the extractor's judgement."""
    claim = {"is_regression": True, "confidence": 0.9, "kind": fields.get("kind", "functional"),
             "culprit": {"commit": fields["culprit"], "subject": fields.get("culprit_subject")}
             if fields.get("culprit") else None,
             "good": fields.get("good"), "bad": fields.get("bad"), "metric": None, "change_percent": None,
             "hardware": {"cpu": None, "arch": None, "memory": None, "storage": None},
             "config": {"filesystem": None, "benchmark": None, "command": None, "kernel_config": []},
             "subsystem": fields.get("subsystem"), "numbers": [], "evidence": {}, "facts": []}
    store.save_claims([{"message_id": mid, "is_regression": True, "confidence": 0.9, "kind": claim["kind"],
                        "culprit": fields.get("culprit"), "claim": claim, "extractor_version": "test"}])


# -- regzbot commands --------------------------------------------------------------------------------
def test_regzbot_introduced_caret_and_title_override_the_extractor(store):
    from bot.triage.runner import merge_thread

    ingest(store, C1, C2)
    update_tracker(store)
    c = rec_by_report(store, "c1@example.org")  # ^: the parent mail is the report
    assert c["culprit_commit"] == "abcdef123456" and c["title"] == "usb: audio dies after resume"
    assert c["title_source"] == "regzbot" and c["status"] == "triaged"  # quoted resolve not applied
    assert c["overrides"]["title"] == {"actor": THORSTEN, "message_id": "c2@example.org", "source": "regzbot"}
    assert c["overrides"]["culprit_commit"]["message_id"] == "c2@example.org"
    h = history(c, "title")[0]
    assert (h["actor"], h["message_id"], h["source"]) == (THORSTEN, "c2@example.org", "regzbot")
    assert related(c) == {"c1@example.org", "c2@example.org"}

    # the extractor later reads the thread differently: it fills facts, but never the
    # culprit or title a human set
    write_claim(store, "c1@example.org", culprit="fedcba987654", culprit_subject="usb: unrelated", subsystem="sound")
    merge_thread(store, "c1@example.org")
    update_tracker(store)
    c = rec_by_report(store, "c1@example.org")
    assert c["culprit_commit"] == "abcdef123456" and c["culprit_subject"] is None
    assert c["title"] == "usb: audio dies after resume" and c["subsystem"] == "sound"


def test_commands_applied_exactly_once(store):
    ingest(store, C1, C2)
    first = update_tracker(store)
    assert first["commands_applied"] == 2
    rows, hist = count(store, ts.regzbot_commands_applied), count(store, ts.regression_history)
    # the same mail again (a duplicate delivery), and runs with nothing new
    ingest(store, C2)
    for _ in range(3):
        again = update_tracker(store)
        assert again["commands_applied"] == 0 and again["created"] == 0
    assert count(store, ts.regzbot_commands_applied) == rows == 2
    assert count(store, ts.regression_history) == hist
    # a human changes the title again later; an old command is never re-applied over it
    ingest(store, mail("c3@example.org", "Re: usb audio dies after resume", "#regzbot title: usb audio: silence "
                       "after resume\n", "Tue, 12 Mar 2024 08:00:00 +0000", frm=THORSTEN, parent="c2@example.org",
                       refs=["c1@example.org", "c2@example.org"]))
    update_tracker(store)
    update_tracker(store)
    c = rec_by_report(store, "c1@example.org")
    assert c["title"] == "usb audio: silence after resume" and len(history(c, "title")) == 2


def test_fix_resolve_dup_of_and_monitor_commands(store):
    ingest(store, A1, A2, C1, C2)
    update_tracker(store)
    ingest(store,
           mail("c4@example.org", "Re: usb audio dies after resume", "#regzbot fix: 0123456789ab\n",
                "Wed, 13 Mar 2024 08:00:00 +0000", frm="Dev <dev@example.org>", parent="c2@example.org",
                refs=["c1@example.org", "c2@example.org"]),
           mail("e1@example.org", "bad page faults", "Hi,\n\nmy machine is slow.\n",
                "Wed, 13 Mar 2024 09:00:00 +0000", frm="E <e@example.org>"),
           mail("e2@example.org", "Re: bad page faults", "#regzbot introduced: v6.7..v6.8\n"
                "#regzbot dup-of: https://lore.kernel.org/r/reg-a1@example.org/\n",
                "Wed, 13 Mar 2024 10:00:00 +0000", frm=THORSTEN, parent="e1@example.org"),
           mail("a3@example.org", "Re: page_fault1 throughput regression in will-it-scale since v6.8",
                "#regzbot monitor: https://lore.kernel.org/all/patch-1@example.org/\n"
                "#regzbot link: https://bugzilla.kernel.org/show_bug.cgi?id=7 bugzilla\n",
                "Wed, 13 Mar 2024 11:00:00 +0000", frm=THORSTEN, parent="reg-a2@example.org",
                refs=["reg-a1@example.org", "reg-a2@example.org"]))
    update_tracker(store)
    c = rec_by_report(store, "c1@example.org")
    assert c["status"] == "fix-pending" and c["fix_commit"] == "0123456789ab"
    assert history(c, "status")[-1]["actor"] == "Dev <dev@example.org>"
    e = rec_by_report(store, "e2@example.org")  # introduced without ^: this mail is the report
    a = rec_by_report(store, "reg-a1@example.org")
    assert e["status"] == "duplicate" and e["duplicate_of"] == a["id"] and e["good"] == "v6.7"
    assert "e2@example.org" in related(a, "duplicate")
    assert {"patch-1@example.org"} <= related(a, "monitor")
    assert "https://bugzilla.kernel.org/show_bug.cgi?id=7" in related(a, "link")

    # the monitored thread's mails join the record; then resolve and unmonitor
    ingest(store, mail("patch-1@example.org", "[PATCH] mm: fix zonelist walk", "Fixes it.\n",
                       "Thu, 14 Mar 2024 08:00:00 +0000", frm="Dev <dev@example.org>"),
           mail("patch-2@example.org", "Re: [PATCH] mm: fix zonelist walk", "Looks good.\n",
                "Thu, 14 Mar 2024 09:00:00 +0000", frm="Rev <rev@example.org>", parent="patch-1@example.org"),
           mail("a4@example.org", "Re: page_fault1 throughput regression in will-it-scale since v6.8",
                "#regzbot unmonitor: https://lore.kernel.org/all/patch-1@example.org/\n"
                "#regzbot resolve: turned out to be a firmware bug\n",
                "Fri, 15 Mar 2024 08:00:00 +0000", frm=THORSTEN, parent="a3@example.org",
                refs=["reg-a1@example.org", "reg-a2@example.org", "a3@example.org"]))
    update_tracker(store)
    a = rec_by_report(store, "reg-a1@example.org")
    assert "patch-2@example.org" in related(a)
    assert "patch-1@example.org" not in related(a, "monitor")
    assert a["status"] == "resolved"
    last = history(a, "status")[-1]
    assert last["note"] == "turned out to be a firmware bug" and last["message_id"] == "a4@example.org"


def test_regzbot_inconclusive_stops_tracking_but_the_lab_status_stays_open(store):
    ingest(store, mail("q1@example.org", "odd hang at boot", "It hangs.\n", "Mon, 04 Mar 2024 09:00:00 +0000"),
           mail("q2@example.org", "Re: odd hang at boot", "#regzbot introduced: v6.8-rc1..v6.8-rc2\n",
                "Mon, 04 Mar 2024 10:00:00 +0000", frm=THORSTEN, parent="q1@example.org"))
    update_tracker(store)
    rid = rec_by_report(store, "q2@example.org")["id"]
    assert set_status(store, rid, "inconclusive", "regtriage-lab", note="too noisy")
    assert rec_by_report(store, "q2@example.org")["status"] in OPEN
    ingest(store, mail("q3@example.org", "Re: odd hang at boot", "#regzbot inconclusive: nobody can bisect\n",
                       "Mon, 04 Mar 2024 11:00:00 +0000", frm=THORSTEN, parent="q2@example.org",
                       refs=["q1@example.org", "q2@example.org"]))
    update_tracker(store)
    r = rec_by_report(store, "q2@example.org")
    assert r["status"] == "resolved" and history(r, "status")[-1]["note"] == "inconclusive: nobody can bisect"


def test_pending_command_waits_for_the_thread_to_be_tracked(store):
    ingest(store, mail("p1@example.org", "odd hang at boot", "It hangs.\n", "Mon, 04 Mar 2024 09:00:00 +0000"),
           mail("p2@example.org", "Re: odd hang at boot", "#regzbot title: boot hangs on foo\n",
                "Mon, 04 Mar 2024 10:00:00 +0000", frm=THORSTEN, parent="p1@example.org"))
    stats = update_tracker(store)
    assert stats["commands_pending"] == 1 and count(store, ts.regressions) == 0
    ingest(store, mail("p3@example.org", "Re: odd hang at boot", "#regzbot introduced: v6.8-rc1..v6.8-rc2 ^\n",
                       "Mon, 04 Mar 2024 11:00:00 +0000", frm=THORSTEN, parent="p2@example.org",
                       refs=["p1@example.org", "p2@example.org"]))
    update_tracker(store)
    r = rec_by_report(store, "p2@example.org")  # ^ of p3 is p2
    assert r["title"] == "boot hangs on foo" and r["bad"] == "v6.8-rc2"
    with store.engine.connect() as conn:
        outcomes = dict(conn.execute(select(ts.regzbot_commands_applied.c.command,
                                            ts.regzbot_commands_applied.c.outcome)).all())
    assert outcomes == {"title": "applied", "introduced": "applied"}


def test_backlinks_monitor_and_duplicate_cue(store):
    ingest(store, A1, A2)
    update_tracker(store)
    ingest(store, mail("fixpatch@example.org", "[PATCH] mm: restore the zonelist fast path",
                       "Restore it.\n\nLink: https://lore.kernel.org/r/reg-a1@example.org/\n"
                       "Signed-off-by: Dev <dev@example.org>\n", "Mon, 18 Mar 2024 08:00:00 +0000",
                       frm="Dev <dev@example.org>"),
           mail("fixpatch-r@example.org", "Re: [PATCH] mm: restore the zonelist fast path", "Acked.\n",
                "Mon, 18 Mar 2024 09:00:00 +0000", frm="Ack <ack@example.org>", parent="fixpatch@example.org"),
           mail("f1@example.org", "sluggish page faults", "Hi,\n\nPage faults slow.\n",
                "Mon, 18 Mar 2024 10:00:00 +0000", frm="F <f@example.org>"),
           mail("f2@example.org", "Re: sluggish page faults",
                "#regzbot introduced: v6.7..v6.8\n\nThis looks like the same issue as\n"
                "https://lore.kernel.org/r/reg-a1@example.org/\n",
                "Mon, 18 Mar 2024 11:00:00 +0000", frm="G <g@example.org>", parent="f1@example.org"))
    update_tracker(store)
    a = rec_by_report(store, "reg-a1@example.org")
    assert {"fixpatch@example.org", "fixpatch-r@example.org"} <= related(a, "monitor")
    f = rec_by_report(store, "f2@example.org")
    assert f["status"] == "duplicate" and f["duplicate_of"] == a["id"]
    assert history(f, "status")[-1]["actor"] == "G <g@example.org>"


# -- lifecycle ------------------------------------------------------------------------------------------
def test_lifecycle_and_open_semantics(store):
    from bot.tracker.query import parse_query, run_query

    ingest(store, C1, C2)
    update_tracker(store)
    rid = rec_by_report(store, "c1@example.org")["id"]

    def is_open():
        return rid in {r["id"] for r in run_query(store, parse_query("open regressions"))[0]}

    assert is_open()
    for status, open_ in (("rerun-scheduled", True), ("not-reproduced", True), ("confirmed", True),
                          ("inconclusive", True), ("improved", True), ("backburner", True), ("fix-pending", True), ("fixed", False),
                          ("resolved", False), ("duplicate", False), ("reported", True)):
        assert set_status(store, rid, status, "rerun-bot", note=f"to {status}")
        assert is_open() is open_, status
    assert set_status(store, rid, "reported", "rerun-bot") is False  # unchanged: no history row
    rec = get_record(store, rid)
    last = history(rec, "status")[-1]
    assert (last["old"], last["new"], last["actor"], last["source"]) == ("duplicate", "reported", "rerun-bot", "user")
    with pytest.raises(ValueError):
        set_status(store, rid, "bogus", "x")
    with pytest.raises(KeyError):
        set_status(store, 99999, "fixed", "x")


def test_backburner_and_unbackburn_restore_the_status(store):
    ingest(store, C1, C2,
           mail("c5@example.org", "Re: usb audio dies after resume", "#regzbot backburner: needs rare hw\n",
                "Tue, 12 Mar 2024 08:00:00 +0000", frm=THORSTEN, parent="c2@example.org"))
    update_tracker(store)
    assert rec_by_report(store, "c1@example.org")["status"] == "backburner"
    ingest(store, mail("c6@example.org", "Re: usb audio dies after resume", "#regzbot unbackburn\n",
                       "Wed, 13 Mar 2024 08:00:00 +0000", frm=THORSTEN, parent="c5@example.org"))
    update_tracker(store)
    assert rec_by_report(store, "c1@example.org")["status"] == "triaged"


# -- fixes in kernel trees --------------------------------------------------------------------------
def _commit(repo, files, msg):
    for name, text in files.items():
        p = Path(repo.working_tree_dir) / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        repo.index.add([name])
    return repo.index.commit(msg).hexsha


def test_fixes_found_in_kernel_trees(store, tmp_path):
    import git

    from bot.config import Config
    from bot.tracker.kernel_tree import KernelTrees

    mainline = git.Repo.init(tmp_path / "linux")
    _commit(mainline, {"mm/page_alloc.c": "int a;\n"}, "initial")
    mainline.create_tag("v6.7")
    culprit = _commit(mainline, {"mm/page_alloc.c": "int b;\n"}, "mm: use zonelist_zone() to get zone")
    mainline.create_tag("v6.8")
    nxt = mainline.clone(tmp_path / "linux-next")
    # fix for the culprit-tagged report, in mainline
    _commit(mainline, {"mm/page_alloc.c": "int c;\n"},
            f'mm: fix zonelist walk\n\nFixes: {culprit[:12]} ("mm: use zonelist_zone() to get zone")\n'
            "Signed-off-by: Dev <dev@example.org>\n")
    # fix for the range-only report, only in -next (Link: to the report)
    next_fix = _commit(nxt, {"drivers/usb/x.c": "int d;\n"},
                       "usb: audio: keep the clock on resume\n\n"
                       "Link: https://lore.kernel.org/r/r2@example.org/\nSigned-off-by: Dev <dev@example.org>\n")
    ingest(store,
           mail("r1@example.org", "page faults slow", f"#regzbot introduced: {culprit[:12]}\n",
                "Mon, 04 Mar 2024 09:00:00 +0000"),
           mail("r2@example.org", "usb audio silent", "#regzbot introduced: v6.7..v6.8\n",
                "Mon, 04 Mar 2024 09:00:00 +0000"),
           mail("r3@example.org", "unrelated hang", "#regzbot introduced: v6.7..v6.8\n",
                "Mon, 04 Mar 2024 09:00:00 +0000"))
    repos = [{"path": str(tmp_path / "linux"), "name": "mainline", "mainline": True},
             {"path": str(tmp_path / "linux-next"), "name": "next"}]
    config = Config(home=tmp_path, db_url=store.url, data={"kernel": {"repos": repos}})
    stats = update_tracker(store, config)
    assert stats["fixes"] == {"fixed": 1, "fix_pending": 1}
    r1, r2, r3 = (rec_by_report(store, f"r{i}@example.org") for i in (1, 2, 3))
    assert r1["status"] == "fixed" and r1["fix_tree"] == "mainline" and r1["fix_subject"] == "mm: fix zonelist walk"
    assert r1["culprit_subject"] == "mm: use zonelist_zone() to get zone"  # resolved in the tree
    h = history(r1, "status")[-1]
    assert h["source"] == "kernel-tree" and h["note"].startswith("Fixes: ")
    assert r2["status"] == "fix-pending" and r2["fix_commit"] == next_fix and r2["fix_tree"] == "next"
    assert r3["status"] == "triaged"
    # the -next fix is merged into mainline: fixed
    mainline.git.pull(str(tmp_path / "linux-next"), "HEAD", "--no-rebase", "--no-edit")
    with KernelTrees.from_config(repos) as trees:
        from bot.tracker.records import check_fixes

        out = check_fixes(store, trees)
    assert out["fixed"] == 1
    r2 = rec_by_report(store, "r2@example.org")
    assert r2["status"] == "fixed" and history(r2, "status")[-1]["source"] == "kernel-tree"
    assert update_tracker(store, config)["fixes"] == {"fixed": 0, "fix_pending": 0}  # nothing new


# -- tracker entry, templates, CLI ---------------------------------------------------------------------
def test_tracker_entry_json_and_templates(store):
    from bot.tracker.entry import ENTRY_KEYS, entry, render

    hostile = ("**bold** <script>alert(1)</script> [x](javascript:alert(1)) `code` # heading | table "
               + "averyveryveryverylongwordwithoutanyspaceswhatsoeverthatgoesonandonandon " * 2)
    ingest(store, A1, A2,
           mail("a5@example.org", "Re: page_fault1 throughput regression in will-it-scale since v6.8",
                f"#regzbot title: {hostile}\n", "Wed, 06 Mar 2024 08:00:00 +0000", frm=THORSTEN,
                parent="reg-a2@example.org", refs=["reg-a1@example.org", "reg-a2@example.org"]))
    update_tracker(store)
    e = entry(store, rec_by_report(store, "reg-a1@example.org")["id"])
    assert set(ENTRY_KEYS) <= set(e)
    assert e["culprit"]["commit"].startswith("54a6eb5c4765")
    assert e["culprit"]["url"] == f"https://git.kernel.org/torvalds/c/{e['culprit']['commit']}"
    assert e["report"] == {"message_id": "reg-a1@example.org", "url": "https://lore.kernel.org/r/reg-a1@example.org/"}
    assert e["range"] == {"good": "v6.7", "bad": "v6.8"} and e["reruns"] == []
    assert {r["message_id"] for r in e["related"]} == {"reg-a2@example.org", "a5@example.org"}
    assert all({"at", "field", "old", "new", "actor", "message_id", "source"} <= set(h) for h in e["history"])
    assert e["set_by"]["title"]["actor"] == THORSTEN
    json.dumps(e)  # serialisable as is

    txt = render(e, "txt")
    for line in txt.splitlines():
        assert len(line) <= 72 or " " not in line.strip(), line  # only a lone long token may exceed
    assert "https://lore.kernel.org/r/reg-a1@example.org/" in txt and "Status:      triaged" in txt
    assert "<script>" in txt  # plain text keeps the title as written

    md = render(e, "md")
    assert "<script>" not in md and "&lt;script&gt;" in md
    assert "**bold**" not in md and "\\*\\*bold\\*\\*" in md
    assert "](javascript" not in md and "\\[x\\]\\(javascript" in md
    assert "[54a6eb5c4765" in md and "(https://git.kernel.org/torvalds/c/54a6eb5c4765" in md


def test_markdown_link_urls_cannot_break_out():
    from bot.tracker.entry import _md_link, md_escape, safe_url

    assert safe_url("javascript:alert(1)") == ""
    link = _md_link("t", "https://lore.kernel.org/r/a)(b <c>@x/")
    assert link == "[t](https://lore.kernel.org/r/a%29%28b%20%3Cc%3E@x/)"
    assert md_escape("a\nb\r\x1b[31mc") == "a b \\[31mc"  # one line, no control characters


def test_track_cli_show_record_and_markdown(store, db_url, home):
    from click.testing import CliRunner

    from bot.cli.main import Context, main
    from bot.cli.tracker import register, show_record

    register(main)
    ingest(store, A1, A2, C1, C2)
    runner = CliRunner()
    home.mkdir(parents=True, exist_ok=True)
    conf = home / "trusting.toml"
    conf.write_text('[trust]\ntrusted_senders = ["regressions@leemhuis.info"]\n')
    res = runner.invoke(main, ["--db", db_url, "--config", str(conf), "track", "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["created"] == 2
    res = runner.invoke(main, ["--db", db_url, "track"], catch_exceptions=False)
    assert res.exit_code == 0 and "0 records created" in res.stdout
    rid = rec_by_report(store, "c1@example.org")["id"]
    res = runner.invoke(main, ["--db", db_url, "regressions", "--json"], catch_exceptions=False)
    assert {e["id"] for e in json.loads(res.stdout)} == {1, 2}
    res = runner.invoke(main, ["--db", db_url, "record", "c2@example.org", "--markdown"], catch_exceptions=False)
    assert res.exit_code == 0 and "**Regression #%d: usb: audio dies after resume**" % rid in res.stdout
    res = runner.invoke(main, ["--db", db_url, "set-status", str(rid), "confirmed", "--note", "rerun ok",
                               "--actor", "tester"], catch_exceptions=False)
    assert res.exit_code == 0 and "confirmed" in res.stdout

    ctx = Context(None, db_url, False)
    res = runner.invoke(main, ["--db", db_url, "query", "confirmed", "regressions", "--json"], catch_exceptions=False)
    assert [e["id"] for e in json.loads(res.stdout)] == [rid]

    import click

    @click.command()
    @click.argument("ident")
    @click.option("--json", "as_json", is_flag=True)
    def show(ident, as_json):
        show_record(ctx, ident, as_json)

    res = runner.invoke(show, [str(rid), "--json"], catch_exceptions=False)
    shown = json.loads(res.stdout)
    assert shown["id"] == rid and shown["status"] == "confirmed"
    assert shown["history"][-1]["actor"] == "tester" and shown["history"][-1]["note"] == "rerun ok"
    res = runner.invoke(show, [str(rid)], catch_exceptions=False)
    assert res.exit_code == 0 and "[regression #%d] usb: audio dies after resume" % rid in res.stdout
    flat = " ".join(res.stdout.split())  # lines are wrapped at 72 columns
    assert re.search(r"title: usb audio dies after resume -> usb: audio dies after resume \[regzbot: Thorsten "
                     r"Leemhuis <regressions@leemhuis\.info>, <c2@example\.org>\]", flat)
    res = runner.invoke(show, ["424242"])
    assert res.exit_code != 0 and "no regression record" in res.output


def test_six_digit_culprit_is_kept_but_dedupes_only_exactly():
    from bot.tracker.fields import culprits_match, fields_from_claim

    assert fields_from_claim({"culprit": {"commit": "de1414", "subject": None}})["culprit_commit"] == "de1414"
    assert fields_from_claim({"culprit": {"commit": "de14", "subject": None}})["culprit_commit"] is None
    assert fields_from_claim({"culprit": {"commit": "zz1414", "subject": None}})["culprit_commit"] is None
    assert culprits_match("de1414", "de1414")
    assert not culprits_match("de1414", "de14140abc")  # 6 digits are too few to match a prefix
