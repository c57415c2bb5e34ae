"""What verdict messages say (bot.lab.verdict_report, templates/rerun*.j2, reply.txt.j2,
verdict_irc.txt.j2): a real scheduler run on the fake backend of tests/test_scheduler.py stores a
verdict; the tracker entry, the reply draft, the Matrix and IRC notifications and the dashboard's
CSV/SVG files are rendered from the stored job and must state the machine (emulated), the
kernels, the recipe, n per side, the medians, the change with its interval, the CV and the
samples -- and "not reproduced" may never claim more than the interval says."""

from __future__ import annotations

import statistics

import pytest

from bot.lab.scheduler import Scheduler
from bot.lab.scheduling import schedule_rerun
from storage.lab_jobs import get as get_job
from bot.lab.verdict_report import regression_bound, samples_csv, summarize
from bot.tracker.records import get_record
from tests.test_scheduler import LAB, Clock, fake_lab, lab_config, record  # noqa: F401 - fixture

BASE = "https://regtriage.example.org"
SAME = {"good": [100.0, 100.1, 99.9, 100.0, 100.05], "bad": [100.02, 99.95, 100.0, 100.1, 99.98]}


def _done_job(store, *, samples=None, tags=(), change=-10.0, **lab):
    import tests.test_scheduler as ts

    if samples is not None:
        ts.LAB.samples = lambda label, n, no: samples[label][:n]
    c = lab_config(**lab)
    c["lab"]["machines"][0]["tags"] = list(tags)
    rid = record(store, change_percent=change)
    jid = schedule_rerun(store, c, rid)["id"]
    s = Scheduler(store, c, clock=Clock())
    s.tick()
    s.tick()
    job = get_job(store, jid)
    assert job["state"] == "done", job
    return rid, job


def _figures(job) -> dict:
    r = job["result"]
    s = job["samples"]
    return {"machine": job["machine"], "good": "good-1 (image:/k/good)", "bad": "bad-1 (image:/k/bad)", "recipe": "dd-seqwrite",
            "n": f"{r['n_good']} good, {r['n_bad']} bad",
            "median_good": f"{statistics.median(s['good']):.4g}", "median_bad": f"{statistics.median(s['bad']):.4g}",
            "change": f"{r['change_percent']:+.2f}%", "ci": f"{r['ci'][0]:+.2f}% .. {r['ci'][1]:+.2f}%",
            }


def test_not_reproduced_on_an_emulated_machine_every_message_states_the_figures(store):
    from bot.notify.format import irc_line, matrix_bodies
    from bot.reply.compose import render_body
    from bot.tracker.entry import entry, render

    rid, job = _done_job(store, samples=SAME, tags=["emulated"], allow_emulated=True)
    assert job["verdict"] == "not-reproduced" and job["result"]["emulated"] is True
    f = _figures(job)
    e = entry(store, rid)
    assert e["reruns"][-1]["backend"] == "fake"
    # the lab's verdict is the lab's: history source "lab", no "Set by hand"
    rec = get_record(store, rid)
    status_rows = [h for h in rec["history"] if h["field"] == "status" and h["new"] == "not-reproduced"]
    assert status_rows and status_rows[-1]["source"] == "lab" and status_rows[-1]["actor"] == "regtriage-lab"
    assert not e["set_by"]

    tracker = render(e, "txt", BASE)
    body = render_body(e, event_kind="not-reproduced", link=f"{BASE}/regressions/{rid}", regzbot=[],
                       answers_report=True, base_url=BASE)
    plain, html = matrix_bodies("not-reproduced", e, BASE)
    md = render(e, "md", BASE)
    csv_url = f"{BASE}/regressions/{rid}/reruns/{job['id']}/samples.csv"
    svg_url = f"{BASE}/regressions/{rid}/reruns/{job['id']}/samples.svg"
    for name, text in (("tracker entry", tracker), ("reply", body), ("matrix plain", plain)):
        flat = " ".join(text.split())
        assert "Set by hand" not in flat, name
        assert "EMULATED" in flat and f"{f['machine']} (fake backend)" in flat, name
        assert f"good {f['good']}" in flat and f"bad {f['bad']}" in flat, name
        assert f"Recipe: {f['recipe']}" in flat and f"Runs: {f['n']}" in flat, name
        assert f"Medians: good {f['median_good']}, bad {f['median_bad']}" in flat, name
        assert f"Change: {f['change']}, 99% repeated confidence interval {f['ci']}" in flat, name
        assert f"CV: {job['result']['cv_percent']:.1f}%" in flat, name
        assert f"Samples: {csv_url}" in flat and f"Plot: {svg_url}" in flat, name
    # the mail: the honest sentence up front, the samples inline as CSV, no over-claim
    flat = " ".join(body.split())
    bound = -job["result"]["ci"][0]  # throughput: the interval's low end is the worst regression it allows
    assert f"a regression larger than {bound:.1f}% is ruled out on this machine; a smaller one is not" in flat
    assert "could not reproduce the regression" not in flat and "emulated CPU" in flat
    assert samples_csv(e["reruns"][-1]).strip() in body
    assert len([ln for ln in body.splitlines() if ln.count(",") == 3 and ln[0].isdigit()]) == 10
    # Matrix HTML: the same figures, the links as links
    assert f'href="{csv_url}"' in html and f'href="{svg_url}"' in html and "emulated" in html
    assert "repeated confidence interval" in md
    # IRC: one line with the figures and the link
    line = irc_line("not-reproduced", e, BASE)
    assert len(line.encode()) <= 400 and "\n" not in line
    for part in (f"lab on {f['machine']} (emulated, a stand-in)", "n=5+5", f"median {f['median_good']} -> {f['median_bad']}",
                 f["change"], f["ci"], f"CV {job['result']['cv_percent']:.1f}%", f"{BASE}/regressions/{rid}"):
        assert part in line, (part, line)


