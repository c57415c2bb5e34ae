"""End to end, for real: a regression report we write about two real Debian kernel builds
("dd throughput dropped from A to B") goes through ingest -> triage -> tracker -> matching (a
qemu machine declared in the test config) -> a qemu rerun that boots both real kernels under
QEMU and collects real dd samples -> a verdict stored on the record and shown by
``show --json`` (``reruns``).

The kernel pair is chosen like tests/test_qemu_backend.py does (a generic and a PREEMPT_RT 6.1
build of the same ABI, cached under ~/.cache/regtriage-test); the message names their
``uname -r`` versions, and ``[lab.builds]`` maps those back to the Debian packages.  Small on
purpose: 6 samples per build in 4 guest boots (3 per boot, 1 warm-up each), ~45 s under TCG; an
undecided first look (bot.lab.stats.decide: looks at 6 and 12 per build) is extended once by 6
more per build, ~40 s more.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from bot.lab import builds
from tests.test_qemu_backend import BUILD_CACHE, _pick_kernel_pair, lab_tools  # noqa: F401 - fixture

VERDICTS = ("confirmed", "improved", "not-reproduced", "inconclusive")


@pytest.fixture
def lab_cli(cli):
    from bot.cli.main import main

    if "rerun" not in main.commands:
        from bot.cli.lab import register

        register(main)
    return cli


def _version(package: str) -> str:
    """linux-image-6.1.0-56-rt-amd64-unsigned -> 6.1.0-56-rt-amd64 (its ``uname -r``)."""
    return package.removeprefix("linux-image-").removesuffix("-unsigned")


def _message(good: str, bad: str) -> bytes:
    return f"""From: Disk Tester <disk.tester@example.org>
To: linux-kernel@vger.kernel.org
Subject: [REGRESSION] -30% dd write throughput from {good} to {bad}
Date: Mon, 01 Jul 2024 10:00:00 +0000
Message-ID: <dd-e2e-{bad}@example.org>

Hi,

dd throughput dropped from {good} to {bad} on my x86_64 box: writes of
small blocks went from about 130 MB/s to about 90 MB/s (-30%).

Reproducer (run it a few times, the first run warms up):

  dd if=/dev/zero of=/mnt/scratch/ddtest bs=512 count=100000

{good} is good, {bad} is bad.

#regzbot introduced: {good}..{bad}

Thanks,
Disk Tester
""".encode()


def _config(tmp_path: Path) -> str:
    return f"""
[trust]
trusted_senders = ["disk.tester@example.org"]  # the reporter's #regzbot introduced: sets the range

[lab]
runs = 6
samples_per_batch = 3
warmup = 1
max_runs = 12
extend_step = 6
alpha = 0.01

[lab.timeouts]
boot_s = 120
batch_s = 300
total_s = 900

[lab.qemu]
build_cache = "{BUILD_CACHE}"
kvm_probe_timeout_s = 8

[lab.builds]
"6.1.0-*-amd64" = "debian:linux-image-6.1.0-{{1}}-amd64-unsigned"
"6.1.0-*-rt-amd64" = "debian:linux-image-6.1.0-{{1}}-rt-amd64-unsigned"

[[lab.machines]]
name = "qemu-tcg"
arch = "x86_64"
cpu = "QEMU TCG (emulated)"
cores = 1
memory = "512M"
storage = ["ram"]
filesystems = ["tmpfs"]
backend = "qemu"
tags = ["emulated", "ci"]
[lab.machines.settings]
work_dir = "{tmp_path / 'qemu-lab'}"

