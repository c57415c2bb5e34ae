"""``regtriage run``: the long-running bot, one asyncio process.

Loops, each running one blocking step at a time in a worker thread:

* poll: subscriptions that are due (``[service] poll_interval``) are polled, each under a lease
  so several workers on one PostgreSQL never poll the same subscription at once;
* pipeline: triage new mail, update the tracker, turn new status changes into events
  (notifications queued, reruns scheduled by policy), under a lease (one worker at a time);
* lab: the rerun scheduler's tick, when a lab is configured;
* notify: deliver the notification outbox, when targets are configured;
* web: the dashboard plus ``/metrics`` (Prometheus) and ``/healthz``.

SIGTERM or SIGINT stops the loops after the step in progress (every step commits its work
before it returns, so a restart resumes without loss or duplicates).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from bot.sources.subscriptions import poll_one, poll_settings, subscription_label
from bot.tracker.events import consume_events
from bot.tracker.records import update_tracker
from bot.triage.runner import open_trees, triage_pending
from bot.web.app import create_app
from bot.web.metrics import ProcessCounters, render

log = logging.getLogger("regtriage.service")


class Service:
    def __init__(self, store, config, *, host: str = "127.0.0.1", port: int = 8080, web: bool = True,
                 worker_id: str | None = None) -> None:
        self.store = store
        self.config = config
        self.settings = config.section("service") if config is not None else {}
        self.host, self.port, self.web = host, port, web
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.poll_interval = float(self.settings.get("poll_interval", 300))
        self.tick = float(self.settings.get("tick", 5))
        self.counters = ProcessCounters()
        self.stop = asyncio.Event()
        self.hooks: dict[str, Callable[[], Any]] = {}
        self._server = None
        self.bound_port: int | None = None

    # -- steps (blocking; run in threads) -------------------------------------------------------
    def due_subscriptions(self) -> list[dict[str, Any]]:
        now = datetime.now(timezone.utc)
        due = []
        for sub in self.store.subscriptions():
            last = sub.get("last_poll_at")
            if last is not None and last.tzinfo is None:
                last = last.replace(tzinfo=timezone.utc)
            if last is None or now - last >= timedelta(seconds=self.poll_interval):
                due.append(sub)
        return due

    def poll_step(self) -> int:
        settings, home = poll_settings(self.config)
        new = 0
        for sub in self.due_subscriptions():
            if self.stop.is_set():
                break
            name = f"sub:{sub['id']}"
            stamp = self.store.try_lease(name, self.worker_id, max(self.poll_interval, 600))
            if stamp is None:
                continue  # another worker is polling it
            try:
                detail = poll_one(self.store, sub, settings, home)
            finally:
                self.store.release_lease(name, stamp)
            new += detail["new_messages"]
            if detail["error"]:
                log.warning("poll failed", extra={"subscription": subscription_label(sub), "error": detail["error"]})
            else:
                log.info("polled", extra={"subscription": subscription_label(sub), "new_messages": detail["new_messages"]})
        return new

    def pipeline_step(self) -> dict[str, Any]:
        stamp = self.store.try_lease("pipeline", self.worker_id, 3600)
        if stamp is None:
            return {"skipped": "another worker runs the pipeline"}
        trees = open_trees(self.config)
        try:
            triaged = triage_pending(self.store, trees=trees,
                                     workers=self.config.section("triage").get("workers"))
            tracked = update_tracker(self.store, self.config, trees=trees)
            handled = consume_events(self.store, self.on_event)
        finally:
            if trees is not None:
                trees.close()
            self.store.release_lease("pipeline", stamp)
        if triaged["extracted"] or handled:
            log.info("pipeline", extra={"extracted": triaged["extracted"], "events": handled})
        return {"triage": triaged, "tracker": tracked, "events": handled}

    def on_event(self, event) -> None:
        """A tracker event: queue its notifications; let the lab policy schedule a rerun."""
        self.counters.inc(f"event-{event.kind}:seen")
        enqueue = self.hooks.get("enqueue_event")
        if enqueue is not None:
            enqueue(event)
        schedule = self.hooks.get("schedule_rerun")
        if schedule is not None and event.kind == "triaged":
            schedule(event)

    # -- loops ----------------------------------------------------------------------------------
    async def _loop(self, name: str, step: Callable[[], Any], interval: float) -> None:
        while not self.stop.is_set():
            try:
                if asyncio.iscoroutinefunction(step):
                    await step()
                else:
                    await asyncio.to_thread(step)
                self.counters.inc(f"{name}:ok")
            except Exception as exc:  # noqa: BLE001 - a failing step is logged and retried
                self.counters.inc(f"{name}:failed")
                log.error("step failed", extra={"step": name, "error": f"{exc.__class__.__name__}: {exc}"})
            try:
                await asyncio.wait_for(self.stop.wait(), timeout=interval)
            except asyncio.TimeoutError:
                pass

    def _web_app(self):
        from starlette.applications import Starlette
        from starlette.responses import Response
        from starlette.routing import Mount, Route

        async def metrics(_request):
            body = await asyncio.to_thread(render, self.store, self.counters)
            return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")

        return Starlette(routes=[Route("/metrics", metrics), Mount("/", app=create_app(self.store, self.config))])

    async def _serve_web(self) -> None:
        import uvicorn

        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.listen(128)  # connections queue from now on, before the server's first accept
        self.bound_port = sock.getsockname()[1]
        config = uvicorn.Config(self._web_app(), log_level="warning", lifespan="off", access_log=False)
        self._server = uvicorn.Server(config)
        self._server.install_signal_handlers = lambda: None  # ours stop everything
        log.info("serving", extra={"url": f"http://{self.host}:{self.bound_port}/"})
        try:
            await self._server.serve(sockets=[sock])
        finally:
            sock.close()

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self.request_stop)
            except (NotImplementedError, RuntimeError):  # not the main thread (tests)
                pass
        # start-up hooks (e.g. chat connections) run beside the loops: a slow server delays nothing
        tasks = [*(asyncio.create_task(self._call(hook, "startup")) for hook in self.hooks.get("startup", [])),
                 asyncio.create_task(self._loop("poll", self.poll_step, self.tick)),
                 asyncio.create_task(self._loop("pipeline", self.pipeline_step, self.tick))]
        for name, (step, interval) in self.extra_steps().items():
            tasks.append(asyncio.create_task(self._loop(name, step, interval)))
        web = asyncio.create_task(self._serve_web()) if self.web else None
        log.info("started", extra={"worker": self.worker_id, "steps": ["poll", "pipeline", *self.extra_steps()]})
        await self.stop.wait()
        log.info("stopping: finishing the steps in progress")
        if self._server is not None:
            self._server.should_exit = True
        await asyncio.gather(*tasks, return_exceptions=True)
        if web is not None:
            await asyncio.gather(web, return_exceptions=True)
        for hook in self.hooks.get("shutdown", []):
            await self._call(hook, "shutdown")
        log.info("stopped")
        return 0

    async def _call(self, hook: Callable[[], Any], phase: str) -> None:
        """A start-up or shutdown hook (sync or async); a failure is logged, never fatal."""
        try:
            if asyncio.iscoroutinefunction(hook):
                await hook()
            else:
                await asyncio.to_thread(hook)
        except Exception as exc:  # noqa: BLE001
            log.error("hook failed", extra={"phase": phase, "error": f"{exc.__class__.__name__}: {exc}"})

    def request_stop(self) -> None:
        self.stop.set()
        if self._server is not None:
            self._server.should_exit = True

    def extra_steps(self) -> dict[str, tuple[Callable[[], Any], float]]:
        """Optional loops (lab scheduler, notification outbox), as configured."""
        return dict(self.hooks.get("steps", {}))


def setup_logging(json_lines: bool = False, level: str = "INFO") -> None:
    """Plain or JSON-lines logs on stderr.  Only explicit fields are logged: never the config,
    so secrets from it or the environment cannot reach a log."""
    import json
    import sys

    class JsonFormatter(logging.Formatter):
        SKIP = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}

        def format(self, record: logging.LogRecord) -> str:
            doc = {"ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(),
                   "level": record.levelname.lower(), "logger": record.name, "msg": record.getMessage()}
            doc.update({k: v for k, v in record.__dict__.items() if k not in self.SKIP})
            if record.exc_info:
                doc["exc"] = self.formatException(record.exc_info)
            return json.dumps(doc, default=str)

    class PlainFormatter(logging.Formatter):
        SKIP = JsonFormatter.SKIP

        def format(self, record: logging.LogRecord) -> str:
            extra = " ".join(f"{k}={v}" for k, v in record.__dict__.items() if k not in self.SKIP)
            return f"{record.levelname.lower():7s} {record.name}: {record.getMessage()}" + (f" {extra}" if extra else "")

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_lines else PlainFormatter())
    root = logging.getLogger("regtriage")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
