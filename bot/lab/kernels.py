"""A build spec turned into a bootable kernel image on disk, whatever its kind: an image as is,
a Debian kernel package (bot.lab.builds) or a tree built with TuxMake (bot.lab.kbuild)."""

from __future__ import annotations

import os
from pathlib import Path

from bot.lab.builds import BuildError, BuildSpec, ResolvedBuild, debian_kernel
from bot.lab.kbuild import tree_kernel


def resolve(spec: BuildSpec, cache_dir: str | os.PathLike, **kw) -> ResolvedBuild:
    """Any build spec -> an existing kernel image on disk."""
    spec.validate()
    if spec.kind == "image":
        p = Path(spec.image)
        if not p.is_file():
            raise BuildError(f"kernel image not found: {p}")
        return ResolvedBuild(str(p.resolve()), f"image:{p}", None, {})
    if spec.kind == "debian":
        return debian_kernel(spec.debian, cache_dir, **kw)
    return tree_kernel(spec, cache_dir, **kw)
