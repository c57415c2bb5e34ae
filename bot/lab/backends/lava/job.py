"""LAVA job definitions for a run's batches (pure): one deploy + boot + test block per batch,
emitted with :func:`json.dumps` (JSON is YAML), no string templating."""

from __future__ import annotations

import json
import math
import re

from bot.lab.backends.base import LabError, RunSpec
from bot.lab.backends.lava.config import LavaConfig
from bot.lab.backends.rundir import RUN_ID_RE
from bot.lab.recipes import MiB, RecipeSpec

APPEND = "console=ttyS0 panic=-1"  # LAVA waits for the "Linux version" banner: no quiet/loglevel
PROMPT = "/ # "
ARCH_CONTEXT = {"x86_64": "amd64", "aarch64": "arm64", "i386": "i386"}
REPORT_STEP = "sh /regtriage/report.sh"


def chunk_schedule(schedule: list, batches_per_job: int) -> list[list[int]]:
    """Batch indexes per LAVA job, in order."""
    idx = list(range(len(schedule)))
    if batches_per_job <= 0:
        return [idx]
    return [idx[i:i + batches_per_job] for i in range(0, len(idx), batches_per_job)]


def suite_name(index: int, label: str) -> str:
    return f"regtriage-b{index:03d}-{label}"


def guest_memory_mib(recipe: RecipeSpec, configured: int | None) -> tuple[int, int]:
    data = recipe.bytes or 0
    scratch = max(64, math.ceil(data / MiB) + 32)
    return max(configured or 512, scratch + 256), scratch


def render_job(*, cfg: LavaConfig, run_id: str, job: RunSpec, schedule: list, batch_indexes: list[int],
               urls: dict, memory_mib: int, part: int = 0, parts: int = 1) -> str:
    """The LAVA job definition (JSON, which is YAML) for some batches of a run.

    ``urls``: ``{"kernel": {"good": url, "bad": url}, "ramdisk": {n_samples: url}}``."""
    if not RUN_ID_RE.match(run_id):
        raise LabError("bad run id")
    t = job.timeouts
    name = f"regtriage {run_id}" + (f" {job.label}" if job.label else "") + (f" part {part + 1}/{parts}" if parts > 1 else "")
    actions = []
    per_batch = 0
    for i in batch_indexes:
        label, n = schedule[i]
        if label not in ("good", "bad") or type(n) is not int:
            raise LabError("bad schedule")
        for u in (urls["kernel"][label], urls["ramdisk"][n]):
            if not re.fullmatch(r"(file|https?)://[A-Za-z0-9._~%/:+-]+", u):
                raise LabError(f"unsafe artifact URL {u!r}")
        actions.append({"deploy": {
            "to": "tmpfs",
            "timeout": {"seconds": cfg.deploy_timeout_s},
            "images": {
                "kernel": {"image_arg": f'-kernel {{kernel}} -append "{APPEND}"', "url": urls["kernel"][label]},
                "ramdisk": {"image_arg": "-initrd {ramdisk}", "url": urls["ramdisk"][n], "compression": "gz",
                            "format": "cpio.newc", "overlays": {"lava": True}},
            }}})
        actions.append({"boot": {"method": "qemu", "media": "tmpfs", "prompts": [PROMPT],
                                 "timeout": {"seconds": int(t.boot_s)}}})
        actions.append({"test": {
            "timeout": {"seconds": int(t.batch_s)},
            "definitions": [{
                "from": "inline", "name": suite_name(i, label), "path": "inline/regtriage.yaml",
                "repository": {
                    "metadata": {"format": "Lava-Test Test Definition 1.0", "name": suite_name(i, label),
                                 "description": f"regtriage {job.recipe.name} batch {i} ({label})"},
                    "run": {"steps": [REPORT_STEP]}}}]}})
        per_batch += cfg.deploy_timeout_s + int(t.boot_s) + int(t.batch_s)
    job_timeout = min(per_batch + 120, int(cfg.job_timeout_s or t.total_s))
    context = {"arch": ARCH_CONTEXT.get(job.good.arch, "amd64"), "memory": memory_mib}
    if cfg.no_kvm:
        context["no_kvm"] = True
    context.update(cfg.context)
    definition = {
        "job_name": name,
        "device_type": cfg.device_type,
        "visibility": cfg.visibility,
        "priority": cfg.priority,
        "timeouts": {"job": {"seconds": max(job_timeout, 60)},
                     "action": {"seconds": max(int(t.batch_s), cfg.deploy_timeout_s, int(t.boot_s))},
                     "connection": {"seconds": cfg.connection_timeout_s}},
        "context": context,
        "metadata": {"regtriage.run": run_id, "regtriage.recipe": job.recipe.name,
                     "regtriage.batches": ",".join(f"{i}:{schedule[i][0]}" for i in batch_indexes)},
        "actions": actions,
    }
    if cfg.device_tags:
        definition["tags"] = list(cfg.device_tags)
    return json.dumps(definition, indent=2)
