"""The notification part of a long-running bot (for ``regtriage run``, in one asyncio process).

```python
svc = NotifyService(store, load_settings(config))
await svc.start()                 # one connection per configured IRC server / Matrix account,
                                  # chat listeners on, reconnecting in the background
while running:
    await svc.run_pass()          # tracker status changes -> outbox; deliver what is due
    await asyncio.sleep(10)
await svc.stop()
```
A server that is down at start does not stop the others: its adapter keeps reconnecting and
its notifications stay queued until it is back.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from bot.notify.base import DeliveryError
from bot.notify.deliver import Deliverer
from bot.notify.notifiers import make_adapter
from bot.notify.outbox import scan_tracker
from bot.notify.responder import ChatActions, ChatResponder
from bot.notify.settings import NotifySettings

log = logging.getLogger("regtriage.notify.service")


class NotifyService:
    def __init__(self, store, settings: NotifySettings, *, actions: ChatActions | None = None,
                 adapter_factory=make_adapter, listen: bool = True) -> None:
        self.store = store
        self.s = settings
        self.listen = listen and settings.chat.enabled
        self.responder = ChatResponder(store, settings, actions)
        self.adapters: dict[tuple[str, str], Any] = {}
        for account in settings.accounts():
            a = adapter_factory(account)
            if self.listen:
                a.on_command(self.responder)
            self.adapters[(account.kind, account.name)] = a
        self.deliverer = Deliverer(store, settings, adapters=self.adapters)

    async def start(self, *, timeout: float | None = None) -> dict[str, str | None]:
        """Start every adapter; returns ``{"kind:name": None or the first connection error}``."""
        async def one(key, a):
            try:
                await a.start(listen=self.listen, wait=True, timeout=timeout or self.s.send_timeout)
                return key, None
            except (DeliveryError, asyncio.TimeoutError, OSError) as exc:
                log.warning("%s:%s not connected yet: %s", key[0], key[1], exc)
                if self.listen:  # keep its listener retrying (an IRC adapter already does)
                    await a.start(listen=True, wait=False)
                return key, str(exc) or exc.__class__.__name__
        results = await asyncio.gather(*(one(k, a) for k, a in self.adapters.items()))
        return {f"{k[0]}:{k[1]}": err for k, err in results}

    async def run_pass(self, *, scan: bool | None = None, **kw) -> dict[str, Any]:
        """Tracker changes -> outbox (``[notify] watch_tracker``), then one delivery pass."""
        out: dict[str, Any] = {}
        if scan if scan is not None else self.s.watch_tracker:
            out["tracker"] = await asyncio.to_thread(scan_tracker, self.store, settings=self.s)
        out.update(await self.deliverer.run_once(**kw))
        return out

    async def serve(self, stop: asyncio.Event, interval: float = 10.0) -> None:
        while not stop.is_set():
            try:
                await self.run_pass()
            except Exception:  # noqa: BLE001 - keep serving
                log.exception("notification pass failed")
            try:
                await asyncio.wait_for(stop.wait(), interval)
            except asyncio.TimeoutError:
                pass

    async def stop(self) -> None:
        for a in self.adapters.values():
            try:
                await a.stop()
            except Exception:  # noqa: BLE001
                log.exception("stopping adapter")
