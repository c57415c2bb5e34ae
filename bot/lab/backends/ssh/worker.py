"""The ssh backend's worker (``python -m bot.lab.backends.ssh worker RUN_DIR``): one run's
batches on one lab machine, with the run's state kept by :class:`RunMachine`."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path

from bot.lab import parsers
from bot.lab.backends.base import LabError, RunSpec
from bot.lab.backends.rundir import (atomic_write_json, exclusive_lock, printable, read_json, save_state, worker_main,
                                     write_result)
from bot.lab.backends.runstate import (Begin, BatchFinished, BatchStarted, CancelRequested, Complete, Expired, Failed,
                                       Finished, Progress, Ready, Rebooting, RunBatch, RunMachine, SampleParsed, Save,
                                       Tick, Waiting)
from bot.lab.backends.ssh.commands import measured_step, remote_kill, remote_step
from bot.lab.backends.ssh.config import HostConfig
from bot.lab.backends.ssh.session import CommandResult, SshSession
from bot.lab.recipes import SAFE_SCRATCH_RE, RecipeError

LOG_LIMIT = 20000  # bytes of stdout/stderr per command kept in run.log


class _Cancelled(Exception):
    pass


class BatchFailed(Exception):
    pass


class SshWorker:
    """The ssh transport of one run (in the detached worker process): drives the host over
    paramiko and feeds what happens to the run's :class:`RunMachine`."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.spec = json.loads((run_dir / "spec.json").read_text())
        self.host = HostConfig(**self.spec["host"])
        self.job = RunSpec.from_dict(self.spec["job"], {"max_size": 1 << 40})
        self.schedule = [tuple(x) for x in self.spec["schedule"]]
        self.releases = self.spec["releases"]
        self.state = read_json(run_dir / "state.json", {}) or {}
        self.machine = RunMachine.restore(self.schedule, self.job.timeouts, self.state)
        self.send(Begin(time.monotonic()))  # the run's total time starts now
        self.log = open(run_dir / "run.log", "a", encoding="utf-8", errors="replace")
        self.session: SshSession | None = None
        self.stop_requested = False
        self.remote_dir = f"{self.host.scratch_dir}/regtriage-{run_dir.name}"
        if not SAFE_SCRATCH_RE.match(self.remote_dir):
            raise LabError(f"unsafe remote run directory {self.remote_dir!r}")

    # -- the machine ------------------------------------------------------------------------------
    def send(self, event) -> list:
        """Feed the run's machine and save the state when it asks.  (Its StopWork needs nothing
        here: every path that stops a run kills the remote step on its way out, see step().)"""
        actions = self.machine.send(event)
        if any(isinstance(a, Save) for a in actions):
            save_state(self.run_dir, self.state, self.machine)
        return actions

    def save(self) -> None:
        atomic_write_json(self.run_dir / "state.json", self.state)

    def note(self, text: str) -> None:
        self.log.write(f"# {time.strftime('%H:%M:%S')} {text}\n")
        self.log.flush()

    def check_cancel(self) -> list[Expired]:
        """Raise on a cancel request, the run's total timeout (BatchFailed) or the batch's
        (LabError, as a remote command's own timeout: the step is killed); the other limits
        that passed."""
        if self.stop_requested or (self.run_dir / "cancel").exists():
            raise _Cancelled()
        expired = [a for a in self.send(Tick(time.monotonic())) if isinstance(a, Expired)]
        for a in expired:
            if a.phase == "total":
                raise BatchFailed(a.reason)
            if a.phase == "batch":
                raise LabError(a.reason)
        return expired

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

        def waiting() -> None:
            self.note(f"waiting for another run on machine {self.host.name}")
            self.send(Waiting(time.monotonic(), f"waiting for another run on machine {self.host.name}"))

        self.lock_fh, _ = exclusive_lock(locks / f"{self.host.name}.lock", waiting, self.check_cancel)

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
        except (_Cancelled, LabError, BatchFailed):
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
        self.send(Progress(time.monotonic(), f"switching {self.host.host} to {want} ({label})"))
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
            self.send(Rebooting(time.monotonic()))
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
                if any(a.phase == "boot" for a in self.check_cancel()):
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

    def iteration(self, index: int, label: str, i: int) -> float:
        """Run one iteration of the recipe; return the metric value."""
        steps = self.job.recipe.host_argv(self.remote_dir)
        measured = measured_step(steps)
        res = None
        for n, argv in enumerate(steps):
            left = self.machine.batch_time_left(time.monotonic())
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
        """The batch's record; its samples and warm-ups go to the machine as they come."""
        t0 = time.monotonic()
        batch = {"index": index, "build": label, "expected_release": self.releases[label], "kernel_release": None,
                 "ok": False, "error": None}
        self.note(f"batch {index + 1}/{len(self.schedule)} build={label} release={self.releases[label]} "
                  f"samples={n_samples} warmup={self.job.warmup}")
        try:
            batch["kernel_release"] = self.ensure_kernel(label)
            self.send(Progress(time.monotonic(),
                               f"batch {index + 1}/{len(self.schedule)}: {label} on {batch['kernel_release']}"))
            self.send(BatchStarted(time.monotonic(), index))
            for i in range(self.job.warmup + n_samples):
                self.check_cancel()
                v = self.iteration(index, label, i)
                if not v > 0:
                    raise BatchFailed(f"non-positive sample {v}")
                self.send(SampleParsed(time.monotonic(), v, warmup=i < self.job.warmup))
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
            self.send(Progress(time.monotonic(), f"connecting to {self.host.user}@{self.host.host}:{self.host.port}"))
            self.note(f"machine {self.host.name}: {self.host.user}@{self.host.host}:{self.host.port}; "
                      f"releases good={self.releases['good']} bad={self.releases['bad']}")
            try:
                self.connect()
            except LabError as exc:
                raise BatchFailed(str(exc)) from None
            self.state["remote_dir"] = self.remote_dir
            self.prepare_remote()
            self.begin()
            actions = self.send(Ready(time.monotonic()))
            while (run := next((a for a in actions if isinstance(a, RunBatch)), None)) is not None:
                self.check_cancel()
                index, label = run.batch.index, run.batch.label
                batch = self.run_batch(index, label, run.batch.samples)
                if not batch["ok"]:
                    self.note(f"batch {index + 1} failed: {batch['error']}")
                    self.cleanup_remote()
                actions = self.send(BatchFinished(time.monotonic(), batch))
            if self.machine.finished:  # a batch failed
                return 1
            complete = next(a for a in actions if isinstance(a, Complete))
            self.cleanup_remote()
            write_result(self.run_dir, complete, metric=self.job.recipe.metric,
                         higher_is_better=self.job.recipe.higher_is_better, releases=self.releases,
                         machine=self.host.name)
            self.note("done")
            self.send(Finished(time.monotonic(), f"({self.job.recipe.metric}) on {self.host.name}"))
            return 0
        except _Cancelled:
            self.note("cancelled")
            self.cleanup_remote()
            self.send(CancelRequested(time.monotonic()))
            return 2
        except (BatchFailed, LabError, RecipeError, OSError) as exc:
            self.note(f"failed: {exc}")
            self.cleanup_remote()
            self.send(Failed(time.monotonic(), str(exc)))
            return 1
        except Exception as exc:  # noqa: BLE001 - report anything instead of dying silently
            self.note(f"internal error: {exc!r}")
            self.send(Failed(time.monotonic(), f"internal error: {exc!r}"))
            raise
        finally:
            if self.session is not None:
                self.session.close()
            self.log.close()


def main(argv: list[str] | None = None) -> int:
    return worker_main(argv, "bot.lab.backends.ssh", "worker", lambda run_dir: SshWorker(run_dir).run())


if __name__ == "__main__":
    sys.exit(main())