[[lab.machines]]
name = "arm-box"
arch = "aarch64"
cpu = "Ampere Altra Q80-30"
cores = 80
memory = "256G"
storage = ["nvme"]
filesystems = ["ext4", "xfs"]
backend = "qemu"
"""


@pytest.mark.slow
def test_report_to_verdict_with_two_real_kernels(lab_cli, tmp_path, lab_tools):  # noqa: F811
    cli = lab_cli
    good_pkg, bad_pkg = _pick_kernel_pair()
    for pkg in (good_pkg, bad_pkg):  # download once (cached); the run itself then only boots
        builds.debian_kernel(pkg, BUILD_CACHE)
    good, bad = _version(good_pkg), _version(bad_pkg)
    t0 = time.monotonic()
    (tmp_path / "regtriage.toml").write_text(_config(tmp_path))  # ./regtriage.toml (cwd is tmp_path)
    eml = tmp_path / "report.eml"
    eml.write_bytes(_message(good, bad))

    # ingest -> triage -> tracker
    r = cli("ingest", eml, "--json")
    assert r.exit_code == 0, r.output
    recs = json.loads(cli("regressions", "--json").output)
    assert len(recs) == 1
    rec = recs[0]
    rid = rec["id"]
    assert rec["range"] == {"good": good, "bad": bad}, rec["range"]
    assert rec["config"]["command"].startswith("dd if=/dev/zero")

    # matching: the qemu machine fits, the arm64 box is excluded with the reason
    machines = json.loads(cli("lab", "list", "--json").output)
    assert [m["name"] for m in machines] == ["qemu-tcg", "arm-box"]
    m = json.loads(cli("lab", "match", str(rid), "--json").output)["match"]
    assert m["best"] == "qemu-tcg"
    arm = next(c for c in m["candidates"] if c["machine"] == "arm-box")
    assert not arm["eligible"] and any("aarch64" in x["text"] and x["excludes"] for x in arm["reasons"])

    # the rerun, for real: two real kernels booted under QEMU, ABAB, real dd samples
    r = cli("rerun", str(rid), "--wait", "--timeout", "600", "--json")
    assert r.exit_code == 0, r.output
    job = json.loads(r.output)
    assert job["state"] == "done", (job["state"], job["message"], job.get("events"))
    assert job["verdict"] in VERDICTS and job["attempts"] == 1

    # the verdict on the record, in show --json
    e = json.loads(cli("show", str(rid), "--json").output)
    assert e["status"] == job["verdict"]
    assert len(e["reruns"]) == 1
    run = e["reruns"][0]
    assert run["machine"] == "qemu-tcg" and run["recipe"] == "dd-seqwrite" and run["metric"] == "dd.write_MBps"
    assert run["higher_is_better"] is True and run["verdict"] == job["verdict"]
    assert run["builds"] == {"good": f"debian:{good_pkg}", "bad": f"debian:{bad_pkg}"}
    n = run["n_good"]
    assert n in (6, 12) and run["n_bad"] == n and len(run["samples"]["good"]) == n
    assert run["rounds"] == n // 6 and job["rounds"] == n // 6
    if run["verdict"] == "inconclusive" and n == 6:  # stopped early: futility or the noise gate (TCG)
        assert not job["result"]["reasons"][0].startswith("continue"), job["result"]["reasons"]
    assert all(isinstance(v, float) and v > 0 for v in run["samples"]["good"] + run["samples"]["bad"])
    # the default order is abba: each pair of batches counterbalanced (good bad, bad good, ...)
    assert run["order"] == (["good", "bad", "bad", "good"] * n)[:len(run["order"])]
    assert run["order"].count("good") == run["order"].count("bad")
    assert run["recipe_params"] == {"bs": "512", "count": 100000, "sync": "none", "direct": False}
    assert len(run["ci"]) == 2 and run["ci"][0] <= run["change_percent"] <= run["ci"][1]
    last = e["history"][-1]
    assert last["actor"] == "regtriage-lab" and last["new"] == job["verdict"]
    assert f"{run['change_percent']:+.2f}%" in last["note"] and "CI" in last["note"]

    # the raw log: both real kernels booted, counterbalanced (abba), warm-ups discarded
    assert len(run["logs"]) == n // 6
    log = "".join(Path(p).read_text() for p in run["logs"])
    releases = re.findall(r"^REGTRIAGE-START .*kernel=(\S+)", log, re.M)
    assert releases == [good, bad, bad, good] * (n // 6)
    bench = sorted(float(v) for v in re.findall(r"^BENCH dd\.write_MBps=([0-9.]+)", log, re.M))
    assert bench == sorted(run["samples"]["good"] + run["samples"]["bad"])
    assert len(re.findall(r"^WARMUP ", log, re.M)) == 4 * (n // 6)

    # nothing left running; the job list shows it done
    assert json.loads(cli("jobs", "--json").output) == []
    assert [j["state"] for j in json.loads(cli("jobs", "--all", "--json").output)] == ["done"]
    print(f"\ne2e ({time.monotonic() - t0:.0f}s): {good} vs {bad} (claimed {e['change_percent']}%): "
          f"{run['verdict']} {run['change_percent']:+.2f}% CI {run['ci']}, p={run['p_value']:.3g}, n={n}/{n}, "
          f"rounds {run['rounds']}\n  good {run['samples']['good']}\n  bad  {run['samples']['bad']}\n  {last['note']}")
