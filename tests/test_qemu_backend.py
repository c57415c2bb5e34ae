"""The lab backend interface and the qemu backend, for real: two real Debian kernel builds
(downloaded with apt-get, cached under ~/.cache/regtriage-test) booted under QEMU with the busybox
initramfs, real samples, ABAB order, warm-ups, cancel, dead worker, boot timeout.

Prerequisites (tests/system-packages.txt): qemu-system-x86, busybox-static, cpio.  The session
fixture installs them when missing and running as root, and skips with the reason otherwise.
The first run downloads two ~70 MB kernel packages; later runs use the cache."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bot.lab import builds, initramfs
from bot.lab.backends import DONE, FAILED, LabError, RunSpec, Samples, Timeouts, backend_for_handle, get_backend
from bot.lab.backends.qemu import QemuBackend, parse_console, qemu_marker
from bot.lab.builds import BuildError, BuildSpec
from bot.lab.recipes import make_recipe

CACHE = Path(os.environ.get("REGTRIAGE_TEST_CACHE", Path.home() / ".cache" / "regtriage-test"))
BUILD_CACHE = CACHE / "builds"
PACKAGES = [p.strip() for p in (Path(__file__).parent / "system-packages.txt").read_text().split() if p.strip()]
NEEDED = {"qemu-system-x86": "qemu-system-x86_64", "busybox-static": None, "cpio": "cpio"}


# ============================================================================ pure: interface
def test_schedule_orders():
    r = make_recipe("syscall-getpid", {"iterations": 1000})
    g, b = BuildSpec(image="/k/good"), BuildSpec(image="/k/bad")
    spec = RunSpec(r, g, b, runs=5, samples_per_batch=2)
    assert spec.schedule() == [("good", 2), ("bad", 2), ("good", 2), ("bad", 2), ("good", 1), ("bad", 1)]
    spec.order = "abba"
    assert [x[0] for x in spec.schedule()] == ["good", "bad", "bad", "good", "good", "bad"]
    spec.order = "blocked"
    assert [x[0] for x in spec.schedule()] == ["good"] * 3 + ["bad"] * 3
    assert sum(n for lab, n in spec.schedule() if lab == "bad") == 5


def test_runspec_roundtrip_and_validation():
    r = make_recipe("dd-seqwrite", {"bs": "64k", "count": 16})
    spec = RunSpec(r, BuildSpec.parse("debian:linux-image-6.1.0-47-amd64-unsigned"), BuildSpec.parse("/boot/vmlinuz-x"),
                   runs=3, warmup=2, order="abba", timeouts=Timeouts(boot_s=30), label="regzbot-12")
    d = json.loads(json.dumps(spec.to_dict()))
    again = RunSpec.from_dict(d)
    assert again.to_dict() == spec.to_dict() and again.schedule() == spec.schedule()
    for bad in ({"runs": 0}, {"runs": "3"}, {"warmup": 21}, {"order": "random"}, {"label": "a b"},
                {"samples_per_batch": 0}):
        with pytest.raises(LabError):
            RunSpec.from_dict({**d, **bad})
    with pytest.raises(LabError):
        RunSpec.from_dict({**d, "builds": {"good": d["builds"]["good"]}})
    with pytest.raises(LabError):
        RunSpec.from_dict({**d, "timeouts": {"boot_s": 0}})
    with pytest.raises(LabError, match="invalid run spec"):
        RunSpec.from_dict({**d, "recipe": {"name": "dd-seqwrite", "params": {"bs": "1M;reboot"}}})
    with pytest.raises(LabError, match="unknown run spec keys"):
        RunSpec.from_dict({**d, "command": "rm -rf /"})


def test_build_specs():
    assert BuildSpec.parse("debian:linux-image-6.12.107+deb12-rt-amd64-unsigned").kind == "debian"
    assert BuildSpec.parse("image:/boot/vmlinuz").image == "/boot/vmlinuz"
    t = BuildSpec.parse("tree:/src/linux@v6.1", kconfig="tinyconfig", fragments=["CONFIG_64BIT=y"])
    assert (t.kind, t.tree, t.ref, t.kconfig) == ("tree", "/src/linux", "v6.1", "tinyconfig")
    for bad in ("debian:linux-image-6.1.0-47-amd64;reboot", "debian:bash", "debian:-oAPT::x=1",
                "debian:linux-image-6.1.0-47-amd64-unsigned ", "debian:linux-image-../../etc", "image:rel/path",
                "ftp://x", "tree:/src/linux@--upload-pack=x"):
        with pytest.raises(BuildError):
            BuildSpec.parse(bad)
    with pytest.raises(BuildError):
        BuildSpec(image="/a", debian="linux-image-6.1.0-47-amd64-unsigned")
    for kw in ({"kconfig": "defconfig; reboot"}, {"kconfig": "rel/path.config"}, {"fragments": ["CONFIG_X=$(reboot)"]},
               {"fragments": "CONFIG_X=y"}, {"fragments": ["../../etc/x.config"]}, {"toolchain": "sh -c x"}):
        with pytest.raises(BuildError):
            BuildSpec(tree="/src", ref="v1", **kw)
    # jobs stored before TuxMake (with a build command) still load; the command is ignored
    assert BuildSpec.from_dict({"tree": "/src", "ref": "v1", "build_command": ["make"]}).kconfig == "defconfig"
    with pytest.raises(BuildError):
        BuildSpec.from_dict({"image": "/a", "shell": "x"})


def test_handles_are_validated(tmp_path):
    b = QemuBackend.from_config({"lab": {"qemu": {"work_dir": str(tmp_path)}}})
    for h in ("qemu:../../etc", "qemu:20250101T000000-zzzzzzzz", "ssh:20250101T000000-00000000", None, 5,
              "qemu:20250101T000000-00000000"):
        with pytest.raises(LabError):
            b.poll(h)
    with pytest.raises(LabError, match="unknown lab backend"):
        get_backend("beaker")
    with pytest.raises(LabError):
        QemuBackend.from_config({"qemu": {"work_dir": str(tmp_path), "accel": "xen"}})
    with pytest.raises(LabError, match="unknown keys"):
        QemuBackend.from_config({"qemu": {"work_dir": str(tmp_path), "extra_args": "-hda /dev/sda"}})
    ok, why = b.supports(make_recipe("fio"))
    assert not ok and "busybox" in why
    ok, why = b.supports(make_recipe("dd-seqwrite", {"bs": "1M", "count": 1024}))
    assert ok  # 1 GiB scratch + 256 MiB fits the default 4 GiB cap
    small = QemuBackend.from_config({"qemu": {"work_dir": str(tmp_path), "max_memory_mib": 512}})
    ok, why = small.supports(make_recipe("dd-seqwrite", {"bs": "1M", "count": 1024}))
    assert not ok and "max_memory_mib" in why


def test_parse_console():
    text = ("[    0.0] boot noise\r\nREGTRIAGE-START recipe=x kernel=6.1.0-47-amd64 samples=2 warmup=1\r\n"
            "WARMUP m=1.5\nBENCH m=2.25\nBENCH m=3\nBENCH m=-1\nBENCH m=nan\nBENCH m=1e9\nxBENCH m=4\n"
            "REGTRIAGE-END\nRESULT ok\n")
    p = parse_console(text)
    assert p["started"] and p["ended"] and p["result"] == "ok" and p["kernel"] == "6.1.0-47-amd64"
    assert p["bench"] == [2.25, 3.0] and p["warmup"] == [1.5] and p["metrics"] == {"m"}
    assert parse_console("BENCH m=1\n")["bench"] == []  # before the start marker: ignored
    p = parse_console("REGTRIAGE-START kernel=k\nRESULT fail dd write failed\n")
    assert p["result"] == "fail" and p["reason"] == "dd write failed"


# ============================================================================ real: prerequisites
def _missing_tools() -> list[str]:
    missing = []
    for pkg, binary in NEEDED.items():
        if pkg == "busybox-static":
            if initramfs.busybox_problem() is not None:
                missing.append(pkg)
        elif shutil.which(binary) is None:
            missing.append(pkg)
    return missing


@pytest.fixture(scope="session")
def lab_tools():
    assert set(NEEDED) <= set(PACKAGES), "tests/system-packages.txt must list the lab's Debian packages"
    missing = _missing_tools()
    if missing:
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            pytest.skip(f"missing Debian packages {missing} and not root with apt-get to install them "
                        f"(apt-get install -y {' '.join(missing)})")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True, env=env, timeout=1200)
        assert not _missing_tools()
    return True


def _pick_kernel_pair() -> tuple[str, str]:
    """A generic and a PREEMPT_RT 6.1 build of the same ABI, chosen from what apt offers;
    prefers a pair already in the test cache, else the newest ABI."""
    names = builds.available_debian_kernels(r"-unsigned$")
    if not names and os.geteuid() == 0:
        subprocess.run(["apt-get", "update", "-qq"], check=True, timeout=600)
        names = builds.available_debian_kernels(r"-unsigned$")
    pairs = []
    for n in names:
        m = re.fullmatch(r"linux-image-(6\.1\.0-(\d+))-amd64-unsigned", n)
        if m and f"linux-image-{m.group(1)}-rt-amd64-unsigned" in names:
            pairs.append((int(m.group(2)), n, f"linux-image-{m.group(1)}-rt-amd64-unsigned"))
    if not pairs:
        pytest.skip("apt offers no linux-image-6.1.0-N-amd64-unsigned + -rt- pair (apt-get update?)")
    cached = [p for p in pairs if all((BUILD_CACHE / "debian" / x / ".regtriage.json").is_file() for x in p[1:])]
    _, a, b = max(cached or pairs)
    return a, b


@pytest.fixture(scope="session")
def kernels(lab_tools):
    if shutil.which("apt-get") is None:
        pytest.skip("apt-get not available: cannot download Debian kernel builds")
    good_pkg, bad_pkg = _pick_kernel_pair()
    t0 = time.monotonic()
    good = builds.debian_kernel(good_pkg, BUILD_CACHE)
    bad = builds.debian_kernel(bad_pkg, BUILD_CACHE)
    print(f"\nkernels: {good_pkg} {good.version}, {bad_pkg} {bad.version} ({time.monotonic() - t0:.1f}s)")
    return {"good": good_pkg, "bad": bad_pkg, "good_image": good.kernel, "bad_image": bad.kernel}


@pytest.fixture(scope="session")
def lab(tmp_path_factory, lab_tools):
    work = tmp_path_factory.mktemp("qemu-lab")
    return QemuBackend.from_config({"lab": {"qemu": {"work_dir": str(work), "build_cache": str(BUILD_CACHE),
                                                     "kvm_probe_timeout_s": 8}}})


def _qemu_pids(run_dir: Path) -> list[int]:
    marker = qemu_marker(run_dir)
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker in (d / "cmdline").read_bytes().decode(errors="replace"):
                    out.append(int(d.name))
            except OSError:
                pass
    return out


def _wait_until(pred, timeout: float, interval: float = 0.2):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    return pred()


def _run_dir(lab: QemuBackend, handle: str) -> Path:
    return Path(lab.describe(handle)["run_dir"])


def _logs(desc: dict) -> str:
    """The tails of a run's logs, for assertion messages (a worker that died early has no run.log)."""
    run_dir = Path(desc["run_dir"])
    out = [f"run dir {run_dir} exists: {run_dir.is_dir()}"]
    for name in ("worker.log", "run.log", "state.json"):
        try:
            out.append(f"--- {name}\n" + (run_dir / name).read_text(errors="replace")[-3000:])
        except OSError as exc:
            out.append(f"--- {name}: {exc}")
    return "\n".join(out)


