"""Kernel builds from a git tree with TuxMake (``tree:`` builds of :mod:`bot.lab.builds`).

A build is ``tuxmake --runtime null`` (the host's toolchain) ``--wrapper ccache`` of one commit
with one kconfig: a base config (a defconfig name such as ``defconfig`` / ``tinyconfig``, an
absolute path to a config file, or ``running``: ``/proc/config.gz`` or
``/boot/config-$(uname -r)`` of this machine) plus fragments (``CONFIG_X=y`` /
``# CONFIG_X is not set`` lines, in-tree fragment names such as ``kvm_guest.config``, or
absolute paths).  Targets ``config kernel``.

Cache layout under ``<cache>/kbuild/``:

* ``entries/<key>/``: one build, ``key = <commit>-<config hash>-<toolchain hash>``: TuxMake's
  output (``bzImage``, ``config``, ``metadata.json``, ``build.log``) plus ``regtriage.json``
  (status ``ok`` / ``failed``, log tail, duration, ref, sizes).  A failed build is cached too:
  asking again answers with the recorded reason at once (delete the entry to retry).
* ``src/<tree id>/``: a detached ``git worktree`` of the tree, checked out at the commit being
  built (one per tree; its lock serialises the builds of that tree).
* ``objs/<tree id>-<config hash>-<toolchain hash>/``: TuxMake's ``--build-dir``, kept between
  builds, so the next commit of a bisection rebuilds only what changed.
* ``locks/``: ``flock`` files; two workers asking for the same key wait for one build.

The ccache directory is ``ccache_dir`` (default ``<cache>/ccache``).  Every build runs in its own
process group under a time limit (``timeout_s``); when the cache passes its disk budget
(``max_cache_mib``), the least recently used entries and object directories are removed.

Nothing here comes from mail unvalidated: refs match :data:`bot.lab.builds.GIT_REF_RE` and are
resolved with ``git rev-parse --end-of-options``; kconfig names, fragments and toolchains are
matched against strict patterns; every command is an argument list.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from bot.lab.builds import abs_path_ok, BuildError, BuildSpec, GIT_REF_RE, locked, ResolvedBuild

SHA_RE = re.compile(r"^[0-9a-f]{40,64}$")
TUXMAKE_ARCH = {"x86_64": "x86_64", "i386": "i386", "aarch64": "arm64"}
IMAGE_NAMES = ("bzImage", "Image.gz", "Image", "vmlinuz", "zImage")
DEFAULTS = {"jobs": os.cpu_count() or 2, "timeout_s": 3600.0, "max_cache_mib": 20480}


class BuildFailed(BuildError):
    """The build ran and failed (or a failure of this key is cached); ``tail`` has the log's end."""

    def __init__(self, message: str, *, tail: str = "", entry: str | None = None):
        super().__init__(message)
        self.tail = tail
        self.entry = entry


# ---------------------------------------------------------------------------------- settings
def build_options(b: dict, home: Path | None = None) -> dict[str, Any]:
    """The host side of ``[lab.builds]`` (not part of a build's identity): ``cache_dir``,
    ``ccache_dir``, ``jobs``, ``timeout_s``, ``max_cache_mib``."""
    out: dict[str, Any] = dict(DEFAULTS)
    for k in ("cache_dir", "ccache_dir"):
        v = b.get(k)
        if v is not None:
            v = os.path.expanduser(v)
            if not abs_path_ok(v):
                raise BuildError(f"[lab.builds] {k} must be an absolute path")
            out[k] = v
    if "cache_dir" not in out:
        if home is None:
            from bot.config import default_home

            home = default_home()
        out["cache_dir"] = str(Path(home) / "lab" / "builds")
    for k, lo, hi in (("jobs", 1, 1024), ("timeout_s", 10, 86400 * 2), ("max_cache_mib", 100, 1 << 24)):
        v = b.get(k, out[k])
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
            raise BuildError(f"[lab.builds] {k} must be a number in [{lo}, {hi}]")
        out[k] = int(v) if k == "jobs" else v
    return out


