"""The on-disk run state every process-running backend keeps (qemu, ssh, lkp, lava): a run
directory per handle with JSON files written atomically (``spec.json``, ``state.json`` holding
the :class:`~bot.lab.backends.runstate.RunMachine` state, ``result.json``), the worker processes
it started, and text from tools made printable.  Shared here so each backend is only its
transport: :class:`RunDirs` is the polling side every such backend inherits."""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from bot.lab.backends.base import DONE, QUEUED, LabError, RunSpec, Samples, Status, Timeouts
from bot.lab.backends.runstate import CancelRequested, Complete, RunMachine, StopWork, WorkerGone
from bot.lab.procs import proc_alive_and_ours
from bot.lab.recipes import RecipeError, make_recipe


def default_work_dir(kind: str) -> Path:
    """``$REGTRIAGE_HOME/lab/<kind>``: where a backend keeps its run directories."""
    from bot.config import default_home

    return default_home() / "lab" / kind


def atomic_write_json(path: Path, data) -> None:
    """Write JSON so that a reader never sees half a file (a temp file, then rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(3)}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


def read_json(path: Path, default=None):
    """The JSON in ``path``, or ``default`` when it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


def printable(text, limit: int = 300) -> str:
    """Tool output made safe for one log or status line: non-printable characters blanked, cut."""
    return "".join(c if c.isprintable() else " " for c in str(text))[:limit]


class Children:
    """The worker processes this backend object started, by handle, reaped once they exit."""

    def __init__(self) -> None:
        self._procs: dict[str, subprocess.Popen] = {}

    def add(self, handle: str, proc: subprocess.Popen) -> None:
        self._procs[handle] = proc

    def get(self, handle: str, default=None):
        return self._procs.get(handle, default)

    def pop(self, handle: str, default=None):
        return self._procs.pop(handle, default)

    def reap(self, handle: str) -> None:
        proc = self._procs.get(handle)
        if proc is not None and proc.poll() is not None:
            self._procs.pop(handle, None)


# ============================================================================ run directories
RUN_ID_RE = re.compile(r"^[0-9]{8}T[0-9]{6}-[0-9a-f]{8}$")


def new_run_dir(work_dir: Path) -> Path:
    """A fresh ``<work_dir>/runs/<UTC time>-<8 hex>`` directory (created)."""
    runs = work_dir / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    while True:
        run_dir = runs / f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{secrets.token_hex(4)}"
        try:
            run_dir.mkdir()
            return run_dir
        except FileExistsError:
            continue


def stamped(status: Status) -> Status:
    """``status`` with ``updated_at`` = now (the machine has no clock; the transport stamps)."""
    return replace(status, updated_at=time.time())


def save_state(run_dir: Path, state: dict, machine: RunMachine) -> Status:
    """Write the machine's status and batches into ``state`` (the run's other keys kept) and
    ``state.json``; returns the status as written."""
    st = stamped(machine.status)
    state["status"] = st.to_dict()
    state["batches"] = machine.batches
    atomic_write_json(run_dir / "state.json", state)
    return st


def exclusive_lock(path: Path, on_wait: Callable[[], None], check_cancel: Callable[[], None]):
    """Open ``path`` and take an exclusive flock on it (released by the kernel if the worker
    dies), polling every 0.5 s; ``on_wait`` is called once when the lock is busy, and
    ``check_cancel`` at every poll.  Returns (the open file, whether it had to wait)."""
    import fcntl

    fh = open(path, "a+")
    waited = False
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fh, waited
        except BlockingIOError:
            if not waited:
                on_wait()
                waited = True
            check_cancel()
            time.sleep(0.5)