# ============================================================================ real: tests
def test_initramfs_is_valid_newc_for_gnu_cpio(tmp_path, lab_tools):
    spec = make_recipe("syscall-getpid", {"iterations": 1000})
    path = initramfs.initramfs_for(spec, samples=2, warmup=1, scratch_mib=64, cache_dir=tmp_path)
    again = initramfs.initramfs_for(spec, samples=2, warmup=1, scratch_mib=64, cache_dir=tmp_path)
    assert again == path  # cached per recipe + params + counts
    other = initramfs.initramfs_for(spec, samples=3, warmup=1, scratch_mib=64, cache_dir=tmp_path)
    assert other != path
    raw = gzip.decompress(path.read_bytes())
    listing = subprocess.run(["cpio", "-itv"], input=raw, capture_output=True, check=True).stdout.decode()
    assert re.search(r"^crw-+\s.*5,\s*1\s.*dev/console$", listing, re.M)
    assert re.search(r"^-rwxr-xr-x .* init$", listing, re.M) and "bin/dd -> busybox" in listing
    out = tmp_path / "x"
    out.mkdir()
    subprocess.run(["cpio", "-id", "--quiet", "init", "bin/busybox"], input=raw, cwd=out, check=True)
    init = (out / "init").read_text()
    assert "bs=1 count=1000" in init and "RESULT ok" in init and "poweroff -f" in init
    assert (out / "bin/busybox").read_bytes() == Path("/bin/busybox").read_bytes()
    # the rendered init is valid shell syntax for busybox ash
    subprocess.run(["/bin/busybox", "sh", "-n", str(out / "init")], check=True)


