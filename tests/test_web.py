"""The web dashboard (bot.web.app, bot.web.svg, ``regtriage serve``), driven as a person would:
the real uvicorn server on 127.0.0.1 over a database built through the real pipeline
(ingest -> triage -> track), and the pages read in a real headless Chromium (Debian's
``chromium`` + ``chromium-driver``, through Selenium; no browser download).

Checks: the filters and the query box narrow the list; a regression page shows the timeline,
evidence linked to lore, the culprit commit link and the SVG plot of a rerun; a hostile mail
subject renders as inert text (no dialog, no element, no CSP violation); the Atom feed parses;
``/api/regressions`` equals ``regtriage query --json``; ``/openapi.json``; ``/healthz``; the
``serve`` command; the SVG builder on its own.  API and feed checks run on SQLite and
PostgreSQL; the browser runs against SQLite.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import requests

CULPRIT = "54a6eb5c4765aa573a030ceeba2c14e3d2ea5706"
HOSTILE = '<script>alert(1)</script> "><img src=x onerror=alert(2)>'
SCREENSHOT = Path("/tmp/regtriage-web.png")
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--window-size=1280,1000"]


def mail(mid, subject, body, date, frm="Perf Tester <perf@example.org>", parent=None):
    head = f"From: {frm}\nSubject: {subject}\nMessage-ID: <{mid}>\nDate: {date}\n"
    if parent:
        head += f"In-Reply-To: <{parent}>\nReferences: <{parent}>\n"
    return (head + "\n" + body).encode()


MAILS = [
    mail("perf-1@example.org", "[REGRESSION] mm: page_fault1 throughput down 15% since v6.8", """Hi,

Since v6.8 we see a 15% drop in will-it-scale page_fault1 throughput on an AMD EPYC 7763 box.
v6.7 is fine. I am bisecting now.
""", "Mon, 04 Mar 2024 10:00:00 +0000"),
    mail("perf-2@example.org", "Re: [REGRESSION] mm: page_fault1 throughput down 15% since v6.8",
         f"""The bisect finished. The first bad commit is:

commit {CULPRIT}
    mm: use zonelist_zone() to get zone

Reverting it on top of v6.8 restores the throughput.
""", "Tue, 05 Mar 2024 10:00:00 +0000", parent="perf-1@example.org"),
    mail("dup-1@example.org", "[REGRESSION] kernel build 10% slower on v6.8", """Hello,

Kernel builds got 10% slower with v6.8 compared to v6.7 on my Ryzen box.
The regression is caused by commit 54a6eb5c4765 ("mm: use zonelist_zone() to get zone").
""", "Sun, 10 Mar 2024 10:00:00 +0000", frm="Builder <b@example.org>"),
    mail("ext4-1@example.org", "[REGRESSION] ext4: fsync fails with EIO since v6.9", """Hi,

Since v6.9 fsync on ext4 returns EIO on my laptop after a few minutes; v6.8 works fine.
The regression is caused by commit 0123456789ab ("ext4: rework the journal commit path").
""", "Wed, 15 May 2024 09:00:00 +0000", frm="Laptop User <lu@example.org>"),
    mail("hostile-1@example.org", f"[REGRESSION] net: {HOSTILE} tcp throughput down 20% since v6.10", """Hi,

Since v6.10 iperf3 TCP throughput dropped by 20% on my Intel Xeon box; v6.9 is fine.
The regression is caused by commit 89abcdef0123 ("net: tcp: change the autotuning").
""", "Thu, 01 Aug 2024 08:00:00 +0000", frm='"<b>Net</b> Tester" <nt@example.org>'),
    mail("usb-1@example.org", "usb audio dies after resume",
         "Hi, my USB headset produces no sound after suspend and resume. Any idea?\n",
         "Mon, 11 Mar 2024 10:00:00 +0000", frm="User <u@example.org>"),
    mail("usb-2@example.org", "Re: usb audio dies after resume",
         """Thanks for the report, let me add it to the tracking.