def spawn_worker(run_dir: Path, module: str, verb: str, log_name: str) -> subprocess.Popen:
    """``python -m <module> <verb> <run dir>``, detached (its own session), output to ``log_name``."""
    log = open(run_dir / log_name, "ab")
    try:
        return subprocess.Popen([sys.executable, "-m", module, verb, str(run_dir)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True, cwd=str(run_dir))
    finally:
        log.close()


def last_log_line(path: Path, limit: int = 200) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return printable(lines[-1], limit) if lines else ""


class RunDirs:
    """The run-directory half of a backend whose runs are driven by a detached local worker
    (qemu, ssh, lkp; lava's preparer): vetting a job, run directories, spawning, polling with the
    dead-worker diagnosis of :class:`~bot.lab.backends.runstate.RunMachine`, samples, listing.
    A subclass sets ``name``, ``work_dir``, ``lab_config`` and ``_children``, has ``supports``,
    and may override :meth:`_after_worker_died`."""

    name: str
    work_dir: Path
    _children: Children
    PID_FILE = "worker.json"
    LOG_FILE = "worker.log"

    def _run_dir(self, handle: str) -> Path:
        prefix = f"{self.name}:"
        if not isinstance(handle, str) or not handle.startswith(prefix):
            article = "an" if self.name[:1] in "aefhilmnorsx" else "a"  # as read aloud: an ssh, a qemu
            raise LabError(f"not {article} {self.name} handle: {handle!r}")
        run_id = handle[len(prefix):]
        if not RUN_ID_RE.match(run_id):
            raise LabError(f"malformed {self.name} handle: {handle!r}")
        d = self.work_dir / "runs" / run_id
        if not (d / "spec.json").is_file():
            raise LabError(f"no such run {handle} under {self.work_dir}")
        return d

    def _vet(self, job: RunSpec) -> None:
        """Refuse a job this backend cannot run: a recipe it runs is checked again against this
        lab's configured limits (a spec may have been built by hand), then what the backend
        supports (memory, programs) is, with the reason."""
        job.validate()
        if job.recipe.supports(self.name)[0]:
            try:
                make_recipe(job.recipe.name, job.recipe.params, self.lab_config)
            except RecipeError as exc:
                raise LabError(f"recipe rejected: {exc}") from None
        ok, why = self.supports(job.recipe)
        if not ok:
            raise LabError(f"{self.name} backend cannot run {job.recipe.name}: {why}")

    def _new_run(self, job: RunSpec, spec: dict, state: dict, message: str) -> tuple[str, Path]:
        """A run directory with ``spec.json`` (the job, its schedule, ``spec``) and a queued
        ``state.json`` (``state`` added); (handle, run directory)."""
        run_dir = new_run_dir(self.work_dir)
        handle = f"{self.name}:{run_dir.name}"
        schedule = job.schedule()
        atomic_write_json(run_dir / "spec.json", {"handle": handle, "job": job.to_dict(), "schedule": schedule,
                                                   "submitted_at": time.time(), **spec})
        atomic_write_json(run_dir / "state.json", {
            "status": Status(QUEUED, message, 0, len(schedule), updated_at=time.time()).to_dict(),
            "batches": [], **state})
        return handle, run_dir

    def _start(self, handle: str, run_dir: Path, module: str, verb: str = "worker") -> None:
        proc = spawn_worker(run_dir, module, verb, self.LOG_FILE)
        self._children.add(handle, proc)
        info = {"pid": proc.pid, "started_at": time.time()}
        if self.PID_FILE == "worker.json":
            info["pgid"] = proc.pid
        atomic_write_json(run_dir / self.PID_FILE, info)

    def _reap(self, handle: str) -> None:
        self._children.reap(handle)

    def _worker_pid(self, run_dir: Path):
        return (read_json(run_dir / self.PID_FILE, {}) or {}).get("pid")

    def _worker_alive(self, run_dir: Path, pid) -> bool:
        return proc_alive_and_ours(pid, str(run_dir))

    def _stop_worker(self, handle: str, run_dir: Path, grace_s: float, *, group: bool,
                     alive: Callable[[], bool] | None = None) -> None:
        """Stop a run's worker if it is still ours: TERM (to its whole process group with
        ``group``), up to ``grace_s`` for it to finish by itself (``alive()``: by default the
        worker process), then KILL its process group and wait as long again."""
        pid = self._worker_pid(run_dir)
        if not self._worker_alive(run_dir, pid):
            return
        alive = alive or (lambda: self._worker_alive(run_dir, pid))
        for sig, interval in ((signal.SIGTERM, 0.1), (signal.SIGKILL, 0.05)):
            try:
                if group or sig == signal.SIGKILL:
                    os.killpg(pid, sig)
                else:
                    os.kill(pid, sig)
            except ProcessLookupError:
                pass
            end = time.monotonic() + grace_s
            while time.monotonic() < end and alive():
                self._reap(handle)
                time.sleep(interval)
            if not alive():
                return

    def _machine(self, run_dir: Path, state: dict) -> RunMachine:
        spec = read_json(run_dir / "spec.json", {}) or {}
        t = ((spec.get("job") or {}).get("timeouts")) or {}
        return RunMachine.restore(spec.get("schedule") or [], Timeouts(**t), state)

    def _after_worker_died(self, run_dir: Path, state: dict) -> None:
        """Kill what the dead worker left running (hook)."""

    def _poll_worker(self, handle: str) -> tuple[Status, bool]:
        """The run's status, and whether its worker is known to be gone (diagnosed here: the
        run is then failed with the reason, and what the worker left behind is killed)."""
        run_dir = self._run_dir(handle)
        self._reap(handle)
        state = read_json(run_dir / "state.json", {}) or {}
        m = self._machine(run_dir, state)
        if m.finished:
            return m.status, False
        pid = self._worker_pid(run_dir)
        if pid is None:  # written right after the worker starts: give it a moment
            time.sleep(0.2)
            pid = self._worker_pid(run_dir)
        if self._worker_alive(run_dir, pid):
            return m.status, False
        self._reap(handle)  # dead: it may have finished between our two reads
        state = read_json(run_dir / "state.json", {}) or {}
        m = self._machine(run_dir, state)
        if m.finished:
            return m.status, True
        return self._worker_gone(run_dir, state, m, pid), True

    def _worker_gone(self, run_dir: Path, state: dict, m: RunMachine, pid, **names) -> Status:
        line = last_log_line(run_dir / self.LOG_FILE)
        actions = m.send(WorkerGone(time.monotonic(), pid, f"{self.LOG_FILE}: {line}" if line else "", **names))
        st = save_state(run_dir, state, m)
        if any(isinstance(a, StopWork) for a in actions):
            self._after_worker_died(run_dir, state)
        return st

    def poll(self, handle: str) -> Status:
        return self._poll_worker(handle)[0]

    def _settle_cancel(self, run_dir: Path) -> Status:
        """After the worker was stopped: the run is failed as cancelled unless it had finished."""
        state = read_json(run_dir / "state.json", {}) or {}
        m = self._machine(run_dir, state)
        if m.finished:
            return m.status
        m.send(CancelRequested(time.monotonic()))
        return save_state(run_dir, state, m)

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

    def describe(self, handle: str) -> dict:
        run_dir = self._run_dir(handle)
        st = self.poll(handle)
        spec = read_json(run_dir / "spec.json", {}) or {}
        state = read_json(run_dir / "state.json", {}) or {}
        return {"backend": self.name, "handle": handle, "run_dir": str(run_dir), "status": st.to_dict(),
                "job": spec.get("job"), "schedule": spec.get("schedule"), "batches": state.get("batches", []),
                "log_path": str(run_dir / "run.log"), **self._describe_more(spec, state)}

    def _describe_more(self, spec: dict, state: dict) -> dict:
        """What :meth:`describe` adds for this backend."""
        return {}

    def list_runs(self) -> list[str]:
        d = self.work_dir / "runs"
        if not d.is_dir():
            return []
        return sorted(f"{self.name}:{p.name}" for p in d.iterdir()
                      if RUN_ID_RE.match(p.name) and (p / "spec.json").is_file())


def worker_main(argv: list[str] | None, module: str, verb: str, run: Callable[[Path], int]) -> int:
    """``python -m <module> <verb> RUN_DIR``: the entry point of a backend's detached process."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] != verb:
        print(f"usage: python -m {module} {verb} RUN_DIR", file=sys.stderr)
        return 64
    return run(Path(argv[1]))


def write_result(run_dir: Path, complete: Complete, *, metric: str, higher_is_better: bool, **extra) -> None:
    """``result.json`` of a finished run (what :meth:`RunDirs.fetch_samples` reads)."""
    atomic_write_json(run_dir / "result.json", {
        "samples": complete.samples, "warmups": complete.warmups, "metric": metric,
        "higher_is_better": higher_is_better, "order": complete.order, **extra})