@pytest.mark.slow
def test_real_ab_run_two_debian_kernels(lab, kernels):
    """Boot both real kernels under TCG (auto: KVM probe first), ABAB, 2 boots x 2 samples each,
    1 warm-up per boot; samples parse, are positive, counts match, warm-ups are discarded."""
    t0 = time.monotonic()
    job = RunSpec(make_recipe("syscall-getpid", {"iterations": 100_000}),
                  BuildSpec(debian=kernels["good"]), BuildSpec(debian=kernels["bad"]),
                  runs=4, samples_per_batch=2, warmup=1, order="abab", timeouts=Timeouts(boot_s=90, batch_s=180))
    handle = lab.submit(job)
    assert handle.startswith("qemu:")
    st = lab.poll(handle)
    assert st.state in ("queued", "running") and st.batches_total == 4
    st = lab.wait(handle, timeout=240)
    elapsed = time.monotonic() - t0
    desc = lab.describe(handle)
    assert st.state == DONE, (st, _logs(desc))
    json.dumps(desc)  # persistable

    samples = lab.fetch_samples(handle)
    assert isinstance(samples, Samples) and set(samples) == {"good", "bad"}
    assert len(samples["good"]) == 4 and len(samples["bad"]) == 4
    assert all(isinstance(v, float) and v > 0 for v in samples["good"] + samples["bad"])
    assert samples.metric == "syscall.calls_per_sec" and samples.higher_is_better
    assert samples.order == ["good", "bad", "good", "bad"]

    log = Path(samples.log_path).read_text()
    # ABAB, as the guests themselves report it: the kernel release of each boot, in log order
    releases = re.findall(r"^REGTRIAGE-START .*kernel=(\S+)", log, re.M)
    rel_good = kernels["good_image"].rsplit("vmlinuz-", 1)[1]
    rel_bad = kernels["bad_image"].rsplit("vmlinuz-", 1)[1]
    assert releases == [rel_good, rel_bad, rel_good, rel_bad]
    # warm-ups ran (one per boot) and are not among the samples
    warm = [float(v) for v in re.findall(r"^WARMUP syscall\.calls_per_sec=([0-9.]+)", log, re.M)]
    bench = [float(v) for v in re.findall(r"^BENCH syscall\.calls_per_sec=([0-9.]+)", log, re.M)]
    assert len(warm) == 4 and len(bench) == 8
    assert sorted(bench) == sorted(samples["good"] + samples["bad"])
    assert samples.warmups["good"] + samples.warmups["bad"] and sorted(warm) == sorted(
        samples.warmups["good"] + samples.warmups["bad"])
    assert log.count("RESULT ok") == 4
    assert not _qemu_pids(Path(desc["run_dir"]))

    # accel auto: the outcome of the KVM probe is remembered
    accel = json.loads((lab.work_dir / "accel.json").read_text())
    assert isinstance(accel["kvm_works"], bool)
    assert desc["accel"] == ("kvm" if accel["kvm_works"] else "tcg")

    # a restarted regtriage (new backend object, same work dir) finds the finished run on disk
    fresh = backend_for_handle(handle, {"lab": {"qemu": {"work_dir": str(lab.work_dir)}}})
    assert fresh.poll(handle).state == DONE
    assert dict(fresh.fetch_samples(handle)) == dict(samples)
    assert handle in fresh.list_runs()
    assert fresh.handle_state(handle)["status"]["state"] == DONE

    from bot.lab.stats import judge

    j = judge(samples["good"], samples["bad"], higher_is_better=samples.higher_is_better)
    print(f"\nreal A/B ({elapsed:.0f}s, accel {desc['accel']}): good {kernels['good']} {samples['good']}\n"
          f"  bad {kernels['bad']} {samples['bad']}\n  warm-ups {samples.warmups}\n"
          f"  judge: {j.verdict} {j.change_percent:+.2f}% {j.reasons}")