#regzbot ^introduced: abcdef123456
#regzbot title: usb: audio dies after resume
""", "Mon, 11 Mar 2024 12:00:00 +0000", frm="Thorsten Leemhuis <regressions@leemhuis.info>",
         parent="usb-1@example.org"),
]
GOOD = [101.2, 99.8, 100.5, 102.0, 100.9, 99.5, 100.1, 101.4]
BAD = [86.0, 85.1, 87.2, 84.9, 86.6, 85.8, 86.3]
RERUN = {"id": 7, "machine": "epyc-7763-01", "recipe": "will-it-scale/page_fault1", "metric": "page_fault1.ops_per_sec",
         "higher_is_better": True, "verdict": "confirmed", "change_percent": -14.6, "ci": [-15.9, -13.2],
         "p_value": 1.2e-7, "samples": {"good": GOOD, "bad": BAD},
         "order": ["good", "bad"] * 7 + ["good"], "finished": "2024-03-06T12:00:00+00:00"}


# -- the database, the server ------------------------------------------------------------------------
def build_db(url: str) -> dict[str, int]:
    """Records through the real pipeline; returns {name: record id}.  The lab's verdict on the
    page_fault1 report and a fix for the ext4 one are set the way those components will."""
    from sqlalchemy import select

    import storage.tracker_schema as ts
    from bot.sources.ingest import Ingester
    from bot.tracker.records import set_status, update_tracker
    from bot.triage.runner import triage_pending
    from storage.store import Store

    store = Store(url)
    ing = Ingester(store, workers=1)
    for raw in MAILS:
        ing.add(raw, "test")
    ing.flush()
    ing.close()
    triage_pending(store)
    from pathlib import Path

    from bot.config import Config

    # the regressions list's #regzbot commands are honoured: he is on the allow-list
    update_tracker(store, Config(home=Path("/nonexistent"), db_url=url,
                                 data={"trust": {"trusted_senders": ["regressions@leemhuis.info"]}}))
    r = ts.regressions
    with store.engine.connect() as conn:
        by_report = dict(conn.execute(select(r.c.report_message_id, r.c.id)).all())
    ids = {name: by_report[f"{name}-1@example.org"] for name in ("perf", "dup", "ext4", "hostile", "usb")}
    set_status(store, ids["perf"], "confirmed", "lab", "rerun 7: -14.6% (CI -15.9% to -13.2%)")
    set_status(store, ids["ext4"], "fixed", "test", "fix merged")
    store.close()
    return ids


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, url: str, ids: dict[str, int]):
        import uvicorn

        from bot.web.app import create_app
        from storage.store import Store

        from sqlalchemy import select

        import storage.tracker_schema as ts

        self.db_url, self.ids = url, ids
        self.store = Store(url)
        with self.store.engine.connect() as conn:
            self.subsystems = dict(conn.execute(select(ts.regressions.c.id, ts.regressions.c.subsystem)).all())
        reruns = {ids["perf"]: [RERUN]}
        app = create_app(self.store, None, reruns=lambda store, rid: reruns.get(rid, []))
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "uvicorn did not start"
            time.sleep(0.05)

    def get(self, path: str, **kw) -> requests.Response:
        return requests.get(self.base + path, timeout=20, **kw)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.store.close()


def _pg_schema_url(pg_server: str):
    import psycopg

    schema = f"rt_web_{uuid.uuid4().hex[:10]}"
    plain = pg_server.replace("postgresql+psycopg", "postgresql")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in pg_server else "?"

    def drop():
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')

    return f"{pg_server}{sep}options=-csearch_path%3D{schema}", drop


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def server(request, tmp_path_factory):
    drop = None
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('web') / 'regtriage.sqlite3'}"
    else:
        url, drop = _pg_schema_url(request.getfixturevalue("pg_server"))
    srv = Server(url, build_db(url))
    yield srv
    srv.stop()
    if drop:
        drop()


@pytest.fixture(scope="module")
def sqlite_server(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('webui') / 'regtriage.sqlite3'}"
    srv = Server(url, build_db(url))
    yield srv
    srv.stop()


# -- the browser -------------------------------------------------------------------------------------
def _ensure_chromium() -> str | None:
    if os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER):
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return "chromium/chromium-driver missing (apt-get install chromium chromium-driver)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], env=env, check=False, capture_output=True, timeout=600)
    done = subprocess.run(["apt-get", "install", "-y", "-qq", "chromium", "chromium-driver"], env=env,
                          check=False, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        return f"apt-get install chromium chromium-driver failed: {done.stderr[-500:]}"
    return None


@pytest.fixture(scope="module")
def browser():
    reason = _ensure_chromium()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="regtriage-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in CHROME_FLAGS + [f"--user-data-dir={profile}"]:
        opts.add_argument(flag)
    opts.set_capability("unhandledPromptBehavior", "ignore")  # a dialog stays open: we look for it
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def no_dialog(driver) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        alert = driver.switch_to.alert
    except NoAlertPresentException:
        return
    text = alert.text
    alert.dismiss()
    pytest.fail(f"a JavaScript dialog opened: {text!r}")


def console_problems(driver) -> list[str]:
    """Browser console errors: CSP violations, failed loads (favicon aside)."""
    return [e["message"] for e in driver.get_log("browser")
            if e["level"] in ("SEVERE", "WARNING") and "favicon.ico" not in e["message"]]


def listed(driver) -> set[int]:
    from selenium.webdriver.common.by import By

    return {int(tr.get_attribute("data-id")) for tr in driver.find_elements(By.CSS_SELECTOR, "#regressions tr.rec")}


def submit_form(driver, **fields) -> None:
    """Fill the list page's form as a person would and press the Filter button."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    for name, value in fields.items():
        el = driver.find_element(By.ID, name)
        if el.tag_name == "select":
            Select(el).select_by_value(value)
        else:
            el.clear()
            el.send_keys(value)
    click_and_wait(driver, ".frow button[type=submit]")


