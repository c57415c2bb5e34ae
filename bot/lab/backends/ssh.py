"""The ``ssh`` lab backend: run a recipe's real tools (dd, fio, sysbench, perf bench, hackbench,
stress-ng: see :mod:`bot.lab.recipes`) on a lab host over SSH, on hosts booted into the wanted
kernels (or switched by a configured command).

How a run works
---------------
* ``submit`` validates the :class:`RunSpec`, works out the **expected kernel release** of each
  build (see :func:`expected_release`), picks the machine, creates
  ``<work_dir>/runs/<run id>/`` with ``spec.json`` (job, schedule, the machine's resolved host
  settings, releases) and ``state.json``, and starts a detached worker
  (``python -m bot.lab.backends.ssh worker <run dir>``, its own session).  Handle: ``ssh:<run id>``.
* The worker takes ``<work_dir>/locks/<machine>.lock`` (one run per machine at a time; a waiting
  run is ``queued``), connects (paramiko; host key verified against the configured
  ``known_hosts`` file only, unknown or changed keys refused), creates a remote run directory
  ``<scratch_dir>/regtriage-<run id>`` and runs the batches in the spec's order (``abab`` by
  default).  Per batch:

  1. ``uname -r`` on the host.  If it is not the build's expected release, the boot command for
     the build runs (``kernels[label]``, ``kernels[release]`` or ``boot_switch`` with
     ``{release}``); with ``reboot = true`` the worker then drops the connection, waits
     ``reboot_down_s`` and reconnects until ``timeouts.boot_s``.  ``uname -r`` must then equal the
     expected release, **before any sample counts**: otherwise the batch (and run) fails with the
     reason ("host runs X, expected Y for build good").  ``uname -r`` is checked again after the
     batch (a host that rebooted mid-batch is caught).
  2. ``warmup`` discarded iterations then ``samples_per_batch`` measured ones; each iteration runs
     the recipe's :meth:`~bot.lab.recipes.RecipeSpec.host_argv` steps in the remote run directory,
     the last step being the measured one, parsed by the recipe's own parser
     (:meth:`~bot.lab.recipes.RecipeSpec.parse_output`).
* Remote commands are built **only** from the recipe's validated argv (``shlex.join``), the
  validated run directory, and the configured host settings (boot commands, ``uname_command``);
  nothing from mail reaches a shell.  Each step runs as
  ``cd RUNDIR && echo $$ > RUNDIR/cmd.pid && exec env LC_ALL=C <argv>``: sshd starts every
  command in a new session, so that pid leads the step's process group.  Cancel, timeout or a
  worker that is told to stop runs :func:`remote_kill` over a new channel (the step's process
  group and every descendant: STOP, TERM + CONT, KILL); :meth:`SshBackend.cancel` and ``poll`` of
  a dead worker do the same themselves when the worker is gone.
* Files in the run directory: ``spec.json``, ``state.json`` (status, batches with samples and the
  kernel release seen), ``worker.json`` (pid), ``worker.log``, ``run.log`` (host notes, every
  command with its stdout/stderr: the raw log), ``result.json`` when done.  Any process with the
  same ``work_dir`` can poll, fetch or cancel; a dead worker is detected and reported failed.

Configuration (``[lab.ssh]``; the host keys may also sit per machine in
``[lab.ssh.machines.<name>]``, which override the top-level ones)::

    work_dir = "~/.regtriage/lab/ssh"    # default $REGTRIAGE_HOME/lab/ssh
    machine = "default"                  # which machine submit uses (default: the only one)
    host = "lab1.example.org"            # hostname or IP
    port = 22
    user = "bench"
    key_file = "/etc/regtriage/lab_ed25519"   # or use_agent = true
    use_agent = false
    known_hosts = "/etc/regtriage/known_hosts" # required: host key verification is always on
    scratch_dir = "/var/tmp"             # remote; workloads only touch <scratch_dir>/regtriage-<run id>
    kernels = {"6.1.0-47-amd64" = "sudo grub-reboot 'Debian, 6.1.0-47' && sudo reboot"}
    boot_switch = "sudo /usr/local/sbin/boot-kernel {release}"  # {release} validated + quoted
    reboot = true                        # boot commands reboot the host: wait for it
    reboot_down_s = 10                   # wait this long before reconnecting
    uname_command = "uname -r"
    releases = {"tree:/src/linux@v6.2-rc1" = "6.2.0-rc1"}      # builds whose release can't be derived
    connect_timeout_s = 10
    exclusive = true                     # one run per machine at a time (lock under work_dir)

Kernel releases (:data:`RELEASE_RE`): ``debian:linux-image-6.1.0-47-amd64-unsigned`` ->
``6.1.0-47-amd64``; ``image:/boot/vmlinuz-6.2.0-rc1`` -> ``6.2.0-rc1``; anything else needs a
``releases`` entry keyed by the build's ``describe()`` string.  Boot commands are configuration
(trusted, run by the remote user's shell as written); only the ``{release}`` placeholder is
substituted, with a release that matched :data:`RELEASE_RE` and is shell-quoted.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bot.lab import parsers
from bot.lab.backends.base import (DONE, FAILED, QUEUED, RUNNING, Backend, LabError, RunSpec, Samples, Status)
from bot.lab.backends.rundir import Children, atomic_write_json, default_work_dir, printable, read_json
from bot.lab.builds import BuildSpec
from bot.lab.procs import proc_alive_and_ours
from bot.lab.recipes import SAFE_SCRATCH_RE, RecipeError, RecipeSpec, make_recipe

RUN_ID_RE = re.compile(r"^[0-9]{8}T[0-9]{6}-[0-9a-f]{8}$")
RELEASE_RE = re.compile(r"^[0-9]{1,2}\.[0-9]{1,3}(?:\.[0-9]{1,4})?(?:[-+~][A-Za-z0-9._+~-]{1,64})?$")
HOST_RE = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9-]{1,63})*|[0-9a-fA-F:.]{2,45})$")
USER_RE = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")
MACHINE_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
LOG_LIMIT = 20000  # bytes of stdout/stderr per command kept in run.log


def validate_release(release) -> str:
    if not isinstance(release, str) or not RELEASE_RE.match(release):
        raise LabError(f"not an accepted kernel release: {release!r} (expected e.g. 6.1.0-47-amd64)")
    return release


def expected_release(build: BuildSpec, releases: dict | None = None) -> str:
    """The ``uname -r`` a host must report when running ``build``."""
    releases = releases or {}
    if build.describe() in releases:
        return validate_release(releases[build.describe()])
    if build.kind == "debian":
        m = re.match(r"^linux-image-(.+?)(?:-unsigned)?(?:-dbg)?$", build.debian)
        if m:
            return validate_release(m.group(1))
    if build.kind == "image":
        m = re.match(r"^(?:vmlinu[xz]|bzImage|Image)-(.+)$", os.path.basename(build.image))
        if m and RELEASE_RE.match(m.group(1)):
            return m.group(1)
    raise LabError(f"cannot tell the kernel release of {build.describe()}: add it to [lab.ssh] releases")


# ====================================================================================== config
@dataclass
class HostConfig:
    """One lab machine's SSH settings (all from configuration, never from mail)."""

    host: str
    user: str
    known_hosts: str
    port: int = 22
    key_file: str | None = None
    use_agent: bool = False
    scratch_dir: str = "/var/tmp"
    kernels: dict = field(default_factory=dict)
    boot_switch: str | None = None
    reboot: bool = False
    reboot_down_s: float = 10.0
    uname_command: str = "uname -r"
    releases: dict = field(default_factory=dict)
    connect_timeout_s: float = 10.0
    name: str = "default"

    def __post_init__(self):
        w = f"[lab.ssh] machine {self.name!r}:"
        if not isinstance(self.name, str) or not MACHINE_RE.match(self.name):
            raise LabError(f"[lab.ssh] machine name {self.name!r} must match {MACHINE_RE.pattern}")
        if not isinstance(self.host, str) or not HOST_RE.match(self.host):
            raise LabError(f"{w} host {self.host!r} is not a hostname or IP address")
        if type(self.port) is not int or not 1 <= self.port <= 65535:
            raise LabError(f"{w} port must be 1..65535")
        if not isinstance(self.user, str) or not USER_RE.match(self.user):
            raise LabError(f"{w} user {self.user!r} is not an accepted user name")
        if not isinstance(self.known_hosts, str) or not os.path.isabs(os.path.expanduser(self.known_hosts)):
            raise LabError(f"{w} known_hosts must be an absolute path (host key verification is required)")
        self.known_hosts = os.path.expanduser(self.known_hosts)
        if self.key_file is not None:
            if not isinstance(self.key_file, str) or not os.path.isabs(os.path.expanduser(self.key_file)):
                raise LabError(f"{w} key_file must be an absolute path")
            self.key_file = os.path.expanduser(self.key_file)
        if not isinstance(self.use_agent, bool):
            raise LabError(f"{w} use_agent must be true or false")
        if self.key_file is None and not self.use_agent:
            raise LabError(f"{w} needs key_file or use_agent = true")
        if not isinstance(self.scratch_dir, str) or not SAFE_SCRATCH_RE.match(self.scratch_dir) \
                or ".." in self.scratch_dir or len(self.scratch_dir) > 150:
            raise LabError(f"{w} scratch_dir {self.scratch_dir!r} is not a safe absolute path")
        self.scratch_dir = self.scratch_dir.rstrip("/") or "/"
        if not isinstance(self.kernels, dict) or not all(
                isinstance(k, str) and (k in ("good", "bad") or RELEASE_RE.match(k)) and isinstance(v, str)
                and v.strip() and "\0" not in v for k, v in self.kernels.items()):
            raise LabError(f"{w} kernels must map 'good'/'bad' or a kernel release to a boot command")
        if self.boot_switch is not None:
            if not isinstance(self.boot_switch, str) or "\0" in self.boot_switch:
                raise LabError(f"{w} boot_switch must be a string")
            rest = self.boot_switch.replace("{release}", "")
            if "{release}" not in self.boot_switch or "{" in rest or "}" in rest:
                raise LabError(f"{w} boot_switch must contain the placeholder {{release}} and no other braces")
        if not isinstance(self.reboot, bool):
            raise LabError(f"{w} reboot must be true or false")
        for k, lo, hi in (("reboot_down_s", 0, 3600), ("connect_timeout_s", 1, 300)):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
                raise LabError(f"{w} {k} must be a number in [{lo}, {hi}]")
        if not isinstance(self.uname_command, str) or not self.uname_command.strip() or "\0" in self.uname_command:
            raise LabError(f"{w} uname_command must be a command string")
        if not isinstance(self.releases, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and RELEASE_RE.match(v) for k, v in self.releases.items()):
            raise LabError(f"{w} releases must map build descriptions to kernel releases")

    def boot_command(self, label: str, release: str) -> str | None:
        """The configured command that makes the host boot ``release`` (None: none configured)."""
        validate_release(release)
        if label in self.kernels:
            return self.kernels[label]
        if release in self.kernels:
            return self.kernels[release]
        if self.boot_switch:
            return self.boot_switch.replace("{release}", shlex.quote(release))
        return None


