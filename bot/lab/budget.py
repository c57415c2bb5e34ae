"""The daily lab budget: how much lab time the bot may start on its own (automatic reruns) or on
chat requests in any 24 hours (``[lab] daily_budget_minutes``), and how much the jobs of the last
24 hours take of it.  Reruns asked for on the command line are not capped (bot.lab.scheduling)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import storage.lab_jobs as jobs
from bot.lab.inventory import lab_section
from bot.lab.settings import SchedulerError
from storage.lab_jobs import JobCost
from storage.store import utcnow

DEFAULT_DAILY_BUDGET_MINUTES = 480


def daily_budget_minutes(config: Any) -> float:
    """``[lab] daily_budget_minutes``: lab time the bot may start on its own (auto reruns) or on
    chat requests in any 24 hours, default 480; 0: none."""
    v = lab_section(config).get("daily_budget_minutes", DEFAULT_DAILY_BUDGET_MINUTES)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 7 * 24 * 60:
        raise SchedulerError("[lab] daily_budget_minutes must be a number of minutes, 0..10080")
    return float(v)


def job_minutes(job: JobCost, now: datetime) -> float:
    """Lab time a job costs: what it ran when it has finished, its whole time-out while it is
    queued or running (a reservation), nothing when it never ran."""
    started, finished = job.started_at, job.finished_at
    if job.state in ("declined", "waiting") or (finished is not None and started is None):
        return 0.0
    if started is not None and finished is not None:
        return max(0.0, (finished - started).total_seconds() / 60)
    total = ((job.plan or {}).get("timeouts") or {}).get("total_s") or 7200
    if started is not None:  # running: what is left of its time-out counts, and what it ran
        return max(float(total) / 60, (now - started).total_seconds() / 60)
    return float(total) / 60


def budget_used_minutes(store, now: datetime | None = None) -> float:
    """Lab time of every job created in the last 24 hours (whoever asked for it)."""
    now = now or utcnow()
    return sum(job_minutes(j, now) for j in jobs.costs_since(store, now - timedelta(hours=24)))


def over_budget(store, config: Any, need_minutes: float, requested_by: str) -> str | None:
    """Why a run of ``need_minutes`` asked for by ``requested_by`` (not the command line) would
    take the last 24 hours' lab time past the budget, or None when it fits."""
    budget, used = daily_budget_minutes(config), budget_used_minutes(store)
    if used + need_minutes <= budget:
        return None
    return (f"rerun not started ({requested_by}): the daily lab budget is spent ({used:.0f} of "
            f"[lab] daily_budget_minutes = {budget:g} used in the last 24 h; this run may take "
            f"{need_minutes:.0f} min)")