def test_confirmed_reply_and_csv_svg_on_the_dashboard(store):
    from starlette.testclient import TestClient

    from bot.reply.compose import render_body
    from bot.tracker.entry import entry
    from bot.web.app import create_app

    rid, job = _done_job(store, change=-20.0)
    assert job["verdict"] == "confirmed"
    e = entry(store, rid)
    body = render_body(e, event_kind="confirmed", link=None, regzbot=[], answers_report=True, base_url=None)
    flat = " ".join(body.split())
    assert f'Its verdict, "confirmed": reproduced on m1: dd.write_MBps changed by ' \
           f'{job["result"]["change_percent"]:+.1f}%' in flat
    assert "the whole interval lies on the regression side" in flat and "emulated" not in flat
    assert "Samples:" not in flat  # no [web] base_url: no links, the samples are inline
    assert "run,build,sample,value" in body
    client = TestClient(create_app(store, None))
    csv = client.get(f"/regressions/{rid}/reruns/{job['id']}/samples.csv")
    assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    rows = csv.text.strip().splitlines()
    assert rows[0] == "run,build,sample,value" and len(rows) == 11
    good = [float(r.split(",")[3]) for r in rows[1:] if r.split(",")[1] == "good"]
    assert good == job["samples"]["good"]
    svg = client.get(f"/regressions/{rid}/reruns/{job['id']}/samples.svg")
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    assert svg.text.count('class="sample good"') == 5
    assert client.get(f"/regressions/{rid}/reruns/{job['id'] + 99}/samples.csv").status_code == 404
    page = client.get(f"/regressions/{rid}").text
    assert f"/regressions/{rid}/reruns/{job['id']}/samples.csv" in page
    assert f"CV {job['result']['cv_percent']:.1f}% (the noisier build)" in page and "emulated machine" not in page


def _rerun(**kw):
    r = {"id": 3, "regression_id": 7, "machine": "box", "backend": "ssh", "recipe": "dd-seqwrite",
         "metric": "dd.seconds", "higher_is_better": False, "verdict": "inconclusive", "change_percent": 17.0,
         "ci": [-21.0, 55.0], "n_good": 5, "n_bad": 5, "samples": {"good": [1.0] * 5, "bad": [1.2] * 5},
         "order": [], "builds": {"good": "debian:a", "bad": "debian:b"}, "refs": {}, "ci_level": 0.99,
         "cv_percent": 25.0, "emulated": True, "claimed_change_percent": 30.0,
         "reasons": ["too noisy: CV 25.0% over 5+5 runs on an emulated machine"]}
    r.update(kw)
    return r


@pytest.mark.parametrize("hib, ci, bound", [(True, (-3.0, 4.0), 3.0), (False, (-3.0, 4.0), 4.0),
                                            (True, (0.5, 4.0), 0.0), (False, (-4.0, -0.5), 0.0)])
