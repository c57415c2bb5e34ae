"""``[lab.ssh]`` configuration: lab machines (:class:`HostConfig`), the kernel release a build
must show (:func:`expected_release`) and the backend's settings (:class:`SshConfig`).  All
from configuration, validated; nothing here comes from mail."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from bot.lab.backends.base import LabError
from bot.lab.builds import BuildSpec
from bot.lab.recipes import SAFE_SCRATCH_RE

RELEASE_RE = re.compile(r"^[0-9]{1,2}\.[0-9]{1,3}(?:\.[0-9]{1,4})?(?:[-+~][A-Za-z0-9._+~-]{1,64})?$")
HOST_RE = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9-]{1,63})*|[0-9a-fA-F:.]{2,45})$")
USER_RE = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")
MACHINE_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def validate_release(release) -> str:
    if not isinstance(release, str) or not RELEASE_RE.match(release):
        raise LabError(f"not an accepted kernel release: {release!r} (expected e.g. 6.1.0-47-amd64)")
    return release


def expected_release(build: BuildSpec, releases: dict | None = None) -> str:
    """The ``uname -r`` a host must report when running ``build``."""
    releases = releases or {}
    if build.describe() in releases:
        return validate_release(releases[build.describe()])
    if build.kind == "debian":
        m = re.match(r"^linux-image-(.+?)(?:-unsigned)?(?:-dbg)?$", build.debian)
        if m:
            return validate_release(m.group(1))
    if build.kind == "image":
        m = re.match(r"^(?:vmlinu[xz]|bzImage|Image)-(.+)$", os.path.basename(build.image))
        if m and RELEASE_RE.match(m.group(1)):
            return m.group(1)
    raise LabError(f"cannot tell the kernel release of {build.describe()}: add it to [lab.ssh] releases")



@dataclass
class HostConfig:
    """One lab machine's SSH settings (all from configuration, never from mail)."""

    host: str
    user: str
    known_hosts: str
    port: int = 22
    key_file: str | None = None
    use_agent: bool = False
    scratch_dir: str = "/var/tmp"
    kernels: dict = field(default_factory=dict)
    boot_switch: str | None = None
    reboot: bool = False
    reboot_down_s: float = 10.0
    uname_command: str = "uname -r"
    releases: dict = field(default_factory=dict)
    connect_timeout_s: float = 10.0
    name: str = "default"

    def __post_init__(self):
        w = f"[lab.ssh] machine {self.name!r}:"
        if not isinstance(self.name, str) or not MACHINE_RE.match(self.name):
            raise LabError(f"[lab.ssh] machine name {self.name!r} must match {MACHINE_RE.pattern}")
        if not isinstance(self.host, str) or not HOST_RE.match(self.host):
            raise LabError(f"{w} host {self.host!r} is not a hostname or IP address")
        if type(self.port) is not int or not 1 <= self.port <= 65535:
            raise LabError(f"{w} port must be 1..65535")
        if not isinstance(self.user, str) or not USER_RE.match(self.user):
            raise LabError(f"{w} user {self.user!r} is not an accepted user name")
        if not isinstance(self.known_hosts, str) or not os.path.isabs(os.path.expanduser(self.known_hosts)):
            raise LabError(f"{w} known_hosts must be an absolute path (host key verification is required)")
        self.known_hosts = os.path.expanduser(self.known_hosts)
        if self.key_file is not None:
            if not isinstance(self.key_file, str) or not os.path.isabs(os.path.expanduser(self.key_file)):
                raise LabError(f"{w} key_file must be an absolute path")
            self.key_file = os.path.expanduser(self.key_file)
        if not isinstance(self.use_agent, bool):
            raise LabError(f"{w} use_agent must be true or false")
        if self.key_file is None and not self.use_agent:
            raise LabError(f"{w} needs key_file or use_agent = true")
        if not isinstance(self.scratch_dir, str) or not SAFE_SCRATCH_RE.match(self.scratch_dir) \
                or ".." in self.scratch_dir or len(self.scratch_dir) > 150:
            raise LabError(f"{w} scratch_dir {self.scratch_dir!r} is not a safe absolute path")
        self.scratch_dir = self.scratch_dir.rstrip("/") or "/"
        if not isinstance(self.kernels, dict) or not all(
                isinstance(k, str) and (k in ("good", "bad") or RELEASE_RE.match(k)) and isinstance(v, str)
                and v.strip() and "\0" not in v for k, v in self.kernels.items()):
            raise LabError(f"{w} kernels must map 'good'/'bad' or a kernel release to a boot command")
        if self.boot_switch is not None:
            if not isinstance(self.boot_switch, str) or "\0" in self.boot_switch:
                raise LabError(f"{w} boot_switch must be a string")
            rest = self.boot_switch.replace("{release}", "")
            if "{release}" not in self.boot_switch or "{" in rest or "}" in rest:
                raise LabError(f"{w} boot_switch must contain the placeholder {{release}} and no other braces")
        if not isinstance(self.reboot, bool):
            raise LabError(f"{w} reboot must be true or false")
        for k, lo, hi in (("reboot_down_s", 0, 3600), ("connect_timeout_s", 1, 300)):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
                raise LabError(f"{w} {k} must be a number in [{lo}, {hi}]")
        if not isinstance(self.uname_command, str) or not self.uname_command.strip() or "\0" in self.uname_command:
            raise LabError(f"{w} uname_command must be a command string")
        if not isinstance(self.releases, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and RELEASE_RE.match(v) for k, v in self.releases.items()):
            raise LabError(f"{w} releases must map build descriptions to kernel releases")

    def boot_command(self, label: str, release: str) -> str | None:
        """The configured command that makes the host boot ``release`` (None: none configured)."""
        validate_release(release)
        if label in self.kernels:
            return self.kernels[label]
        if release in self.kernels:
            return self.kernels[release]
        if self.boot_switch:
            return self.boot_switch.replace("{release}", shlex.quote(release))
        return None


