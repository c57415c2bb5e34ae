"""Queries on the lab's job tables that more than the scheduler needs (storage/lab_schema.py)."""

from __future__ import annotations

from sqlalchemy import func, select

import storage.lab_schema as ls
from storage.lab_schema import ACTIVE_STATES
from storage.store import Store

J, L = ls.lab_jobs, ls.lab_machine_leases


def machine_load(store: Store) -> dict[str, int]:
    """machine -> number of active jobs (waiting for it, queued on it, running on it)."""
    with store.engine.connect() as conn:
        return {m: n for m, n in conn.execute(select(J.c.machine, func.count()).where(
            J.c.state.in_(ACTIVE_STATES), J.c.machine.is_not(None)).group_by(J.c.machine))}


def busy_machines(store: Store) -> dict[str, int]:
    """machine -> the job holding its lease."""
    with store.engine.connect() as conn:
        return {m: j for m, j in conn.execute(select(L.c.machine, L.c.job_id))}