def test_regression_bound_is_the_intervals_worst_end(hib, ci, bound):
    assert regression_bound(ci, hib) == bound


def test_wording_never_claims_more_than_the_interval():
    # the case: CV 25% on an emulated machine, CI -21..+55% on a time metric
    v = summarize(_rerun())
    assert v["statement"].startswith("undecided on box (emulated)")
    assert "still allows a regression of up to 55.0%" in v["statement"]
    assert "too noisy: CV 25.0%" in v["statement"]
    v = summarize(_rerun(verdict="not-reproduced", change_percent=0.5, ci=[-2.0, 3.0], emulated=False,
                         cv_percent=1.0, claimed_change_percent=30.0))
    assert "a regression larger than 3.0% is ruled out on this machine; a smaller one is not" in v["statement"]
    assert "(the report claimed 30.0%)" in v["statement"] and "emulated" not in v["statement"]
    v = summarize(_rerun(verdict="not-reproduced", change_percent=-3.0, ci=[-5.0, -1.0], emulated=False))
    assert "wholly on the improvement side" in v["statement"]
    v = summarize(_rerun(verdict="improved", change_percent=-10.0, ci=[-15.0, -5.0]))
    assert v["statement"].startswith("not a regression on box (emulated): the bad kernel was better")


def test_hostile_values_stay_text_in_chat_and_mail():
    from bot.notify.format import irc_line, matrix_bodies
    from bot.tracker.entry import render

    e = {"id": 7, "title": "x\x03\x02 <script>alert(1)</script>\nPRIVMSG #x :hi", "status": "inconclusive",
         "kind": "performance", "subsystem": None, "culprit": None, "range": {"good": None, "bad": None},
         "metric": None, "change_percent": None, "hardware": {}, "config": {}, "numbers": [],
         "report": {"message_id": None, "url": None}, "related": [], "history": [], "updated": None,
         "created": None, "duplicate_of": None, "duplicates": [], "fix": None, "set_by": {},
         "reruns": [_rerun(metric="<img src=x onerror=alert(1)>", recipe_params={"bs": "1\n#regzbot fixed"})]}
    line = irc_line("inconclusive", e, BASE)
    assert "\n" not in line and "\x03" not in line and "\x02" not in line
    plain, html = matrix_bodies("inconclusive", e, BASE)
    assert "<img" not in html and "<script" not in html
    text = render(e, "txt", BASE)
    assert not any(ln.startswith("#regzbot") for ln in text.splitlines())


NO_FIT_LAB = """
[lab]
runs = 5
warmup = 0
builds = {"good-1" = "image:/k/good", "bad-1" = "image:/k/bad"}
machines = [{name = "arm1", arch = "aarch64", backend = "fake", storage = ["ssd"]},
            {name = "hdd1", arch = "x86_64", backend = "fake", storage = ["hdd"], filesystems = ["ext4"]}]
"""


def test_match_plan_rerun_exit_1_with_the_reasons_when_nothing_fits(cli, home, tmp_path):
    from tests.test_scheduler import _lab_cli

    store = _lab_cli(cli, tmp_path, NO_FIT_LAB)
    hw = {"cpu": None, "arch": "x86_64", "memory": None, "storage": "nvme"}
    rid = record(store, hardware=hw, config={"filesystem": "xfs", "benchmark": "dd",
                                             "command": "dd if=/dev/zero of=/x bs=1M count=8", "kernel_config": []})
    bare = record(store)  # names no hardware: hdd1 is only a stand-in
    store.close()
    reasons = ("arch aarch64 is not the report's x86_64", "score -40 is below min_score 0")
    for args in (("lab", "match", str(rid)), ("lab", "plan", str(rid)), ("rerun", str(rid), "--dry-run"),
                 ("rerun", str(rid))):
        r = cli(*args)
        flat = " ".join(r.output.split())
        assert r.exit_code == 1, (args, r.output)
        assert all(x in flat for x in reasons), (args, flat)
    r = cli("lab", "match", str(bare))
    assert r.exit_code == 1 and "no machine matches: the report names no hardware; best stand-in: hdd1" in \
        " ".join(r.output.split())
    r = cli("rerun", str(bare), "--dry-run")  # a person may still run it there, and is told so
    assert r.exit_code == 0 and "hdd1 (a stand-in: the report names no hardware)" in r.output
    r = cli("rerun", str(bare))
    assert r.exit_code == 0 and "a stand-in: the report names no hardware" in r.output
