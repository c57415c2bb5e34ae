"""Where a name lives in the kernel source tree: directory names, module names and ``.c``
basenames -> their directory (``dwc3`` -> drivers/usb/dwc3, ``btusb`` -> drivers/bluetooth).

The table (``data/kernel_paths.txt.gz``) is generated from a kernel source tarball by
``bench/build_kernel_paths.py``; it is general knowledge of the tree, not read from any message.
"""

from __future__ import annotations

import gzip
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "kernel_paths.txt.gz"


def key(name: str) -> str:
    return name.strip().lower().replace("-", "_")


class Tree:
    def __init__(self, lines: list[str]):
        self.dirs: set[str] = set()
        self.names: dict[str, list[tuple[str, str]]] = {}  # name key -> [(directory, name as spelt)]
        self.by_base: dict[str, list[str]] = {}  # directory basename -> every directory of that name
        self.leaves: set[str] = set()  # directories that build a module of their own name (a driver's)
        for line in lines:
            d, _, names = line.rstrip("\n").partition("\t")
            if not d:
                continue
            self.dirs.add(d)
            self.by_base.setdefault(key(d.rsplit("/", 1)[-1]), []).append(d)
            base = key(d.rsplit("/", 1)[-1])
            for n in names.split():
                self.names.setdefault(key(n), []).append((d, n))
                if key(n) == base and d.count("/") >= 2:
                    self.leaves.add(d)

    def is_dir(self, path: str) -> bool:
        return path in self.dirs

    def dir_named(self, name: str, under: str | None = None) -> str | None:
        """The one directory called ``name`` (within ``under`` when given), else None."""
        cands = [d for d in self.by_base.get(key(name), ()) if under is None or d.startswith(under + "/")]
        return cands[0] if len(cands) == 1 else None

    def file_dir(self, name: str, under: str | None = None) -> tuple[str, str] | None:
        """(directory, name as spelt) of the one module or ``.c`` file ``name`` (within
        ``under`` when given)."""
        cands = [(d, n) for d, n in self.names.get(key(name), ())
                 if under is None or d == under or d.startswith(under + "/")]
        if not cands or any(d != cands[0][0] for d, _ in cands):
            return None
        # a module and its source file in one directory ("page-alloc.o" from page_alloc.c)
        return next(((d, n) for d, n in cands if n == name), cands[-1])

    def is_leaf(self, path: str) -> bool:
        """A driver's own directory, three levels deep or more, with a module or file of its
        name (iwlwifi/ -> iwlwifi.o): not refined further ("iwlwifi: mvm:" is iwlwifi)."""
        return path in self.leaves

    def locate(self, name: str, under: str | None = None, dirs_only: bool = False) -> str | None:
        """The most specific area a name stands for: ``under/name`` when that is a directory,
        else the one directory of that name below ``under``, else the directory of the module
        or file of that name (a file's directory: ``mm/vmscan.c`` is mm, as kernel people
        file it).  ``dirs_only``: directories only."""
        k = key(name)
        if not k or k in (".", ".."):
            return None
        if under is not None:
            for n in (name, name.replace("_", "-"), name.replace("-", "_")):
                if self.is_dir(f"{under}/{n}"):
                    return f"{under}/{n}"
        d = self.dir_named(name, under)
        if d is not None or dirs_only:
            return d
        if any(under is None or x.startswith(under + "/") for x in self.by_base.get(k, ())):
            return None  # several directories of that name: which one is not clear
        found = self.file_dir(name, under)
        if found is None:
            return None
        return found[0]


@lru_cache(maxsize=1)
def tree() -> Tree:
    try:
        with gzip.open(DATA, "rt", encoding="utf-8") as f:
            return Tree(f.readlines())
    except OSError:
        return Tree([])


def locate(name: str, under: str | None = None, dirs_only: bool = False) -> str | None:
    return tree().locate(name, under, dirs_only)


def is_leaf(path: str) -> bool:
    return tree().is_leaf(path)
