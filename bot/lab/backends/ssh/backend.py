"""The ssh backend's API side (see the package docstring): submit validates a run and starts
its worker; poll, cancel, describe and fetch work from the run directory alone."""

from __future__ import annotations

import shlex
import time
from dataclasses import asdict
from pathlib import Path

from bot.lab.backends.base import Backend, LabError, RunSpec, Status, lab_table
from bot.lab.backends.rundir import Children, RunDirs, atomic_write_json, default_work_dir, printable, read_json
from bot.lab.backends.ssh.commands import remote_kill
from bot.lab.backends.ssh.config import SSH_KEYS, HostConfig, SshConfig, expected_release, machines_from_config
from bot.lab.backends.ssh.session import SshSession
from bot.lab.recipes import RecipeSpec



class SshBackend(RunDirs, Backend):
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
    def supports(self, recipe: RecipeSpec) -> tuple[bool, str]:
        return recipe.supports(self.name)

    def extra_spec(self, job: RunSpec, host: HostConfig, releases: dict) -> dict:
        """Backend-specific additions to spec.json (the lkp backend adds its job file)."""
        return {}

    # ------------------------------------------------------------------------------ API
    def submit(self, job: RunSpec, machine: str | None = None) -> str:
        self._vet(job)
        host = self.cfg.pick(machine)
        releases = {label: expected_release(job.build(label), host.releases) for label in ("good", "bad")}
        if releases["good"] == releases["bad"]:
            raise LabError(f"good and bad builds have the same kernel release {releases['good']}: "
                           "the host could not tell them apart")
        for label in ("good", "bad"):
            host.boot_command(label, releases[label])  # validates
        handle, run_dir = self._new_run(job, {
            "kind": self.kind, "host": asdict(host), "releases": releases, "work_dir": self.cfg.work_dir,
            "exclusive": self.cfg.exclusive, "lab_limits": self.lab_config, **self.extra_spec(job, host, releases)},
            {}, "waiting for the worker")
        self._start(handle, run_dir, self.WORKER_MODULE)
        return handle

    def _after_worker_died(self, run_dir: Path, state: dict) -> None:
        self._kill_remote(run_dir)

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
        self._stop_worker(handle, run_dir, grace_s, group=False)  # it kills its remote step, records "cancelled"
        self._reap(handle)
        self._kill_remote(run_dir)
        return self._settle_cancel(run_dir)

    def _describe_more(self, spec: dict, state: dict) -> dict:
        host = spec.get("host") or {}
        return {"releases": spec.get("releases"), "machine": host.get("name"),
                "host": f"{host.get('user')}@{host.get('host')}:{host.get('port')}"}