HOST_KEYS = set(HostConfig.__dataclass_fields__) - {"name"}
SSH_KEYS = HOST_KEYS | {"work_dir", "machine", "machines", "exclusive"}


def lab_table(config: dict | None) -> dict:
    cfg = dict(config or {})
    if isinstance(cfg.get("lab"), dict):
        cfg = cfg["lab"]
    return cfg


def machines_from_config(ssh: dict) -> dict[str, HostConfig]:
    """``{name: HostConfig}`` from a ``[lab.ssh]`` table: top-level host keys are the defaults
    (and the machine ``default`` if ``host`` is set there); ``machines.<name>`` override."""
    base = {k: v for k, v in ssh.items() if k in HOST_KEYS}
    out: dict[str, HostConfig] = {}
    machines = ssh.get("machines") or {}
    if not isinstance(machines, dict):
        raise LabError("[lab.ssh] machines must be a table of tables")
    for name, over in machines.items():
        if not isinstance(over, dict):
            raise LabError(f"[lab.ssh.machines.{name}] must be a table")
        unknown = set(over) - HOST_KEYS
        if unknown:
            raise LabError(f"[lab.ssh.machines.{name}] unknown keys: {sorted(unknown)}")
        try:
            out[name] = HostConfig(**{**base, **over, "name": name})
        except TypeError as exc:
            raise LabError(f"[lab.ssh.machines.{name}]: {exc}") from None
    if "host" in base and "default" not in out:
        try:
            out["default"] = HostConfig(**base, name="default")
        except TypeError as exc:
            raise LabError(f"[lab.ssh]: {exc}") from None
    return out