@pytest.mark.slow
@pytest.mark.parametrize("recipe,params,metric", [
    ("dd-seqwrite", {"bs": "1M", "count": 32}, "dd.write_MBps"),
    ("dd-seqread", {"bs": "64k", "count": 512}, "dd.read_MBps"),
])
def test_real_dd_recipes(lab, kernels, recipe, params, metric):
    job = RunSpec(make_recipe(recipe, params), BuildSpec(image=kernels["good_image"]),
                  BuildSpec(image=kernels["bad_image"]), runs=2, samples_per_batch=2, warmup=1)
    handle = lab.submit(job)
    st = lab.wait(handle, timeout=150)
    desc = lab.describe(handle)
    assert st.state == DONE, (st, _logs(desc))
    s = lab.fetch_samples(handle)
    assert s.metric == metric and len(s["good"]) == 2 and len(s["bad"]) == 2
    assert all(v > 0 for v in s["good"] + s["bad"])
    print(f"\n{recipe}: good {s['good']} bad {s['bad']}")


@pytest.mark.slow
def test_cancel_kills_the_running_guest(lab, kernels):
    job = RunSpec(make_recipe("syscall-getpid", {"iterations": 10_000_000}), BuildSpec(image=kernels["good_image"]),
                  BuildSpec(image=kernels["bad_image"]), runs=2, warmup=0)
    handle = lab.submit(job)
    run_dir = _run_dir(lab, handle)
    assert _wait_until(lambda: "REGTRIAGE-START" in "".join(
        p.read_text(errors="replace") for p in run_dir.glob("batch-*.console")), 90), "guest never started"
    assert _qemu_pids(run_dir), "no qemu running for the run"
    worker_pid = json.loads((run_dir / "worker.json").read_text())["pid"]
    st = lab.cancel(handle)
    assert st.state == FAILED and st.cancelled and "cancel" in st.message
    assert lab.poll(handle).state == FAILED
    assert _wait_until(lambda: not _qemu_pids(run_dir), 5), "qemu survived the cancel"
    assert not Path(f"/proc/{worker_pid}").exists() or "Z" in Path(f"/proc/{worker_pid}/stat").read_text().split()[2]
    with pytest.raises(LabError, match="failed"):
        lab.fetch_samples(handle)


