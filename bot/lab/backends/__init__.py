"""Lab backends: run a vetted recipe on two builds (``good`` and ``bad``) and collect samples.

Interface (:class:`Backend`)::

    handle = backend.submit(run_spec)          # starts the work, returns at once: "qemu:<run id>"
    status = backend.poll(handle)              # Status(state, message, ...); state in STATES
    samples = backend.fetch_samples(handle)    # Samples: {"good": [...], "bad": [...]} + log_path
    backend.cancel(handle)                     # stop it; kills every process it started
    backend.describe(handle) -> dict           # JSON-serialisable state (spec, status, batches)

A handle is a plain string ``<backend>:<run id>`` and all run state lives on disk under the
backend's work directory, so a scheduler persists ``{"backend": ..., "handle": ...}`` (see
:meth:`Backend.handle_state`) and, after a restart, builds the backend from the same
configuration (:func:`get_backend`) and keeps polling.

:class:`RunSpec` (JSON round-trip with ``to_dict``/``from_dict``)::

    {"recipe": {"name": "syscall-getpid", "params": {"iterations": 200000}},
     "builds": {"good": {"debian": "linux-image-6.1.0-47-amd64-unsigned"},
                "bad":  {"image": "/srv/kernels/vmlinuz-6.2-rc1"}},
     "runs": 10,              # measured samples per build
     "samples_per_batch": 1,  # samples per batch (qemu: per guest boot)
     "warmup": 1,             # warm-up iterations per batch, run first and discarded
     "order": "abab",         # batch order across builds: abab | abba | blocked
     "timeouts": {"boot_s": 120, "batch_s": 900, "total_s": 7200},
     "label": "regzbot-1234"} # optional, [A-Za-z0-9._-]{1,64}

A *batch* is one unit of execution of one build: for qemu one guest boot running ``warmup`` +
``samples_per_batch`` iterations.  Batches alternate between the builds in ``order`` so slow
drift of the host (thermal, page cache, other tenants) spreads over both builds.

Backends are found by name in a registry: the built-in ones (:data:`BUILTIN`), backends a test
or a plug-in registers at run time (:func:`register_backend`), and backends other packages
declare as entry points in the group ``regtriage.lab_backends`` (``name = "module:Class"``, the
class having ``from_config(config)``), so a lab can add one without editing this project.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any, Callable

from bot.lab.backends.base import (BUILD_LABELS, DONE, FAILED, LABEL_RE, ORDERS, QUEUED, RUNNING,  # noqa: F401
                                   STATES, Backend, LabError, RunSpec, Samples, Status, Timeouts)

ENTRY_POINT_GROUP = "regtriage.lab_backends"
BUILTIN = {
    "qemu": "bot.lab.backends.qemu:QemuBackend",
    "ssh": "bot.lab.backends.ssh:SshBackend",
    "lkp": "bot.lab.backends.lkp:LkpBackend",
    "lava": "bot.lab.backends.lava:LavaBackend",
}
_REGISTERED: dict[str, Callable[[dict], Any]] = {}


def register_backend(name: str, factory: Callable[[dict], Any]) -> None:
    """Make ``factory(config) -> Backend`` the backend called ``name`` (before the built-in and
    entry-point ones)."""
    if not isinstance(name, str) or not LABEL_RE.match(name):
        raise ValueError(f"bad backend name {name!r}")
    _REGISTERED[name] = factory


def unregister_backend(name: str) -> None:
    _REGISTERED.pop(name, None)


def _load(target: str):
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def backend_names() -> list[str]:
    """Every backend name the registry knows."""
    return sorted(set(_REGISTERED) | set(BUILTIN) | {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


def get_backend(name: str, config: dict | None = None) -> Backend:
    """Backend by name, configured from ``config`` (the whole config dict or its ``[lab]``
    table; each backend reads ``[lab.<name>]``)."""
    if name in _REGISTERED:
        return _REGISTERED[name](dict(config or {}))
    if name in BUILTIN:
        return _load(BUILTIN[name]).from_config(config)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return ep.load().from_config(config)
    raise LabError(f"unknown lab backend {name!r}")


def backend_for_handle(handle: str, config: dict | None = None) -> Backend:
    """The backend a handle belongs to (``<backend>:<run id>``)."""
    if not isinstance(handle, str) or ":" not in handle:
        raise LabError(f"not a lab handle: {handle!r}")
    return get_backend(handle.split(":", 1)[0], config)
