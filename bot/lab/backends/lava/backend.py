"""The lava backend's API side (see the package docstring): submit starts the preparer; poll
reads LAVA's job states into the run's :class:`RunMachine`; results, logs and cancel."""

from __future__ import annotations

import shutil
import time
from dataclasses import asdict
from pathlib import Path

from bot.lab import initramfs as initramfs_mod
from bot.lab.backends.base import QUEUED, RUNNING, Backend, LabError, RunSpec, Status, backend_table
from bot.lab.backends.lava.client import LavaClient
from bot.lab.backends.lava.config import LavaConfig
from bot.lab.backends.lava.job import ARCH_CONTEXT, guest_memory_mib
from bot.lab.backends.lava.results import console_lines, failure_reason, parse_results, read_jobs
from bot.lab.backends.rundir import Children, RunDirs, atomic_write_json, printable, read_json, save_state, write_result
from bot.lab.backends.runstate import BatchFinished, Complete, Failed, Finished, Progress, Ready, RunMachine
from bot.lab.recipes import RecipeSpec


class LavaBackend(RunDirs, Backend):
    name = "lava"
    PID_FILE = "preparer.json"
    LOG_FILE = "prepare.log"

    def __init__(self, cfg: LavaConfig, lab_config: dict | None = None):
        self.cfg = cfg
        self.lab_config = {k: v for k, v in (lab_config or {}).items() if k != "lava"}
        self.work_dir = Path(cfg.work_dir)
        self._children = Children()
        self._client: LavaClient | None = None

    @classmethod
    def from_config(cls, config: dict | None = None, **overrides) -> "LavaBackend":
        cfg, q = backend_table(config, "lava", overrides)
        if "token" in q:
            raise LabError("[lab.lava] put the token in the environment (token_env) or a file (token_file)")
        unknown = set(q) - set(LavaConfig.__dataclass_fields__)
        if unknown:
            raise LabError(f"[lab.lava] unknown keys: {sorted(unknown)}")
        if "url" not in q:
            raise LabError("[lab.lava] url is required")
        return cls(LavaConfig(**q), cfg)

    @property
    def client(self) -> LavaClient:
        if self._client is None:
            self._client = LavaClient(self.cfg.url, self.cfg.token(), self.cfg.http_timeout_s)
        return self._client

    # -------------------------------------------------------------------- helpers
    def supports(self, recipe: RecipeSpec) -> tuple[bool, str]:
        ok, why = recipe.supports("lava")  # the qemu busybox guest workload, without guest tools
        if not ok:
            return False, why.replace("qemu", "lava (busybox guest)")
        mem, _ = guest_memory_mib(recipe, self.cfg.memory_mib)
        if mem > 8192:
            return False, f"needs {mem} MiB of guest memory"
        return True, "ok"

    def _note(self, run_dir: Path, text: str) -> None:
        with open(run_dir / "run.log", "a") as fh:
            fh.write(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {text}\n")

    # -------------------------------------------------------------------- API
    def submit(self, job: RunSpec) -> str:
        self._vet(job)
        if job.good.arch != job.bad.arch or job.good.arch not in ARCH_CONTEXT:
            raise LabError(f"good and bad builds must have the same supported arch ({', '.join(ARCH_CONTEXT)})")
        if not self.cfg.token():
            raise LabError(f"no LAVA token: set ${self.cfg.token_env}" +
                           (f" or write it to {self.cfg.token_file}" if self.cfg.token_file else ""))
        problem = initramfs_mod.busybox_problem(self.cfg.busybox)
        if problem:
            raise LabError(problem)
        handle, run_dir = self._new_run(job, {"backend": asdict(self.cfg)}, {"jobs": [], "builds": {}},
                                        "preparing builds and job")
        self._note(run_dir, f"submitted {handle}: {job.recipe.name} {job.recipe.params}, {len(job.schedule())} batches")
        self._start(handle, run_dir, "bot.lab.backends.lava", "prepare")
        return handle

    def poll(self, handle: str) -> Status:
        run_dir = self._run_dir(handle)
        self._reap(handle)
        state = read_json(run_dir / "state.json", {}) or {}
        m = self._machine(run_dir, state)
        if m.finished:
            return m.status
        if not state.get("submitted"):
            pid = self._worker_pid(run_dir)
            if pid is None:
                time.sleep(0.2)
                pid = self._worker_pid(run_dir)
            if self._worker_alive(run_dir, pid):
                return m.status
            self._reap(handle)  # gone: it may have finished submitting between our two reads
            state = read_json(run_dir / "state.json", {}) or {}
            m = self._machine(run_dir, state)
            if m.finished:
                return m.status
            if not state.get("submitted"):
                if not state.get("jobs"):
                    return self._worker_gone(run_dir, state, m, pid, name="preparer", doing="submitting")
                # it died part-way: poll what it did submit, cancel the rest below via failure
                state["submit_incomplete"] = True
        return self._poll_jobs(run_dir, state, m)

    def _poll_jobs(self, run_dir: Path, state: dict, m: RunMachine) -> Status:
        spec = read_json(run_dir / "spec.json", {})
        jobs = state["jobs"]
        cancel_requested = bool(state.get("cancel_requested"))
        try:
            infos = [self.client.job(j["id"]) for j in jobs]
        except LabError as exc:  # a server that does not answer is not a failure: say so, keep the state
            st = m.status
            msg = f"{st.message.split(' [LAVA unreachable')[0]} [LAVA unreachable: {printable(exc, 150)}]"
            return Status(st.state, msg, st.batches_done, st.batches_total, st.cancelled, time.time())
        view = read_jobs(jobs, infos)
        now = time.monotonic()
        if view.failed or state.get("submit_incomplete"):
            for j in view.active:
                try:
                    self.client.cancel(j["id"])
                except LabError:
                    pass
            if view.active:  # finish them first, then report
                state["cancel_requested"] = cancel_requested
                m.send(Progress(now, "a job failed: cancelling the others", RUNNING, view.done_batches))
                return save_state(run_dir, state, m)
            cancelled = cancel_requested or any(c for _, c in view.failed)
            if view.failed:
                why = self._failure(run_dir, view.failed, cancel_requested)
            else:
                why = "the preparer died before submitting every job"
            self._finish(run_dir)
            m.send(Failed(now, why, cancelled=cancelled, batches_done=view.done_batches))
            return save_state(run_dir, state, m)
        if view.all_done:
            return self._complete(run_dir, state, spec, m)
        m.send(Progress(now, view.message(jobs, cancel_requested), RUNNING if view.running else QUEUED,
                        view.done_batches))
        return save_state(run_dir, state, m)

    def _failure(self, run_dir: Path, failed: list, cancel_requested: bool) -> str:
        """Why the run failed (LAVA's reason for the first failed job); their logs are kept."""
        j, _ = failed[0]
        reason = j.get("failure_comment")
        if not reason and not cancel_requested and j.get("lava_health") == "Incomplete":
            try:
                reason = failure_reason(self.client.get_all(f"jobs/{int(j['id'])}/tests/"))
            except LabError:
                reason = None
        why = ("cancelled by request" if cancel_requested else
               f"LAVA job {j['id']} {j['lava_health']}" + (f": {printable(reason)}" if reason else ""))
        for fj, _ in failed:
            self._save_log(run_dir, fj["id"])
        return why

    def _complete(self, run_dir: Path, state: dict, spec: dict, m: RunMachine) -> Status:
        """Every job is Complete: read the results, check them batch by batch, store the samples."""
        schedule = spec["schedule"]
        job = RunSpec.from_dict(spec["job"], self.lab_config or None)
        releases = {k: v.get("release") for k, v in (state.get("builds") or {}).items()}
        batches, problems = [], []
        try:
            for j in state["jobs"]:
                suites = {s.get("id"): s.get("name") for s in self.client.suites(j["id"])}
                tests = self.client.tests(j["id"])
                atomic_write_json(run_dir / f"job-{j['id']}-tests.json", tests)
                b, p = parse_results(tests, suites, schedule=schedule, batch_indexes=j["batches"],
                                     metric=job.recipe.metric, warmup=job.warmup, kernel_releases=releases)
                batches += b
                problems += p
                self._save_log(run_dir, j["id"])
        except LabError as exc:
            st = m.status
            return Status(st.state, f"reading results: {printable(exc, 200)}", st.batches_done, st.batches_total,
                          updated_at=time.time())
        now = time.monotonic()
        if problems:
            self._note(run_dir, "result problems: " + "; ".join(problems))
            self._finish(run_dir)
            m = RunMachine(schedule, job.timeouts, status=m.status, batches=batches)
            m.send(Failed(now, "; ".join(problems)[:500], batches_done=len(batches)))
            return save_state(run_dir, state, m)
        m = RunMachine(schedule, job.timeouts, status=m.status)
        actions = m.send(Ready(now))
        for b in sorted(batches, key=lambda b: b["index"]):  # the machine checks them against the schedule
            actions = m.send(BatchFinished(now, b))
        complete = next(a for a in actions if isinstance(a, Complete))
        write_result(run_dir, complete, metric=job.recipe.metric, higher_is_better=job.recipe.higher_is_better,
                     kernels={b["build"]: b["kernel_release"] for b in batches},
                     jobs=[{k: j.get(k) for k in ("id", "device", "start_time", "end_time")} for j in state["jobs"]])
        self._note(run_dir, "done")
        self._finish(run_dir)
        m.send(Finished(now, f"({job.recipe.metric}, LAVA jobs {', '.join(str(j['id']) for j in state['jobs'])})"))
        return save_state(run_dir, state, m)

    def _save_log(self, run_dir: Path, job_id: int) -> None:
        """Append the job's console (LAVA log lines of level ``target``) and notes to run.log."""
        try:
            text = self.client.get_text(f"jobs/{int(job_id)}/logs/")
        except LabError as exc:
            self._note(run_dir, f"job {job_id}: log not available: {exc}")
            return
        (run_dir / f"job-{job_id}.log.yaml").write_text(text)
        with open(run_dir / "run.log", "a") as fh:
            fh.write(f"===== LAVA job {job_id} console =====\n" + "\n".join(console_lines(text)) + "\n")

    def _finish(self, run_dir: Path) -> None:
        if not self.cfg.keep_artifacts:
            d = Path(self.cfg.artifact_dir) / run_dir.name
            if d.is_dir():
                shutil.rmtree(d, ignore_errors=True)

    def cancel(self, handle: str, wait_s: float | None = None) -> Status:
        run_dir = self._run_dir(handle)
        (run_dir / "cancel").write_text(str(time.time()))
        m = self._machine(run_dir, read_json(run_dir / "state.json", {}) or {})
        if m.finished:
            return m.status
        self._stop_worker(handle, run_dir, 10.0, group=True)  # the preparer, if still running
        self._reap(handle)
        state = read_json(run_dir / "state.json", {}) or {}
        state["cancel_requested"] = True
        atomic_write_json(run_dir / "state.json", state)
        errors = []
        for j in state.get("jobs") or []:
            if j.get("lava_state") == "Finished":
                continue
            try:
                self.client.cancel(j["id"])
                self._note(run_dir, f"cancel requested for LAVA job {j['id']}")
            except LabError as exc:
                errors.append(f"job {j['id']}: {exc}")
        if not state.get("jobs"):
            self._finish(run_dir)
            m = self._machine(run_dir, state)
            m.send(Failed(time.monotonic(), "cancelled by request (before submission)", cancelled=True,
                          batches_done=0))
            return save_state(run_dir, state, m)
        end = time.monotonic() + (self.cfg.cancel_wait_s if wait_s is None else wait_s)
        while True:
            st = self.poll(handle)
            if st.finished or time.monotonic() >= end:
                break
            time.sleep(1)
        if not st.finished:
            st = Status(st.state, f"cancel requested{'; ' + '; '.join(errors) if errors else ''}; {st.message}",
                        st.batches_done, st.batches_total, True, time.time())
        return st

    def _describe_more(self, spec: dict, state: dict) -> dict:
        return {"server": self.cfg.url, "builds": state.get("builds", {}),
                "jobs": [{**j, "url": f"{self.cfg.url}scheduler/job/{j['id']}"} for j in state.get("jobs", [])]}
