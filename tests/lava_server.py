"""A real LAVA lab on loopback for tests: Debian ``lava-server`` + ``lava-dispatcher`` 2023.01.

:class:`LavaServer` (see /work/shared/docs/lab-harnesses.md part B):

* ``ensure_installed()`` - ``apt-get install -y --no-install-recommends lava-server lava-dispatcher``
  when the packages are missing (root only; ~1-2 min).  The package's postinst creates the role
  and database ``lavaserver`` (and ``devel``) when PostgreSQL is running; if they are missing
  afterwards, ``/usr/bin/python3 /usr/share/lava-server/postinst.py --config --db`` is run.  The
  system ``python3`` must be used (a pyenv ``python3`` on PATH has no django), so every command runs
  with a system PATH.
* ``start()`` - never starts, stops or reconfigures PostgreSQL (it must already answer on
  127.0.0.1:5432; other databases are never touched).  Starts, each in its own session:
  ``gunicorn3 lava_server.wsgi`` on a free loopback port, ``lava-server manage lava-scheduler``
  and ``lava-worker`` with a private ``--worker-dir``.  Creates (idempotently) the superuser
  ``regtriage``, a fresh REST token for it, the ``qemu`` device type, the worker and a qemu device
  whose dictionary (``/etc/lava-server/dispatcher-config/devices/<name>.jinja2``) extends
  ``qemu.jinja2`` with ``memory`` and ``mac_addr``.
* ``stop()`` - terminates exactly the processes it started (by pid / session id) plus anything
  whose command line names the private worker dir (``lava-run`` and its qemu), then waits.
  The install, the database and the device stay in place.

Run ``python tests/lava_server.py`` to start a lab by hand (prints URL and token, Ctrl-C stops).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PACKAGES = ("lava-server", "lava-dispatcher")
DEVICES_DIR = Path("/etc/lava-server/dispatcher-config/devices")


class LavaSetupError(RuntimeError):
    """The lab cannot be set up here; the message says why (tests skip with it)."""


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYENV", "VIRTUAL_ENV", "PYTHON"))}
    env.update(PATH=SYSTEM_PATH, DEBIAN_FRONTEND="noninteractive", LC_ALL="C.UTF-8", **extra)
    return env


def _run(argv: list[str], *, timeout: float = 300, check: bool = True, input: str | None = None
         ) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=_env(), input=input,
                          stdin=None if input is not None else subprocess.DEVNULL)
    if check and proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        raise LavaSetupError(f"{' '.join(argv[:5])} failed (exit {proc.returncode}): {tail}")
    return proc


def installed() -> bool:
    for pkg in PACKAGES:
        proc = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True,
                              env=_env())
        if proc.returncode != 0 or "install ok installed" not in proc.stdout:
            return False
    return shutil.which("lava-server", path=SYSTEM_PATH) is not None


def pg_ready() -> bool:
    return shutil.which("pg_isready", path=SYSTEM_PATH) is not None and subprocess.run(
        ["pg_isready", "-q", "-h", "127.0.0.1", "-p", "5432"], env=_env()).returncode == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LavaServer:
    def __init__(self, base_dir: str | os.PathLike | None = None, *, device: str = "regtriage-qemu01",
                 worker: str = "regtriage-worker", user: str = "regtriage", memory_mib: int = 1024,
                 port: int | None = None):
        # every directory above base must be traversable by lavaserver (the scheduler drops
        # privileges and then re-stats its log file): the default is a fresh /tmp/regtriage-lava-*
        self.base = Path(base_dir or tempfile.mkdtemp(prefix="regtriage-lava-")).resolve()
        self.base.mkdir(parents=True, exist_ok=True)
        os.chmod(self.base, 0o755)  # gunicorn runs as lavaserver and the worker reads served files
        self.device, self.worker, self.user, self.memory_mib = device, worker, user, memory_mib
        self.port = port
        self.url: str | None = None
        self.token: str | None = None
        self.procs: dict[str, subprocess.Popen] = {}
        self.timings: dict[str, float] = {}

    @property
    def worker_dir(self) -> Path:
        return self.base / "worker"

    # ------------------------------------------------------------------------------- install
    def ensure_installed(self) -> float:
        """Install the packages if missing; seconds spent (0.0 if they were there)."""
        if installed():
            self.timings.setdefault("install_s", 0.0)
            return 0.0
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            raise LavaSetupError("lava-server/lava-dispatcher are not installed and this is not root with apt-get "
                                 "(apt-get install -y --no-install-recommends lava-server lava-dispatcher)")
        if not pg_ready():
            raise LavaSetupError("PostgreSQL is not answering on 127.0.0.1:5432 (LAVA's postinst needs it)")
        t0 = time.monotonic()
        _run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES], timeout=1800)
        self.timings["install_s"] = time.monotonic() - t0
        return self.timings["install_s"]

    def _db_configured(self) -> bool:
        proc = subprocess.run(["runuser", "-u", "postgres", "--", "psql", "-Atqc",
                               "SELECT 1 FROM pg_database WHERE datname = 'lavaserver'"],
                              capture_output=True, text=True, env=_env(), cwd="/")
        return proc.returncode == 0 and proc.stdout.strip() == "1" and \
            Path("/etc/lava-server/settings.d/00-database.yaml").is_file()

    def ensure_database(self) -> None:
        if not pg_ready():
            raise LavaSetupError("PostgreSQL is not answering on 127.0.0.1:5432")
        if not self._db_configured():
            t0 = time.monotonic()
            _run(["/usr/bin/python3", "/usr/share/lava-server/postinst.py", "--config", "--db"], timeout=900)
            self.timings["db_setup_s"] = time.monotonic() - t0

    def manage(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
        return _run(["lava-server", "manage", *args], check=check, timeout=timeout)

    # ------------------------------------------------------------------------------- objects
    def _ensure_objects(self) -> str:
        """Superuser + fresh token, device type, worker, device dictionary, device; the worker token."""
        if self.manage("users", "details", self.user, check=False).returncode != 0:
            self.manage("users", "add", "--superuser", "--staff", "--passwd", secrets.token_hex(12), self.user)
        self.token = secrets.token_hex(20)
        self.manage("tokens", "add", "--user", self.user, "--description", "regtriage tests", "--secret", self.token)
        if self.manage("device-types", "details", "qemu", check=False).returncode != 0:
            self.manage("device-types", "add", "qemu")
        if self.manage("workers", "details", self.worker, check=False).returncode != 0:
            self.manage("workers", "add", "--description", "regtriage test worker", self.worker)
        details = self.manage("workers", "details", self.worker).stdout
        worker_token = next((ln.split(":", 1)[1].strip() for ln in details.splitlines()
                             if ln.strip().startswith("token")), "")
        if not worker_token:
            raise LavaSetupError(f"no token for worker {self.worker}: {details!r}")
        DEVICES_DIR.mkdir(parents=True, exist_ok=True)
        mac = "52:54:00:12:34:%02x" % (sum(self.device.encode()) % 256)
        (DEVICES_DIR / f"{self.device}.jinja2").write_text(
            "{% extends 'qemu.jinja2' %}\n"
            f"{{% set mac_addr = '{mac}' %}}\n"
            f"{{% set memory = {int(self.memory_mib)} %}}\n")
        if self.manage("devices", "details", self.device, check=False).returncode != 0:
            self.manage("devices", "add", "--device-type", "qemu", "--worker", self.worker,
                        "--description", "regtriage test qemu (TCG)", self.device)
        else:
            self.manage("devices", "update", "--worker", self.worker, "--health", "GOOD", self.device,
                        check=False)
        return worker_token

    # ------------------------------------------------------------------------------- processes
    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.base / f"{name}.out", "ab")
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env=_env(), cwd=str(self.base), start_new_session=True)
        finally:
            log.close()
        self.procs[name] = proc
        return proc

    def _wait_http(self, timeout: float = 120) -> None:
        import requests

        end = time.monotonic() + timeout
        last = ""
        while time.monotonic() < end:
            if self.procs["gunicorn"].poll() is not None:
                raise LavaSetupError(f"gunicorn exited ({self.procs['gunicorn'].returncode}): "
                                     f"{self._tail('gunicorn')}")
            try:
                r = requests.get(f"{self.url}api/v0.2/system/version/", timeout=5)
                if r.status_code == 200:
                    self.version = r.json().get("version")
                    return
                last = f"HTTP {r.status_code}"
            except requests.RequestException as exc:
                last = str(exc)
            time.sleep(0.5)
        raise LavaSetupError(f"LAVA web did not come up on {self.url}: {last}")

    def _wait_device_idle(self, timeout: float = 120) -> None:
        """Until the worker is online and the device Idle (jobs would queue anyway; this makes
        timings and failures clearer)."""
        import requests

        end = time.monotonic() + timeout
        last = None
        while time.monotonic() < end:
            for name in ("scheduler", "worker"):
                if self.procs[name].poll() is not None:
                    raise LavaSetupError(f"{name} exited ({self.procs[name].returncode}): {self._tail(name)}")
            try:
                r = requests.get(f"{self.url}api/v0.2/devices/{self.device}/", timeout=5,
                                 headers={"Authorization": f"Token {self.token}"})
                last = r.json() if r.status_code == 200 else r.status_code
                wr = requests.get(f"{self.url}api/v0.2/workers/{self.worker}/", timeout=5,
                                  headers={"Authorization": f"Token {self.token}"})
                wstate = wr.json().get("state") if wr.status_code == 200 else None
                if isinstance(last, dict) and wstate == "Online" and last.get("state") == "Idle" \
                        and last.get("health") in ("Good", "Unknown"):
                    return
            except (requests.RequestException, ValueError):
                pass
            time.sleep(1)
        raise LavaSetupError(f"device {self.device} never became Idle/online: {last}; worker: {self._tail('worker')}")

    def _cancel_leftovers(self) -> None:
        """Cancel jobs an interrupted earlier session left unfinished (they would hold the device)."""
        import requests

        h = {"Authorization": f"Token {self.token}"}
        for state in ("Submitted", "Scheduling", "Scheduled", "Running", "Canceling"):
            r = requests.get(f"{self.url}api/v0.2/jobs/", params={"state": state, "limit": 200}, headers=h, timeout=30)
            for job in (r.json().get("results", []) if r.status_code == 200 else []):
                requests.get(f"{self.url}api/v0.2/jobs/{int(job['id'])}/cancel/", headers=h, timeout=30)
                self.timings.setdefault("cancelled_leftover_jobs", []).append(job["id"])

    def _tail(self, name: str, n: int = 5) -> str:
        try:
            return " | ".join((self.base / f"{name}.out").read_text(errors="replace").strip().splitlines()[-n:])
        except OSError:
            return ""

    def start(self) -> "LavaServer":
        t0 = time.monotonic()
        self.ensure_installed()
        self.ensure_database()
        worker_token = self._ensure_objects()
        self.port = self.port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        try:
            self._spawn("gunicorn", ["gunicorn3", "lava_server.wsgi", "-u", "lavaserver", "-g", "lavaserver",
                                     "--worker-class", "eventlet", "--workers", "2", "--timeout", "60",
                                     "--bind", f"127.0.0.1:{self.port}", "--log-level", "info"])
            self._wait_http()
            self._spawn("scheduler", ["lava-server", "manage", "lava-scheduler", "--level", "INFO",
                                      "--log-file", str(self.base / "scheduler.log")])
            self.worker_dir.mkdir(exist_ok=True)
            (self.base / "worker-token").write_text(worker_token)
            os.chmod(self.base / "worker-token", 0o600)
            self._spawn("worker", ["lava-worker", "--name", self.worker, "--url", self.url,
                                   "--token-file", str(self.base / "worker-token"),
                                   "--worker-dir", str(self.worker_dir), "--level", "INFO",
                                   "--log-file", str(self.base / "worker.log")])
            self._cancel_leftovers()
            self._wait_device_idle()
            time.sleep(3)  # the scheduler drops privileges after start: make sure it survived that
            for name in ("scheduler", "worker", "gunicorn"):
                if self.procs[name].poll() is not None:
                    raise LavaSetupError(f"{name} exited ({self.procs[name].returncode}): {self._tail(name)}")
        except BaseException:
            self.stop()
            raise
        self.timings["start_s"] = time.monotonic() - t0
        return self

    def _strays(self) -> list[int]:
        """Live processes that belong to this lab: in one of our sessions, or naming our dirs."""
        sids = {p.pid for p in self.procs.values()}
        marker = str(self.worker_dir).encode()
        out = []
        for d in Path("/proc").iterdir():
            if not d.name.isdigit() or int(d.name) == os.getpid():
                continue
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
                cmdline = (d / "cmdline").read_bytes()
            except (OSError, IndexError):
                continue
            if fields[0] in ("Z", "X"):
                continue
            if int(fields[3]) in sids or marker in cmdline:
                out.append(int(d.name))
        return out

    def stop(self, timeout: float = 20) -> None:
        # worker first (it stops lava-run and the guest), then scheduler, then web
        for name in ("worker", "scheduler", "gunicorn"):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        end = time.monotonic() + timeout
        while (left := self._strays()) and time.monotonic() < end:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGTERM if time.monotonic() < end - timeout / 2 else signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.3)
        for pid in self._strays():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in self.procs.values():
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass

    def alive(self) -> list[int]:
        return self._strays()

    def __enter__(self) -> "LavaServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


if __name__ == "__main__":  # pragma: no cover - manual use
    lab = LavaServer(sys.argv[1] if len(sys.argv) > 1 else None)
    lab.start()
    print(f"LAVA {getattr(lab, 'version', '?')} at {lab.url} token {lab.token} device {lab.device} "
          f"(dir {lab.base}); Ctrl-C stops", flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        lab.stop()
