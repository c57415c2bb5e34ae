"""``[lab.lava]`` configuration (:class:`LavaConfig`, validated) and the API token's lookup."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit

from bot.lab import initramfs as initramfs_mod
from bot.lab.backends.base import LabError
from bot.lab.backends.rundir import default_work_dir

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
PRIORITIES = ("high", "medium", "low")


@dataclass
class LavaConfig:
    url: str
    token_env: str = "REGTRIAGE_LAVA_TOKEN"
    token_file: str | None = None
    device_type: str = "qemu"
    device_tags: list = field(default_factory=list)
    visibility: str = "public"
    priority: str | int = "medium"
    no_kvm: bool = False
    context: dict = field(default_factory=dict)
    memory_mib: int | None = None
    batches_per_job: int = 0
    job_timeout_s: int | None = None
    deploy_timeout_s: int = 300
    connection_timeout_s: int = 120
    artifact_dir: str | None = None
    artifact_url: str | None = None
    keep_artifacts: bool = False
    work_dir: str = ""
    build_cache: str | None = None
    deb_dir: str | None = None
    busybox: str = initramfs_mod.DEFAULT_BUSYBOX
    http_timeout_s: float = 30.0
    cancel_wait_s: float = 60.0

    def __post_init__(self):
        bad = lambda msg: LabError(f"[lab.lava] {msg}")  # noqa: E731
        if not isinstance(self.url, str):
            raise bad("url is required")
        u = urlsplit(self.url)
        if u.scheme not in ("http", "https") or not u.hostname or u.query or u.fragment or u.username:
            raise bad(f"url must be http(s)://host[:port][/path] without credentials, got {self.url!r}")
        self.url = self.url.rstrip("/") + "/"
        if not isinstance(self.token_env, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", self.token_env):
            raise bad("token_env must be an environment variable name")
        for k in ("device_type",):
            if not isinstance(getattr(self, k), str) or not NAME_RE.match(getattr(self, k)):
                raise bad(f"{k} must match {NAME_RE.pattern}")
        if not isinstance(self.device_tags, list) or not all(isinstance(t, str) and NAME_RE.match(t)
                                                              for t in self.device_tags):
            raise bad(f"device_tags must be a list of names matching {NAME_RE.pattern}")
        if self.visibility not in ("public", "personal"):
            raise bad("visibility must be public or personal")
        if not (self.priority in PRIORITIES or (type(self.priority) is int and 0 <= self.priority <= 100)):
            raise bad("priority must be high, medium, low or an int 0..100")
        if not isinstance(self.no_kvm, bool) or not isinstance(self.keep_artifacts, bool):
            raise bad("no_kvm and keep_artifacts must be true or false")
        if not isinstance(self.context, dict):
            raise bad("context must be a table")
        for k, v in self.context.items():
            if not (isinstance(k, str) and re.fullmatch(r"[a-z][a-z0-9_]{0,63}", k)):
                raise bad(f"context key {k!r} is not a plain name")
            if not (isinstance(v, (bool, int)) or (isinstance(v, str) and re.fullmatch(r"[A-Za-z0-9_.,:=/+-]{0,128}", v))):
                raise bad(f"context value for {k!r} must be a bool, an int or a short plain string")
        for k, lo, hi in (("batches_per_job", 0, 1000), ("deploy_timeout_s", 10, 86400),
                          ("connection_timeout_s", 5, 3600)):
            v = getattr(self, k)
            if type(v) is not int or not lo <= v <= hi:
                raise bad(f"{k} must be an int in [{lo}, {hi}]")
        for k, lo, hi in (("memory_mib", 128, 1 << 20), ("job_timeout_s", 60, 7 * 86400)):
            v = getattr(self, k)
            if v is not None and (type(v) is not int or not lo <= v <= hi):
                raise bad(f"{k} must be an int in [{lo}, {hi}]")
        for k, lo, hi in (("http_timeout_s", 1, 600), ("cancel_wait_s", 0, 3600)):
            v = getattr(self, k)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not lo <= v <= hi:
                raise bad(f"{k} must be a number in [{lo}, {hi}]")
        self.work_dir = str(Path(self.work_dir or default_work_dir("lava")).expanduser().resolve())
        self.artifact_dir = str(Path(self.artifact_dir or os.path.join(self.work_dir, "artifacts")).expanduser().resolve())
        if self.artifact_url is None:
            self.artifact_url = "file://" + quote(self.artifact_dir)
        au = urlsplit(self.artifact_url)
        if au.scheme not in ("file", "http", "https") or au.query or au.fragment or au.username \
                or not re.fullmatch(r"[A-Za-z0-9._~%/:+-]*", self.artifact_url.split("://", 1)[-1]):
            raise bad(f"artifact_url must be a plain file://, http:// or https:// prefix, got {self.artifact_url!r}")
        self.artifact_url = self.artifact_url.rstrip("/")
        if self.token_file is not None:
            self.token_file = str(Path(self.token_file).expanduser())

    @property
    def builds_dir(self) -> str:
        return self.build_cache or os.path.join(self.work_dir, "builds")

    def token(self) -> str | None:
        """The API token: ``$<token_env>``, else the first line of ``token_file``."""
        tok = os.environ.get(self.token_env, "").strip()
        if not tok and self.token_file:
            try:
                tok = Path(self.token_file).read_text().strip().splitlines()[0].strip()
            except (OSError, IndexError):
                tok = ""
        if tok and not re.fullmatch(r"[A-Za-z0-9_.:-]{8,256}", tok):
            raise LabError("[lab.lava] the token has unexpected characters")
        return tok or None