# ================================================================================= ssh session
class _Cancelled(Exception):
    pass


class BatchFailed(Exception):
    pass


@dataclass
class CommandResult:
    rc: int
    stdout: str
    stderr: str
    duration_s: float


class SshSession:
    """A paramiko connection to one machine with host key verification against the configured
    ``known_hosts`` file only (``RejectPolicy``: unknown hosts and changed keys are refused)."""

    def __init__(self, host: HostConfig):
        self.host = host
        self.client = None

    def connect(self) -> "SshSession":
        import paramiko

        h = self.host
        if not os.path.isfile(h.known_hosts):
            raise LabError(f"known_hosts file {h.known_hosts} does not exist")
        client = paramiko.SSHClient()
        client.load_host_keys(h.known_hosts)  # only this file; ~/.ssh/known_hosts is not read
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            client.connect(h.host, port=h.port, username=h.user, key_filename=h.key_file,
                           allow_agent=h.use_agent, look_for_keys=False, timeout=h.connect_timeout_s,
                           banner_timeout=h.connect_timeout_s, auth_timeout=h.connect_timeout_s)
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise LabError(f"host key verification failed for {h.host}:{h.port}: the server's "
                           f"{exc.key.get_name()} key does not match {h.known_hosts} (refused)") from None
        except paramiko.SSHException as exc:
            client.close()
            msg = str(exc)
            if "not found in known_hosts" in msg:
                raise LabError(f"host key verification failed for {h.host}:{h.port}: no key in "
                               f"{h.known_hosts} (refused)") from None
            raise LabError(f"ssh to {h.user}@{h.host}:{h.port} failed: {printable(msg)}") from None
        except (OSError, EOFError) as exc:
            client.close()
            raise LabError(f"cannot connect to {h.host}:{h.port}: {printable(str(exc))}") from None
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(15)
        self.client = client
        return self

    def close(self) -> None:
        if self.client is not None:
            try:
                self.client.close()
            except Exception:  # noqa: BLE001
                pass
            self.client = None

    @property
    def alive(self) -> bool:
        t = self.client.get_transport() if self.client is not None else None
        return bool(t and t.is_active())

    def run(self, command: str, *, timeout: float, stdin: bytes | None = None, check=None) -> CommandResult:
        """Run ``command`` (a shell command string built by this module) and wait for it.
        ``check()`` is called while waiting and may raise (cancel); on a timeout the channel is
        closed and LabError raised (the caller kills the remote process group)."""
        if not self.alive:
            raise LabError(f"not connected to {self.host.host}")
        t0 = time.monotonic()
        try:
            chan = self.client.get_transport().open_session(timeout=self.host.connect_timeout_s)
            chan.exec_command(command)
            if stdin:
                chan.sendall(stdin)
            chan.shutdown_write()
        except Exception as exc:  # noqa: BLE001 - paramiko raises SSHException/EOFError/OSError
            raise LabError(f"ssh channel failed: {printable(str(exc)) or type(exc).__name__}") from None
        out, err = bytearray(), bytearray()
        try:
            while True:
                busy = False
                while chan.recv_ready():
                    out += chan.recv(65536)
                    busy = True
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                    busy = True
                if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                    break
                if chan.closed and not chan.exit_status_ready():
                    raise LabError("the ssh connection was lost while a command ran")
                if time.monotonic() - t0 > timeout:
                    raise LabError(f"command timed out after {timeout:.0f}s")
                if check is not None:
                    check()
                if not busy:
                    time.sleep(0.02)
            rc = chan.recv_exit_status()
        finally:
            chan.close()
        return CommandResult(rc, out.decode(errors="replace"), err.decode(errors="replace"),
                             time.monotonic() - t0)


