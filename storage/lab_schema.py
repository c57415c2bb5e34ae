"""Tables of the lab scheduler (bot.lab.scheduler; their SQL in storage/lab_jobs.py and
storage/bisections.py), on the shared ``storage.schema.metadata``.

Created by migrations 0005 (jobs) and 0009 (bisections); keep them in step.

* ``lab_jobs``: one row per confirmation rerun of a record -- its plan (recipe, builds, run
  counts: JSON), the machine it was matched to, its state, the backend handle of the run in
  flight (so a restarted worker resumes polling instead of resubmitting), attempts and the
  time of the next one (retries with backoff), the worker holding it (``owner`` until
  ``lease_until``), the deadline, the samples collected over all rounds and the verdict.
* ``lab_machine_leases``: at most one row per machine -- the job that holds it.  The primary
  key makes "this machine is mine" atomic on SQLite and PostgreSQL alike, so a machine runs
  one job at a time whatever the number of workers.
* ``lab_job_events``: what happened to each job (state changes, retries, errors), oldest first.

Job states: ``waiting`` (no machine fits yet), ``queued``, ``submitting``, ``running``,
``done``, ``failed``, ``cancelled``, ``declined``.
"""

from __future__ import annotations

from sqlalchemy import JSON, Boolean, Column, DateTime, Float, ForeignKey, Index, Integer, String, Table, Text

import storage.tracker_schema  # noqa: F401 - the "regressions" table the foreign key names
from storage.schema import metadata

TZ = DateTime(timezone=True)

JOB_STATES = ("waiting", "queued", "submitting", "running", "done", "failed", "cancelled", "declined")
ACTIVE_STATES = ("waiting", "queued", "submitting", "running")
FINAL_STATES = ("done", "failed", "cancelled", "declined")

lab_jobs = Table(
    "lab_jobs", metadata,
    Column("id", Integer, primary_key=True),
    Column("regression_id", Integer, ForeignKey("regressions.id", ondelete="CASCADE")),
    Column("state", String(16), nullable=False),
    Column("machine", String(64)),  # matched machine (None while waiting / when declined)
    Column("backend", String(32)),
    Column("backend_config", JSON),  # the [lab] table the backend was built from (resume after restart)
    Column("plan", JSON, nullable=False),  # recipe, builds, runs, match, reasons (bot.lab.plan)
    Column("spec", JSON),  # RunSpec of the current round (bot.lab.backends.RunSpec.to_dict)
    Column("handle", String(200)),  # backend handle of the run in flight ("qemu:<run id>")
    Column("attempts", Integer, nullable=False, default=0),  # submissions that failed or are in flight
    Column("max_attempts", Integer, nullable=False, default=3),
    Column("rounds", Integer, nullable=False, default=0),  # backend runs finished (1 + extensions)
    Column("next_attempt_at", TZ),  # queued: not before this (backoff)
    Column("deadline_at", TZ),  # running: cancelled and failed after this
    Column("owner", String(128)),  # the worker polling / submitting it
    Column("lease_until", TZ),  # ... until then; afterwards any worker may take it over
    Column("cancel_requested", Boolean, nullable=False, default=False),
    Column("samples", JSON),  # {"good": [...], "bad": [...], "order": [...], "warmups": {...}, "rounds": [...]}
    Column("result", JSON),  # the judgement (bot.lab.stats.Judgement.to_dict) and the verdict note
    Column("verdict", String(16)),
    Column("record_updated", Boolean, nullable=False, default=False),  # verdict written to the record
    Column("message", Text),  # last status / reason, for people
    Column("created_at", TZ, nullable=False),
    Column("updated_at", TZ, nullable=False),
    Column("started_at", TZ),
    Column("finished_at", TZ),
)
Index("ix_lab_jobs_state", lab_jobs.c.state, lab_jobs.c.next_attempt_at)
Index("ix_lab_jobs_regression", lab_jobs.c.regression_id)
Index("ix_lab_jobs_machine", lab_jobs.c.machine, lab_jobs.c.state)

lab_machine_leases = Table(
    "lab_machine_leases", metadata,
    Column("machine", String(64), primary_key=True),
    Column("job_id", Integer, ForeignKey("lab_jobs.id", ondelete="CASCADE"), nullable=False),
    Column("owner", String(128)),
    Column("acquired_at", TZ, nullable=False),
)

lab_job_events = Table(
    "lab_job_events", metadata,
    Column("id", Integer, primary_key=True),
    Column("job_id", Integer, ForeignKey("lab_jobs.id", ondelete="CASCADE"), nullable=False),
    Column("at", TZ, nullable=False),
    Column("state", String(16)),
    Column("message", Text),
    Column("owner", String(128)),
)
Index("ix_lab_job_events_job", lab_job_events.c.job_id, lab_job_events.c.id)

# -- automatic bisections (bot.lab.bisect_driver; SQL in storage/bisections.py; migration 0009) -----
BISECT_STATES = ("queued", "running", "done", "failed", "cancelled")
BISECT_ACTIVE = ("queued", "running")

lab_bisections = Table(
    "lab_bisections", metadata,
    Column("id", Integer, primary_key=True),
    Column("regression_id", Integer, ForeignKey("regressions.id", ondelete="CASCADE")),
    Column("state", String(16), nullable=False),  # BISECT_STATES
    Column("tree", Text, nullable=False),  # the configured kernel tree (path)
    Column("good_ref", String(200)),  # as the record / command gave them
    Column("bad_ref", String(200)),
    Column("machine", String(64)),  # the lab machine every step runs on
    Column("plan", JSON, nullable=False),  # recipe, run settings, build settings, bounds
    Column("bisect", JSON),  # bot.lab.bisection state: range, goods, bad, skipped, steps, lab_s
    Column("ends", JSON),  # samples of the good and bad ends {"good": [...], "bad": [...], "metric", ...}
    Column("result", JSON),  # {"kind", "culprit", "candidates", "log", "reason"}
    Column("owner", String(128)),  # the worker advancing it ...
    Column("lease_until", TZ),  # ... until then
    Column("cancel_requested", Boolean, nullable=False, default=False),
    Column("record_updated", Boolean, nullable=False, default=False),
    Column("message", Text),
    Column("created_at", TZ, nullable=False),
    Column("updated_at", TZ, nullable=False),
    Column("finished_at", TZ),
)
Index("ix_lab_bisections_state", lab_bisections.c.state)
Index("ix_lab_bisections_regression", lab_bisections.c.regression_id)

lab_bisection_steps = Table(
    "lab_bisection_steps", metadata,
    Column("id", Integer, primary_key=True),
    Column("bisection_id", Integer, ForeignKey("lab_bisections.id", ondelete="CASCADE"), nullable=False),
    Column("n", Integer, nullable=False),  # 0: the ends, 1.. the steps
    Column("commit", String(64), nullable=False),
    Column("state", String(16), nullable=False),  # building, running, done
    Column("build", JSON),  # the build's result (entry, image, status, reason, log tail)
    Column("handle", String(200)),  # backend run in flight
    Column("samples", JSON),  # {"good": [...], "step": [...]} collected so far
    Column("verdict", String(16)),  # good / bad / skip (None while in progress)
    Column("change_percent", Float),
    Column("judgement", JSON),
    Column("lab_s", Float),  # lab time spent (builds + runs)
    Column("started_at", TZ, nullable=False),
    Column("finished_at", TZ),
)
Index("ix_lab_bisection_steps", lab_bisection_steps.c.bisection_id, lab_bisection_steps.c.n, unique=True)
