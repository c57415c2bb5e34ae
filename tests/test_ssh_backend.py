"""The ssh lab backend against a real OpenSSH server on 127.0.0.1 (Debian ``openssh-server``),
(the recipes' output parsers are tested per recipe: tests/test_recipe_*.py).

Kernel switching is simulated (TEST SHIM): the test host's PATH (sshd ``SetEnv``) starts with a
directory holding a ``uname`` script that prints the content of a "running release" file for
``uname -r``; the configured ``boot_switch`` command writes the wanted release into that file.
Everything else (ssh, host key checks, dd/fio runs, process groups, kills) is real."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from bot.lab.backends import DONE, FAILED, LabError, RunSpec, get_backend
from bot.lab.builds import BuildSpec
from bot.lab.recipes import make_recipe

DATA = Path(__file__).parent / "data" / "lab"
SSHD = "/usr/sbin/sshd"
GOOD_PKG, BAD_PKG = "linux-image-6.1.0-40-amd64", "linux-image-6.1.0-41-amd64"
GOOD_REL, BAD_REL = "6.1.0-40-amd64", "6.1.0-41-amd64"


# =========================================================================== config (pure)
def test_expected_release_and_host_config():
    from bot.lab.backends.ssh import HostConfig, expected_release, remote_step

    assert expected_release(BuildSpec(debian="linux-image-6.1.0-47-amd64-unsigned")) == "6.1.0-47-amd64"
    assert expected_release(BuildSpec(image="/srv/k/vmlinuz-6.2.0-rc1")) == "6.2.0-rc1"
    with pytest.raises(LabError, match="releases"):
        expected_release(BuildSpec(image="/srv/k/bzImage"))
    assert expected_release(BuildSpec(image="/srv/k/bzImage"), {"image:/srv/k/bzImage": "6.3.0"}) == "6.3.0"
    base = dict(host="127.0.0.1", user="root", known_hosts="/tmp/kh", key_file="/tmp/k")
    h = HostConfig(**base, boot_switch="sudo /usr/local/sbin/boot {release}")
    assert h.boot_command("good", "6.1.0-47-amd64") == "sudo /usr/local/sbin/boot 6.1.0-47-amd64"
    with pytest.raises(LabError, match="release"):
        h.boot_command("good", "6.1; rm -rf /")
    assert HostConfig(**base, kernels={"bad": "reboot-into-bad"}).boot_command("bad", "6.1.0-1-amd64") == "reboot-into-bad"
    for bad in (dict(boot_switch="boot {kernel}"), dict(boot_switch="boot"), dict(host="a;b"), dict(user="r t"),
                dict(known_hosts="kh"), dict(scratch_dir="/tmp/x y"), dict(kernels={"$(x)": "y"})):
        with pytest.raises(LabError):
            HostConfig(**{**base, **bad})
    cmd = remote_step("/var/tmp/regtriage-x", ["dd", "if=/dev/zero", "of=/var/tmp/regtriage-x/f", "bs=4096"])
    assert cmd.endswith("exec env LC_ALL=C dd if=/dev/zero of=/var/tmp/regtriage-x/f bs=4096")
    assert "'a;b'" in remote_step("/var/tmp/x", ["echo", "a;b"])  # tokens are always shell-quoted


# ================================================================================ real sshd
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children_of(pids: set[int]) -> set[int]:
    """All live descendants of ``pids``."""
    parent = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
                parent[int(d.name)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                pass
    out, frontier = set(), set(pids)
    while frontier:
        new = {p for p, pp in parent.items() if pp in frontier and p not in out}
        out |= new
        frontier = new
    return out


class SshdServer:
    """A real sshd (-D) on 127.0.0.1:<free port> with a generated host key, an authorized client
    key for root, and the uname TEST SHIM first in PATH.  ``stop()`` kills it and every process
    it started."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self.hostkey = root / "ssh_host_ed25519_key"
        self.client_key = root / "client_ed25519"
        self.release_file = root / "running-release"  # TEST SHIM state: the "booted" kernel
        self.shim_dir = root / "shim-bin"
        self.known_hosts = root / "known_hosts"
        self.scratch = root / "scratch"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "SshdServer":
        for key in (self.hostkey, self.client_key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "regtriage-test", "-f", str(key)],
                           check=True, stdin=subprocess.DEVNULL)
        (self.root / "authorized_keys").write_text(Path(f"{self.client_key}.pub").read_text())
        self.shim_dir.mkdir()
        shim = self.shim_dir / "uname"
        # TEST SHIM, not a real kernel switch: `uname -r` reports the release the boot command wrote
        shim.write_text("#!/bin/sh\n# regtriage TEST SHIM: simulated kernel release for the ssh backend tests\n"
                        f'if [ "$1" = "-r" ] && [ -f {self.release_file} ]; then cat {self.release_file}; '
                        'else exec /bin/uname "$@"; fi\n')
        shim.chmod(0o755)
        self.release_file.write_text("6.0.0-1-amd64\n")
        self.scratch.mkdir()
        cfg = self.root / "sshd_config"
        cfg.write_text(f"""Port {self.port}
ListenAddress 127.0.0.1
HostKey {self.hostkey}
PidFile none
AuthorizedKeysFile {self.root}/authorized_keys
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
AllowUsers root
MaxStartups 100
MaxSessions 100
SetEnv PATH={self.shim_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
LogLevel ERROR
""")
        # privilege separation directory (the service makes it; left in place: others may use it)
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        subprocess.run([SSHD, "-t", "-f", str(cfg)], check=True)
        self.log = open(self.root / "sshd.log", "wb")
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(cfg), "-p", str(self.port)],
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        end = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    if s.recv(64).startswith(b"SSH-2.0-"):
                        break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"sshd did not start: {(self.root / 'sshd.log').read_text()}")
            time.sleep(0.05)
        pub = Path(f"{self.hostkey}.pub").read_text().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {pub[0]} {pub[1]}\n")
        return self

    def running_release(self) -> str:
        return self.release_file.read_text().strip()

    def ssh_config(self, work_dir: Path, **over) -> dict:
        ssh = {"work_dir": str(work_dir), "host": "127.0.0.1", "port": self.port, "user": "root",
               "key_file": str(self.client_key), "known_hosts": str(self.known_hosts),
               "scratch_dir": str(self.scratch), "reboot": False,
               "boot_switch": f"echo {{release}} > {self.release_file}"}
        ssh.update(over)
        return {"lab": {"ssh": {k: v for k, v in ssh.items() if v is not None}}}

    def stop(self) -> None:
        if self.proc is None:
            return
        kids = _children_of({self.proc.pid})
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        for pid in kids | _children_of(kids):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.log.close()
        self.proc = None


