"""The lava backend's preparer (``python -m bot.lab.backends.lava prepare RUN_DIR``, detached):
resolves both builds, stages the kernels and initramfs archives, renders and submits the LAVA
job(s) and records their ids, feeding the run's :class:`RunMachine` as it goes, then exits."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
from pathlib import Path

from bot.lab.backends.base import QUEUED, LabError, RunSpec
from bot.lab.backends.lava.backend import LavaBackend
from bot.lab.backends.lava.config import LavaConfig
from bot.lab.backends.lava.guest import build_initramfs, render_guest_files
from bot.lab.backends.lava.job import chunk_schedule, guest_memory_mib, render_job
from bot.lab.backends.rundir import atomic_write_json, printable, read_json, save_state, worker_main
from bot.lab.backends.runstate import Failed, Progress, RunMachine
from bot.lab.builds import BuildError
from bot.lab.kernels import resolve
from bot.lab.recipes import RecipeError


class _Cancelled(Exception):
    pass


def _on_term(signum, frame):
    raise _Cancelled()


def prepare(run_dir: Path) -> int:
    """Resolve builds, stage artifacts, submit the job(s); record LAVA ids as they come."""
    signal.signal(signal.SIGTERM, _on_term)
    spec = json.loads((run_dir / "spec.json").read_text())
    cfg = LavaConfig(**spec["backend"])
    backend = LavaBackend(cfg)
    state = read_json(run_dir / "state.json", {}) or {}
    machine = RunMachine.restore(spec["schedule"], None, state)

    def queued(msg: str) -> None:
        machine.send(Progress(time.monotonic(), msg, QUEUED, batches_done=0))
        save_state(run_dir, state, machine)
        backend._note(run_dir, msg)

    try:
        job = RunSpec.from_dict(spec["job"])
        schedule = [tuple(x) for x in spec["schedule"]]
        stage = Path(cfg.artifact_dir) / run_dir.name
        stage.mkdir(parents=True, exist_ok=True)
        os.chmod(stage, 0o755)
        base_url = f"{cfg.artifact_url}/{run_dir.name}"
        urls = {"kernel": _stage_kernels(run_dir, cfg, job, state, stage, base_url, queued),
                "ramdisk": {}}
        mem, scratch = guest_memory_mib(job.recipe, cfg.memory_mib)
        urls["ramdisk"] = _stage_initramfs(cfg, job, schedule, scratch, stage, base_url)
        _submit(run_dir, cfg, backend, job, schedule, urls, mem, state)
        queued(f"submitted LAVA job(s) {', '.join(str(j['id']) for j in state['jobs'])}")
        if (run_dir / "cancel").exists():  # cancel() may have read the state before we wrote the ids
            _cancel_jobs(backend, state)
        return 0
    except _Cancelled:
        if state.get("jobs"):
            _cancel_jobs(backend, state)
            state["submitted"] = True
            atomic_write_json(run_dir / "state.json", state)
        else:
            machine.send(Failed(time.monotonic(), "cancelled by request (before submission)", cancelled=True,
                                batches_done=0))
            save_state(run_dir, state, machine)
        return 2
    except (BuildError, RecipeError, LabError, OSError, ValueError) as exc:
        if state.get("jobs"):
            state["submitted"] = True  # poll() cancels the submitted ones and reports the failure
            state["submit_incomplete"] = True
            atomic_write_json(run_dir / "state.json", state)
            backend._note(run_dir, f"failed after submitting some jobs: {exc}")
        else:
            msg = f"preparing the run failed: {printable(exc, 400)}"
            machine.send(Failed(time.monotonic(), msg, batches_done=0))
            save_state(run_dir, state, machine)
            backend._note(run_dir, msg)
        return 1


def _check_cancel(run_dir: Path) -> None:
    if (run_dir / "cancel").exists():
        raise _Cancelled()


def _stage_kernels(run_dir: Path, cfg, job, state: dict, stage: Path, base_url: str, queued) -> dict:
    """Resolve both builds and copy their kernels where the LAVA workers fetch them."""
    urls = {}
    for label in ("good", "bad"):
        _check_cancel(run_dir)
        queued(f"resolving {label}: {job.build(label).describe()}")
        bspec = job.build(label)
        kw = {"deb_dir": cfg.deb_dir} if bspec.kind == "debian" and cfg.deb_dir else {}
        rb = resolve(bspec, cfg.builds_dir, **kw)
        rel = re.search(r"vmlinu[xz]-(.+)$", rb.kernel)
        state["builds"][label] = {**rb.to_dict(), "release": rel.group(1) if rel else None}
        dst = stage / f"vmlinuz-{label}"
        shutil.copyfile(rb.kernel, dst)
        os.chmod(dst, 0o644)
        urls[label] = f"{base_url}/vmlinuz-{label}"
    return urls


def _stage_initramfs(cfg, job, schedule: list, scratch: int, stage: Path, base_url: str) -> dict:
    """One busybox initramfs per batch size in the schedule."""
    urls: dict = {}
    for _, n in schedule:
        if n in urls:
            continue
        files = render_guest_files(job.recipe, samples=n, warmup=job.warmup, scratch_mib=scratch)
        blob = build_initramfs(files, cfg.busybox)
        dst = stage / f"initramfs-{n}.cpio.gz"
        dst.write_bytes(blob)
        os.chmod(dst, 0o644)
        urls[n] = f"{base_url}/initramfs-{n}.cpio.gz"
    return urls


def _submit(run_dir: Path, cfg, backend, job, schedule: list, urls: dict, mem: int, state: dict) -> None:
    """Submit the schedule as one LAVA job per chunk of batches, recording each id at once."""
    chunks = chunk_schedule(schedule, cfg.batches_per_job)
    state["jobs"] = state.get("jobs") or []
    for part, idxs in enumerate(chunks):
        _check_cancel(run_dir)
        definition = render_job(cfg=cfg, run_id=run_dir.name, job=job, schedule=schedule, batch_indexes=idxs,
                                urls=urls, memory_mib=mem, part=part, parts=len(chunks))
        (run_dir / f"definition-{part}.yaml").write_text(definition)
        ids = backend.client.submit(definition)
        state["jobs"].append({"id": ids[0], "batches": idxs, "part": part})
        atomic_write_json(run_dir / "state.json", state)
        backend._note(run_dir, f"submitted LAVA job {ids[0]} ({len(idxs)} batches): {cfg.url}scheduler/job/{ids[0]}")
    state["submitted"] = True


def _cancel_jobs(backend, state: dict) -> None:
    for j in state["jobs"]:
        try:
            backend.client.cancel(j["id"])
        except LabError:
            pass

def main(argv: list[str] | None = None) -> int:
    return worker_main(argv, "bot.lab.backends.lava", "prepare", prepare)