def click_and_wait(driver, css: str) -> None:
    """Click and wait for the next page to replace this one."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    from selenium.common.exceptions import WebDriverException

    old = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.CSS_SELECTOR, css).click()
    stale = EC.staleness_of(old)

    def replaced(d) -> bool:
        try:
            return stale(d)
        except WebDriverException as exc:  # chromium's other word for a stale node
            if "does not belong to the document" in str(exc):
                return True
            raise
    WebDriverWait(driver, 10).until(replaced)


# -- browser tests --------------------------------------------------------------------------------------
def test_list_filters_and_query_box_narrow_the_list(sqlite_server, browser):
    from selenium.webdriver.common.by import By

    ids = sqlite_server.ids
    browser.get(sqlite_server.base + "/")
    assert listed(browser) == set(ids.values())
    assert browser.find_element(By.ID, "total").text == "5"

    submit_form(browser, status="open")
    assert listed(browser) == {ids["perf"], ids["hostile"], ids["usb"]}
    assert "status=open" in browser.current_url
    submit_form(browser, status="", kind="functional")
    assert listed(browser) == {ids["ext4"]}
    submit_form(browser, kind="", subsystem="fs")
    assert listed(browser) == {ids["ext4"]}
    submit_form(browser, subsystem="mm")
    in_mm = {rid for rid, sub in sqlite_server.subsystems.items() if sub and (sub == "mm" or sub.startswith("mm/"))}
    assert ids["dup"] in in_mm and ids["ext4"] not in in_mm  # "mm: ..." culprit subject
    assert listed(browser) == in_mm
    submit_form(browser, subsystem="", text="throughput")
    assert listed(browser) == {ids["perf"], ids["hostile"]}
    submit_form(browser, text="", status="duplicate")
    assert listed(browser) == {ids["dup"]}

    # the query box: the language of `regtriage query`, and filters narrow it further
    browser.get(sqlite_server.base + "/")
    q = browser.find_element(By.ID, "q")
    q.send_keys("open performance regressions")
    click_and_wait(browser, ".qrow button[type=submit]")
    assert listed(browser) == {ids["perf"], ids["hostile"]}
    understood = browser.find_element(By.ID, "understood").text
    assert "kind:performance" in understood and "status:open" in understood
    submit_form(browser, text="page_fault1")
    assert listed(browser) == {ids["perf"]}

    no_dialog(browser)
    assert console_problems(browser) == []  # no CSP violation, nothing failed to load

    browser.get(sqlite_server.base + "/?q=since:notadate")  # a 400 page that says why
    assert "not a date" in browser.find_element(By.ID, "query-error").text
    assert browser.find_element(By.ID, "q").get_attribute("value") == "since:notadate"
    browser.get_log("browser")  # the 400 itself is logged; drop it


def test_regression_page_timeline_evidence_culprit_and_plot(sqlite_server, browser):
    from selenium.webdriver.common.by import By

    from bot.tracker.entry import entry
    from storage.store import Store

    rid = sqlite_server.ids["perf"]
    store = Store(sqlite_server.db_url)
    e = entry(store, rid)
    store.close()
    browser.set_window_size(1280, 1000)
    browser.get(f"{sqlite_server.base}/regressions/{rid}")
    assert "page_fault1 throughput down 15%" in browser.find_element(By.ID, "title").text

    # culprit linked to the commit
    culprit = browser.find_element(By.CSS_SELECTOR, "#culprit a.commit")
    assert culprit.get_attribute("href") == f"https://git.kernel.org/torvalds/c/{CULPRIT}"
    assert culprit.text == CULPRIT[:12]

    # evidence quoted and linked to the message on lore
    quotes = [q.text for q in browser.find_elements(By.CSS_SELECTOR, "#evidence blockquote")]
    assert any("15% drop in will-it-scale page_fault1" in q for q in quotes)
    assert any(q == f"commit {CULPRIT}" for q in quotes)
    lore = {a.get_attribute("href") for a in browser.find_elements(By.CSS_SELECTOR, "#evidence a.lore")}
    assert "https://lore.kernel.org/r/perf-1@example.org/" in lore
    assert "https://lore.kernel.org/r/perf-2@example.org/" in lore  # the bisect result set the culprit

    # the timeline: one row per history entry, the lab's verdict last
    events = browser.find_elements(By.CSS_SELECTOR, "#timeline tr.event")
    assert len(events) == len(e["history"]) >= 5
    assert "confirmed" in events[-1].text and "rerun 7" in events[-1].text

    # the rerun: verdict, numbers we formatted, and the plot with one point per sample
    rerun = browser.find_element(By.CSS_SELECTOR, "#reruns .rerun")
    assert "confirmed" in rerun.find_element(By.CSS_SELECTOR, ".verdict").text
    assert "-15.9% to -13.2%" in rerun.text and "< 0.0001" in rerun.text and "8 good, 7 bad" in rerun.text
    svg = rerun.find_element(By.CSS_SELECTOR, "svg.samples")
    assert len(svg.find_elements(By.CSS_SELECTOR, "circle.sample.good")) == len(GOOD)
    assert len(svg.find_elements(By.CSS_SELECTOR, "circle.sample.bad")) == len(BAD)
    assert len(svg.find_elements(By.CSS_SELECTOR, "line.mean")) == 2
    assert len(svg.find_elements(By.CSS_SELECTOR, "rect.ci")) == 1
    assert svg.size["width"] > 300 and svg.size["height"] > 100  # laid out, not collapsed by the CSP

    # the whole page as a person sees it
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1280, min(max(int(height) + 120, 1000), 4000))
    browser.get(f"{sqlite_server.base}/regressions/{rid}")
    assert browser.save_screenshot(str(SCREENSHOT))
    browser.set_window_size(1280, 1000)
    assert SCREENSHOT.stat().st_size > 20000
    no_dialog(browser)
    assert console_problems(browser) == []


def test_hostile_subject_renders_inert(sqlite_server, browser):
    from selenium.webdriver.common.by import By

    rid = sqlite_server.ids["hostile"]
    for path in ("/", "/?q=throughput", f"/regressions/{rid}"):
        browser.get(sqlite_server.base + path)
        time.sleep(0.2)  # an onerror handler would have fired by now
        no_dialog(browser)
        assert browser.find_elements(By.TAG_NAME, "script") == []
        assert browser.find_elements(By.TAG_NAME, "img") == []
        assert browser.find_elements(By.CSS_SELECTOR, "[onerror]") == []
        body = browser.find_element(By.TAG_NAME, "body").text
        assert "<script>alert(1)</script>" in body and '"><img src=x onerror=alert(2)>' in body
        assert console_problems(browser) == []
    assert HOSTILE in browser.find_element(By.ID, "title").text
    assert browser.find_elements(By.TAG_NAME, "b") == []


# -- HTTP: API, feed, OpenAPI, health (SQLite and PostgreSQL) ---------------------------------------
QUERIES = ["", "open regressions", "kind:performance", "status:all text:throughput", "duplicates",
           "regressions in fs/ since v6.9", f"culprit:{CULPRIT[:8]}", "confirmed regressions in the last 30 years"]


def test_api_equals_cli_query_json(server, cli):
    for q in QUERIES:
        res = server.get("/api/regressions", params={"q": q})
        assert res.status_code == 200, (q, res.text)
        api = res.json()
        out = cli("query", "--json", *q.split(), db=server.db_url)
        assert out.exit_code == 0, out.output
        expected = json.loads(out.output)
        for item in expected:  # the lab's reruns: the only addition
            if item["id"] == server.ids["perf"]:
                item["reruns"] = [RERUN]
        assert api == expected, q
        assert res.headers["X-Total-Count"] == str(len(expected))
        assert res.headers["content-type"].startswith("application/json")
    assert len(server.get("/api/regressions").json()) == 5


def test_api_filters_paging_and_errors(server):
    ids = server.ids

    def got(**params):
        res = server.get("/api/regressions", params=params)
        assert res.status_code == 200, res.text
        return [x["id"] for x in res.json()]

    assert set(got(status="open")) == {ids["perf"], ids["hostile"], ids["usb"]}
    assert got(kind="functional") == [ids["ext4"]]
    assert got(subsystem="fs/") == [ids["ext4"]]
    assert set(got(text="throughput")) == {ids["perf"], ids["hostile"]}
    assert set(got(q="performance", status="open")) == {ids["perf"], ids["hostile"]}
    assert got(q="fixed", status="open") == []  # query and filters: what both select
    everything = got()
    page = server.get("/api/regressions", params={"limit": 2, "offset": 1})
    assert [x["id"] for x in page.json()] == everything[1:3]
    assert page.headers["X-Total-Count"] == "5" and 'rel="next"' in page.headers["Link"]
    assert "offset=3" in page.headers["Link"]

    one = server.get(f"/api/regressions/{ids['perf']}").json()
    assert one["id"] == ids["perf"] and one["status"] == "confirmed" and one["reruns"] == [RERUN]
    assert one["culprit"]["url"] == f"https://git.kernel.org/torvalds/c/{CULPRIT}"
    missing = server.get("/api/regressions/999999")
    assert missing.status_code == 404 and "error" in missing.json()
    for bad in ({"q": "status:bogus"}, {"limit": "ten"}, {"offset": "-1"}, {"kind": "weird"}):
        res = server.get("/api/regressions", params=bad)
        assert res.status_code == 400 and res.json()["error"], bad


def test_atom_feed(server):
    import feedparser

    res = server.get("/feed.atom")
    assert res.status_code == 200 and res.headers["content-type"].startswith("application/atom+xml")
    ET.fromstring(res.content)  # well-formed XML
    feed = feedparser.parse(res.content)
    assert not feed.bozo, feed.get("bozo_exception")
    assert feed.version == "atom10"
    titles = [x.title for x in feed.entries]
    ids = server.ids
    for name, rid in ids.items():
        assert any(t.startswith(f"New regression #{rid}:") for t in titles), (name, titles)
    assert any(t.startswith(f"Confirmed regression #{ids['perf']}:") for t in titles)
    assert titles[0].startswith("Confirmed")  # newest first
    hostile = next(x for x in feed.entries if x.title.startswith(f"New regression #{ids['hostile']}:"))
    assert HOSTILE in hostile.title  # text, escaped by the XML writer
    assert len({x.id for x in feed.entries}) == len(feed.entries)
    for x in feed.entries:
        assert x.link.startswith(server.base + "/regressions/") and x.updated and x.summary
    page = requests.get(hostile.link, timeout=20)
    assert page.status_code == 200 and "tcp throughput down 20%" in page.text


def test_openapi_health_static_and_headers(server):
    doc = server.get("/openapi.json")
    assert doc.status_code == 200
    spec = doc.json()
    assert spec["openapi"].startswith("3.1")
    assert {"/api/regressions", "/api/regressions/{id}", "/feed.atom", "/healthz"} <= set(spec["paths"])
    listing = spec["paths"]["/api/regressions"]["get"]
    assert {p["name"] for p in listing["parameters"]} >= {"q", "status", "subsystem", "kind", "text", "limit",
                                                          "offset"}
    schema = spec["components"]["schemas"]["Regression"]
    item = server.get(f"/api/regressions/{server.ids['perf']}").json()
    assert set(schema["required"]) <= set(item) and set(item) <= set(schema["properties"])
    assert set(item["reruns"][0]) <= set(spec["components"]["schemas"]["Rerun"]["properties"])

    health = server.get("/healthz")
    assert health.status_code == 200 and health.text == "ok"
    css = server.get("/static/style.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    for path in ("/", f"/regressions/{server.ids['perf']}", "/api/regressions", "/feed.atom", "/nope"):
        res = server.get(path)
        csp = res.headers["Content-Security-Policy"]
        assert "default-src 'self'" in csp and "img-src 'self' data:" in csp and "style-src 'self'" in csp
        assert "script-src" not in csp and "unsafe" not in csp
        assert res.headers["X-Content-Type-Options"] == "nosniff"
    assert server.get("/nope").status_code == 404
    assert server.get("/regressions/999999").status_code == 404
    moved = server.get("/regressions?status=open", allow_redirects=False)
    assert moved.status_code == 308 and moved.headers["location"] == "/?status=open"
    page = server.get(f"/regressions/{server.ids['hostile']}").text
    assert "<script" not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


# -- the command -----------------------------------------------------------------------------------
def _main():
    from bot.cli.main import main

    if "serve" not in main.commands:
        from bot.cli.web import register

        register(main)
    return main


def test_help_does_not_import_the_web_stack():
    code = ("import sys\nfrom bot.cli.main import main\nfrom bot.cli.web import register\n"
            "'serve' in main.commands or register(main)\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "try:\n    main(['serve', '--help'])\nexcept SystemExit:\n    pass\n"
            "bad = [m for m in ('starlette', 'uvicorn', 'bot.web.app', 'jinja2') if m in sys.modules]\n"
            "print('IMPORTED', bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "IMPORTED []" in out.stdout
    assert "--port" in out.stdout and "serve" in out.stdout


def test_serve_command_runs_the_server(tmp_path):
    url = f"sqlite:///{tmp_path / 'regtriage.sqlite3'}"
    ids = build_db(url)
    port = free_port()
    code = ("import sys\nfrom bot.cli.main import main\nfrom bot.cli.web import register\n"
            "'serve' in main.commands or register(main)\nmain(sys.argv[1:])\n")
    proc = subprocess.Popen([sys.executable, "-c", code, "--db", url, "serve", "--host", "127.0.0.1", "--port",
                             str(port), "--log-level", "warning"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, "REGTRIAGE_HOME": str(tmp_path / "home")})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                res = requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except requests.ConnectionError:
                assert proc.poll() is None, proc.stdout.read().decode()
                assert time.monotonic() < deadline, "regtriage serve did not answer"
                time.sleep(0.2)
        assert res.status_code == 200 and res.text == "ok"
        page = requests.get(f"http://127.0.0.1:{port}/regressions/{ids['ext4']}", timeout=10)
        assert page.status_code == 200 and "fsync fails with EIO" in page.text and "No reruns yet" in page.text
    finally:
        proc.terminate()
        proc.wait(15)


def test_serve_help_via_click():
    from click.testing import CliRunner

    res = CliRunner().invoke(_main(), ["serve", "--help"])
    assert res.exit_code == 0 and "--host" in res.output and "--port" in res.output


# -- the SVG on its own ----------------------------------------------------------------------------
def test_samples_svg_points_order_numbers_and_escaping():
    from bot.web.svg import samples_svg

    svg = samples_svg(RERUN)
    root = ET.fromstring(svg)  # well-formed, standalone
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg"
    circles = root.findall(f".//{ns}circle")
    good = [c for c in circles if c.get("class") == "sample good"]
    bad = [c for c in circles if c.get("class") == "sample bad"]
    assert len(good) == len(GOOD) and len(bad) == len(BAD) and len(circles) == len(GOOD) + len(BAD)
    # run order: x grows along RERUN["order"]; good runs first, then alternate
    xs = [(float(c.get("cx")), c.get("class").split()[1]) for c in circles]
    assert [side for _, side in sorted(xs)] == RERUN["order"]
    # higher values are drawn higher (smaller y): the good samples sit above the bad ones
    assert max(float(c.get("cy")) for c in good) < min(float(c.get("cy")) for c in bad)
    assert "-15.9%" in svg and "-13.2%" in svg and "style" not in svg and "script" not in svg.lower()

    hostile = dict(RERUN, metric='<script>alert(1)</script>"><img src=x onerror=alert(2)>',
                   samples={"good": [1, 2, float("nan"), "x", None, 3], "bad": [float("inf"), 4, 5]},
                   order="nonsense", ci=["a", 2])
    out = samples_svg(hostile)
    root = ET.fromstring(out)
    assert root.findall(f".//{ns}script") == [] and root.findall(f".//{ns}img") == []
    assert "<script" not in out and "<img" not in out and "&lt;script&gt;" in out
    assert "nan" not in out.lower() and "inf" not in out.lower()
    assert len(root.findall(f".//{ns}circle")) == 5  # 3 good + 2 bad finite numbers
    assert root.findall(f".//{ns}rect[@class='ci']") == []

    empty = ET.fromstring(samples_svg({"samples": {}}))
    assert empty.findall(f".//{ns}circle") == [] and "no samples" in samples_svg({})
    flat = ET.fromstring(samples_svg({"samples": {"good": [5, 5], "bad": [5, 5]}}))
    assert len(flat.findall(f".//{ns}circle")) == 4
    big = samples_svg({"samples": {"good": [1.5e9, 1.6e9], "bad": [1.2e9, 1.1e9]}, "ci": [-30, -20]})
    assert "e+" not in big and "G" in big


def test_json_is_strict_and_reruns_default_to_the_lab(store, monkeypatch):
    import bot.lab.reruns
    from bot.web.api import json_bytes
    from bot.web.record_view import reruns_for

    doc = {"p_value": float("nan"), "ci": [float("-inf"), 1.5], "title": "a\ud800b", "n": 3}
    assert json.loads(json_bytes(doc)) == {"p_value": None, "ci": [None, 1.5], "title": "a\ufffdb", "n": 3}
    assert reruns_for(store, 1) == []  # no lab jobs yet
    monkeypatch.setattr(bot.lab.reruns, "reruns_for", lambda st, rid: [{"id": 7, "record": rid}])
    assert reruns_for(store, 3) == [{"id": 7, "record": 3}]  # the page's reruns are the lab's