def remote_step(rundir: str, argv: list[str]) -> str:
    """The shell command for one recipe step: ``argv`` (validated tokens) quoted with
    ``shlex.join``, run in ``rundir`` with its process group id written to ``rundir/cmd.pid``."""
    if not SAFE_SCRATCH_RE.match(rundir) or ".." in rundir:
        raise LabError(f"unsafe remote directory {rundir!r}")
    if not argv or not all(isinstance(a, str) and a and "\0" not in a for a in argv):
        raise LabError("a remote step is a non-empty list of strings")
    d = shlex.quote(rundir)
    return f"cd {d} && echo $$ > {shlex.quote(rundir + '/cmd.pid')} && exec env LC_ALL=C {shlex.join(argv)}"


def measured_step(steps: list[list[str]]) -> int:
    """Index of the step whose output holds the measurement: the last one, except for
    ``prepare``/``run``/``cleanup`` sequences (sysbench), where it is ``run``."""
    if len(steps) > 1 and steps[-1][-1] == "cleanup":
        for i, argv in enumerate(steps):
            if argv[-1] == "run":
                return i
    return len(steps) - 1


def remote_kill(rundir: str) -> str:
    """Kill the step recorded in ``rundir/cmd.pid`` with everything it started: its process group
    and all its descendants (fio's job processes call setsid(), so the group is not enough).
    The pid is only trusted if that process still has ``rundir`` as its working directory (no
    stale pid of an unrelated process).  The tree is stopped first (so nothing escapes by being
    reparented), then sent TERM + CONT, and KILL a second later."""
    if not SAFE_SCRATCH_RE.match(rundir) or ".." in rundir:
        raise LabError(f"unsafe remote directory {rundir!r}")
    d = shlex.quote(rundir)
    pidfile = shlex.quote(rundir + "/cmd.pid")
    awk = ("{par[$1]=$2; grp[$1]=$3} END {keep[r]=1; n=1; while (n) {n=0; for (x in par) "
           "if (!(x in keep) && ((par[x] in keep) || grp[x]==r)) {keep[x]=1; n=1}} "
           "for (x in keep) if (x in par) print x}")
    return (f"p=$(cat {pidfile} 2>/dev/null); case \"$p\" in ''|*[!0-9]*) exit 0;; esac; "
            f"[ \"$p\" -gt 1 ] || exit 0; [ \"$(readlink /proc/$p/cwd 2>/dev/null)\" = {d} ] || exit 0; "
            f"tree() {{ ps -eo pid=,ppid=,pgid= | awk -v r=\"$p\" {shlex.quote(awk)}; }}; "
            "t=$(tree); [ -n \"$t\" ] || exit 0; kill -STOP $t 2>/dev/null; t=$(tree); kill -STOP $t 2>/dev/null; "
            "kill -TERM $t 2>/dev/null; kill -CONT $t 2>/dev/null; sleep 1; kill -KILL $t 2>/dev/null; "
            f"rm -f {pidfile}; exit 0")


# ==================================================================================== backend
@dataclass
class SshConfig:
    work_dir: str
    machines: dict = field(default_factory=dict)  # name -> HostConfig
    machine: str | None = None
    exclusive: bool = True

    def __post_init__(self):
        self.work_dir = str(Path(self.work_dir).expanduser().resolve())
        if not isinstance(self.exclusive, bool):
            raise LabError("[lab.ssh] exclusive must be true or false")
        if self.machine is not None and self.machine not in self.machines:
            raise LabError(f"[lab.ssh] machine {self.machine!r} is not configured "
                           f"(machines: {', '.join(sorted(self.machines)) or 'none'})")

    def pick(self, name: str | None = None) -> HostConfig:
        name = name or self.machine
        if name is None:
            if len(self.machines) != 1:
                raise LabError("[lab.ssh] set machine = ... (or configure exactly one machine)")
            name = next(iter(self.machines))
        if name not in self.machines:
            raise LabError(f"unknown lab machine {name!r}")
        return self.machines[name]


