"""The on-disk run state every process-running backend keeps (qemu, ssh, lkp, lava): a run
directory per handle with JSON files written atomically, the worker processes it started, and
text from tools made printable.  Shared here so each backend is only its transport."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from pathlib import Path


def default_work_dir(kind: str) -> Path:
    """``$REGTRIAGE_HOME/lab/<kind>``: where a backend keeps its run directories."""
    from bot.config import default_home

    return default_home() / "lab" / kind


def atomic_write_json(path: Path, data) -> None:
    """Write JSON so that a reader never sees half a file (a temp file, then rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(3)}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


def read_json(path: Path, default=None):
    """The JSON in ``path``, or ``default`` when it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


def printable(text, limit: int = 300) -> str:
    """Tool output made safe for one log or status line: non-printable characters blanked, cut."""
    return "".join(c if c.isprintable() else " " for c in str(text))[:limit]


class Children:
    """The worker processes this backend object started, by handle, reaped once they exit."""

    def __init__(self) -> None:
        self._procs: dict[str, subprocess.Popen] = {}

    def add(self, handle: str, proc: subprocess.Popen) -> None:
        self._procs[handle] = proc

    def get(self, handle: str, default=None):
        return self._procs.get(handle, default)

    def pop(self, handle: str, default=None):
        return self._procs.pop(handle, default)

    def reap(self, handle: str) -> None:
        proc = self._procs.get(handle)
        if proc is not None and proc.poll() is not None:
            self._procs.pop(handle, None)
