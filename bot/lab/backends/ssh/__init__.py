"""The ``ssh`` lab backend: run a recipe's real tools (dd, fio, sysbench, perf bench, hackbench,
stress-ng: see :mod:`bot.lab.recipes`) on a lab host over SSH, on hosts booted into the wanted
kernels (or switched by a configured command).

How a run works
---------------
* ``submit`` validates the :class:`RunSpec`, works out the **expected kernel release** of each
  build (see :func:`expected_release`), picks the machine, creates
  ``<work_dir>/runs/<run id>/`` with ``spec.json`` (job, schedule, the machine's resolved host
  settings, releases) and ``state.json``, and starts a detached worker
  (``python -m bot.lab.backends.ssh worker <run dir>``, its own session).  Handle: ``ssh:<run id>``.
* The worker takes ``<work_dir>/locks/<machine>.lock`` (one run per machine at a time; a waiting
  run is ``queued``), connects (paramiko; host key verified against the configured
  ``known_hosts`` file only, unknown or changed keys refused), creates a remote run directory
  ``<scratch_dir>/regtriage-<run id>`` and runs the batches in the spec's order (``abab`` by
  default).  Per batch:

  1. ``uname -r`` on the host.  If it is not the build's expected release, the boot command for
     the build runs (``kernels[label]``, ``kernels[release]`` or ``boot_switch`` with
     ``{release}``); with ``reboot = true`` the worker then drops the connection, waits
     ``reboot_down_s`` and reconnects until ``timeouts.boot_s``.  ``uname -r`` must then equal the
     expected release, **before any sample counts**: otherwise the batch (and run) fails with the
     reason ("host runs X, expected Y for build good").  ``uname -r`` is checked again after the
     batch (a host that rebooted mid-batch is caught).
  2. ``warmup`` discarded iterations then ``samples_per_batch`` measured ones; each iteration runs
     the recipe's :meth:`~bot.lab.recipes.RecipeSpec.host_argv` steps in the remote run directory,
     the last step being the measured one, parsed by the recipe's own parser
     (:meth:`~bot.lab.recipes.RecipeSpec.parse_output`).
* Remote commands are built **only** from the recipe's validated argv (``shlex.join``), the
  validated run directory, and the configured host settings (boot commands, ``uname_command``);
  nothing from mail reaches a shell.  Each step runs as
  ``cd RUNDIR && echo $$ > RUNDIR/cmd.pid && exec env LC_ALL=C <argv>``: sshd starts every
  command in a new session, so that pid leads the step's process group.  Cancel, timeout or a
  worker that is told to stop runs :func:`remote_kill` over a new channel (the step's process
  group and every descendant: STOP, TERM + CONT, KILL); :meth:`SshBackend.cancel` and ``poll`` of
  a dead worker do the same themselves when the worker is gone.
* Files in the run directory: ``spec.json``, ``state.json`` (status, batches with samples and the
  kernel release seen), ``worker.json`` (pid), ``worker.log``, ``run.log`` (host notes, every
  command with its stdout/stderr: the raw log), ``result.json`` when done.  Any process with the
  same ``work_dir`` can poll, fetch or cancel; a dead worker is detected and reported failed.

Modules: :mod:`~bot.lab.backends.ssh.config` (hosts, releases, settings),
:mod:`~bot.lab.backends.ssh.session` (paramiko), :mod:`~bot.lab.backends.ssh.commands` (the
remote shell commands), :mod:`~bot.lab.backends.ssh.backend` (submit, poll, cancel),
:mod:`~bot.lab.backends.ssh.worker` (the batches).  The run's state (batch order, transitions,
timeouts, a dead worker's diagnosis) is :class:`~bot.lab.backends.runstate.RunMachine`'s; this
package is the transport.

Configuration (``[lab.ssh]``; the host keys may also sit per machine in
``[lab.ssh.machines.<name>]``, which override the top-level ones)::

    work_dir = "~/.regtriage/lab/ssh"    # default $REGTRIAGE_HOME/lab/ssh
    machine = "default"                  # which machine submit uses (default: the only one)
    host = "lab1.example.org"            # hostname or IP
    port = 22
    user = "bench"
    key_file = "/etc/regtriage/lab_ed25519"   # or use_agent = true
    use_agent = false
    known_hosts = "/etc/regtriage/known_hosts" # required: host key verification is always on
    scratch_dir = "/var/tmp"             # remote; workloads only touch <scratch_dir>/regtriage-<run id>
    kernels = {"6.1.0-47-amd64" = "sudo grub-reboot 'Debian, 6.1.0-47' && sudo reboot"}
    boot_switch = "sudo /usr/local/sbin/boot-kernel {release}"  # {release} validated + quoted
    reboot = true                        # boot commands reboot the host: wait for it
    reboot_down_s = 10                   # wait this long before reconnecting
    uname_command = "uname -r"
    releases = {"tree:/src/linux@v6.2-rc1" = "6.2.0-rc1"}      # builds whose release can't be derived
    connect_timeout_s = 10
    exclusive = true                     # one run per machine at a time (lock under work_dir)

Kernel releases (:data:`RELEASE_RE`): ``debian:linux-image-6.1.0-47-amd64-unsigned`` ->
``6.1.0-47-amd64``; ``image:/boot/vmlinuz-6.2.0-rc1`` -> ``6.2.0-rc1``; anything else needs a
``releases`` entry keyed by the build's ``describe()`` string.  Boot commands are configuration
(trusted, run by the remote user's shell as written); only the ``{release}`` placeholder is
substituted, with a release that matched :data:`RELEASE_RE` and is shell-quoted.
"""

from bot.lab.backends.ssh.backend import SshBackend
from bot.lab.backends.ssh.commands import measured_step, remote_kill, remote_step
from bot.lab.backends.base import lab_table
from bot.lab.backends.ssh.config import (HOST_KEYS, RELEASE_RE, SSH_KEYS, HostConfig, SshConfig, expected_release,
                                         machines_from_config, validate_release)
from bot.lab.backends.ssh.session import CommandResult, SshSession
from bot.lab.backends.ssh.worker import BatchFailed, SshWorker, main

__all__ = ["HOST_KEYS", "RELEASE_RE", "SSH_KEYS", "BatchFailed", "CommandResult", "HostConfig", "SshBackend",
           "SshConfig", "SshSession", "SshWorker", "expected_release", "lab_table", "machines_from_config", "main",
           "measured_step", "remote_kill", "remote_step", "validate_release"]
