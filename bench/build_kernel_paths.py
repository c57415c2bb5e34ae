"""Build extractors/data/kernel_paths.txt.gz: the kernel's source directories and the names
that locate them, read from a kernel source tarball (Debian's ``linux-source-6.1``).

Usage:
    .venv/bin/python bench/build_kernel_paths.py [TARBALL] [--out PATH]

TARBALL defaults to /usr/src/linux-source-6.1.tar.xz (``apt-get install linux-source-6.1``).
One line per directory under the areas below: ``<dir>\\t<name> <name> ...``, where the names are
the directory's ``.c`` basenames and the module names its Makefile builds (``obj-y += btusb.o``),
the directory's own module name (a driver's directory: ``iwlwifi.o`` in ``iwlwifi/``), the others
kept only when the name occurs in no other directory and does not merely extend the name of a directory on its path (``amdgpu_dm.c`` in ``amdgpu/``: the directory is found by its own name).
Files under arch/ are left out (arch areas are found by their directories).  The extractor
(``extractors/kernel_paths.py``) reads it to turn subject prefixes such as ``usb: dwc3:`` or
``btusb:`` into the directory they name.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import re
import sys
import tarfile
from pathlib import Path

AREAS = ("drivers", "fs", "net", "sound", "arch", "kernel", "mm", "block", "lib", "io_uring", "crypto",
         "security", "virt", "ipc", "init")
DEFAULT_TARBALL = "/usr/src/linux-source-6.1.tar.xz"
OUT = Path(__file__).resolve().parent.parent / "extractors" / "data" / "kernel_paths.txt.gz"
_OBJ = re.compile(r"^obj-[^\s+:=]*\s*[+:]?=\s*(.*)$")


def _modules(makefile: str) -> set[str]:
    """Module / object names a Makefile builds in its own directory (``obj-$(CONFIG_X) += x.o``)."""
    text = makefile.replace("\\\n", " ")
    out = set()
    for line in text.splitlines():
        m = _OBJ.match(line.strip())
        if m:
            out |= {w[:-2] for w in m.group(1).split() if w.endswith(".o") and "/" not in w and "$" not in w}
    return out


def read_tree(tarball: str) -> dict[str, set[str]]:
    """{directory: names} for the directories under AREAS (one pass over the tarball)."""
    dirs: dict[str, set[str]] = collections.defaultdict(set)
    with tarfile.open(tarball, "r|*") as tf:
        for member in tf:
            parts = member.name.strip("/").split("/")[1:]  # drop the top folder (linux-source-6.1/)
            if not parts or parts[0] not in AREAS:
                continue
            if member.isdir():
                dirs["/".join(parts)]
                continue
            d, f = "/".join(parts[:-1]), parts[-1]
            if f.endswith(".c"):
                dirs[d].add(f[:-2])
            elif f in ("Makefile", "Kbuild") and member.isfile():
                dirs[d] |= _modules(tf.extractfile(member).read().decode("utf-8", "replace"))
            else:
                dirs[d]
    return dirs


def _key(name: str) -> str:
    return name.lower().replace("-", "_")


def table(dirs: dict[str, set[str]]) -> dict[str, list[str]]:
    """Keep the names that locate one directory (see the module docstring)."""
    where = collections.defaultdict(set)
    for d, names in dirs.items():
        for n in names:
            where[_key(n)].add(d)
    dir_names = {_key(d.rsplit("/", 1)[-1]) for d in dirs}
    out = {}
    for d, names in sorted(dirs.items()):
        comps = [_key(c) for c in d.split("/")[1:]]
        keep = []
        for n in sorted(names):
            k = _key(n)
            if [k] == comps[-1:] and not d.startswith("arch/"):
                keep.append(n)  # the directory's own module ("iwlwifi.o"): a driver's directory
                continue
            if d.startswith("arch/") or len(where[k]) != 1 or k in dir_names:
                continue
            if any(len(c.split("_")[0]) >= 2 and k.startswith(c.split("_")[0] + "_") for c in comps):
                continue
            keep.append(n)
        out[d] = keep
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tarball", nargs="?", default=DEFAULT_TARBALL)
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    if not Path(a.tarball).exists():
        print(f"{a.tarball} missing: apt-get install linux-source-6.1", file=sys.stderr)
        return 1
    t = table(read_tree(a.tarball))
    text = "".join(f"{d}\t{' '.join(names)}\n" for d, names in t.items())
    with open(a.out, "wb") as f:  # mtime 0: the same tree gives the same bytes
        f.write(gzip.compress(text.encode(), 9, mtime=0))
    print(f"{a.out}: {len(t)} directories, {sum(map(len, t.values()))} names, {Path(a.out).stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