class SshBackend(Backend):
    name = "ssh"
    kind = "ssh"  # written into spec.json; the worker builds its executor from it
    WORKER_MODULE = "bot.lab.backends.ssh"  # python -m <this> worker RUN_DIR runs the batches

    def __init__(self, cfg: SshConfig, lab_config: dict | None = None):
        self.cfg = cfg
        self.lab_config = {k: v for k, v in (lab_config or {}).items() if k not in ("ssh", "lkp", "qemu", "lava")}
        self.work_dir = Path(cfg.work_dir)
        self._children = Children()

    @classmethod
    def from_config(cls, config: dict | None = None, **overrides) -> "SshBackend":
        lab = lab_table(config)
        ssh = dict(lab.get("ssh") or {})
        if not isinstance(ssh, dict):
            raise LabError("[lab.ssh] must be a table")
        ssh.update(overrides)
        unknown = set(ssh) - SSH_KEYS
        if unknown:
            raise LabError(f"[lab.ssh] unknown keys: {sorted(unknown)}")
        cfg = SshConfig(work_dir=ssh.get("work_dir") or str(default_work_dir(cls.kind)),
                        machines=machines_from_config(ssh), machine=ssh.get("machine"),
                        exclusive=ssh.get("exclusive", True))
        return cls(cfg, lab)

    # ------------------------------------------------------------------------------ helpers
    def _run_dir(self, handle: str) -> Path:
        prefix = f"{self.name}:"
        if not isinstance(handle, str) or not handle.startswith(prefix):
            raise LabError(f"not an {self.name} handle: {handle!r}")
        run_id = handle[len(prefix):]
        if not RUN_ID_RE.match(run_id):
            raise LabError(f"malformed {self.name} handle: {handle!r}")
        d = self.work_dir / "runs" / run_id
        if not (d / "spec.json").is_file():
            raise LabError(f"no such run {handle} under {self.work_dir}")
        return d

    def supports(self, recipe: RecipeSpec) -> tuple[bool, str]:
        return recipe.supports(self.name)

    def _check_recipe(self, job: RunSpec) -> None:
        ok, why = self.supports(job.recipe)
        if not ok:
            raise LabError(f"{self.name} backend cannot run {job.recipe.name}: {why}")
        try:  # again, against this lab's configured limits (the spec may have been hand-built)
            make_recipe(job.recipe.name, job.recipe.params, self.lab_config)
        except RecipeError as exc:
            raise LabError(f"recipe rejected: {exc}") from None

    def extra_spec(self, job: RunSpec, host: HostConfig, releases: dict) -> dict:
        """Backend-specific additions to spec.json (the lkp backend adds its job file)."""
        return {}

    # ------------------------------------------------------------------------------ API
    def submit(self, job: RunSpec, machine: str | None = None) -> str:
        job.validate()
        self._check_recipe(job)
        host = self.cfg.pick(machine)
        releases = {label: expected_release(job.build(label), host.releases) for label in ("good", "bad")}
        if releases["good"] == releases["bad"]:
            raise LabError(f"good and bad builds have the same kernel release {releases['good']}: "
                           "the host could not tell them apart")
        for label in ("good", "bad"):
            host.boot_command(label, releases[label])  # validates
        runs = self.work_dir / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        while True:
            run_id = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{secrets.token_hex(4)}"
            run_dir = runs / run_id
            try:
                run_dir.mkdir()
                break
            except FileExistsError:
                continue
        handle = f"{self.name}:{run_id}"
        schedule = job.schedule()
        atomic_write_json(run_dir / "spec.json", {
            "handle": handle, "kind": self.kind, "job": job.to_dict(), "host": asdict(host),
            "releases": releases, "schedule": schedule, "work_dir": self.cfg.work_dir,
            "exclusive": self.cfg.exclusive, "lab_limits": self.lab_config, "submitted_at": time.time(),
            **self.extra_spec(job, host, releases)})
        atomic_write_json(run_dir / "state.json", {
            "status": Status(QUEUED, "waiting for the worker", 0, len(schedule), updated_at=time.time()).to_dict(),
            "batches": []})
        log = open(run_dir / "worker.log", "ab")
        try:
            proc = subprocess.Popen([sys.executable, "-m", self.WORKER_MODULE, "worker", str(run_dir)],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, close_fds=True, cwd=str(run_dir))
        finally:
            log.close()
        self._children.add(handle, proc)
        atomic_write_json(run_dir / "worker.json", {"pid": proc.pid, "pgid": proc.pid, "started_at": time.time()})
        return handle

    def _reap(self, handle: str) -> None:
        self._children.reap(handle)

    def _worker_pid(self, run_dir: Path):
        return (read_json(run_dir / "worker.json", {}) or {}).get("pid")

    def poll(self, handle: str) -> Status:
        run_dir = self._run_dir(handle)
        self._reap(handle)
        state = read_json(run_dir / "state.json", {}) or {}
        st = Status.from_dict(state.get("status") or {"state": FAILED, "message": "state.json unreadable"})
        if st.finished:
            return st
        pid = self._worker_pid(run_dir)
        if pid is None:
            time.sleep(0.2)
            pid = self._worker_pid(run_dir)
        if proc_alive_and_ours(pid, str(run_dir)):
            return st
        self._reap(handle)
        state = read_json(run_dir / "state.json", {}) or {}
        st = Status.from_dict(state.get("status") or {"state": FAILED})
        if st.finished:
            return st
        tail = ""
        try:
            lines = (run_dir / "worker.log").read_text(errors="replace").strip().splitlines()
            tail = f"; worker.log: {printable(lines[-1], 200)}" if lines else ""
        except OSError:
            pass
        st = Status(FAILED, f"worker process {pid} died before finishing (last state: {st.state}: {st.message}){tail}",
                    st.batches_done, st.batches_total, updated_at=time.time())
        state["status"] = st.to_dict()
        atomic_write_json(run_dir / "state.json", state)
        self._kill_remote(run_dir)
        return st

    def fetch_samples(self, handle: str) -> Samples:
        run_dir = self._run_dir(handle)
        st = self.poll(handle)
        if st.state != DONE:
            raise LabError(f"run {handle} is {st.state}: {st.message}")
        res = read_json(run_dir / "result.json")
        if not res:
            raise LabError(f"run {handle} is done but result.json is missing")
        return Samples(res["samples"], log_path=str(run_dir / "run.log"), metric=res["metric"],
                       higher_is_better=res["higher_is_better"], order=res.get("order"), warmups=res.get("warmups"))

    def _kill_remote(self, run_dir: Path, attempts: int = 3) -> None:
        """Best effort: kill the remote step of a run whose worker is gone (a remote command
        otherwise keeps running after its ssh connection drops).  A failed connection is retried
        (a loaded host can be slow to answer); the outcome is recorded in ``state.json``."""
        spec = read_json(run_dir / "spec.json", {}) or {}
        state = read_json(run_dir / "state.json", {}) or {}
        rundir = state.get("remote_dir")
        if not rundir or not state.get("remote_busy"):
            return
        try:
            host = HostConfig(**spec["host"])
        except (KeyError, TypeError):
            return
        error = "not tried"
        for attempt in range(attempts):
            if attempt:
                time.sleep(min(4.0, 0.5 * 2 ** attempt))
            try:
                s = SshSession(host).connect()
            except LabError as exc:
                error = str(exc)
                continue
            try:
                s.run(remote_kill(rundir), timeout=30)
                s.run(f"rm -rf -- {shlex.quote(rundir)}", timeout=60)
            except LabError as exc:
                error = str(exc)
                continue
            finally:
                s.close()
            state = read_json(run_dir / "state.json", {}) or {}
            state["remote_busy"] = False
            state["remote_cleanup"] = f"remote step killed after the worker died (attempt {attempt + 1})"
            atomic_write_json(run_dir / "state.json", state)
            return
        state = read_json(run_dir / "state.json", {}) or {}
        state["remote_cleanup"] = f"could not kill the remote step: {printable(error, 200)}"
        atomic_write_json(run_dir / "state.json", state)

    def cancel(self, handle: str, grace_s: float = 15.0) -> Status:
        run_dir = self._run_dir(handle)
        (run_dir / "cancel").write_text(str(time.time()))
        pid = self._worker_pid(run_dir)
        if proc_alive_and_ours(pid, str(run_dir)):
            try:
                os.kill(pid, signal.SIGTERM)  # the worker kills its remote step and records "cancelled"
            except ProcessLookupError:
                pass
            end = time.monotonic() + grace_s
            while time.monotonic() < end and proc_alive_and_ours(pid, str(run_dir)):
                self._reap(handle)
                time.sleep(0.1)
            if proc_alive_and_ours(pid, str(run_dir)):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                time.sleep(0.2)
        self._reap(handle)
        self._kill_remote(run_dir)
        state = read_json(run_dir / "state.json", {}) or {}
        st = Status.from_dict(state.get("status") or {"state": FAILED})
        if not st.finished:
            st = Status(FAILED, "cancelled by request", st.batches_done, st.batches_total, cancelled=True,
                        updated_at=time.time())
            state["status"] = st.to_dict()
            atomic_write_json(run_dir / "state.json", state)
        return st

    def describe(self, handle: str) -> dict:
        run_dir = self._run_dir(handle)
        st = self.poll(handle)
        spec = read_json(run_dir / "spec.json", {}) or {}
        state = read_json(run_dir / "state.json", {}) or {}
        host = spec.get("host") or {}
        return {"backend": self.name, "handle": handle, "run_dir": str(run_dir), "status": st.to_dict(),
                "job": spec.get("job"), "schedule": spec.get("schedule"), "releases": spec.get("releases"),
                "machine": host.get("name"), "host": f"{host.get('user')}@{host.get('host')}:{host.get('port')}",
                "batches": state.get("batches", []), "log_path": str(run_dir / "run.log")}

    def list_runs(self) -> list[str]:
        d = self.work_dir / "runs"
        if not d.is_dir():
            return []
        return sorted(f"{self.name}:{p.name}" for p in d.iterdir()
                      if RUN_ID_RE.match(p.name) and (p / "spec.json").is_file())


