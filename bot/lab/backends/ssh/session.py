"""A paramiko session to one lab machine: host keys verified against the configured
``known_hosts`` only, commands run with a timeout and a cancel check while they wait."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from bot.lab.backends.base import LabError
from bot.lab.backends.rundir import printable
from bot.lab.backends.ssh.config import HostConfig


@dataclass
class CommandResult:
    rc: int
    stdout: str
    stderr: str
    duration_s: float


class SshSession:
    """A paramiko connection to one machine with host key verification against the configured
    ``known_hosts`` file only (``RejectPolicy``: unknown hosts and changed keys are refused)."""

    def __init__(self, host: HostConfig):
        self.host = host
        self.client = None

    def connect(self) -> "SshSession":
        import paramiko

        h = self.host
        if not os.path.isfile(h.known_hosts):
            raise LabError(f"known_hosts file {h.known_hosts} does not exist")
        client = paramiko.SSHClient()
        client.load_host_keys(h.known_hosts)  # only this file; ~/.ssh/known_hosts is not read
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            client.connect(h.host, port=h.port, username=h.user, key_filename=h.key_file,
                           allow_agent=h.use_agent, look_for_keys=False, timeout=h.connect_timeout_s,
                           banner_timeout=h.connect_timeout_s, auth_timeout=h.connect_timeout_s)
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise LabError(f"host key verification failed for {h.host}:{h.port}: the server's "
                           f"{exc.key.get_name()} key does not match {h.known_hosts} (refused)") from None
        except paramiko.SSHException as exc:
            client.close()
            msg = str(exc)
            if "not found in known_hosts" in msg:
                raise LabError(f"host key verification failed for {h.host}:{h.port}: no key in "
                               f"{h.known_hosts} (refused)") from None
            raise LabError(f"ssh to {h.user}@{h.host}:{h.port} failed: {printable(msg)}") from None
        except (OSError, EOFError) as exc:
            client.close()
            raise LabError(f"cannot connect to {h.host}:{h.port}: {printable(str(exc))}") from None
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(15)
        self.client = client
        return self

    def close(self) -> None:
        if self.client is not None:
            try:
                self.client.close()
            except Exception:  # noqa: BLE001
                pass
            self.client = None

    @property
    def alive(self) -> bool:
        t = self.client.get_transport() if self.client is not None else None
        return bool(t and t.is_active())

    def run(self, command: str, *, timeout: float, stdin: bytes | None = None, check=None) -> CommandResult:
        """Run ``command`` (a shell command string built by this module) and wait for it.
        ``check()`` is called while waiting and may raise (cancel); on a timeout the channel is
        closed and LabError raised (the caller kills the remote process group)."""
        if not self.alive:
            raise LabError(f"not connected to {self.host.host}")
        t0 = time.monotonic()
        try:
            chan = self.client.get_transport().open_session(timeout=self.host.connect_timeout_s)
            chan.exec_command(command)
            if stdin:
                chan.sendall(stdin)
            chan.shutdown_write()
        except Exception as exc:  # noqa: BLE001 - paramiko raises SSHException/EOFError/OSError
            raise LabError(f"ssh channel failed: {printable(str(exc)) or type(exc).__name__}") from None
        out, err = bytearray(), bytearray()
        try:
            while True:
                busy = False
                while chan.recv_ready():
                    out += chan.recv(65536)
                    busy = True
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                    busy = True
                if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                    break
                if chan.closed and not chan.exit_status_ready():
                    raise LabError("the ssh connection was lost while a command ran")
                if time.monotonic() - t0 > timeout:
                    raise LabError(f"command timed out after {timeout:.0f}s")
                if check is not None:
                    check()
                if not busy:
                    time.sleep(0.02)
            rc = chan.recv_exit_status()
        finally:
            chan.close()
        return CommandResult(rc, out.decode(errors="replace"), err.decode(errors="replace"),
                             time.monotonic() - t0)