@pytest.mark.slow
def test_dead_worker_is_detected_and_its_guest_dies(lab, kernels):
    job = RunSpec(make_recipe("syscall-getpid", {"iterations": 10_000_000}), BuildSpec(image=kernels["good_image"]),
                  BuildSpec(image=kernels["bad_image"]), runs=2, warmup=0)
    handle = lab.submit(job)
    run_dir = _run_dir(lab, handle)
    assert _wait_until(lambda: _qemu_pids(run_dir), 30)
    worker_pid = json.loads((run_dir / "worker.json").read_text())["pid"]
    os.kill(worker_pid, signal.SIGKILL)  # only the worker: its qemu must follow (PDEATHSIG)
    st = _wait_until(lambda: (lambda s: s if s.finished else None)(lab.poll(handle)), 10)
    assert st and st.state == FAILED and "died" in st.message, st
    assert _wait_until(lambda: not _qemu_pids(run_dir), 5), "orphaned qemu"


@pytest.mark.slow
def test_garbage_kernel_fails_with_reason(lab, tmp_path):
    junk = tmp_path / "vmlinuz-garbage"
    junk.write_bytes(os.urandom(2 << 20))
    job = RunSpec(make_recipe("syscall-getpid", {"iterations": 1000}), BuildSpec(image=str(junk)),
                  BuildSpec(image=str(junk)), runs=2, warmup=0, timeouts=Timeouts(boot_s=10, batch_s=30))
    handle = lab.submit(job)
    st = lab.wait(handle, timeout=60, interval=0.3)
    assert st.state == FAILED and ("never reached init" in st.message or "boot timeout" in st.message), st
    assert "batch 1 (good) failed" in st.message
    assert not _qemu_pids(_run_dir(lab, handle))