# ===================================================================================== worker
class SshWorker:
    """Drives one run's batches (in the detached worker process)."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.spec = json.loads((run_dir / "spec.json").read_text())
        self.host = HostConfig(**self.spec["host"])
        self.job = RunSpec.from_dict(self.spec["job"], {"max_size": 1 << 40})
        self.schedule = [tuple(x) for x in self.spec["schedule"]]
        self.releases = self.spec["releases"]
        self.state = read_json(run_dir / "state.json", {}) or {}
        self.state.setdefault("batches", [])
        self.deadline = time.monotonic() + self.job.timeouts.total_s
        self.log = open(run_dir / "run.log", "a", encoding="utf-8", errors="replace")
        self.session: SshSession | None = None
        self.stop_requested = False
        self.remote_dir = f"{self.host.scratch_dir}/regtriage-{run_dir.name}"
        if not SAFE_SCRATCH_RE.match(self.remote_dir):
            raise LabError(f"unsafe remote run directory {self.remote_dir!r}")

    # -- state ----------------------------------------------------------------------------------
    def set_status(self, state: str, message: str, **kw) -> None:
        done = sum(1 for b in self.state["batches"] if b.get("ok"))
        self.state["status"] = Status(state, message, done, len(self.schedule), updated_at=time.time(), **kw).to_dict()
        atomic_write_json(self.run_dir / "state.json", self.state)

    def save(self) -> None:
        atomic_write_json(self.run_dir / "state.json", self.state)

    def note(self, text: str) -> None:
        self.log.write(f"# {time.strftime('%H:%M:%S')} {text}\n")
        self.log.flush()

    def check_cancel(self) -> None:
        if self.stop_requested or (self.run_dir / "cancel").exists():
            raise _Cancelled()
        if time.monotonic() > self.deadline:
            raise BatchFailed(f"total timeout of {self.job.timeouts.total_s:.0f}s exceeded")

    def _on_term(self, signum, frame):
        self.stop_requested = True

    # -- lock -------------------------------------------------------------------------------------
    def lock_dir(self) -> Path:
        return Path(self.spec["work_dir"]) / "locks"

    def acquire_lock(self) -> None:
        """One run per machine at a time (flock: released by the kernel if the worker dies)."""
        if not self.spec.get("exclusive", True):
            return
        locks = self.lock_dir()
        locks.mkdir(parents=True, exist_ok=True)
        self.lock_fh = open(locks / f"{self.host.name}.lock", "a+")
        waiting = False
        while True:
            try:
                fcntl.flock(self.lock_fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not waiting:
                    self.note(f"waiting for another run on machine {self.host.name}")
                    self.set_status(QUEUED, f"waiting for another run on machine {self.host.name}")
                    waiting = True
                self.check_cancel()
                time.sleep(0.5)

    # -- remote ---------------------------------------------------------------------------------
    def connect(self) -> SshSession:
        if self.session is not None and self.session.alive:
            return self.session
        if self.session is not None:
            self.session.close()
        self.session = SshSession(self.host).connect()
        return self.session

    def remote(self, command: str, *, timeout: float, stdin: bytes | None = None, log: bool = True,
               cancellable: bool = True) -> CommandResult:
        s = self.connect()
        if log:
            self.log.write(f"$ {command}\n")
        res = s.run(command, timeout=timeout, stdin=stdin, check=self.check_cancel if cancellable else None)
        if log:
            for name, text in (("stdout", res.stdout), ("stderr", res.stderr)):
                if text.strip():
                    t = text if len(text) <= LOG_LIMIT else text[:LOG_LIMIT] + "\n[... cut]\n"
                    self.log.write("".join(f"{name}| {line}\n" for line in t.splitlines()))
            self.log.write(f"# exit {res.rc} in {res.duration_s:.3f}s\n")
            self.log.flush()
        return res

    def kill_remote_step(self) -> None:
        try:
            s = self.connect()
            s.run(remote_kill(self.remote_dir), timeout=30)
            self.note("killed the remote step")
        except LabError as exc:
            self.note(f"could not kill the remote step: {exc}")

    def step(self, argv: list[str], timeout: float) -> CommandResult:
        """Run one recipe step in the remote run directory; kills it on cancel or timeout."""
        self.state["remote_busy"] = True
        self.save()
        try:
            return self.remote(remote_step(self.remote_dir, argv), timeout=timeout)
        except (_Cancelled, LabError):
            self.kill_remote_step()
            raise

    def running_release(self) -> str:
        res = self.remote(self.host.uname_command, timeout=60)
        rel = res.stdout.strip()
        if res.rc != 0 or not rel:
            raise BatchFailed(f"'{self.host.uname_command}' failed on {self.host.host} (exit {res.rc}): "
                          f"{printable(res.stderr.strip(), 200)}")
        return printable(rel.splitlines()[-1].strip(), 100)

    def ensure_kernel(self, label: str) -> str:
        """Make the host run the build's kernel; returns the release seen (== expected) or
        raises BatchFailed with the reason."""
        want = self.releases[label]
        have = self.running_release()
        if have == want:
            return have
        cmd = self.host.boot_command(label, want)
        if cmd is None:
            raise BatchFailed(f"host {self.host.host} runs kernel {have}, expected {want} for build {label}, "
                          "and no boot command is configured (kernels/boot_switch)")
        self.note(f"host runs {have}; switching to {want} for build {label}")
        self.set_status(RUNNING, f"switching {self.host.host} to {want} ({label})")
        res = None
        try:
            res = self.remote(cmd, timeout=self.job.timeouts.boot_s)
        except LabError as exc:
            if not self.host.reboot:
                raise BatchFailed(f"boot command for {want} failed: {exc}") from None
            self.note(f"boot command ended with: {exc} (expected while the host reboots)")
        if res is not None and res.rc != 0 and not self.host.reboot:
            raise BatchFailed(f"boot command for {want} failed (exit {res.rc}): {printable(res.stderr.strip(), 200)}")
        if self.host.reboot:
            self.session.close()
            end = time.monotonic() + self.job.timeouts.boot_s
            t_down = time.monotonic() + self.host.reboot_down_s
            while time.monotonic() < t_down:
                self.check_cancel()
                time.sleep(0.2)
            last = None
            while True:
                self.check_cancel()
                try:
                    self.connect()
                    break
                except LabError as exc:
                    last = exc
                    if "host key verification failed" in str(exc):
                        raise BatchFailed(str(exc)) from None
                if time.monotonic() > end:
                    raise BatchFailed(f"host did not come back within {self.job.timeouts.boot_s:.0f}s "
                                  f"after switching to {want}: {last}")
                time.sleep(2)
        have = self.running_release()
        if have != want:
            raise BatchFailed(f"host {self.host.host} runs kernel {have} after the boot command, "
                          f"expected {want} for build {label}")
        return have

    # -- iterations -------------------------------------------------------------------------------
    def prepare_remote(self) -> None:
        res = self.remote(f"mkdir -p -- {shlex.quote(self.remote_dir)}", timeout=60)
        if res.rc != 0:
            raise BatchFailed(f"cannot create {self.remote_dir} on {self.host.host}: {printable(res.stderr.strip(), 200)}")

    def iteration(self, index: int, label: str, i: int, batch_end: float) -> float:
        """Run one iteration of the recipe; return the metric value."""
        steps = self.job.recipe.host_argv(self.remote_dir)
        measured = measured_step(steps)
        res = None
        for n, argv in enumerate(steps):
            left = batch_end - time.monotonic()
            if left <= 0:
                raise BatchFailed(f"batch timeout: {self.job.timeouts.batch_s:.0f}s exceeded")
            out = self.step(argv, left)
            if out.rc != 0:
                raise BatchFailed(f"{argv[0]} exited {out.rc}: {printable((out.stderr or out.stdout).strip()[-200:], 200)}")
            if n == measured:
                res = out
        try:
            return self.job.recipe.parse_output(res.stdout, res.stderr)
        except parsers.ParseError as exc:
            raise BatchFailed(f"cannot parse {steps[measured][0]} output: {exc}") from None

    def run_batch(self, index: int, label: str, n_samples: int) -> dict:
        t0 = time.monotonic()
        batch = {"index": index, "build": label, "expected_release": self.releases[label], "kernel_release": None,
                 "samples": [], "warmups": [], "ok": False, "error": None}
        self.note(f"batch {index + 1}/{len(self.schedule)} build={label} release={self.releases[label]} "
                  f"samples={n_samples} warmup={self.job.warmup}")
        try:
            batch["kernel_release"] = self.ensure_kernel(label)
            self.set_status(RUNNING, f"batch {index + 1}/{len(self.schedule)}: {label} on {batch['kernel_release']}")
            batch_end = time.monotonic() + self.job.timeouts.batch_s
            for i in range(self.job.warmup + n_samples):
                self.check_cancel()
                v = self.iteration(index, label, i, batch_end)
                if not v > 0:
                    raise BatchFailed(f"non-positive sample {v}")
                (batch["warmups"] if i < self.job.warmup else batch["samples"]).append(v)
                self.note(f"{'WARMUP' if i < self.job.warmup else 'BENCH'} {self.job.recipe.metric}={v:.6g}")
            after = self.running_release()
            if after != self.releases[label]:
                raise BatchFailed(f"host kernel changed during the batch: {after}, expected {self.releases[label]}")
            batch["ok"] = True
        except BatchFailed as exc:
            batch["error"] = str(exc)
        except LabError as exc:
            batch["error"] = str(exc)
        batch["duration_s"] = round(time.monotonic() - t0, 3)
        return batch

    def cleanup_remote(self) -> None:
        try:
            if self.session is not None and self.session.alive:
                self.remote(f"rm -rf -- {shlex.quote(self.remote_dir)}", timeout=120, cancellable=False)
                self.state["remote_busy"] = False
                self.save()
        except (LabError, _Cancelled, BatchFailed) as exc:
            self.note(f"remote cleanup failed: {exc}")

    def begin(self) -> None:
        """Hook for subclasses: runs once after the remote directory exists."""

    # -- the run ----------------------------------------------------------------------------------
    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        atomic_write_json(self.run_dir / "worker.json",
                           {"pid": os.getpid(), "pgid": os.getpgid(0), "started_at": time.time()})
        try:
            self.check_cancel()
            self.acquire_lock()
            self.set_status(RUNNING, f"connecting to {self.host.user}@{self.host.host}:{self.host.port}")
            self.note(f"machine {self.host.name}: {self.host.user}@{self.host.host}:{self.host.port}; "
                      f"releases good={self.releases['good']} bad={self.releases['bad']}")
            try:
                self.connect()
            except LabError as exc:
                raise BatchFailed(str(exc)) from None
            self.state["remote_dir"] = self.remote_dir
            self.prepare_remote()
            self.begin()
            for index, (label, n) in enumerate(self.schedule):
                self.check_cancel()
                batch = self.run_batch(index, label, n)
                self.state["batches"].append(batch)
                if not batch["ok"]:
                    self.note(f"batch {index + 1} failed: {batch['error']}")
                    self.cleanup_remote()
                    self.set_status(FAILED, f"batch {index + 1} ({label}) failed: {batch['error']}")
                    return 1
                self.set_status(RUNNING, f"batch {index + 1}/{len(self.schedule)} done")
            samples = {"good": [], "bad": []}
            warmups = {"good": [], "bad": []}
            for b in self.state["batches"]:
                samples[b["build"]] += b["samples"]
                warmups[b["build"]] += b["warmups"]
            self.cleanup_remote()
            atomic_write_json(self.run_dir / "result.json", {
                "samples": samples, "warmups": warmups, "metric": self.job.recipe.metric,
                "higher_is_better": self.job.recipe.higher_is_better,
                "order": [b["build"] for b in self.state["batches"]], "releases": self.releases,
                "machine": self.host.name})
            self.note("done")
            self.set_status(DONE, f"{len(samples['good'])} good + {len(samples['bad'])} bad samples "
                                  f"({self.job.recipe.metric}) on {self.host.name}")
            return 0
        except _Cancelled:
            self.note("cancelled")
            self.cleanup_remote()
            self.set_status(FAILED, "cancelled by request", cancelled=True)
            return 2
        except (BatchFailed, LabError, RecipeError, OSError) as exc:
            self.note(f"failed: {exc}")
            self.cleanup_remote()
            self.set_status(FAILED, str(exc))
            return 1
        except Exception as exc:  # noqa: BLE001 - report anything instead of dying silently
            self.note(f"internal error: {exc!r}")
            self.set_status(FAILED, f"internal error: {exc!r}")
            raise
        finally:
            if self.session is not None:
                self.session.close()
            self.log.close()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] != "worker":
        print("usage: python -m bot.lab.backends.ssh worker RUN_DIR", file=sys.stderr)
        return 64
    return SshWorker(Path(argv[1])).run()


if __name__ == "__main__":
    sys.exit(main())
