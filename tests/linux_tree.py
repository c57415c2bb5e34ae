"""A real Linux kernel git tree for the build and bisection tests.

Debian's ``linux-source-6.1`` package (``/usr/src/linux-source-6.1.tar.xz``, in
tests/system-packages.txt) is unpacked and committed into a git repository as one base commit
(tagged ``v6.1-base``), then a fixed series of small commits is added on top:

====  ==========================================================================
 c1   a comment in kernel/sys.c                       (harmless)
 c2   a comment in fs/read_write.c                    (harmless)
 c3   a comment in mm/filemap.c                       (harmless)
 c4   ``#error`` in init/version.c                    (does NOT build: tag test-broken)
 c5   the #error removed again                        (harmless)
 c6   a busy loop in write_null() (drivers/char/mem.c): every write(2) to /dev/null
      spins -- the project's ``syscall-getpid`` guest recipe (``dd if=/dev/zero
      of=/dev/null bs=1``) gets measurably slower     (THE SLOW ONE: tag test-slow)
 c7   a comment in kernel/fork.c                      (harmless)
 c8   a comment in fs/open.c                          (harmless)
====  ==========================================================================

A bisection of ``v6.1-base..test-c8`` tests c4 first (the middle of 8), so it meets the
broken commit (a ``skip``) before it finds c6.

Everything is committed with fixed author, committer and dates, so the commit ids are the same
on every machine for the same tarball.  The tree is cached under :data:`CACHE`
(``$REGTRIAGE_TEST_CACHE``, default ``~/.cache/regtriage-test``, shared with the other lab tests) next to the ccache directory
and the build cache of the tests; a marker file says it is complete, a file lock keeps two
pytest processes from preparing it at once.

Run ``python tests/linux_tree.py`` to prepare it by hand (prints the commit ids).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from bot.lab.builds import locked as _lock

TARBALL = Path(os.environ.get("REGTRIAGE_LINUX_TARBALL", "/usr/src/linux-source-6.1.tar.xz"))
CACHE = Path(os.environ.get("REGTRIAGE_TEST_CACHE", Path.home() / ".cache" / "regtriage-test"))  # as tests/test_qemu_backend.py
SERIES_VERSION = "4"  # bump when SERIES changes: the cached tree is rebuilt
GIT_ENV = {"GIT_AUTHOR_NAME": "regtriage tests", "GIT_AUTHOR_EMAIL": "tests@regtriage.invalid",
           "GIT_COMMITTER_NAME": "regtriage tests", "GIT_COMMITTER_EMAIL": "tests@regtriage.invalid",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}

WRITE_NULL = ("static ssize_t write_null(struct file *file, const char __user *buf,\n"
              "\t\t\t  size_t count, loff_t *ppos)\n{\n\treturn count;\n}\n")
SLOW_WRITE_NULL = ("static ssize_t write_null(struct file *file, const char __user *buf,\n"
                   "\t\t\t  size_t count, loff_t *ppos)\n{\n"
                   "\tunsigned long i;\n\n"
                   "\t/* regtriage test: every write to /dev/null spins for a while */\n"
                   "\tfor (i = 0; i < 4000; i++)\n\t\tbarrier();\n"
                   "\treturn count;\n}\n")

# (label, subject, file, old text or None to append, new text)
SERIES = [
    ("c1", "sys: explain the uname path", "kernel/sys.c", None, "\n/* regtriage test commit c1 */\n"),
    ("c2", "fs: a note on read/write", "fs/read_write.c", None, "\n/* regtriage test commit c2 */\n"),
    ("c3", "mm: a note on filemap", "mm/filemap.c", None, "\n/* regtriage test commit c3 */\n"),
    ("broken", "init: break the build", "init/version.c", None,
     "\n#error \"regtriage test: this commit does not build\"\n"),
    ("c5", "init: fix the build again", "init/version.c",
     "\n#error \"regtriage test: this commit does not build\"\n", "\n"),
    ("slow", "char/mem: spin in write_null()", "drivers/char/mem.c", WRITE_NULL, SLOW_WRITE_NULL),
    ("c7", "fork: a note", "kernel/fork.c", None, "\n/* regtriage test commit c7 */\n"),
    ("c8", "open: a note", "fs/open.c", None, "\n/* regtriage test commit c8 */\n"),
]

# The guest of the QEMU backend (bot/lab/initramfs.py) on top of tinyconfig: 64-bit, a serial
# console, an initramfs (gzip), ELF + #! scripts for busybox, proc/sys/devtmpfs/tmpfs, printk.
FRAGMENT = """\
CONFIG_64BIT=y
CONFIG_PRINTK=y
CONFIG_TTY=y
CONFIG_SERIAL_8250=y
CONFIG_SERIAL_8250_CONSOLE=y
CONFIG_BLK_DEV_INITRD=y
CONFIG_RD_GZIP=y
CONFIG_BINFMT_ELF=y
CONFIG_BINFMT_SCRIPT=y
CONFIG_PROC_FS=y
CONFIG_SYSFS=y
CONFIG_DEVTMPFS=y
CONFIG_TMPFS=y
CONFIG_SHMEM=y
CONFIG_ACPI=y
CONFIG_PCI=y
CONFIG_PROC_SYSCTL=y
CONFIG_MULTIUSER=y
CONFIG_FUTEX=y
"""


def _git(repo: Path, *args: str, date: str = "2024-01-01T00:00:00Z") -> str:
    env = {**os.environ, **GIT_ENV, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    p = subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(f"git {args[0]} failed: {p.stderr.strip()[-2000:]}")
    return p.stdout.strip()


def _apply_series(tmp: Path) -> None:
    for i, (label, subject, rel, old, new) in enumerate(SERIES, start=1):
        f = tmp / rel
        text = f.read_text()
        if old is None:
            text += new
        else:
            assert old in text, f"{rel}: the text {label} replaces is not there"
            text = text.replace(old, new, 1)
        f.write_text(text)
        _git(tmp, "add", rel)
        _git(tmp, "commit", "-q", "-m", f"{subject}\n\nregtriage test series: {label}",
             date=f"2024-01-{i + 1:02d}T00:00:00Z")
        _git(tmp, "tag", f"test-{label}")
    (tmp / ".git" / "regtriage-series").write_text(SERIES_VERSION + "\n")


def _prepare(target: Path) -> None:
    if (target / ".git" / "regtriage-base").is_file():  # the base commit is there: redo the series only
        _git(target, "checkout", "-q", "-f", "master")
        _git(target, "reset", "-q", "--hard", "v6.1-base")
        tags = _git(target, "tag", "--list", "test-*").split()
        if tags:
            _git(target, "tag", "-d", *tags)
        _apply_series(target)
        return
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".linux-"))
    try:
        subprocess.run(["tar", "-xJf", str(TARBALL), "-C", str(tmp), "--strip-components=1"], check=True)
        gi = tmp / ".gitignore"  # Debian's copy ignores every top-level path (its packaging repo's)
        gi.write_text(gi.read_text().split("#\n# Debian packaging")[0])
        _git(tmp, "init", "-q", "-b", "master")
        _git(tmp, "config", "gc.auto", "0")
        _git(tmp, "add", "-A")
        _git(tmp, "commit", "-q", "-m", f"Linux from {TARBALL.name} (Debian linux-source)")
        _git(tmp, "tag", "v6.1-base")
        (tmp / ".git" / "regtriage-base").write_text("1\n")
        _apply_series(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def linux_tree() -> Path:
    """The prepared tree (made on the first call, then cached)."""
    target = CACHE / "linux-6.1"
    marker = target / ".git" / "regtriage-series"
    with _lock(CACHE / "linux-6.1.lock"):
        if not (marker.is_file() and marker.read_text().strip() == SERIES_VERSION):
            if not TARBALL.is_file():
                raise FileNotFoundError(f"{TARBALL} (apt-get install linux-source-6.1)")
            CACHE.mkdir(parents=True, exist_ok=True)
            _prepare(target)
    return target


def fragment_file() -> Path:
    """FRAGMENT as a file in the cache (TuxMake's --kconfig-add takes a path)."""
    f = CACHE / "qemu-guest.config"
    if not f.is_file() or f.read_text() != FRAGMENT:
        CACHE.mkdir(parents=True, exist_ok=True)
        f.write_text(FRAGMENT)
    return f


def commits(tree: Path) -> dict[str, str]:
    """label -> commit id (``base`` and every label of SERIES)."""
    out = {"base": _git(tree, "rev-parse", "v6.1-base^{commit}")}
    for label, *_ in SERIES:
        out[label] = _git(tree, "rev-parse", f"test-{label}^{{commit}}")
    return out


DEMO_SENDER = "syscall.tester@example.org"


def demo_report(tree: Path) -> str:
    """A regression report about this tree's slow commit, for ``make demo`` (its commit id is
    filled in: it depends on the Debian package's version)."""
    c = commits(tree)
    slow = c["slow"][:12]
    return f"""From: Syscall Tester <{DEMO_SENDER}>
To: linux-kernel@vger.kernel.org
Subject: [REGRESSION] write(2) to /dev/null 3x slower after {slow}
Date: Mon, 01 Jul 2024 10:00:00 +0000
Message-ID: <syscall-demo-{slow}@example.org>

Hi,

on my x86_64 box cheap syscalls got a lot slower: perf bench syscall went
from about 1.9M to about 0.6M calls per second (-68%).

Reproducer:

  perf bench syscall basic --loop 20000

Bisected to commit {slow} ("char/mem: spin in write_null()").

#regzbot introduced: {slow}

Thanks,
Syscall Tester
"""


if __name__ == "__main__":
    import sys
    import time

    t0 = time.monotonic()
    t = linux_tree()
    if sys.argv[1:] == ["--demo-report"]:
        print(demo_report(t), end="")
        sys.exit(0)
    if sys.argv[1:] == ["--fragment"]:
        print(fragment_file())
        sys.exit(0)
    print(f"{t} ready in {time.monotonic() - t0:.0f}s")
    for k, v in commits(t).items():
        print(f"{k:8s} {v}")