HOST_KEYS = set(HostConfig.__dataclass_fields__) - {"name"}
SSH_KEYS = HOST_KEYS | {"work_dir", "machine", "machines", "exclusive"}


def machines_from_config(ssh: dict) -> dict[str, HostConfig]:
    """``{name: HostConfig}`` from a ``[lab.ssh]`` table: top-level host keys are the defaults
    (and the machine ``default`` if ``host`` is set there); ``machines.<name>`` override."""
    base = {k: v for k, v in ssh.items() if k in HOST_KEYS}
    out: dict[str, HostConfig] = {}
    machines = ssh.get("machines") or {}
    if not isinstance(machines, dict):
        raise LabError("[lab.ssh] machines must be a table of tables")
    for name, over in machines.items():
        if not isinstance(over, dict):
            raise LabError(f"[lab.ssh.machines.{name}] must be a table")
        unknown = set(over) - HOST_KEYS
        if unknown:
            raise LabError(f"[lab.ssh.machines.{name}] unknown keys: {sorted(unknown)}")
        try:
            out[name] = HostConfig(**{**base, **over, "name": name})
        except TypeError as exc:
            raise LabError(f"[lab.ssh.machines.{name}]: {exc}") from None
    if "host" in base and "default" not in out:
        try:
            out["default"] = HostConfig(**base, name="default")
        except TypeError as exc:
            raise LabError(f"[lab.ssh]: {exc}") from None
    return out


@dataclass
class SshConfig:
    work_dir: str
    machines: dict = field(default_factory=dict)  # name -> HostConfig
    machine: str | None = None
    exclusive: bool = True

    def __post_init__(self):
        self.work_dir = str(Path(self.work_dir).expanduser().resolve())
        if not isinstance(self.exclusive, bool):
            raise LabError("[lab.ssh] exclusive must be true or false")
        if self.machine is not None and self.machine not in self.machines:
            raise LabError(f"[lab.ssh] machine {self.machine!r} is not configured "
                           f"(machines: {', '.join(sorted(self.machines)) or 'none'})")

    def pick(self, name: str | None = None) -> HostConfig:
        name = name or self.machine
        if name is None:
            if len(self.machines) != 1:
                raise LabError("[lab.ssh] set machine = ... (or configure exactly one machine)")
            name = next(iter(self.machines))
        if name not in self.machines:
            raise LabError(f"unknown lab machine {name!r}")
        return self.machines[name]
