"""The scheduler's settings from ``[lab]`` (validated), who a worker is, and the backend
configuration a job pins for its machine: shared by the scheduler and the bisection driver."""

from __future__ import annotations

import os
import secrets
import socket
from typing import Any

from bot.lab.inventory import lab_section, lab_values, make_backend
from bot.lab.plan import PlanError

SCHED_DEFAULTS = {"lease_s": 60, "retry_backoff_s": 60, "retry_backoff_max_s": 3600, "poll_interval_s": 5,
                  "deadline_grace_s": 300, "on_no_match": "decline", "wait_recheck_s": 60}


class SchedulerError(Exception):
    """A scheduling request cannot be done; the message says why."""


def sched_settings(config: Any) -> dict[str, Any]:
    lab = lab_section(config)
    out = lab_values(config, SCHED_DEFAULTS)
    for k in ("lease_s", "retry_backoff_s", "retry_backoff_max_s", "poll_interval_s", "deadline_grace_s",
              "wait_recheck_s"):
        v = out[k]
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 <= v <= 86400 * 7:
            raise SchedulerError(f"[lab] {k} must be a number of seconds")
    if out["on_no_match"] not in ("wait", "decline"):
        raise SchedulerError('[lab] on_no_match must be "wait" or "decline"')
    jt = lab.get("job_timeout_s")
    if jt is not None and (not isinstance(jt, (int, float)) or isinstance(jt, bool) or not 1 <= jt <= 86400 * 7):
        raise SchedulerError("[lab] job_timeout_s must be a number of seconds")
    out["job_timeout_s"] = jt
    return out


def default_owner() -> str:
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{secrets.token_hex(3)}"


def pinned_backend_config(mach, config: Any) -> dict:
    """The machine's backend configuration as stored in the job: with the backend's work
    directory resolved now (absolute), so a worker started elsewhere (another cwd, another
    $REGTRIAGE_HOME) finds the runs of this job."""
    bc = mach.backend_config(config)
    try:
        wd = getattr(make_backend(mach.backend, bc), "work_dir", None)
    except Exception:  # noqa: BLE001 - submit reports a backend that cannot be built
        wd = None
    if wd is not None:
        bc[mach.backend] = {**bc.get(mach.backend, {}), "work_dir": str(wd)}
    try:  # where and how tree builds are made ([lab.builds] cache_dir, ccache_dir, jobs, limits)
        from bot.lab.plan import BuildMap

        bc["build_options"] = BuildMap.from_config(config).options
    except PlanError:
        pass
    return bc
