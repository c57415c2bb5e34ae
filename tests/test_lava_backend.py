"""The lava lab backend.

Pure tests (always run): configuration and token handling, job definitions for the busybox
recipes, LAVA state/health mapping, results parsing from API JSON captured from a real LAVA
2023.01 server (tests/data/lava/), handle validation, polling/cancel against a stub server.

The REAL test (``@pytest.mark.lava``, only with ``REGTRIAGE_LAVA=1``; ``tests/run-lava-tests.sh``)
installs (if missing) and starts a real LAVA server + scheduler + worker on loopback
(tests/lava_server.py), submits a RunSpec with two real Debian kernel builds (cached under
~/.cache/regtriage-test like the qemu tests) and a tiny dd recipe, waits, and checks the real
measurements of both builds, ABAB order (kernel release reported by each boot), warm-ups kept
apart, cancel of a running job, and a restarted backend resuming the polling of a job that is
still running.  It needs root (install, device dictionary) and PostgreSQL on 127.0.0.1:5432.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bot.lab.backends import DONE, FAILED, QUEUED, RUNNING, LabError, RunSpec, Samples, Timeouts, backend_for_handle, \
    get_backend
from bot.lab.backends.lava import (LavaBackend, LavaConfig, build_initramfs, chunk_schedule, failure_reason, map_lava_state,
                                   parse_results, render_guest_files, render_job, units_for)
from bot.lab.builds import BuildSpec
from bot.lab.recipes import make_recipe

DATA = Path(__file__).parent / "data" / "lava"
REAL = os.environ.get("REGTRIAGE_LAVA") == "1"
CACHE = Path(os.environ.get("REGTRIAGE_TEST_CACHE", Path.home() / ".cache" / "regtriage-test"))
BUILD_CACHE = CACHE / "builds"
RUN_ID = "20260101T000000-0123abcd"


def _job(recipe="dd-seqwrite", params=None, **kw) -> RunSpec:
    kw.setdefault("runs", 2)
    return RunSpec(make_recipe(recipe, params or {"bs": "1M", "count": 16}), BuildSpec(image="/boot/a"),
                   BuildSpec(debian="linux-image-6.1.0-56-rt-amd64-unsigned"), **kw)


def _urls(job: RunSpec) -> dict:
    return {"kernel": {"good": "file:///srv/lava/r/vmlinuz-good", "bad": "file:///srv/lava/r/vmlinuz-bad"},
            "ramdisk": {n: f"file:///srv/lava/r/initramfs-{n}.cpio.gz" for _, n in job.schedule()}}


# ============================================================================ pure: config
def test_config_validation_and_token(tmp_path, monkeypatch):
    cfg = LavaConfig(url="http://lava.example.org", work_dir=str(tmp_path))
    assert cfg.url == "http://lava.example.org/" and cfg.artifact_url == f"file://{tmp_path}/artifacts"
    for bad in ({"url": "ftp://x"}, {"url": "http://u:p@x/"}, {"url": "http://x/?a=1"},
                {"url": "http://x", "visibility": "group"}, {"url": "http://x", "priority": "urgent"},
                {"url": "http://x", "priority": 101}, {"url": "http://x", "device_type": "qemu; rm -rf /"},
                {"url": "http://x", "device_tags": ["ok", "bad tag"]}, {"url": "http://x", "token_env": "A-B"},
                {"url": "http://x", "context": {"extra_options": "-device $(reboot)"}},
                {"url": "http://x", "artifact_url": "http://h/x?y"}, {"url": "http://x", "batches_per_job": -1}):
        with pytest.raises(LabError):
            LavaConfig(**{"work_dir": str(tmp_path), **bad})
    with pytest.raises(LabError, match="environment"):
        LavaBackend.from_config({"lab": {"lava": {"url": "http://x", "token": "abc"}}})
    with pytest.raises(LabError, match="unknown keys"):
        LavaBackend.from_config({"lab": {"lava": {"url": "http://x", "tokn_env": "X"}}})
    with pytest.raises(LabError, match="url is required"):
        get_backend("lava", {})
    monkeypatch.delenv("REGTRIAGE_LAVA_TOKEN", raising=False)
    assert cfg.token() is None
    tf = tmp_path / "tok"
    tf.write_text("filetoken123\n")
    cfg2 = LavaConfig(url="http://x", token_file=str(tf), work_dir=str(tmp_path))
    assert cfg2.token() == "filetoken123"
    monkeypatch.setenv("REGTRIAGE_LAVA_TOKEN", "envtoken456")
    assert cfg2.token() == "envtoken456"  # the environment wins
    monkeypatch.setenv("REGTRIAGE_LAVA_TOKEN", "bad token\nx")
    with pytest.raises(LabError):
        cfg2.token()
    b = get_backend("lava", {"lab": {"lava": {"url": "http://x", "work_dir": str(tmp_path)}}})
    assert isinstance(b, LavaBackend) and b.name == "lava"


def test_submit_refuses_without_token_and_unsupported_recipes(tmp_path, monkeypatch):
    monkeypatch.delenv("REGTRIAGE_LAVA_TOKEN", raising=False)
    b = LavaBackend.from_config({"lava": {"url": "http://127.0.0.1:9/", "work_dir": str(tmp_path)}})
    with pytest.raises(LabError, match="no LAVA token"):
        b.submit(_job())
    monkeypatch.setenv("REGTRIAGE_LAVA_TOKEN", "sometoken123")
    fio = RunSpec(make_recipe("fio", {"size_mib": 16}), BuildSpec(image="/a"), BuildSpec(image="/b"))
    with pytest.raises(LabError, match="cannot run fio"):
        b.submit(fio)
    assert b.supports(make_recipe("dd-seqwrite", {"direct": True}))[0] is False
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_handles_are_validated(tmp_path):
    b = LavaBackend.from_config({"lava": {"url": "http://x", "work_dir": str(tmp_path)}})
    for h in ("qemu:20260101T000000-0123abcd", "lava:../../etc", "lava:", "lava:20260101T000000-0123abcd", 5):
        with pytest.raises(LabError):
            b.poll(h)


# ============================================================================ pure: job format
@pytest.mark.parametrize("recipe,params", [("dd-seqwrite", {"bs": "1M", "count": 16}),
                                           ("dd-seqread", {"bs": "64k", "count": 256}),
                                           ("syscall-getpid", {"iterations": 100000})])
def test_job_definition_for_recipes(tmp_path, recipe, params):
    job = _job(recipe, params, runs=3, samples_per_batch=2, warmup=1, label="regzbot-42",
               timeouts=Timeouts(boot_s=120, batch_s=300, total_s=3600))
    cfg = LavaConfig(url="http://x", work_dir=str(tmp_path), no_kvm=True, device_tags=["tcg"], priority=40)
    sched = job.schedule()
    assert sched == [("good", 2), ("bad", 2), ("good", 1), ("bad", 1)]
    text = render_job(cfg=cfg, run_id=RUN_ID, job=job, schedule=sched, batch_indexes=[0, 1, 2, 3],
                      urls=_urls(job), memory_mib=512)
    d = json.loads(text)  # JSON, i.e. YAML that LAVA's loader reads as is
    assert d["device_type"] == "qemu" and d["visibility"] == "public" and d["priority"] == 40
    assert d["job_name"] == f"regtriage {RUN_ID} regzbot-42" and d["tags"] == ["tcg"]
    assert d["context"] == {"arch": "amd64", "memory": 512, "no_kvm": True}
    assert d["timeouts"]["job"]["seconds"] == min(4 * (300 + 120 + 300) + 120, 3600)
    kinds = [next(iter(a)) for a in d["actions"]]
    assert kinds == ["deploy", "boot", "test"] * 4
    deploys = [a["deploy"] for a in d["actions"] if "deploy" in a]
    assert [x["images"]["kernel"]["url"].rsplit("-", 1)[1] for x in deploys] == ["good", "bad", "good", "bad"]
    assert [x["images"]["ramdisk"]["url"] for x in deploys][2].endswith("initramfs-1.cpio.gz")
    rd = deploys[0]["images"]["ramdisk"]
    assert rd["overlays"] == {"lava": True} and rd["format"] == "cpio.newc" and rd["compression"] == "gz"
    boot = d["actions"][1]["boot"]
    assert boot == {"method": "qemu", "media": "tmpfs", "prompts": ["/ # "], "timeout": {"seconds": 120}}
    tests = [a["test"]["definitions"][0] for a in d["actions"] if "test" in a]
    assert [t["name"] for t in tests] == ["regtriage-b000-good", "regtriage-b001-bad", "regtriage-b002-good",
                                          "regtriage-b003-bad"]
    assert all(t["repository"]["run"]["steps"] == ["sh /regtriage/report.sh"] for t in tests)
    # chunks: one job per 2 batches keeps the order
    assert chunk_schedule(sched, 0) == [[0, 1, 2, 3]] and chunk_schedule(sched, 3) == [[0, 1, 2], [3]]
    part = json.loads(render_job(cfg=cfg, run_id=RUN_ID, job=job, schedule=sched, batch_indexes=[3],
                                 urls=_urls(job), memory_mib=512, part=1, parts=2))
    assert part["job_name"].endswith("part 2/2") and len(part["actions"]) == 3


def test_job_definition_rejects_unsafe_values(tmp_path):
    job = _job()
    cfg = LavaConfig(url="http://x", work_dir=str(tmp_path))
    urls = _urls(job)
    urls["kernel"]["bad"] = "file:///x\n- boot: {}"
    with pytest.raises(LabError, match="unsafe artifact URL"):
        render_job(cfg=cfg, run_id=RUN_ID, job=job, schedule=job.schedule(), batch_indexes=[0, 1], urls=urls,
                   memory_mib=512)
    with pytest.raises(LabError):
        render_job(cfg=cfg, run_id="x: y", job=job, schedule=job.schedule(), batch_indexes=[0], urls=_urls(job),
                   memory_mib=512)
    with pytest.raises(LabError):  # labels are validated by the RunSpec itself
        _job(label="a: b\n")


def test_guest_files_and_initramfs(tmp_path):
    import gzip
    import shutil
    import subprocess

    recipe = make_recipe("syscall-getpid", {"iterations": 5000})
    files = render_guest_files(recipe, samples=3, warmup=1, scratch_mib=64)
    assert set(files) == {"init", "regtriage/bench.sh", "regtriage/report.sh"}
    assert "exec setsid cttyhack sh" in files["init"] and "size=64m" in files["init"]
    assert "bs=1 count=5000" in files["regtriage/bench.sh"] and "samples=3 warmup=1" in files["regtriage/bench.sh"]
    rep = files["regtriage/report.sh"]
    assert 'lava-test-case "syscall.calls_per_sec-$n" --result pass --measurement "$v" --units "1/s"' in rep
    assert 'lava-test-case "warmup-syscall.calls_per_sec-$w"' in rep and "regtriage-result" in rep
    assert units_for("dd.write_MBps") == "MB/s"
    sh = shutil.which("busybox") or shutil.which("sh")
    for name, text in files.items():
        p = tmp_path / name.replace("/", "_")
        p.write_text(text)
        subprocess.run([sh, "sh", "-n", str(p)] if sh.endswith("busybox") else [sh, "-n", str(p)], check=True)
    # the reporting loop, run on the host with a fake lava-test-case, reports exactly what bench printed
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "lava-test-case").write_text('#!/bin/sh\necho "CASE $*" >> "$CASES"\n')
    (fake / "lava-test-case").chmod(0o755)
    bench = tmp_path / "regtriage"
    bench.mkdir()
    script = rep.replace("/regtriage/bench.sh", str(bench / "bench.sh")).replace("/tmp/regtriage-bench.out",
                                                                                 str(tmp_path / "out"))
    (bench / "bench.sh").write_text('echo "REGTRIAGE-START"\necho "WARMUP syscall.calls_per_sec=10.5"\n'
                                    'echo "BENCH syscall.calls_per_sec=11.25"\necho "BENCH syscall.calls_per_sec=12"\n'
                                    'echo "RESULT ok"\n')
    env = {"PATH": f"{fake}:/usr/bin:/bin", "CASES": str(tmp_path / "cases")}
    subprocess.run(["sh", "-c", script], env=env, check=True, capture_output=True)
    cases = (tmp_path / "cases").read_text().splitlines()
    assert cases[0].startswith("CASE uname-") and cases[-1] == "CASE regtriage-result --result pass"
    assert cases[1:4] == ["CASE warmup-syscall.calls_per_sec-1 --result pass --measurement 10.5 --units 1/s",
                          "CASE syscall.calls_per_sec-1 --result pass --measurement 11.25 --units 1/s",
                          "CASE syscall.calls_per_sec-2 --result pass --measurement 12 --units 1/s"]
    if Path("/bin/busybox").is_file() and shutil.which("cpio"):
        from bot.lab.initramfs import busybox_problem

        if busybox_problem() is None:
            raw = gzip.decompress(build_initramfs(files, "/bin/busybox"))
            listing = subprocess.run(["cpio", "-itv"], input=raw, capture_output=True, check=True).stdout.decode()
            assert re.search(r"^-rwxr-xr-x .* regtriage/report\.sh$", listing, re.M)
            assert "bin/sed -> /bin/busybox" in listing and "usr/bin/awk -> /bin/busybox" in listing


# ============================================================================ pure: states, results
@pytest.mark.parametrize("state,health,ours,cancelled", [
    ("Submitted", "Unknown", QUEUED, False), ("Scheduling", "Unknown", QUEUED, False),
    ("Scheduled", "Unknown", QUEUED, False), ("Running", "Unknown", RUNNING, False),
    ("Canceling", "Unknown", RUNNING, False), ("Finished", "Complete", DONE, False),
    ("Finished", "Incomplete", FAILED, False), ("Finished", "Canceled", FAILED, True),
    ("Something new", "Unknown", RUNNING, False)])
def test_state_mapping(state, health, ours, cancelled):
    assert map_lava_state(state, health) == (ours, cancelled)


def test_captured_job_states():
    for name, want in (("job-complete.json", (DONE, False)), ("job-canceled.json", (FAILED, True)),
                       ("job-incomplete.json", (FAILED, False))):
        d = json.loads((DATA / name).read_text())
        assert map_lava_state(d["state"], d["health"]) == want, name
    # LAVA 2023.01 leaves failure_comment empty; the reason is in the lava suite's "job" case
    tests = json.loads((DATA / "tests-incomplete.json").read_text())["results"]
    assert failure_reason(tests) == ("Job error: Invalid job data: [\"Image file '/tmp/lava-try/no-such-vmlinuz' "
                                     "does not exist or is not readable\"]")
    assert failure_reason(_captured_tests()[0]) is None


def _captured_tests() -> tuple[list, dict]:
    tests = json.loads((DATA / "tests-all.json").read_text())["results"]
    suites = {s["id"]: s["name"] for s in json.loads((DATA / "suites.json").read_text())["results"]}
    return tests, suites


def test_parse_captured_results():
    """Job 2 of the real server: dd-seqwrite 1M x 16, runs=2, 1 sample per boot, 1 warm-up, ABAB."""
    tests, suites = _captured_tests()
    sched = [("good", 1), ("bad", 1), ("good", 1), ("bad", 1)]
    batches, problems = parse_results(tests, suites, schedule=sched, batch_indexes=[0, 1, 2, 3],
                                      metric="dd.write_MBps", warmup=1,
                                      kernel_releases={"good": "6.1.0-56-amd64", "bad": "6.1.0-56-rt-amd64"})
    assert problems == []
    assert [b["build"] for b in batches] == ["good", "bad", "good", "bad"]
    assert [b["kernel_release"] for b in batches] == ["6.1.0-56-amd64", "6.1.0-56-rt-amd64"] * 2
    assert all(len(b["samples"]) == 1 and len(b["warmups"]) == 1 and b["samples"][0] > 0 for b in batches)
    assert batches[3]["samples"] == [489.7] and batches[3]["warmups"] == [231.213]
    # wrong expectations are reported, not papered over
    _, problems = parse_results(tests, suites, schedule=[("good", 2)] + sched[1:], batch_indexes=[0, 1, 2, 3],
                                metric="dd.write_MBps", warmup=1, kernel_releases={"good": "6.1.0-99-amd64"})
    assert any("expected 2 samples" in p for p in problems) and any("booted kernel" in p for p in problems)
    _, problems = parse_results(tests, suites, schedule=sched, batch_indexes=[0, 1, 2, 3], metric="dd.read_MBps",
                                warmup=1)
    assert len(problems) == 4
    failing = [dict(t, result="fail") if t["name"] == "regtriage-result" and t["suite"] == 4 else t for t in tests]
    _, problems = parse_results(failing, suites, schedule=sched, batch_indexes=[0, 1, 2, 3], metric="dd.write_MBps",
                                warmup=1)
    assert problems == ["batch 1 (bad): regtriage-result is fail"]


# ============================================================================ pure: stub LAVA server
class _StubLava:
    """Serves the captured JSON with scripted job states; records requests."""

    def __init__(self):
        self.jobs: dict[int, dict] = {}
        self.requests: list[tuple[str, str, str | None]] = []
        self.submitted: list[str] = []
        stub = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                stub.requests.append(("GET", self.path, self.headers.get("Authorization")))
                m = re.match(r"^/api/v0\.2/jobs/(\d+)/(cancel/|tests/|suites/|logs/)?(\?.*)?$", self.path)
                if not m or int(m.group(1)) not in stub.jobs:
                    return self._send(404, {"detail": "Not found."})
                job = stub.jobs[int(m.group(1))]
                sub = m.group(2)
                if sub is None:
                    return self._send(200, job)
                if sub == "cancel/":
                    job["state"], job["health"] = "Finished", "Canceled"
                    return self._send(200, {"message": "Job cancel signal sent."})
                if sub == "suites/":
                    return self._send(200, json.loads((DATA / "suites.json").read_text()))
                if sub == "logs/":
                    return self._send(200, [])
                q = dict(x.split("=", 1) for x in (m.group(3) or "?").lstrip("?").split("&") if "=" in x)
                if job.get("_tests"):
                    return self._send(200, json.loads((DATA / job["_tests"]).read_text()))
                allt = json.loads((DATA / "tests-all.json").read_text())["results"]
                limit, offset = int(q.get("limit", 20)), int(q.get("offset", 0))
                nxt = (f"http://127.0.0.1:{stub.port}/api/v0.2/jobs/{m.group(1)}/tests/?limit={limit}"
                       f"&offset={offset + limit}") if offset + limit < len(allt) else None
                page = {"count": len(allt), "next": nxt, "previous": None, "results": allt[offset:offset + limit]}
                return self._send(200, page)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(("POST", self.path, self.headers.get("Authorization")))
                stub.submitted.append(body["definition"])
                jid = 100 + len(stub.submitted)
                stub.jobs[jid] = {"id": jid, "state": "Submitted", "health": "Unknown", "actual_device": None,
                                  "failure_comment": None}
                self._send(201, {"message": "job(s) successfully submitted", "job_ids": [jid]})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub():
    s = _StubLava()
    yield s
    s.close()


def test_pagination_follows_next(stub):
    from bot.lab.backends.lava import LavaClient

    stub.jobs[7] = {"id": 7}
    c = LavaClient(f"http://127.0.0.1:{stub.port}", "tok12345678")
    tests = c.get_all("jobs/7/tests/", limit=7)
    assert [t["id"] for t in tests] == [t["id"] for t in json.loads((DATA / "tests-all.json").read_text())["results"]]
    assert sum(1 for r in stub.requests if "/tests/" in r[1]) == 13  # 90 cases, 7 per page
    # the captured real pages chain with "next" the same way
    p1 = json.loads((DATA / "tests-page1.json").read_text())
    assert p1["count"] == 90 and p1["next"].endswith("/jobs/2/tests/?limit=6&offset=6")
    assert all(r[2] == "Token tok12345678" for r in stub.requests)


def test_submit_poll_fetch_cancel_against_stub(stub, tmp_path, monkeypatch):
    """The whole flow with a stub server: submit (preparer process stages artifacts and POSTs),
    state mapping while queued/running, completion with captured results, a restarted backend,
    cancel.  The builds are plain image files (no Debian download)."""
    monkeypatch.setenv("REGTRIAGE_LAVA_TOKEN", "stubtoken123")
    ka, kb = tmp_path / "vmlinuz-6.1.0-56-amd64", tmp_path / "vmlinuz-6.1.0-56-rt-amd64"
    ka.write_bytes(b"kernel a")
    kb.write_bytes(b"kernel b")
    conf = {"lab": {"lava": {"url": f"http://127.0.0.1:{stub.port}/", "work_dir": str(tmp_path / "w"),
                             "no_kvm": True}}}
    b = get_backend("lava", conf)
    job = RunSpec(make_recipe("dd-seqwrite", {"bs": "1M", "count": 16}), BuildSpec(image=str(ka)),
                  BuildSpec(image=str(kb)), runs=2, warmup=1)
    h = b.submit(job)
    assert re.fullmatch(r"lava:\d{8}T\d{6}-[0-9a-f]{8}", h)
    end = time.monotonic() + 30
    while not stub.submitted and time.monotonic() < end:
        time.sleep(0.1)
    assert len(stub.submitted) == 1
    for _ in range(50):
        if (st := b.poll(h)).state == QUEUED and "101" in st.message:
            break
        time.sleep(0.1)
    assert st.state == QUEUED and st.batches_total == 4, st
    d = json.loads(stub.submitted[0])
    run_id = h.split(":", 1)[1]
    kurl = d["actions"][0]["deploy"]["images"]["kernel"]["url"]
    assert kurl == f"file://{tmp_path}/w/artifacts/{run_id}/vmlinuz-good"
    assert Path(kurl[len("file://"):]).read_bytes() == b"kernel a"
    assert "stubtoken123" not in json.dumps([p.read_text() for p in (tmp_path / "w").rglob("*.json")])
    stub.jobs[101].update(state="Running", actual_device="qemu01")
    st = b.poll(h)
    assert st.state == RUNNING and "qemu01" in st.message
    # a restarted regtriage: a new backend object, same config, resumes with the handle alone
    fresh = backend_for_handle(h, conf)
    assert fresh is not b and fresh.poll(h).state == RUNNING
    stub.jobs[101].update(state="Finished", health="Complete")
    st = fresh.poll(h)
    assert st.state == DONE, st
    s = fresh.fetch_samples(h)
    assert isinstance(s, Samples) and s.order == ["good", "bad", "good", "bad"] and s.metric == "dd.write_MBps"
    assert len(s["good"]) == 2 and len(s["bad"]) == 2 and s["bad"][1] == 489.7
    assert s.warmups["bad"][1] == 231.213
    assert not (tmp_path / "w" / "artifacts" / run_id).exists()  # staged files removed when finished
    n = len(stub.requests)
    assert b.poll(h).state == DONE and len(stub.requests) == n  # finished: the server is not asked again
    desc = b.describe(h)
    json.dumps(desc)
    assert desc["jobs"][0]["url"].endswith("/scheduler/job/101")

    # cancel a queued run
    h2 = b.submit(job)
    end = time.monotonic() + 30
    while len(stub.submitted) < 2 and time.monotonic() < end:
        time.sleep(0.1)
    _wait(lambda: json.loads((Path(b.describe(h2)["run_dir"]) / "state.json").read_text()).get("submitted"), 10)
    st = b.cancel(h2, wait_s=5)
    assert st.state == FAILED and st.cancelled and "cancelled by request" in st.message, st
    assert ("GET", "/api/v0.2/jobs/102/cancel/", "Token stubtoken123") in stub.requests
    with pytest.raises(LabError, match="failed"):
        b.fetch_samples(h2)

    # an Incomplete job fails the run with LAVA's reason
    h3 = b.submit(job)
    _wait(lambda: len(stub.submitted) >= 3, 30)
    _wait(lambda: json.loads((Path(b.describe(h3)["run_dir"]) / "state.json").read_text()).get("submitted"), 10)
    inc = json.loads((DATA / "job-incomplete.json").read_text())
    stub.jobs[103].update(state="Finished", health="Incomplete", failure_comment=inc["failure_comment"],
                          _tests="tests-incomplete.json")
    st = b.poll(h3)
    assert st.state == FAILED and not st.cancelled and "Incomplete" in st.message, st
    assert "does not exist or is not readable" in st.message


def test_preparer_failure_is_reported(stub, tmp_path, monkeypatch):
    monkeypatch.setenv("REGTRIAGE_LAVA_TOKEN", "stubtoken123")
    b = get_backend("lava", {"lab": {"lava": {"url": f"http://127.0.0.1:{stub.port}/",
                                              "work_dir": str(tmp_path / "w")}}})
    job = RunSpec(make_recipe("dd-seqwrite"), BuildSpec(image=str(tmp_path / "missing")),
                  BuildSpec(image=str(tmp_path / "missing2")), runs=1)
    h = b.submit(job)
    st = b.wait(h, timeout=30, interval=0.1)
    assert st.state == FAILED and "kernel image not found" in st.message, st
    assert not stub.submitted


def _wait(pred, timeout: float, interval: float = 0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    v = pred()
    assert v, "condition not reached"
    return v


# ============================================================================ REAL LAVA
@pytest.fixture(scope="module")
def lava_lab(tmp_path_factory):
    if not REAL:
        pytest.skip("real LAVA test: set REGTRIAGE_LAVA=1 (tests/run-lava-tests.sh); it installs lava-server + "
                    "lava-dispatcher if missing and takes minutes")
    if os.geteuid() != 0:
        pytest.skip("real LAVA test needs root (package install, device dictionary, lava-worker)")
    from tests.lava_server import LavaServer, LavaSetupError, pg_ready

    if not pg_ready():
        pytest.skip("PostgreSQL is not answering on 127.0.0.1:5432")
    lab = LavaServer()  # its own /tmp/regtriage-lava-* (lavaserver must reach the scheduler log there)
    try:
        lab.start()
    except LavaSetupError as exc:
        pytest.fail(f"could not start LAVA: {exc}")
    print(f"\nLAVA {getattr(lab, 'version', '?')} at {lab.url} (logs in {lab.base}): {lab.timings}")
    yield lab
    lab.stop()
    assert not lab.alive(), f"stray LAVA processes: {lab.alive()}"


@pytest.fixture(scope="module")
def real_kernels():
    from tests.test_qemu_backend import _pick_kernel_pair
    from bot.lab import builds

    good_pkg, bad_pkg = _pick_kernel_pair()
    good = builds.debian_kernel(good_pkg, BUILD_CACHE)
    bad = builds.debian_kernel(bad_pkg, BUILD_CACHE)
    return {"good": good_pkg, "bad": bad_pkg, "good_image": good.kernel, "bad_image": bad.kernel}


@pytest.mark.lava
@pytest.mark.slow
def test_real_lava(lava_lab, real_kernels, tmp_path, monkeypatch):
    monkeypatch.setenv("REGTRIAGE_LAVA_TOKEN", lava_lab.token)
    work = tmp_path / "lava-work"
    conf = {"lab": {"lava": {"url": lava_lab.url, "work_dir": str(work), "build_cache": str(BUILD_CACHE),
                             "no_kvm": True, "cancel_wait_s": 120}}}
    b = get_backend("lava", conf)
    os.chmod(tmp_path, 0o755)
    rel = {k: real_kernels[f"{k}_image"].rsplit("vmlinuz-", 1)[1] for k in ("good", "bad")}
    timings = {}

    # 1. a real A/B run: 2 boots per build, 2 samples + 1 warm-up per boot, ABAB, one LAVA job
    t0 = time.monotonic()
    job = RunSpec(make_recipe("dd-seqwrite", {"bs": "1M", "count": 16}), BuildSpec(debian=real_kernels["good"]),
                  BuildSpec(debian=real_kernels["bad"]), runs=4, samples_per_batch=2, warmup=1, order="abab",
                  timeouts=Timeouts(boot_s=180, batch_s=300, total_s=1800), label="lava-real")
    h = b.submit(job)
    st = b.wait(h, timeout=900, interval=2)
    timings["ab_job_s"] = round(time.monotonic() - t0, 1)
    desc = b.describe(h)
    assert st.state == DONE, (st, Path(desc["log_path"]).read_text()[-3000:])
    s = b.fetch_samples(h)
    assert s.order == ["good", "bad", "good", "bad"] and s.metric == "dd.write_MBps" and s.higher_is_better
    assert len(s["good"]) == 4 and len(s["bad"]) == 4 and all(v > 0 for v in s["good"] + s["bad"])
    assert len(s.warmups["good"]) == 2 and len(s.warmups["bad"]) == 2
    assert [bb["kernel_release"] for bb in desc["batches"]] == [rel["good"], rel["bad"], rel["good"], rel["bad"]]
    log = Path(s.log_path).read_text()
    assert re.findall(r"^REGTRIAGE-START .*kernel=(\S+)", log, re.M) == [rel["good"], rel["bad"]] * 2
    assert len(desc["jobs"]) == 1 and desc["jobs"][0]["lava_health"] == "Complete"
    jid = desc["jobs"][0]["id"]
    # the measurements as LAVA stores them (decimal strings) are exactly our samples
    stored = [float(t["measurement"]) for t in b.client.tests(jid) if re.fullmatch(r"dd\.write_MBps-\d+", t["name"])]
    assert sorted(stored) == sorted(s["good"] + s["bad"])
    j = desc["jobs"][0]
    print(f"\nreal LAVA A/B ({timings['ab_job_s']}s, job {jid} on {j['device']}, {j['start_time']} -> {j['end_time']})"
          f"\n  good {real_kernels['good']}: {s['good']} (warm-ups {s.warmups['good']})"
          f"\n  bad  {real_kernels['bad']}: {s['bad']} (warm-ups {s.warmups['bad']})")
    from bot.lab.stats import judge

    jr = judge(s["good"], s["bad"], higher_is_better=True)
    print(f"  judge: {jr.verdict} {jr.change_percent:+.2f}%")

    # 2. restart resume: submit, forget the backend object, a new one polls the same LAVA job to the end
    t0 = time.monotonic()
    job2 = RunSpec(make_recipe("syscall-getpid", {"iterations": 20000}), BuildSpec(debian=real_kernels["good"]),
                   BuildSpec(debian=real_kernels["bad"]), runs=1, warmup=0,
                   timeouts=Timeouts(boot_s=180, batch_s=300, total_s=1800))
    h2 = b.submit(job2)
    _wait(lambda: b.poll(h2).state == RUNNING or b.poll(h2).finished, 300, 1)
    b = None  # the first backend object is gone; only the handle and the config remain
    fresh = backend_for_handle(h2, conf)
    st = fresh.wait(h2, timeout=600, interval=2)
    timings["resume_job_s"] = round(time.monotonic() - t0, 1)
    assert st.state == DONE, st
    s2 = fresh.fetch_samples(h2)
    assert len(s2["good"]) == 1 and len(s2["bad"]) == 1 and s2.metric == "syscall.calls_per_sec"
    print(f"  resumed run {h2}: good {s2['good']} bad {s2['bad']} ({timings['resume_job_s']}s)")

    # 3. cancel a running job: LAVA reports it Canceled, the run is failed + cancelled, the device is free
    t0 = time.monotonic()
    job3 = RunSpec(make_recipe("syscall-getpid", {"iterations": 2_000_000}), BuildSpec(debian=real_kernels["good"]),
                   BuildSpec(debian=real_kernels["bad"]), runs=6, warmup=1,
                   timeouts=Timeouts(boot_s=180, batch_s=600, total_s=3600))
    h3 = fresh.submit(job3)
    _wait(lambda: fresh.poll(h3).state == RUNNING, 300, 1)
    st = fresh.cancel(h3)
    timings["cancel_s"] = round(time.monotonic() - t0, 1)
    assert st.state == FAILED and st.cancelled, st
    d3 = fresh.describe(h3)
    assert d3["jobs"][0]["lava_state"] == "Finished" and d3["jobs"][0]["lava_health"] == "Canceled"
    with pytest.raises(LabError):
        fresh.fetch_samples(h3)
    print(f"  cancelled {h3} (LAVA job {d3['jobs'][0]['id']}) in {timings['cancel_s']}s")
    print(f"  timings: {timings}, lab: {lava_lab.timings}")
