"""Configuration: TOML file, environment, command-line overrides.

Resolution order for the database URL: ``--db`` > ``REGTRIAGE_DB`` > ``[storage] db`` in the
config file > SQLite under ``$REGTRIAGE_HOME``.  The config file is ``--config PATH``, else
``$REGTRIAGE_CONFIG``, else ``./regtriage.toml`` if present, else ``$REGTRIAGE_HOME/regtriage.toml``.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ConfigError(Exception):
    """The configuration cannot be used; the message says why."""


def default_home() -> Path:
    env = os.environ.get("REGTRIAGE_HOME")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "regtriage"


@dataclass
class Config:
    home: Path
    db_url: str
    path: Path | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def section(self, name: str) -> dict[str, Any]:
        value = self.data.get(name, {})
        if not isinstance(value, dict):
            raise ConfigError(f"[{name}] in {self.path} must be a table")
        return value

    @property
    def user_agent_contact(self) -> str | None:
        return self.section("lore").get("contact")


def _find_config(explicit: str | None) -> Path | None:
    if explicit:
        p = Path(explicit).expanduser()
        if not p.is_file():
            raise ConfigError(f"config file not found: {p}")
        return p
    env = os.environ.get("REGTRIAGE_CONFIG")
    if env:
        p = Path(env).expanduser()
        if not p.is_file():
            raise ConfigError(f"REGTRIAGE_CONFIG points to a missing file: {p}")
        return p
    for candidate in (Path.cwd() / "regtriage.toml", default_home() / "regtriage.toml"):
        if candidate.is_file():
            return candidate
    return None


def load(config_path: str | None = None, db_url: str | None = None) -> Config:
    path = _find_config(config_path)
    data: dict[str, Any] = {}
    if path is not None:
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config {path}: {exc}") from None
    home_value = data.get("home")
    home = Path(home_value).expanduser() if home_value and not os.environ.get("REGTRIAGE_HOME") else default_home()
    storage = data.get("storage", {}) if isinstance(data.get("storage", {}), dict) else {}
    url = db_url or os.environ.get("REGTRIAGE_DB") or storage.get("db")
    if not url:
        url = f"sqlite:///{home / 'regtriage.sqlite3'}"
    return Config(home=home, db_url=url, path=path, data=data)