def sshd_available() -> str | None:
    if not os.path.exists(SSHD):
        return "openssh-server is not installed (tests/system-packages.txt)"
    import importlib.util

    if importlib.util.find_spec("paramiko") is None:
        return "paramiko is not installed (pin paramiko==5.1.0 in setup.cfg)"
    if os.geteuid() != 0:
        return "the sshd fixture needs root (sshd privilege separation)"
    return None


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    reason = sshd_available()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    server = SshdServer(tmp_path_factory.mktemp("sshd")).start()
    yield server
    kids = _children_of({server.proc.pid})
    server.stop()
    left = _wait_for(lambda: not [p for p in kids if _pid_alive(p)], timeout=5)
    assert left, f"sshd left processes behind: {[p for p in kids if _pid_alive(p)]}"


def _spec(recipe, runs=2, **kw) -> RunSpec:
    return RunSpec(recipe=recipe, good=BuildSpec(debian=GOOD_PKG), bad=BuildSpec(debian=BAD_PKG), runs=runs,
                   samples_per_batch=1, warmup=1, order="abab", **kw)


def _wait_for(pred, timeout=20.0, interval=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    return None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def _pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_abab_run_switches_kernels_and_resumes_after_restart(sshd, tmp_path):
    config = sshd.ssh_config(tmp_path / "lab")
    backend = get_backend("ssh", config)
    recipe = make_recipe("dd-seqwrite", {"bs": "64k", "count": 16})
    handle = backend.submit(_spec(recipe))
    assert handle.startswith("ssh:")
    del backend  # "restart": a new instance built from the same configuration polls the handle
    backend2 = get_backend("ssh", config)
    st = backend2.wait(handle, timeout=40, interval=0.2)
    assert st.state == DONE, st.message
    assert (st.batches_done, st.batches_total) == (4, 4)
    samples = backend2.fetch_samples(handle)
    assert samples.metric == "dd.write_MBps" and samples.higher_is_better
    assert len(samples["good"]) == 2 and len(samples["bad"]) == 2
    assert all(v > 0 for v in samples["good"] + samples["bad"])
    assert samples.order == ["good", "bad", "good", "bad"]
    assert len(samples.warmups["good"]) == 2  # one warm-up per batch, discarded
    d = backend2.describe(handle)
    assert [b["kernel_release"] for b in d["batches"]] == [GOOD_REL, BAD_REL, GOOD_REL, BAD_REL]
    assert d["releases"] == {"good": GOOD_REL, "bad": BAD_REL}
    assert sshd.running_release() == BAD_REL  # the last batch switched the (simulated) kernel
    log = Path(samples.log_path).read_text()
    assert f"switching to {GOOD_REL} for build good" in log and "exec env LC_ALL=C dd if=/dev/zero" in log
    assert "copied" in log  # dd's raw summary is kept in the log
    assert not any(sshd.scratch.iterdir())  # the remote run directory was removed
    assert backend2.list_runs() == [handle]


def test_wrong_running_kernel_fails_with_reason(sshd, tmp_path):
    sshd.release_file.write_text("6.0.0-1-amd64\n")
    recipe = make_recipe("dd-seqwrite", {"bs": "4k", "count": 4})
    # no way to switch kernels: the host must already run the build's kernel
    backend = get_backend("ssh", sshd.ssh_config(tmp_path / "a", boot_switch=None))
    h = backend.submit(_spec(recipe, runs=1))
    st = backend.wait(h, timeout=30, interval=0.1)
    assert st.state == FAILED
    assert "runs kernel 6.0.0-1-amd64, expected 6.1.0-40-amd64 for build good" in st.message
    assert backend.describe(h)["batches"][0]["samples"] == []
    with pytest.raises(LabError, match="failed"):
        backend.fetch_samples(h)
    # a boot command that does not switch: caught by the uname check before any sample counts
    backend = get_backend("ssh", sshd.ssh_config(tmp_path / "b", boot_switch="true {release}"))
    h = backend.submit(_spec(recipe, runs=1))
    st = backend.wait(h, timeout=30, interval=0.1)
    assert st.state == FAILED and "after the boot command, expected 6.1.0-40-amd64" in st.message


def _remote_pgid(sshd) -> int | None:
    pidfiles = list(sshd.scratch.glob("regtriage-*/cmd.pid"))
    if not pidfiles:
        return None
    txt = pidfiles[0].read_text().strip()
    return int(txt) if txt.isdigit() and _pid_alive(int(txt)) else None


def _live_procs_mentioning(text: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if text in (d / "cmdline").read_bytes().decode(errors="replace") and _pid_alive(int(d.name)):
                    out.append(int(d.name))
            except OSError:
                pass
    return out


def test_cancel_kills_the_remote_process(sshd, tmp_path):
    backend = get_backend("ssh", sshd.ssh_config(tmp_path / "lab"))
    recipe = make_recipe("fio", {"rw": "write", "bs": "4k", "size_mib": 4, "runtime_s": 60})
    h = backend.submit(_spec(recipe, runs=1))
    pgid = _wait_for(lambda: _remote_pgid(sshd), timeout=30)
    assert pgid, backend.poll(h)
    # the step's shell writes cmd.pid, then execs env, then fio (mid-exec the cmdline reads empty)
    assert _wait_for(lambda: "fio" in _cmdline(pgid), timeout=10), "the remote step is not fio"
    t0 = time.monotonic()
    st = backend.cancel(h)
    assert st.state == FAILED and st.cancelled and "cancel" in st.message
    assert time.monotonic() - t0 < 15
    assert _wait_for(lambda: not _pid_alive(pgid), timeout=5), "remote fio still running"
    # fio's job processes setsid() themselves: the whole tree must be gone, not just the group
    assert _wait_for(lambda: not _live_procs_mentioning(str(sshd.scratch)), timeout=5), "fio job process left"
    assert not any(sshd.scratch.iterdir())


def test_dead_worker_is_detected_and_its_remote_step_killed(sshd, tmp_path):
    backend = get_backend("ssh", sshd.ssh_config(tmp_path / "lab"))
    recipe = make_recipe("fio", {"rw": "write", "bs": "4k", "size_mib": 4, "runtime_s": 60})
    h = backend.submit(_spec(recipe, runs=1))
    pgid = _wait_for(lambda: _remote_pgid(sshd), timeout=30)
    assert pgid
    wpid = json.loads((backend._run_dir(h) / "worker.json").read_text())["pid"]
    os.kill(wpid, signal.SIGKILL)
    st = _wait_for(lambda: (lambda s: s if s.finished else None)(backend.poll(h)), timeout=10)
    assert st and st.state == FAILED and "died" in st.message
    assert _wait_for(lambda: not _pid_alive(pgid), timeout=15), (
        "remote fio of a dead worker still running", json.loads((backend._run_dir(h) / "state.json").read_text()))
    assert "killed" in json.loads((backend._run_dir(h) / "state.json").read_text())["remote_cleanup"]
    assert _wait_for(lambda: not _live_procs_mentioning(str(sshd.scratch)), timeout=5), "fio job process left"


def test_host_key_mismatch_is_refused(sshd, tmp_path):
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    pub = Path(f"{other}.pub").read_text().split()
    kh = tmp_path / "known_hosts_wrong"
    kh.write_text(f"[127.0.0.1]:{sshd.port} {pub[0]} {pub[1]}\n")
    recipe = make_recipe("dd-seqwrite", {"bs": "4k", "count": 4})
    backend = get_backend("ssh", sshd.ssh_config(tmp_path / "a", known_hosts=str(kh)))
    h = backend.submit(_spec(recipe, runs=1))
    st = backend.wait(h, timeout=30, interval=0.1)
    assert st.state == FAILED and "host key verification failed" in st.message and "does not match" in st.message
    empty = tmp_path / "known_hosts_empty"
    empty.write_text("")
    backend = get_backend("ssh", sshd.ssh_config(tmp_path / "b", known_hosts=str(empty)))
    h = backend.submit(_spec(recipe, runs=1))
    st = backend.wait(h, timeout=30, interval=0.1)
    assert st.state == FAILED and "host key verification failed" in st.message and "refused" in st.message


def test_submit_validation(sshd, tmp_path):
    backend = get_backend("ssh", sshd.ssh_config(tmp_path / "lab"))
    recipe = make_recipe("dd-seqwrite", {"bs": "4k", "count": 4})
    same = RunSpec(recipe=recipe, good=BuildSpec(debian=GOOD_PKG), bad=BuildSpec(debian=GOOD_PKG))
    with pytest.raises(LabError, match="same kernel release"):
        backend.submit(same)
    with pytest.raises(LabError, match="releases"):
        backend.submit(RunSpec(recipe=recipe, good=BuildSpec(image="/srv/bzImage"), bad=BuildSpec(debian=BAD_PKG)))
    with pytest.raises(LabError, match="unknown keys"):
        get_backend("ssh", {"lab": {"ssh": {"hostname": "x"}}})
    with pytest.raises(LabError, match="not an ssh handle"):
        backend.poll("qemu:20260101T000000-00000000")


@pytest.mark.parametrize("name,params", [
    ("dd-seqread", {"bs": "64k", "count": 16}),
    ("syscall-getpid", {"iterations": 100000}),
    ("sysbench-fileio", {"size_mib": 8, "file_num": 2, "mode": "rndrw", "time_s": 1}),
    ("fio", {"rw": "randread", "bs": "4k", "size_mib": 4}),
])
def test_each_host_recipe_runs_with_the_real_tool(sshd, tmp_path, name, params):
    if shutil.which({"dd-seqread": "dd", "syscall-getpid": "perf"}.get(name, name.split("-")[0])) is None:
        pytest.fail(f"the tool for {name} is missing (tests/system-packages.txt)")
    backend = get_backend("ssh", sshd.ssh_config(tmp_path / "lab"))
    recipe = make_recipe(name, params)
    job = RunSpec(recipe=recipe, good=BuildSpec(debian=GOOD_PKG), bad=BuildSpec(debian=BAD_PKG), runs=1,
                  samples_per_batch=1, warmup=0, order="abab")
    h = backend.submit(job)
    st = backend.wait(h, timeout=40, interval=0.1)
    assert st.state == DONE, st.message
    s = backend.fetch_samples(h)
    assert s.metric == recipe.metric and len(s["good"]) == 1 and len(s["bad"]) == 1
    assert all(v > 0 for v in s["good"] + s["bad"])
