"""Rerun results of a record, as the tracker entry, ``show --json``, the web page and its plot
show them: one dict per finished rerun job with a verdict, oldest first::

    {"id": 3, "machine": "qemu-tcg-1", "recipe": "dd-seqwrite", "metric": "dd.write_MBps",
     "higher_is_better": true, "verdict": "confirmed", "change_percent": -12.3, "ci": [-15.1, -9.2],
     "p_value": 0.0012, "n_good": 6, "n_bad": 6,
     "samples": {"good": [...], "bad": [...]}, "order": ["good", "bad", ...],
     "builds": {"good": "debian:linux-image-...", "bad": "debian:linux-image-..."},
     "finished": "2024-07-01T10:03:00+00:00",
     # extras: "refs", "recipe_params", "recipe_notes", "reasons", "rounds", "alpha",
     #         "p_mannwhitney", "warmups", "logs", "job_state"}
"""

from __future__ import annotations

from typing import Any

import storage.lab_jobs as jobs
from storage.lab_jobs import Job


def _rerun(job: Job) -> dict[str, Any]:
    plan = job.plan or {}
    result = job.result or {}
    samples = job.samples or {}
    recipe = plan.get("recipe") or {}
    bt = plan.get("builds_text") or {}
    finished = job.finished_at
    ci = result.get("ci")
    return {
        "id": job.id,
        "regression_id": job.regression_id,
        "machine": job.machine,
        "backend": job.backend,
        "stand_in": bool((plan.get("match") or {}).get("stand_in")),  # the report named no hardware
        "recipe": recipe.get("name"),
        "metric": samples.get("metric") or recipe.get("metric"),
        "higher_is_better": samples.get("higher_is_better", recipe.get("higher_is_better")),
        "verdict": job.verdict,
        "change_percent": result.get("change_percent"),
        "ci": [ci[0], ci[1]] if isinstance(ci, (list, tuple)) and len(ci) == 2 else None,
        "p_value": result.get("p_value"),
        "n_good": result.get("n_good", len(samples.get("good") or [])),
        "n_bad": result.get("n_bad", len(samples.get("bad") or [])),
        "samples": {"good": list(samples.get("good") or []), "bad": list(samples.get("bad") or [])},
        "order": list(samples.get("order") or []),
        "builds": {"good": bt.get("good"), "bad": bt.get("bad")},
        "finished": finished.isoformat() if finished is not None else None,
        "refs": dict(plan.get("refs") or {}),
        "recipe_params": dict(recipe.get("params") or {}),
        "recipe_notes": list(recipe.get("notes") or []),
        "reasons": list(result.get("reasons") or []),
        "alpha": result.get("alpha"),
        "p_mannwhitney": result.get("p_mannwhitney"),
        # the sequential design's view (bot.lab.stats.decide): None for results judged before it
        "cv_percent": result.get("cv_percent"),
        "emulated": result.get("emulated"),
        "ci_level": result.get("ci_level"),
        "claimed_change_percent": result.get("claimed_change_percent", plan.get("claimed_change_percent")),
        "look": result.get("look"),
        "looks": result.get("looks"),
        "median_good": result.get("median_good"),
        "median_bad": result.get("median_bad"),
        "warmups": samples.get("warmups") or {},
        "rounds": len(samples.get("rounds") or []),
        "logs": [r.get("log_path") for r in samples.get("rounds") or [] if r.get("log_path")],
        "job_state": job.state,
    }


def reruns_for(store, rid: int) -> list[dict[str, Any]]:
    """The finished reruns (jobs ``done`` with a verdict) of record ``rid``, oldest first."""
    return reruns_for_many(store, [rid])[rid]


def reruns_for_many(store, ids) -> dict[int, list[dict[str, Any]]]:
    """:func:`reruns_for` of several records in one statement: {record id: reruns}."""
    return {rid: [_rerun(j) for j in done] for rid, done in jobs.verdicts_for_records(store, ids).items()}
