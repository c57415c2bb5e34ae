"""Optional parts of the service (lab scheduler, notifications), attached when configured.

* ``[lab]`` with machines: a ``lab`` loop runs the rerun scheduler's tick every
  ``[lab] poll_interval_s``; a record that becomes ``triaged`` gets a rerun when
  ``[lab] auto_rerun = true`` and its report is recent (``[lab] auto_rerun_max_age_hours``,
  default 72: a backfill of old mail schedules nothing); on shutdown the worker gives up its leases on running jobs.
* ``[service] replies = "draft"`` or ``"send"``: a record reaching a status of ``[service]
  reply_on`` (default confirmed, not-reproduced) gets its reply on the list thread, drafted
  into the outbox or sent (``regtriage reply``'s policy: allow-listed lists, rate limits, never
  the same reply twice).
* ``[notify]`` with IRC servers or Matrix accounts: one connection per account is kept for the
  life of the process (listening for chat commands when ``[chat] enabled``); tracker events
  from the service's event stream are queued in the outbox and a ``notify`` loop delivers them.
  Each transition is announced once per target (keyed by its history row), by the same rule as
  ``regtriage notify --send-pending`` (bot.notify.outbox.announce): mail received more than
  ``[notify] max_age_hours`` ago, old transitions and "new" events of records closed since are
  stored as skipped, with the reason.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from bot.lab.inventory import lab_section
from bot.lab.scheduler import Scheduler
from bot.lab.scheduling import auto_schedule, schedule_rerun
from bot.lab.settings import default_owner, sched_settings, SchedulerError
from bot.notify.outbox import announce
from bot.notify.responder import TrackerActions
from bot.notify.settings import load_settings
from bot.reply.compose import EVENT_KINDS, ReplyError
from bot.reply.run import run_reply
from bot.reply.settings import MailSettings
from bot.service.notify import NotifyService
from bot.tracker.events import is_backfill

log = logging.getLogger("regtriage.service")


def install_hooks(service) -> None:
    """Attach the lab and notification steps when their configuration asks for them."""
    steps: dict[str, tuple[Any, float]] = {}
    service.hooks["steps"] = steps
    service.hooks.setdefault("startup", [])
    service.hooks.setdefault("shutdown", [])
    scheduler = _install_lab(service, steps)
    _install_replies(service)
    _install_notify(service, steps, scheduler)


def _chain(service, name: str, fn) -> None:
    """Add ``fn(event)`` to the event hook ``name``, after what is there already."""
    previous = service.hooks.get(name)

    def both(event) -> None:
        if previous is not None:
            previous(event)
        fn(event)

    service.hooks[name] = both


# -- replies on the lists --------------------------------------------------------------------------
REPLY_MODES = {"off": None, "draft": "dry-run", "send": "send"}


def reply_policy(config) -> tuple[str | None, tuple[str, ...]]:
    """``[service] replies`` (off | draft | send, default off) and ``[service] reply_on`` (the
    statuses that get a reply, default confirmed and not-reproduced) -> (run_reply mode, statuses)."""
    settings = config.section("service") if config is not None else {}
    mode = settings.get("replies", "off")
    if mode not in REPLY_MODES:
        raise ValueError('[service] replies must be "off", "draft" or "send"')
    on = settings.get("reply_on", ["confirmed", "not-reproduced"])
    if not isinstance(on, list) or any(k not in EVENT_KINDS for k in on):
        raise ValueError(f"[service] reply_on must be a list of statuses ({', '.join(EVENT_KINDS)})")
    return REPLY_MODES[mode], tuple(on)


def max_age_hours(table: dict, key: str, where: str, default: float = 72) -> float:
    """A positive number of hours from a config table (the backfill cut-off of a hook)."""
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"[{where}] {key} must be a positive number of hours")
    return float(value)


def _install_replies(service) -> None:
    mode, statuses = reply_policy(service.config)
    if mode is None:
        return
    max_age = max_age_hours(service.config.section("service"), "reply_max_age_hours", "service")
    MailSettings.from_config(service.config)  # a broken [mail] stops the start, with its reason
    def reply(event) -> None:
        if event.status not in statuses or is_backfill(service.store, event, max_age):
            return
        try:  # one reply per record, status and facts: a repeated event finds it done
            out = run_reply(service.store, service.config, event.regression_id, mode=mode, event=event.status)
        except ReplyError as exc:
            service.counters.inc("reply:refused")
            log.info("no reply", extra={"record": event.regression_id, "reason": str(exc)})
            return
        except Exception as exc:  # noqa: BLE001 - a mail failure must not hold up the event stream
            service.counters.inc("reply:failed")
            log.error("reply failed", extra={"record": event.regression_id,
                                             "error": f"{exc.__class__.__name__}: {exc}"})
            return
        service.counters.inc(f"reply:{out.status}")
        log.info("reply", extra={"record": event.regression_id, "status": out.status, "detail": out.message})

    _chain(service, "enqueue_event", reply)


# -- lab -------------------------------------------------------------------------------------------
def _lab_configured(config) -> bool:
    return bool(lab_section(config).get("machines")) if config is not None else False


def _install_lab(service, steps):
    if not _lab_configured(service.config):
        return None
    interval = float(sched_settings(service.config)["poll_interval_s"]) or service.tick
    scheduler = Scheduler(service.store, service.config, owner=default_owner(),
                          log=lambda msg: log.info("lab", extra={"detail": msg}))
    steps["lab"] = (scheduler.tick, interval)

    max_age = max_age_hours(lab_section(service.config), "auto_rerun_max_age_hours", "lab")

    def schedule(event) -> None:
        if is_backfill(service.store, event, max_age):
            return  # old mail being backfilled: tracked, never rerun on its own
        job = auto_schedule(service.store, service.config, event.regression_id)
        if job is not None:
            service.counters.inc("lab-rerun:scheduled")
            log.info("rerun scheduled", extra={"record": event.regression_id, "job": job.get("id")})

    _chain(service, "schedule_rerun", schedule)
    service.hooks["shutdown"].append(scheduler.release)
    return scheduler


class LabActions:
    """Chat commands that change state: ``resolve`` through the tracker, ``rerun`` through the
    lab scheduler (a real job when a lab is configured; otherwise the request is only recorded)."""

    def __init__(self, store, config, lab: bool) -> None:
        self.store, self.config, self.lab = store, config, lab
        self.tracker = TrackerActions(store)

    def resolve(self, rid: int, actor: str, note: str | None) -> bool:
        return self.tracker.resolve(rid, actor, note)

    def rerun(self, rid: int, actor: str) -> bool:
        if not self.lab:
            return self.tracker.rerun(rid, actor)
        try:
            schedule_rerun(self.store, self.config, rid, requested_by=f"chat {actor}")
        except SchedulerError as exc:
            log.info("chat rerun refused", extra={"record": rid, "actor": actor, "reason": str(exc)})
            return False
        return True


# -- notifications -----------------------------------------------------------------------------------
def _install_notify(service, steps, scheduler) -> None:
    settings = load_settings(service.config)
    if not settings.accounts():
        return
    notify = NotifyService(service.store, settings,
                           actions=LabActions(service.store, service.config, scheduler is not None))
    def enqueue(event) -> None:
        try:  # the same per-transition rule as `notify --send-pending` (bot.notify.outbox.announce)
            out = announce(service.store, event, settings=settings)
        except KeyError:  # the record is gone
            return
        if out["skipped"]:
            service.counters.inc("notify:skipped", out["skipped"])
        service.counters.inc("notify:queued", out["queued"])

    started = asyncio.Event()

    async def start() -> None:
        try:
            result = await notify.start()
        finally:
            started.set()
        for account, error in result.items():
            if error:
                log.warning("chat account not connected yet", extra={"account": account, "error": error})
            else:
                log.info("chat account connected", extra={"account": account})

    async def deliver() -> None:
        if not started.is_set():
            return  # connections are still being made; the queue waits
        out = await notify.run_pass(scan=False)
        for key in ("sent", "failed"):
            if out.get(key):
                service.counters.inc(f"notify:{key}", int(out[key]))

    _chain(service, "enqueue_event", enqueue)
    service.hooks["startup"].append(start)
    service.hooks["shutdown"].append(notify.stop)
    steps["notify"] = (deliver, min(10.0, service.tick))
