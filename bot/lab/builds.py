"""Kernel builds for the lab: turn a :class:`BuildSpec` into a bootable kernel image on disk.

Three kinds of build (exactly one per spec):

* ``image``: a kernel image already on disk (``/path/to/vmlinuz`` or ``bzImage``); used as is.
* ``debian``: a Debian kernel package, e.g. ``linux-image-6.1.0-47-amd64-unsigned``.
  ``apt-get download`` fetches the ``.deb`` into the cache, ``dpkg-deb -x`` unpacks it (nothing is
  installed), and the image is ``<cache>/debian/<package>/boot/vmlinuz-*``.  Cached by package
  name (Debian's ABI-numbered kernel packages are immutable per name); the ``.deb`` is kept in
  ``<cache>/debs`` so a wiped extraction is redone without a download.  Package names are checked
  against a strict regex (:data:`DEBIAN_KERNEL_RE`) before anything is run, and commands are
  run with argument lists, never a shell.
* ``tree``: a git ref in a local kernel tree, built with TuxMake (:mod:`bot.lab.kbuild`): the
  kconfig is a base config (a defconfig name such as ``tinyconfig``, a config file, or
  ``running``: the running machine's config) plus fragments; the host toolchain (``--runtime
  null``), ccache as the wrapper.  Cached by (commit, config hash, toolchain) under
  ``<cache>/kbuild/``; the image, ``config``, ``metadata.json`` and the build log are kept.

Spec strings: ``debian:PKG``, ``image:/abs/path`` (or just an absolute path), ``tree:/repo@REF``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# linux-image-6.1.0-47-amd64-unsigned, linux-image-6.12.107+deb12-rt-amd64-unsigned,
# linux-image-6.1.0-47-cloud-amd64, linux-image-6.1.0-47-arm64-unsigned, ...
DEBIAN_KERNEL_RE = re.compile(
    r"^linux-image-[0-9]{1,2}\.[0-9]{1,3}(?:\.[0-9]{1,4})?(?:-[0-9]{1,4}|\+deb[0-9]{1,3})?"
    r"(?:-(?:rt|cloud))?-(?:amd64|arm64|armmp|armmp-lpae|i386|686|686-pae|ppc64el|s390x|riscv64|"
    r"powerpc64le|loong64|marvell|rpi)(?:-unsigned)?(?:-dbg)?$"
)
GIT_REF_RE = re.compile(r"^(?!-)(?!.*\.\.)(?!.*//)[A-Za-z0-9][A-Za-z0-9._/+-]{0,199}$")
KINDS = ("image", "debian", "tree")


# tree builds: what a kconfig, a fragment and a toolchain may be (text from config, never mail)
KCONFIG_NAME_RE = re.compile(r"^[a-z0-9_]{0,40}config$")
FRAGMENT_LINE_RE = re.compile(r'^(CONFIG_[A-Z0-9_]{1,100}=(?:[ymn]|-?[0-9]{1,20}|0x[0-9a-fA-F]{1,16}|"[^"\\\n]{0,200}")'
                              r"|# CONFIG_[A-Z0-9_]{1,100} is not set)$")
FRAGMENT_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,60}\.config$")
TOOLCHAIN_RE = re.compile(r"^(?:gcc|clang)(?:-[0-9]{1,2})?$")


def abs_path_ok(p: Any) -> bool:
    return isinstance(p, str) and os.path.isabs(p) and "\0" not in p and ".." not in Path(p).parts


def validate_kconfig(kconfig: Any, fragments: Any, toolchain: Any) -> None:
    if not (kconfig == "running" or (isinstance(kconfig, str) and KCONFIG_NAME_RE.match(kconfig))
            or abs_path_ok(kconfig)):
        raise BuildError(f"kconfig must be a defconfig name, an absolute config file or 'running': {kconfig!r}")
    if not isinstance(fragments, list) or len(fragments) > 200:
        raise BuildError("fragments must be a list (at most 200)")
    for f in fragments:
        if not (isinstance(f, str) and (FRAGMENT_LINE_RE.match(f) or FRAGMENT_NAME_RE.match(f) or abs_path_ok(f))):
            raise BuildError(f"not an accepted kconfig fragment: {str(f)[:80]!r} (CONFIG_X=y, "
                             "'# CONFIG_X is not set', an in-tree NAME.config or an absolute path)")
    if not isinstance(toolchain, str) or not TOOLCHAIN_RE.match(toolchain):
        raise BuildError(f"not an accepted toolchain: {toolchain!r} (gcc, clang, gcc-12, ...)")


class BuildError(Exception):
    """A build cannot be resolved; the message says why."""


def validate_package_name(name: str) -> str:
    if not isinstance(name, str) or not DEBIAN_KERNEL_RE.match(name):
        raise BuildError(f"not an accepted Debian kernel package name: {name!r} "
                         "(expected e.g. linux-image-6.1.0-47-amd64-unsigned)")
    return name


@dataclass
class BuildSpec:
    """One build to boot: exactly one of ``image``, ``debian``, or ``tree`` + ``ref``.

    A ``tree`` build also says its kconfig (``kconfig``: a defconfig name, an absolute config
    file path, or ``running``; ``fragments``: ``CONFIG_X=y`` lines, in-tree fragment names or
    absolute paths) and ``toolchain`` (TuxMake's name, e.g. ``gcc``); all validated by
    :func:`bot.lab.kbuild.validate_kconfig`."""

    image: str | None = None
    debian: str | None = None
    tree: str | None = None
    ref: str | None = None
    kconfig: str = "defconfig"
    fragments: list[str] = field(default_factory=list)
    toolchain: str = "gcc"
    arch: str = "x86_64"

    def __post_init__(self):
        self.validate()

    @property
    def kind(self) -> str:
        if self.image is not None:
            return "image"
        if self.debian is not None:
            return "debian"
        return "tree"

    def validate(self) -> None:
        given = [k for k, v in (("image", self.image), ("debian", self.debian), ("tree", self.tree)) if v is not None]
        if len(given) != 1:
            raise BuildError(f"a build needs exactly one of image/debian/tree, got {given or 'none'}")
        if self.arch not in ("x86_64", "aarch64", "i386"):
            raise BuildError(f"unsupported arch {self.arch!r}")
        if self.image is not None:
            if not isinstance(self.image, str) or not os.path.isabs(self.image) or "\0" in self.image:
                raise BuildError(f"image must be an absolute path: {self.image!r}")
        if self.debian is not None:
            validate_package_name(self.debian)
        if self.tree is not None:
            if not isinstance(self.tree, str) or not os.path.isabs(self.tree) or "\0" in self.tree:
                raise BuildError(f"tree must be an absolute path: {self.tree!r}")
            if not isinstance(self.ref, str) or not GIT_REF_RE.match(self.ref):
                raise BuildError(f"not an accepted git ref: {self.ref!r}")
            validate_kconfig(self.kconfig, self.fragments, self.toolchain)

    @classmethod
    def parse(cls, text: str, **kw) -> "BuildSpec":
        """``debian:PKG`` | ``image:/path`` | ``/path`` | ``tree:/repo@REF`` (tree builds take
        ``kconfig=``, ``fragments=``, ``toolchain=`` as keywords)."""
        if text.startswith("debian:"):
            return cls(debian=text[len("debian:"):], **kw)
        if text.startswith("image:"):
            return cls(image=text[len("image:"):], **kw)
        if text.startswith("tree:"):
            repo, sep, ref = text[len("tree:"):].rpartition("@")
            if not sep:
                raise BuildError(f"tree build needs REPO@REF: {text!r}")
            return cls(tree=repo, ref=ref, **kw)
        if text.startswith("/"):
            return cls(image=text, **kw)
        raise BuildError(f"unknown build spec {text!r} (debian:PKG, image:/path or tree:/repo@REF)")

    def describe(self) -> str:
        if self.kind == "image":
            return f"image:{self.image}"
        if self.kind == "debian":
            return f"debian:{self.debian}"
        return f"tree:{self.tree}@{self.ref}"

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if v is not None}
        if self.kind != "tree":
            for k in ("kconfig", "fragments", "toolchain"):
                d.pop(k, None)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "BuildSpec":
        allowed = {"image", "debian", "tree", "ref", "kconfig", "fragments", "toolchain", "arch"}
        d = {k: v for k, v in d.items() if k not in ("build_command", "image_path")}  # before TuxMake
        unknown = set(d) - allowed
        if unknown:
            raise BuildError(f"unknown build keys: {sorted(unknown)}")
        return cls(**d)


@dataclass
class ResolvedBuild:
    kernel: str  # absolute path of the bootable image
    description: str
    version: str | None = None  # package version or commit sha
    info: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


@contextmanager
def locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(argv: list[str], *, cwd=None, timeout: float = 600, what: str = "") -> str:
    try:
        proc = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, "LC_ALL": "C"})
    except FileNotFoundError:
        raise BuildError(f"{argv[0]} not found (needed to {what or 'resolve a build'})") from None
    except subprocess.TimeoutExpired:
        raise BuildError(f"{' '.join(argv[:3])} timed out after {timeout:.0f}s") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise BuildError(f"{' '.join(argv[:4])} failed (exit {proc.returncode}): {' | '.join(tail)}")
    return proc.stdout


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _find_image(root: Path) -> Path | None:
    boot = root / "boot"
    images = sorted(p for p in boot.glob("vmlinu[xz]-*") if p.is_file()) if boot.is_dir() else []
    return images[0] if images else None


def debian_kernel(package: str, cache_dir: str | os.PathLike, *, deb_dir: str | os.PathLike | None = None,
                  timeout: float = 600, keep_modules: bool = False) -> ResolvedBuild:
    """Download (``apt-get download``) and unpack (``dpkg-deb -x``) a Debian kernel package;
    return its image.  Cached by package name; safe to call from several processes at once.
    Only ``boot/`` (image, config, System.map) is kept unless ``keep_modules``."""
    validate_package_name(package)
    cache = Path(cache_dir).resolve()
    debs = Path(deb_dir).resolve() if deb_dir else cache / "debs"
    target = cache / "debian" / package
    with locked(cache / "locks" / f"{package}.lock"):
        image = _find_image(target)
        meta_file = target / ".regtriage.json"
        if image is not None and meta_file.is_file():
            meta = json.loads(meta_file.read_text())
            return ResolvedBuild(str(image), f"debian:{package}", meta.get("version"), meta)
        debs.mkdir(parents=True, exist_ok=True)
        deb = next(iter(sorted(debs.glob(f"{package}_*.deb"))), None)
        if deb is None:
            with tempfile.TemporaryDirectory(dir=debs, prefix=".dl-") as tmp:
                os.chmod(tmp, 0o755)  # apt's _apt sandbox user must be able to write here
                _run(["apt-get", "download", "-q", "--", package], cwd=tmp, timeout=timeout,
                     what=f"download {package}")
                got = sorted(Path(tmp).glob(f"{package}_*.deb"))
                if not got:
                    raise BuildError(f"apt-get download {package} produced no .deb")
                deb = debs / got[0].name
                os.replace(got[0], deb)
        version = _run(["dpkg-deb", "-f", "--", str(deb), "Version"], what="read the .deb").strip()
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp_target = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{package}-"))
        try:
            _run(["dpkg-deb", "-x", "--", str(deb), str(tmp_target)], timeout=timeout, what="unpack the .deb")
            if _find_image(tmp_target) is None:
                raise BuildError(f"{deb.name} contains no boot/vmlinuz-*")
            if not keep_modules:  # ~400 MB the busybox guests never load; the .deb keeps them
                for sub in tmp_target.iterdir():
                    if sub.name != "boot":
                        shutil.rmtree(sub) if sub.is_dir() and not sub.is_symlink() else sub.unlink()
            meta = {"package": package, "version": version, "deb": str(deb),
                    "sha256": _sha256(deb)}
            (tmp_target / ".regtriage.json").write_text(json.dumps(meta, indent=1))
            if target.exists():
                shutil.rmtree(target)
            os.replace(tmp_target, target)
        finally:
            if tmp_target.exists():
                shutil.rmtree(tmp_target, ignore_errors=True)
        image = _find_image(target)
        assert image is not None
        return ResolvedBuild(str(image), f"debian:{package}", version, meta)


def available_debian_kernels(flavour_re: str = r"-amd64-unsigned$") -> list[str]:
    """Kernel image packages apt knows about (``apt-cache search``; local index, no download),
    filtered by a regex on the name, and valid per :data:`DEBIAN_KERNEL_RE`."""
    out = _run(["apt-cache", "search", "--names-only", "^linux-image-[0-9]"], what="list kernel packages")
    names = sorted({line.split(" - ", 1)[0].strip() for line in out.splitlines() if " - " in line})
    rx = re.compile(flavour_re)
    return [n for n in names if DEBIAN_KERNEL_RE.match(n) and rx.search(n)]
