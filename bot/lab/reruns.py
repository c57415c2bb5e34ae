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

from sqlalchemy import select

from storage.store import aware


def _rerun(job: dict[str, Any]) -> dict[str, Any]:
    plan = job.get("plan") or {}
    result = job.get("result") or {}
    samples = job.get("samples") or {}
    recipe = plan.get("recipe") or {}
    bt = plan.get("builds_text") or {}
    finished = job.get("finished_at")
    ci = result.get("ci")
    return {
        "id": job["id"],
        "regression_id": job.get("regression_id"),
        "machine": job.get("machine"),
        "backend": job.get("backend"),
        "stand_in": bool((plan.get("match") or {}).get("stand_in")),  # the report named no hardware
        "recipe": recipe.get("name"),
        "metric": samples.get("metric") or recipe.get("metric"),
        "higher_is_better": samples.get("higher_is_better", recipe.get("higher_is_better")),
        "verdict": job.get("verdict"),
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
        "job_state": job.get("state"),
    }


def job_dict(row) -> dict[str, Any]:
    """A ``lab_jobs`` row as a dict, its datetimes timezone-aware."""
    d = dict(row._mapping if hasattr(row, "_mapping") else row)
    for k in ("next_attempt_at", "deadline_at", "lease_until", "created_at", "updated_at", "started_at",
              "finished_at"):
        d[k] = aware(d.get(k))
    return d


def reruns_for(store, rid: int) -> list[dict[str, Any]]:
    """The finished reruns (jobs ``done`` with a verdict) of record ``rid``, oldest first."""
    return reruns_for_many(store, [rid])[rid]


def reruns_for_many(store, ids) -> dict[int, list[dict[str, Any]]]:
    """:func:`reruns_for` of several records in one statement: {record id: reruns}."""
    import storage.lab_schema as ls

    ids = list(dict.fromkeys(ids))
    out: dict[int, list[dict[str, Any]]] = {rid: [] for rid in ids}
    if not ids:
        return out
    j = ls.lab_jobs
    with store.engine.connect() as conn:
        rows = conn.execute(select(j).where(j.c.regression_id.in_(ids), j.c.state == "done",
                                            j.c.verdict.is_not(None))
                            .order_by(j.c.finished_at, j.c.id)).all()
    for r in rows:
        job = job_dict(r)
        out[job["regression_id"]].append(_rerun(job))
    return out