# ---------------------------------------------------------------------------------- helpers
def _git(tree: str, *args: str, timeout: float = 300) -> str:
    try:
        p = subprocess.run(["git", "-C", tree, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=timeout, env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(f"git {args[0]} in {tree}: {exc}") from None
    if p.returncode != 0:
        raise BuildError(f"git {args[0]} in {tree} failed: {(p.stderr or p.stdout).strip()[-300:]}")
    return p.stdout


def rev_parse(tree: str, ref: str) -> str | None:
    """The commit id of ``ref`` in ``tree``, or None (ref validated first; never a shell)."""
    if not isinstance(ref, str) or not GIT_REF_RE.match(ref):
        raise BuildError(f"not an accepted git ref: {ref!r}")
    try:
        p = subprocess.run(["git", "-C", tree, "rev-parse", "--verify", "--quiet", "--end-of-options",
                            f"{ref}^{{commit}}"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = p.stdout.strip()
    return out if p.returncode == 0 and SHA_RE.match(out) else None


def _running_config() -> bytes:
    try:
        with gzip.open("/proc/config.gz", "rb") as fh:
            return fh.read()
    except OSError:
        pass
    p = Path("/boot") / f"config-{os.uname().release}"
    try:
        return p.read_bytes()
    except OSError:
        raise BuildError("kconfig 'running': neither /proc/config.gz nor "
                         f"{p} is readable on this machine") from None


_TOOLCHAIN_IDS: dict[str, str] = {}


def toolchain_id(toolchain: str) -> str:
    """``gcc (Debian 12.2.0-14) 12.2.0``: the first line of ``<compiler> --version``."""
    if toolchain not in _TOOLCHAIN_IDS:
        try:
            p = subprocess.run([toolchain, "--version"], capture_output=True, text=True, timeout=30)
            _TOOLCHAIN_IDS[toolchain] = (p.stdout.splitlines() or ["?"])[0].strip()
        except (OSError, subprocess.TimeoutExpired):
            raise BuildError(f"toolchain {toolchain!r} is not installed on this machine") from None
    return _TOOLCHAIN_IDS[toolchain]


def _h(data: bytes | str, n: int = 12) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()[:n]


def config_inputs(spec: BuildSpec, cache: Path) -> tuple[str, str, list[str]]:
    """(config hash, --kconfig argument, --kconfig-add arguments): file contents are hashed (and
    the running config is copied into the cache, so TuxMake reads a stable file)."""
    parts: list[str] = [spec.arch]
    if spec.kconfig == "running":
        data = _running_config()
        cfg = cache / "configs" / f"running-{_h(data)}.config"
        if not cfg.is_file():
            cfg.parent.mkdir(parents=True, exist_ok=True)
            cfg.write_bytes(data)
        kconfig = str(cfg)
        parts.append("file:" + _h(data, 64))
    elif os.path.isabs(spec.kconfig):
        try:
            parts.append("file:" + _h(Path(spec.kconfig).read_bytes(), 64))
        except OSError as exc:
            raise BuildError(f"kconfig file {spec.kconfig}: {exc.strerror}") from None
        kconfig = spec.kconfig
    else:
        parts.append("name:" + spec.kconfig)
        kconfig = spec.kconfig
    adds = []
    for f in spec.fragments:
        if os.path.isabs(f):
            try:
                parts.append("file:" + _h(Path(f).read_bytes(), 64))
            except OSError as exc:
                raise BuildError(f"kconfig fragment {f}: {exc.strerror}") from None
        else:
            parts.append(f)
        adds.append(f)
    return _h("\n".join(parts)), kconfig, adds


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    errors = [ln for ln in text if re.search(r"\berror\b|Error [0-9]|\*\*\*", ln)]
    picked = (errors[-8:] + ["..."] if errors else []) + text[-lines:]
    return "\n".join(ln[:300] for ln in picked)


def _dir_size(p: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(p):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def _touch(p: Path) -> None:
    try:
        os.utime(p)
    except OSError:
        pass


# ---------------------------------------------------------------------------------- the build
def entry_key(sha: str, cfg_hash: str, tc: str) -> str:
    return f"{sha}-{cfg_hash}-{_h(tc, 8)}"


def cached_result(entry: Path) -> dict | None:
    meta = entry / "regtriage.json"
    try:
        return json.loads(meta.read_text())
    except (OSError, ValueError):
        return None


def _result(entry: Path, info: dict, spec: BuildSpec) -> ResolvedBuild:
    if info.get("status") != "ok":
        raise BuildFailed(f"build of {info.get('sha', '?')[:12]} failed: {info.get('reason')}",
                          tail=info.get("tail") or "", entry=str(entry))
    _touch(entry)
    return ResolvedBuild(str(entry / info["image"]), f"tree:{spec.tree}@{spec.ref}", info["sha"],
                         {**info, "entry": str(entry)})


def _run_tuxmake(argv: list[str], *, env: dict, timeout: float, log: Path,
                 progress: Callable[[str], None] | None) -> tuple[int | None, str]:
    """Run TuxMake in its own process group; (exit code or None on timeout, last line)."""
    last = ""
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env, start_new_session=True, bufsize=1, errors="replace")
        fired = threading.Event()

        def on_timeout():
            fired.set()
            _killpg(proc)

        timer = threading.Timer(timeout, on_timeout)
        timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                out.write(line)
                if line.strip():
                    last = line.rstrip()
                    if progress:
                        progress(last)
            rc = proc.wait()
        finally:
            timer.cancel()
            _killpg(proc)
    return (None if fired.is_set() else rc), last


def _killpg(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def tree_kernel(spec: BuildSpec, cache_dir: str | os.PathLike | None = None, *, opts: dict | None = None,
                progress: Callable[[str], None] | None = None, **_ignored) -> ResolvedBuild:
    """Build ``spec`` (kind ``tree``) with TuxMake, or return the cached build.  Raises
    :class:`BuildFailed` for a failed build (now or cached), BuildError when it cannot start."""
    spec.validate()
    assert spec.kind == "tree" and spec.tree and spec.ref
    o = dict(DEFAULTS)
    o.update(opts or {})
    cache = Path(o.get("cache_dir") or cache_dir or ".").resolve() / "kbuild"
    if not Path(spec.tree).is_dir():
        raise BuildError(f"kernel tree {spec.tree} does not exist")
    sha = rev_parse(spec.tree, spec.ref)
    if sha is None:
        raise BuildError(f"{spec.ref} is not a commit in {spec.tree}")
    tc = toolchain_id(spec.toolchain)
    cfg_hash, kconfig, adds = config_inputs(spec, cache)
    key = entry_key(sha, cfg_hash, tc)
    entry = cache / "entries" / key
    with locked(cache / "locks" / f"{key}.lock"):
        info = cached_result(entry)
        if info is not None:
            return _result(entry, info, spec)
        tree_id = _h(str(Path(spec.tree).resolve()))
        with locked(cache / "locks" / f"src-{tree_id}.lock"):
            info = _build(spec, sha, cache, tree_id, cfg_hash, tc, kconfig, adds, o, progress)
            tmp_entry = Path(info.pop("_tmp"))
            (tmp_entry / "regtriage.json").write_text(json.dumps(info, indent=1))
            if entry.exists():
                shutil.rmtree(entry)
            os.replace(tmp_entry, entry)
        evict(cache, int(float(o["max_cache_mib"]) * 1024 * 1024), keep={entry})
        return _result(entry, info, spec)


def _build(spec: BuildSpec, sha: str, cache: Path, tree_id: str, cfg_hash: str, tc: str, kconfig: str,
           adds: list[str], o: dict, progress) -> dict:
    src = cache / "src" / tree_id
    if not (src / ".git").exists():
        if src.exists():
            shutil.rmtree(src)
        src.parent.mkdir(parents=True, exist_ok=True)
        _git(spec.tree, "worktree", "prune")
        _git(spec.tree, "worktree", "add", "--detach", "--", str(src), sha, timeout=1800)
    else:
        _git(str(src), "checkout", "--quiet", "--detach", "--force", sha, timeout=1800)
    objs = cache / "objs" / f"{tree_id}-{cfg_hash}-{_h(tc, 8)}"
    objs.mkdir(parents=True, exist_ok=True)
    _touch(objs)
    (cache / "entries").mkdir(parents=True, exist_ok=True)
    tmp_entry = Path(tempfile.mkdtemp(dir=cache / "entries", prefix=f".{sha[:12]}-"))
    out = tmp_entry / "out"
    ccache = o.get("ccache_dir") or str(cache.parent / "ccache")
    argv = [sys.executable, "-m", "tuxmake", "--runtime", "null", "--target-arch", TUXMAKE_ARCH[spec.arch],
            "--toolchain", spec.toolchain, "--wrapper", "ccache", "--jobs", str(o["jobs"]),
            "--directory", str(src), "--build-dir", str(objs), "--output-dir", str(out),
            "--kconfig", kconfig]
    for a in adds:
        argv += ["--kconfig-add", a]
    argv += ["config", "kernel"]
    env = {**os.environ, "LC_ALL": "C", "CCACHE_DIR": ccache, "CCACHE_BASEDIR": str(src),
           "KBUILD_BUILD_TIMESTAMP": "regtriage", "KBUILD_BUILD_USER": "regtriage", "KBUILD_BUILD_HOST": "lab"}
    t0 = time.monotonic()
    rc, last = _run_tuxmake(argv, env=env, timeout=float(o["timeout_s"]), log=tmp_entry / "tuxmake.out",
                            progress=progress)
    took = round(time.monotonic() - t0, 1)
    for name in os.listdir(out) if out.is_dir() else []:  # flatten TuxMake's output into the entry
        os.replace(out / name, tmp_entry / name)
    shutil.rmtree(out, ignore_errors=True)
    image = next((n for n in IMAGE_NAMES if (tmp_entry / n).is_file()), None)
    info: dict[str, Any] = {"sha": sha, "ref": spec.ref, "tree": spec.tree, "kconfig": spec.kconfig,
                            "fragments": list(spec.fragments), "config_hash": cfg_hash, "toolchain": tc,
                            "arch": spec.arch, "duration_s": took, "built_at": time.time(), "_tmp": str(tmp_entry),
                            "jobs": o["jobs"]}
    log = tmp_entry / "build.log"
    if rc is None:
        info.update(status="failed", reason=f"timed out after {o['timeout_s']:.0f}s ([lab.builds] timeout_s)",
                    tail=_tail(log if log.is_file() else tmp_entry / "tuxmake.out"))
    elif rc != 0 or image is None:
        tail = _tail(log if log.is_file() else tmp_entry / "tuxmake.out")
        first = next((ln for ln in tail.splitlines() if re.search(r"\berror\b", ln)), last)
        info.update(status="failed", reason=f"tuxmake exit {rc}: {first.strip()[:300]}", tail=tail)
    else:
        info.update(status="ok", image=image)
    if progress:
        progress(f"build {info['status']} in {took:.0f}s")
    return info


def evict(cache: Path, budget: int, keep: set[Path] = frozenset()) -> list[str]:
    """Remove the least recently used entries and object directories until the cache is within
    ``budget`` bytes (the worktrees and ccache are not counted).  Entries being built (their
    lock held) are skipped."""
    import fcntl

    items = []
    for sub in ("entries", "objs"):
        d = cache / sub
        if d.is_dir():
            for p in d.iterdir():
                if p.is_dir() and not p.name.startswith("."):
                    items.append((p.stat().st_mtime, p))
    sizes = {p: _dir_size(p) for _, p in items}
    total = sum(sizes.values())
    removed = []
    for _, p in sorted(items, key=lambda x: x[0]):
        if total <= budget:
            break
        if p in keep:
            continue
        lock = cache / "locks" / f"{p.name}.lock"
        with open(lock, "a+") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # in use
            try:
                shutil.rmtree(p, ignore_errors=True)
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
        total -= sizes[p]
        removed.append(p.name)
    return removed
