"""The ``qemu`` lab backend: boot each build's kernel in QEMU with a busybox initramfs that runs
the recipe, and read the samples off the serial console.

How a run works
---------------
* ``submit`` validates the :class:`RunSpec`, creates ``<work_dir>/runs/<run id>/`` with
  ``spec.json`` and ``state.json``, and starts a detached worker process
  (``python -m bot.lab.backends.qemu worker <run dir>``, its own session/process group) that
  outlives the submitting process.  The handle is ``qemu:<run id>``.
* The worker resolves both builds (:mod:`bot.lab.builds`: image path, Debian package download,
  or tree build), builds/caches the initramfs (:mod:`bot.lab.initramfs`), then runs the batches in
  the spec's order (``abab`` by default).  **One guest boot per batch**; a batch runs ``warmup``
  discarded iterations then ``samples_per_batch`` measured ones (``WARMUP``/``BENCH`` lines).  So
  with the defaults (``samples_per_batch=1``) every sample comes from a fresh boot and builds
  alternate boot by boot; raise ``samples_per_batch`` to trade independence for speed (a boot is
  ~5-15 s under TCG).
* QEMU runs in the worker's process group with ``PR_SET_PDEATHSIG=SIGKILL``: if the worker dies,
  its guest dies too.  Per boot: no start marker within ``timeouts.boot_s`` -> killed, failed
  ("boot timeout"); longer than ``timeouts.batch_s`` -> killed, failed; the whole run is bounded
  by ``timeouts.total_s``.
* Files in the run directory: ``spec.json``, ``state.json`` (status, batches with their samples,
  resolved builds, accelerator), ``worker.json`` (pid), ``run.log`` (host notes plus every
  guest console in execution order: the raw log), ``batch-NNN-<build>.console``/``.stderr``,
  ``result.json`` (samples) when done.  Everything is plain JSON, so any process with the same
  ``work_dir`` can poll, fetch or cancel; a worker that died is detected (pid gone or not ours)
  and the run reported failed.
* The decisions (batch order, status transitions, the boot/batch/total timeouts and the
  power-off grace, a dead worker's diagnosis) are :class:`~bot.lab.backends.runstate.RunMachine`'s:
  the worker feeds it what QEMU does and carries out what it answers; this module is the
  transport (processes, console files, the accelerator).

Accelerator (``accel``): ``tcg`` always works; ``kvm`` is used as configured; ``auto`` (default)
tries KVM on the first boot with a short start-marker timeout (``kvm_probe_timeout_s``, 15 s; a
working KVM guest reaches init in 1-3 s) when ``/dev/kvm`` is usable, falls back to TCG if the
guest hangs or QEMU fails, and remembers the outcome in ``<work_dir>/accel.json`` (delete it to
probe again).  On the machines this was written on, KVM hangs after "Probing EDD".

Guest: ``-m`` = max(memory_mib, scratch + 256 MiB), ``-smp`` from config (default 1), serial
console on QEMU's stdout, ``-nodefaults -no-reboot``, kernel command line
``console=ttyS0 quiet loglevel=1 panic=-1``.  The scratch area is a tmpfs in guest RAM, so
``dd`` recipes measure the kernel's page-cache/tmpfs paths, not a disk; ``direct`` I/O is not
supported there.
Recipes whose tool measures itself (perf bench, hackbench, stress-ng, sysbench cpu/memory) get
the host's binary and its shared libraries in the initramfs (``guest_tools``, see
:mod:`bot.lab.initramfs`); the guest echoes the tool's output as ``OUT`` lines in the console log.

Configuration (``[lab.qemu]``): ``work_dir`` (default ``$REGTRIAGE_HOME/lab/qemu``),
``build_cache`` (default ``<work_dir>/builds``), ``deb_dir``, ``qemu_binary`` (default
``qemu-system-<arch>``), ``accel``, ``kvm_probe_timeout_s``, ``memory_mib`` (512),
``max_memory_mib`` (4096), ``smp`` (1), ``cpu`` (QEMU's default model), ``busybox``
(``/bin/busybox``), ``exclusive`` (true: runs sharing a work dir take ``lab.lock`` and boot one
at a time; a waiting run is ``queued``).
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bot.lab import initramfs as initramfs_mod
from bot.lab.backends.base import Backend, LabError, RunSpec, Status, backend_table
from bot.lab.backends.rundir import (Children, RunDirs, atomic_write_json, default_work_dir, exclusive_lock, printable,
                                     read_json, save_state, worker_main, write_result)
from bot.lab.backends.runstate import (Begin, BatchFinished, BatchStarted, CancelRequested, Complete, Expired, Failed,
                                       Finished, GuestStarted, Progress, Ready, ResultSeen, RunBatch, RunMachine, Save,
                                       StopWork, Tick, Waiting)
from bot.lab.builds import BuildError
from bot.lab.kernels import resolve
from bot.lab.procs import proc_alive_and_ours
from bot.lab.recipes import MiB, RecipeError, RecipeSpec
APPEND = "console=ttyS0 quiet loglevel=1 panic=-1"
QEMU_FOR_ARCH = {"x86_64": "qemu-system-x86_64", "i386": "qemu-system-i386", "aarch64": "qemu-system-aarch64"}
BENCH_RE = re.compile(r"^(BENCH|WARMUP) ([A-Za-z0-9_.-]{1,64})=([0-9]+(?:\.[0-9]+)?)$")
START_MARK = "REGTRIAGE-START"
END_MARK = "REGTRIAGE-END"
PR_SET_PDEATHSIG = 1


@dataclass
class QemuConfig:
    work_dir: str
    build_cache: str | None = None
    deb_dir: str | None = None
    qemu_binary: str | None = None
    accel: str = "auto"
    kvm_probe_timeout_s: float = 15.0
    memory_mib: int = 512
    max_memory_mib: int = 4096
    smp: int = 1
    cpu: str | None = None
    busybox: str = initramfs_mod.DEFAULT_BUSYBOX
    exclusive: bool = True  # one run boots at a time per work dir (lab.lock)

    def __post_init__(self):
        if self.accel not in ("auto", "kvm", "tcg"):
            raise LabError(f"[lab.qemu] accel must be auto, kvm or tcg, got {self.accel!r}")
        for k, lo, hi in (("memory_mib", 128, 1 << 20), ("max_memory_mib", 128, 1 << 20), ("smp", 1, 64)):
            v = getattr(self, k)
            if type(v) is not int or not lo <= v <= hi:
                raise LabError(f"[lab.qemu] {k} must be an int in [{lo}, {hi}]")
        if not isinstance(self.kvm_probe_timeout_s, (int, float)) or not 1 <= self.kvm_probe_timeout_s <= 600:
            raise LabError("[lab.qemu] kvm_probe_timeout_s must be in [1, 600]")
        if not isinstance(self.exclusive, bool):
            raise LabError("[lab.qemu] exclusive must be true or false")
        if self.cpu is not None and not re.fullmatch(r"[A-Za-z0-9_.+-]{1,64}", self.cpu):
            raise LabError(f"[lab.qemu] cpu: invalid model {self.cpu!r}")
        self.work_dir = str(Path(self.work_dir).expanduser().resolve())

    @property
    def builds_dir(self) -> str:
        return self.build_cache or os.path.join(self.work_dir, "builds")


def qemu_marker(run_dir: Path) -> str:
    """A string in every qemu command line of a run (via ``-name``), to verify pids as ours."""
    return f"regtriage-{run_dir.name}"


def _pgid_members(pgid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            out.append(int(d.name))
    return out


class QemuBackend(RunDirs, Backend):
    name = "qemu"

    def __init__(self, cfg: QemuConfig, lab_config: dict | None = None):
        self.cfg = cfg
        self.lab_config = {k: v for k, v in (lab_config or {}).items() if k != "qemu"}  # recipe limits
        self.work_dir = Path(cfg.work_dir)
        self._children = Children()

    @classmethod
    def from_config(cls, config: dict | None = None, **overrides) -> "QemuBackend":
        cfg, q = backend_table(config, "qemu", overrides)
        q.setdefault("work_dir", str(default_work_dir("qemu")))
        allowed = set(QemuConfig.__dataclass_fields__)
        unknown = set(q) - allowed
        if unknown:
            raise LabError(f"[lab.qemu] unknown keys: {sorted(unknown)}")
        return cls(QemuConfig(**q), cfg)

    # ------------------------------------------------------------------------------ helpers
    def guest_memory_mib(self, recipe: RecipeSpec) -> tuple[int, int]:
        """(guest memory, tmpfs scratch size) in MiB for a recipe."""
        data = recipe.bytes or 0
        scratch = max(64, math.ceil(data / MiB) + 32)
        return max(self.cfg.memory_mib, scratch + 256), scratch

    def supports(self, recipe: RecipeSpec) -> tuple[bool, str]:
        ok, why = recipe.supports("qemu")
        if not ok:
            return ok, why
        mem, _ = self.guest_memory_mib(recipe)
        if mem > self.cfg.max_memory_mib:
            return False, f"needs {mem} MiB of guest memory, more than max_memory_mib={self.cfg.max_memory_mib}"
        return True, "ok"

    def qemu_binary(self, arch: str) -> str:
        return self.cfg.qemu_binary or QEMU_FOR_ARCH.get(arch, f"qemu-system-{arch}")

    # ------------------------------------------------------------------------------ API
    def submit(self, job: RunSpec) -> str:
        self._vet(job)
        if job.good.arch != job.bad.arch:
            raise LabError("good and bad builds must have the same arch")
        tools = job.recipe.recipe.guest_tools
        if tools and job.good.arch != os.uname().machine:
            raise LabError(f"{job.recipe.name} copies this host's {', '.join(tools)} into the guest: "
                           f"the builds' arch {job.good.arch} must be the host's ({os.uname().machine})")
        if shutil.which(self.qemu_binary(job.good.arch)) is None:
            raise LabError(f"{self.qemu_binary(job.good.arch)} not found (Debian: apt-get install qemu-system-x86)")
        problem = initramfs_mod.busybox_problem(self.cfg.busybox)
        if problem:
            raise LabError(problem)
        handle, run_dir = self._new_run(
            job, {"backend": asdict(self.cfg), "build_options": self.lab_config.get("build_options")},
            {"builds": {}, "accel": None}, "waiting for the worker")
        self._start(handle, run_dir, "bot.lab.backends.qemu")
        return handle

    def _after_worker_died(self, run_dir: Path, state: dict) -> None:
        self._kill_leftovers(run_dir, state)

    def cancel(self, handle: str, grace_s: float = 5.0) -> Status:
        run_dir = self._run_dir(handle)
        (run_dir / "cancel").write_text(str(time.time()))
        pid = self._worker_pid(run_dir)  # the worker's own process group: the worker and its qemu
        self._stop_worker(handle, run_dir, grace_s, group=True, alive=lambda: bool(_pgid_members(pid)))
        self._reap(handle)
        self._kill_leftovers(run_dir, read_json(run_dir / "state.json", {}) or {})
        return self._settle_cancel(run_dir)

    def _kill_leftovers(self, run_dir: Path, state: dict) -> None:
        """Kill a recorded qemu that is still ours (PDEATHSIG normally got it already)."""
        qpid = state.get("qemu_pid")
        if proc_alive_and_ours(qpid, qemu_marker(run_dir)):
            try:
                os.kill(qpid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _describe_more(self, spec: dict, state: dict) -> dict:
        return {"builds": state.get("builds", {}), "accel": state.get("accel")}


# ====================================================================================== worker
class _Cancelled(Exception):
    pass


class _BootFailed(Exception):
    def __init__(self, message: str, *, reached_init: bool = False):
        super().__init__(message)
        self.reached_init = reached_init


def _set_pdeathsig() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:  # noqa: BLE001
        pass


def parse_console(text: str) -> dict:
    """Parse a guest console log: start marker info, warm-up and measured samples, result."""
    out = {"started": False, "kernel": None, "ended": False, "result": None, "reason": None,
           "bench": [], "warmup": [], "metrics": set()}
    for raw in text.splitlines():
        line = raw.strip("\r\n\x00 ")
        if line.startswith(START_MARK):
            out["started"] = True
            m = re.search(r"kernel=(\S+)", line)
            out["kernel"] = printable(m.group(1), 100) if m else None
        elif line == END_MARK:
            out["ended"] = True
        elif line.startswith("RESULT "):
            parts = line.split(" ", 2)
            out["result"] = parts[1] if len(parts) > 1 else None
            out["reason"] = printable(parts[2]) if len(parts) > 2 else None
        else:
            m = BENCH_RE.match(line)
            if m and out["started"]:
                (out["bench"] if m.group(1) == "BENCH" else out["warmup"]).append(float(m.group(3)))
                out["metrics"].add(m.group(2))
    return out


class _Worker:
    """The qemu transport of one run (in the detached worker process): resolves the builds,
    boots a guest per batch and feeds what it sees to the run's :class:`RunMachine`."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        spec = json.loads((run_dir / "spec.json").read_text())
        self.cfg = QemuConfig(**spec["backend"])
        self.job = RunSpec.from_dict(spec["job"], {"max_size": 1 << 40})
        self.schedule = [tuple(x) for x in spec["schedule"]]
        self.build_options = spec.get("build_options") or None  # [lab.builds] host settings (tree builds)
        self.state = read_json(run_dir / "state.json", {}) or {}
        self.state.setdefault("builds", {})
        self.machine = RunMachine.restore(self.schedule, self.job.timeouts, self.state)
        self.qemu: subprocess.Popen | None = None
        self.log = open(run_dir / "run.log", "a", encoding="utf-8", errors="replace")

    # -- the machine ------------------------------------------------------------------------------
    def send(self, event) -> list:
        """Feed the run's machine; carry out what it asks (save the state, stop the guest)."""
        actions = self.machine.send(event)
        for a in actions:
            if isinstance(a, StopWork):
                self.stop_qemu()
            elif isinstance(a, Save):
                save_state(self.run_dir, self.state, self.machine)
        return actions

    def note(self, text: str) -> None:
        self.log.write(f"# {time.strftime('%H:%M:%S')} {text}\n")
        self.log.flush()

    def check_cancel(self) -> list[Expired]:
        """Raise on a cancel request or the run's total timeout; the batch limits that passed."""
        if (self.run_dir / "cancel").exists():
            raise _Cancelled()
        expired = [a for a in self.send(Tick(time.monotonic())) if isinstance(a, Expired)]
        for a in expired:
            if a.phase == "total":
                raise _BootFailed(a.reason)
        return expired

    # -- one run at a time per work dir -----------------------------------------------------------
    def acquire_lab_lock(self) -> None:
        """Runs sharing a work dir boot one at a time (concurrent guests on a small host would
        disturb each other's numbers).  flock: released by the kernel if the worker dies."""
        if not self.cfg.exclusive:
            return

        def waiting() -> None:
            self.note("waiting for another run in this work dir to finish")
            self.send(Waiting(time.monotonic(), "waiting for another run in this work dir to finish (lab.lock)"))

        self.lock_fh, waited = exclusive_lock(Path(self.cfg.work_dir) / "lab.lock", waiting, self.check_cancel)
        if waited:
            self.send(Progress(time.monotonic(), "got the lab lock"))

    # -- accelerator ----------------------------------------------------------------------------
    def accel_file(self) -> Path:
        return Path(self.cfg.work_dir) / "accel.json"

    def initial_accel(self) -> tuple[str, bool]:
        """(accelerator, is_probe)."""
        if self.cfg.accel != "auto":
            return self.cfg.accel, False
        known = read_json(self.accel_file())
        if isinstance(known, dict) and isinstance(known.get("kvm_works"), bool):
            return ("kvm" if known["kvm_works"] else "tcg"), False
        try:
            fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
            os.close(fd)
        except OSError as exc:
            self.remember_kvm(False, f"/dev/kvm not usable: {exc.strerror}")
            return "tcg", False
        return "kvm", True

    def remember_kvm(self, works: bool, reason: str) -> None:
        self.note(f"accel: KVM {'works' if works else 'does not work'} ({reason})")
        atomic_write_json(self.accel_file(), {"kvm_works": works, "reason": reason, "checked_at": time.time()})

    # -- one boot -------------------------------------------------------------------------------
    def boot(self, index: int, label: str, kernel: str, initrd: Path, accel: str, mem: int,
             n_samples: int, boot_timeout: float) -> dict:
        stem = f"batch-{index:03d}-{label}"
        if accel == "kvm-probe":
            accel, stem = "kvm", stem + "-kvmprobe"
        console = self.run_dir / f"{stem}.console"
        errf = self.run_dir / f"{stem}.stderr"
        argv = [self.qemu_bin, "-accel", accel, "-m", str(mem), "-smp", str(self.cfg.smp), "-display", "none",
                "-monitor", "none", "-serial", "stdio", "-no-reboot", "-nodefaults",
                "-kernel", kernel, "-initrd", str(initrd), "-append", APPEND]
        if self.cfg.cpu:
            argv[1:1] = ["-cpu", self.cfg.cpu]
        # a marker in the command line so pids can be verified as ours before being killed
        argv += ["-name", f"regtriage,process={qemu_marker(self.run_dir)}"]
        self.note(f"batch {index + 1}/{len(self.schedule)} build={label} accel={accel} samples={n_samples} "
                  f"warmup={self.job.warmup} kernel={kernel}")
        t0 = time.monotonic()
        with open(console, "wb") as out, open(errf, "wb") as err:
            self.qemu = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                         preexec_fn=_set_pdeathsig, close_fds=True)
        self.state["qemu_pid"] = self.qemu.pid
        self.send(BatchStarted(t0, index, boot_s=boot_timeout))
        self.send(Progress(time.monotonic(), f"batch {index + 1}/{len(self.schedule)}: booting {label} ({accel})"))
        failure: str | None = None
        reached_init = False
        try:
            while True:
                rc = self.qemu.poll()
                text = console.read_text(errors="replace") if console.exists() else ""
                if not reached_init and START_MARK in text:
                    reached_init = True
                    self.send(GuestStarted(time.monotonic()))
                if rc is not None:
                    break
                if "\nRESULT " in text or text.startswith("RESULT "):
                    self.send(ResultSeen(time.monotonic()))
                expired = self.check_cancel()
                if any(a.phase == "poweroff" for a in expired):
                    self.note("guest printed its result but did not power off: killed")
                    break
                if any(a.phase == "boot" for a in expired):
                    failure = f"boot timeout: no start marker after {boot_timeout:.0f}s ({accel})"
                    break
                if expired:
                    failure = expired[0].reason
                    break
                time.sleep(0.2)
        finally:
            rc = self.stop_qemu()
        duration = time.monotonic() - t0
        text = console.read_text(errors="replace") if console.exists() else ""
        stderr = errf.read_text(errors="replace") if errf.exists() else ""
        self.log.write(text if text.endswith("\n") or not text else text + "\n")
        if stderr.strip():
            self.log.write("".join(f"# qemu stderr: {line}\n" for line in stderr.strip().splitlines()[-20:]))
        self.log.flush()
        parsed = parse_console(text)
        if failure is None:
            failure = self.judge(parsed, rc, text, stderr, n_samples)
        return {"index": index, "build": label, "accel": accel, "kernel_release": parsed["kernel"],
                "samples": parsed["bench"], "warmups": parsed["warmup"], "ok": failure is None,
                "error": failure, "duration_s": round(duration, 2), "console": console.name,
                "reached_init": parsed["started"]}

    def judge(self, parsed: dict, rc, text: str, stderr: str, n_samples: int) -> str | None:
        """What is wrong with a finished boot's console (None: a good batch)."""
        if not parsed["started"]:
            last = printable(" | ".join((stderr.strip().splitlines() or text.strip().splitlines() or ["no output"])[-2:]))
            return f"guest never reached init (qemu exit {rc}): {last}"
        if parsed["result"] != "ok":
            return (f"guest reported failure: {parsed['reason']}" if parsed["result"] == "fail"
                    else "guest stopped before RESULT (kernel panic or crash?)")
        if len(parsed["bench"]) != n_samples or len(parsed["warmup"]) != self.job.warmup:
            return (f"expected {n_samples} samples + {self.job.warmup} warm-ups, "
                    f"parsed {len(parsed['bench'])} + {len(parsed['warmup'])}")
        if parsed["metrics"] != {self.job.recipe.metric}:
            return f"unexpected metric names {sorted(parsed['metrics'])}"
        if any(not v > 0 for v in parsed["bench"]):
            return "non-positive sample"
        return None

    def stop_qemu(self) -> int | None:
        """Stop the current guest (if any); its exit status (negative: killed by that signal)."""
        q = self.qemu
        if q is None:
            return None
        if q.poll() is None:
            q.terminate()
            try:
                q.wait(3)
            except subprocess.TimeoutExpired:
                q.kill()
                q.wait(5)
        self.qemu = None
        self.state.pop("qemu_pid", None)
        return q.returncode

    # -- the run --------------------------------------------------------------------------------
    def prepare(self) -> tuple[dict, dict, int]:
        """Resolve both builds and make the initramfs of each batch size: (kernels, initrds, mem)."""
        self.qemu_bin = QemuBackend(self.cfg).qemu_binary(self.job.good.arch)
        kernels = {}
        for label in ("good", "bad"):
            spec = self.job.build(label)
            self.note(f"resolving {label}: {spec.describe()}")
            kw = {"deb_dir": self.cfg.deb_dir} if spec.kind == "debian" and self.cfg.deb_dir else {}
            if spec.kind == "tree":
                kw = {"opts": self.build_options, "progress": self.note}
            rb = resolve(spec, self.cfg.builds_dir, **kw)
            kernels[label] = rb.kernel
            self.state["builds"][label] = rb.to_dict()
            self.check_cancel()
        mem, scratch = QemuBackend(self.cfg).guest_memory_mib(self.job.recipe)
        initrds: dict[int, Path] = {}
        for _, n in self.schedule:
            if n not in initrds:
                initrds[n] = initramfs_mod.initramfs_for(
                    self.job.recipe, samples=n, warmup=self.job.warmup, scratch_mib=scratch,
                    cache_dir=Path(self.cfg.work_dir) / "initramfs", busybox=self.cfg.busybox)
        return kernels, initrds, mem

    def run_batches(self, kernels: dict, initrds: dict, mem: int) -> int:
        accel, probing = self.initial_accel()
        self.state["accel"] = accel
        actions = self.send(Ready(time.monotonic()))
        while True:
            run = next((a for a in actions if isinstance(a, RunBatch)), None)
            if run is None:
                break
            self.check_cancel()
            index, label, n = run.batch.index, run.batch.label, run.batch.samples
            if probing:
                batch = self.boot(index, label, kernels[label], initrds[n], "kvm-probe", mem, n,
                                  min(self.cfg.kvm_probe_timeout_s, self.job.timeouts.boot_s))
                probing = False
                if batch["reached_init"]:
                    self.remember_kvm(True, f"guest reached init in {batch['duration_s']}s")
                else:
                    kvm_error = batch["error"] or "no start marker"
                    accel = "tcg"
                    self.state["accel"] = accel
                    batch = self.boot(index, label, kernels[label], initrds[n], accel, mem, n,
                                      self.job.timeouts.boot_s)
                    if batch["reached_init"]:  # the same kernel boots under TCG: KVM is the problem
                        self.remember_kvm(False, kvm_error)
                    else:  # the kernel itself does not boot: learn nothing about KVM
                        self.note("KVM probe inconclusive: the guest does not boot under TCG either")
            else:
                batch = self.boot(index, label, kernels[label], initrds[n], accel, mem, n, self.job.timeouts.boot_s)
            if not batch["ok"]:
                self.note(f"batch {index + 1} failed: {batch['error']}")
            actions = self.send(BatchFinished(time.monotonic(), batch))
        if self.machine.finished:  # a batch failed
            return 1
        complete = next(a for a in actions if isinstance(a, Complete))
        write_result(self.run_dir, complete, metric=self.job.recipe.metric,
                     higher_is_better=self.job.recipe.higher_is_better, accel=self.state["accel"],
                     kernels={k: v.get("description") for k, v in self.state["builds"].items()})
        self.note("done")
        self.send(Finished(time.monotonic(), f"({self.job.recipe.metric}, accel {self.state['accel']})"))
        return 0

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        pid_info = {"pid": os.getpid(), "pgid": os.getpgid(0), "started_at": time.time()}
        atomic_write_json(self.run_dir / "worker.json", pid_info)
        try:
            self.check_cancel()
            self.send(Begin(time.monotonic(), "resolving builds"))
            kernels, initrds, mem = self.prepare()
            self.acquire_lab_lock()
            return self.run_batches(kernels, initrds, mem)
        except _Cancelled:
            self.stop_qemu()
            self.note("cancelled")
            self.send(CancelRequested(time.monotonic()))
            return 2
        except (_BootFailed, BuildError, RecipeError, LabError, OSError) as exc:
            self.stop_qemu()
            self.note(f"failed: {exc}")
            self.send(Failed(time.monotonic(), str(exc)))
            return 1
        except Exception as exc:  # noqa: BLE001 - report anything instead of dying silently
            self.stop_qemu()
            self.note(f"internal error: {exc!r}")
            self.send(Failed(time.monotonic(), f"internal error: {exc!r}"))
            raise
        finally:
            self.log.close()

    def _on_term(self, signum, frame):
        (self.run_dir / "cancel").touch()
        raise _Cancelled()


def main(argv: list[str] | None = None) -> int:
    return worker_main(argv, "bot.lab.backends.qemu", "worker", lambda run_dir: _Worker(run_dir).run())


if __name__ == "__main__":
    sys.exit(main())