@pytest.mark.slow
def test_boot_timeout_kills_a_slow_guest(lab, kernels):
    job = RunSpec(make_recipe("syscall-getpid", {"iterations": 1000}), BuildSpec(image=kernels["good_image"]),
                  BuildSpec(image=kernels["bad_image"]), runs=1, warmup=0, timeouts=Timeouts(boot_s=1, batch_s=30))
    handle = lab.submit(job)
    st = lab.wait(handle, timeout=60, interval=0.3)
    assert st.state == FAILED and "boot timeout: no start marker after 1s" in st.message, st
    assert not _qemu_pids(_run_dir(lab, handle))


def test_missing_image_fails_cleanly(lab, tmp_path):
    job = RunSpec(make_recipe("syscall-getpid", {"iterations": 1000}), BuildSpec(image=str(tmp_path / "nope")),
                  BuildSpec(image=str(tmp_path / "nope")), runs=1, warmup=0)
    handle = lab.submit(job)
    st = lab.wait(handle, timeout=30, interval=0.2)
    assert st.state == FAILED and "kernel image not found" in st.message


@pytest.mark.slow
def test_kvm_probe_not_blamed_for_a_broken_kernel(tmp_path, lab_tools):
    """accel=auto in a fresh work dir with a kernel that boots nowhere: the run fails, and no
    verdict about KVM is remembered (it would otherwise be wrongly cached as broken)."""
    fresh = QemuBackend.from_config({"qemu": {"work_dir": str(tmp_path / "w"), "kvm_probe_timeout_s": 3}})
    junk = tmp_path / "vmlinuz-garbage"
    junk.write_bytes(os.urandom(1 << 20))
    job = RunSpec(make_recipe("syscall-getpid", {"iterations": 1000}), BuildSpec(image=str(junk)),
                  BuildSpec(image=str(junk)), runs=1, warmup=0, timeouts=Timeouts(boot_s=5, batch_s=20))
    st = fresh.wait(fresh.submit(job), timeout=60, interval=0.3)
    assert st.state == FAILED
    if os.access("/dev/kvm", os.R_OK | os.W_OK):
        assert not (tmp_path / "w" / "accel.json").exists()


@pytest.mark.slow
def test_runs_queue_on_the_lab_lock_and_cancel_while_queued(lab, kernels):
    long = RunSpec(make_recipe("syscall-getpid", {"iterations": 10_000_000}), BuildSpec(image=kernels["good_image"]),
                   BuildSpec(image=kernels["bad_image"]), runs=2, warmup=0)
    first = lab.submit(long)
    assert _wait_until(lambda: _qemu_pids(_run_dir(lab, first)), 30)
    second = lab.submit(long)
    st = _wait_until(lambda: (lambda s: s if "waiting for another run" in s.message else None)(lab.poll(second)), 15)
    assert st and st.state == "queued", lab.poll(second)
    assert not _qemu_pids(_run_dir(lab, second))
    st2 = lab.cancel(second)
    assert st2.state == FAILED and st2.cancelled
    assert lab.poll(first).state == "running"
    lab.cancel(first)
    assert _wait_until(lambda: not _qemu_pids(_run_dir(lab, first)), 5)


def test_submit_revalidates_hand_built_recipes(tmp_path, lab_tools):
    from bot.lab.recipes import RecipeSpec

    b = QemuBackend.from_config({"lab": {"max_size": "64M", "qemu": {"work_dir": str(tmp_path)}}})
    k = BuildSpec(image="/nonexistent")
    forged = RecipeSpec("syscall-getpid", {"iterations": 10 ** 12})
    with pytest.raises(LabError, match="recipe rejected"):
        b.submit(RunSpec(forged, k, k))
    forged = RecipeSpec("dd-seqwrite", {"bs": "1M", "count": "9; reboot", "sync": "none", "direct": False})
    with pytest.raises(LabError, match="recipe rejected"):
        b.submit(RunSpec(forged, k, k))
    with pytest.raises(LabError, match="size cap"):  # 128 MiB > this lab's 64 MiB cap
        b.submit(RunSpec(make_recipe("dd-seqwrite", {"bs": "1M", "count": 128}), k, k))
    with pytest.raises(LabError, match="busybox"):
        b.submit(RunSpec(make_recipe("fio"), k, k))
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
