"""Busybox initramfs for the qemu lab backend, written in pure Python (newc cpio + gzip).

The archive holds ``/bin/busybox`` (the host's static busybox, ``busybox-static`` on Debian),
symlinks for the applets the guest uses, ``/dev/console`` (so init has a console before
devtmpfs is mounted), empty mount points, the host binaries the recipe names in
``guest_tools`` (e.g. ``perf``, ``hackbench``) with the shared libraries and dynamic loader
``ldd`` lists for them, each at its host path (:func:`tool_files`), and ``/init``: a fixed prologue (mount proc, sysfs,
devtmpfs, a tmpfs scratch area), the recipe's workload script (rendered by
:meth:`bot.lab.recipes.RecipeSpec.render_guest_script` from validated numbers only), and an
epilogue that prints ``RESULT ok`` and powers the guest off.  If anything fails the guest prints
``RESULT fail <reason>`` and powers off; if init dies the kernel panics and (``panic=-1`` +
QEMU's ``-no-reboot``) QEMU exits, so a run never hangs on a broken guest.

Console protocol (one line each, parsed by the host)::

    REGTRIAGE-START recipe=<name> kernel=<uname -r> samples=<n> warmup=<w> clock=<timer_list|uptime>
    WARMUP <metric>=<value>      (warm-up iterations, discarded by the host)
    BENCH <metric>=<value>       (measured samples)
    REGTRIAGE-END
    RESULT ok | RESULT fail <reason>

Archives are cached per (recipe, params, samples, warmup, scratch size, busybox binary):
``<cache>/<sha256>.cpio.gz``; building one takes a few milliseconds anyway.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

APPLETS = ("sh", "ash", "mount", "umount", "mkdir", "rm", "dd", "cat", "echo", "awk", "sync",
           "poweroff", "uname", "sleep", "ls", "head", "true", "false", "test", "[", "mknod")
DEFAULT_BUSYBOX = "/bin/busybox"
SCRATCH = "/scratch"  # the guest's scratch area: a tmpfs; the only place recipes write to

# the guest's clock, shared by every guest script (the qemu init here, the lava workload)
CLOCK_SH = """if [ -r /proc/timer_list ]; then REGTRIAGE_CLOCK=timer_list; else REGTRIAGE_CLOCK=uptime; fi
# now_ns: monotonic nanoseconds into $NOW without forking (shell builtins only)
now_ns() {
  if [ "$REGTRIAGE_CLOCK" = timer_list ]; then
    { read -r _l1; read -r _l2; read -r _l3; } < /proc/timer_list
    _l3=${_l3#now at }
    NOW=${_l3% nsecs}
  else
    read -r _up _idle < /proc/uptime
    _cs=${_up#*.}
    _cs=${_cs#0}
    NOW=$(( ${_up%.*} * 1000000000 + _cs * 10000000 ))
  fi
}
"""

INIT_TEMPLATE = """#!/bin/busybox sh
# regtriage guest init (generated; numbers only, from a validated recipe)
export PATH=/bin:/usr/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
echo 1 > /proc/sys/kernel/printk 2>/dev/null
fail() {
  echo "RESULT fail $*"
  sync
  poweroff -f
  sleep 5
  exit 1
}
mkdir -p {scratch} || fail "mkdir scratch"
mount -t tmpfs -o size={scratch_mib}m scratch {scratch} || fail "cannot mount the tmpfs scratch area"
"""+CLOCK_SH+"""echo "REGTRIAGE-START recipe={recipe} kernel=$(uname -r) samples={samples} warmup={warmup} clock=$REGTRIAGE_CLOCK"
{workload}
echo "REGTRIAGE-END"
echo "RESULT ok"
sync
poweroff -f
sleep 5
"""


def _newc_entry(name: str, mode: int, data: bytes = b"", ino: int = 0, rdev: tuple[int, int] = (0, 0),
                nlink: int = 1) -> bytes:
    nameb = name.encode() + b"\0"
    fields = [ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rdev[0], rdev[1], len(nameb), 0]
    header = b"070701" + b"".join(b"%08X" % f for f in fields)
    out = header + nameb
    out += b"\0" * (-len(out) % 4)
    out += data
    out += b"\0" * (-len(out) % 4)
    return out


def newc_archive(entries: list[tuple]) -> bytes:
    """entries: (name, kind, payload) with kind in dir/file/exe/symlink/chardev; payload is the
    file bytes, the link target, or (major, minor)."""
    buf = io.BytesIO()
    for ino, (name, kind, payload) in enumerate(entries, start=1):
        if kind == "dir":
            buf.write(_newc_entry(name, stat.S_IFDIR | 0o755, ino=ino, nlink=2))
        elif kind in ("file", "exe"):
            perm = 0o755 if kind == "exe" else 0o644
            buf.write(_newc_entry(name, stat.S_IFREG | perm, payload, ino=ino))
        elif kind == "symlink":
            buf.write(_newc_entry(name, stat.S_IFLNK | 0o777, payload.encode(), ino=ino))
        elif kind == "chardev":
            buf.write(_newc_entry(name, stat.S_IFCHR | 0o600, ino=ino, rdev=payload))
        else:
            raise ValueError(f"unknown cpio entry kind {kind!r}")
    buf.write(_newc_entry("TRAILER!!!", 0))
    return buf.getvalue()


def render_init(recipe, *, samples: int, warmup: int, scratch_mib: int) -> str:
    """The guest's /init for one boot: ``warmup`` discarded iterations then ``samples`` measured."""
    for name, v, lo, hi in (("samples", samples, 1, 1000), ("warmup", warmup, 0, 100),
                            ("scratch_mib", scratch_mib, 16, 1 << 20)):
        if type(v) is not int or not lo <= v <= hi:
            raise ValueError(f"{name} must be an int in [{lo}, {hi}], got {v!r}")
    workload = recipe.render_guest_script(scratch=SCRATCH, samples=samples, warmup=warmup)
    head = (INIT_TEMPLATE.replace("{scratch_mib}", str(scratch_mib)).replace("{scratch}", SCRATCH)
            .replace("{recipe}", recipe.name).replace("{samples}", str(samples)).replace("{warmup}", str(warmup)))
    return head.replace("{workload}", workload)  # last: the workload text is not templated again


_LDD_RE = re.compile(r"^\s*(?:\S+ => )?(/[A-Za-z0-9._+/-]+) \(0x[0-9a-f]+\)$")


def tool_files(tools: tuple[str, ...] | list[str]) -> list[str]:
    """Absolute host paths to copy into the guest for ``tools`` (names on PATH): each binary and
    every shared library and loader ``ldd`` resolves for it.  FileNotFoundError with the reason
    when a tool is missing or a library cannot be resolved."""
    out: list[str] = []
    for tool in tools:
        if not re.fullmatch(r"[a-z0-9][a-z0-9._+-]{0,63}", tool):
            raise FileNotFoundError(f"bad guest tool name {tool!r}")
        path = shutil.which(tool)
        if path is None:
            raise FileNotFoundError(f"{tool} is not installed on this host (needed inside the guest)")
        out.append(os.path.abspath(path))
        res = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=30,
                             env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"})
        if res.returncode != 0 and "not a dynamic executable" not in res.stdout + res.stderr:
            raise FileNotFoundError(f"ldd {path} failed: {res.stderr.strip()[:200]}")
        for line in res.stdout.splitlines():
            if "not found" in line:
                raise FileNotFoundError(f"{tool}: shared library missing on the host: {line.strip()[:200]}")
            m = _LDD_RE.match(line)
            if m:
                out.append(m.group(1))
    return list(dict.fromkeys(out))


def _file_entries(paths: list[str]) -> list[tuple]:
    """cpio entries for host files at their own paths (symlinks followed), parents first."""
    dirs: dict[str, None] = {}
    files: list[tuple] = []
    for p in paths:
        rel = p.lstrip("/")
        parts = rel.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs["/".join(parts[:i])] = None
        files.append((rel, "exe", Path(p).read_bytes()))
    return [(d, "dir", None) for d in dirs] + files


def build_archive(init_script: str, busybox: str = DEFAULT_BUSYBOX, tools: tuple[str, ...] = ()) -> bytes:
    bb = Path(busybox)
    data = bb.read_bytes()
    base_dirs = ("bin", "dev", "proc", "sys", "tmp", "scratch", "root")
    entries: list[tuple] = [(d, "dir", None) for d in base_dirs]
    entries.append(("dev/console", "chardev", (5, 1)))
    entries.append(("dev/null", "chardev", (1, 3)))
    entries.append(("bin/busybox", "exe", data))
    entries += [(f"bin/{a}", "symlink", "busybox") for a in APPLETS]
    entries += [e for e in _file_entries(tool_files(tools)) if not (e[1] == "dir" and e[0] in base_dirs)]
    entries.append(("init", "exe", init_script.encode()))
    raw = newc_archive(entries)
    return gzip.compress(raw, compresslevel=6, mtime=0)


def busybox_problem(busybox: str = DEFAULT_BUSYBOX) -> str | None:
    """None if ``busybox`` looks usable inside a guest (exists, static), else why not."""
    p = Path(busybox)
    if not p.is_file():
        return f"{busybox} not found (Debian: apt-get install busybox-static)"
    head = p.read_bytes()[:1 << 16]
    if b"/lib64/ld-linux" in head or b"/lib/ld-linux" in head or b"ld-linux-" in head:
        return f"{busybox} is dynamically linked; the guest needs a static busybox (busybox-static)"
    return None


def initramfs_for(recipe, *, samples: int, warmup: int, scratch_mib: int, cache_dir: str | os.PathLike,
                  busybox: str = DEFAULT_BUSYBOX) -> Path:
    """Path of the cached gzip'd newc archive for this recipe/params/counts (built if missing)."""
    problem = busybox_problem(busybox)
    if problem:
        raise FileNotFoundError(problem)
    init = render_init(recipe, samples=samples, warmup=warmup, scratch_mib=scratch_mib)
    tools = tuple(recipe.recipe.guest_tools)
    parts = [init.encode()]
    for f in [busybox] + tool_files(tools):
        st = os.stat(f)
        parts += [os.path.realpath(f).encode(), str(st.st_size).encode(), str(st.st_mtime_ns).encode()]
    key = hashlib.sha256(b"\0".join(parts)).hexdigest()[:24]
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    out = cache / f"{recipe.name}-{key}.cpio.gz"
    if not out.is_file():
        blob = build_archive(init, busybox, tools)
        fd, tmp = tempfile.mkstemp(dir=cache, prefix=".initramfs-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, out)
        (cache / f"{recipe.name}-{key}.init").write_text(init)
    return out
