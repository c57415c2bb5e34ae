"""A registry recipe with validated parameters (:class:`RecipeSpec`), what the backends hold.

Everything recipe-specific is delegated to the recipe's class in the registry
(:data:`bot.lab.recipes.base.REGISTRY`); this module adds validation, re-checking at render time
(a hand-built or stored spec cannot smuggle in unchecked values), the guest loop and the
backend checks.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from bot.lab.recipes.base import (REGISTRY, SAFE_SCRATCH_RE, BoolParam, EnumParam, IntParam, Limits, Recipe,
                                  RecipeError)

BACKEND_WHY = {
    "qemu": "the {backend} backend only has busybox",
    "lkp": "there is no LKP-tests job template for it",
}


def recipe_class(name: Any) -> Recipe:
    if not isinstance(name, str) or name not in REGISTRY:
        raise RecipeError(f"unknown recipe {name!r}; vetted recipes: {', '.join(REGISTRY)}")
    return REGISTRY[name]


def total_bytes(recipe: str, params: dict) -> int | None:
    """Bytes a recipe writes/reads per sample (None: not a data recipe).  Raises RecipeError on
    values of the wrong type (a hand-built spec), never multiplies a string."""
    return recipe_class(recipe).bytes(params)


def _scratch_ok(scratch: str) -> None:
    if not isinstance(scratch, str) or not SAFE_SCRATCH_RE.match(scratch) or ".." in scratch:
        raise RecipeError(f"unsafe scratch path {scratch!r}")


@dataclass(frozen=True)
class RecipeSpec:
    """A registry recipe with validated parameters.  Build with :func:`make_recipe`."""

    name: str
    params: dict
    notes: tuple[str, ...] = ()

    @property
    def recipe(self) -> Recipe:
        return recipe_class(self.name)

    @property
    def metric(self) -> str:
        return self.recipe.metric(self.params)

    @property
    def higher_is_better(self) -> bool:
        return self.recipe.higher_is_better

    @property
    def backends(self) -> tuple[str, ...]:
        return self.recipe.backends

    def supports(self, backend: str) -> tuple[bool, str]:
        """Whether ``backend`` can run this recipe with these parameters, and why not."""
        if backend == "lava" and self.recipe.guest_tools:
            return False, (f"{self.name} needs {', '.join(self.recipe.guest_tools)} inside the guest; "
                           "the LAVA initramfs has only busybox")
        if backend == "lava":
            backend = "qemu"  # the same busybox guest workload
        if backend not in self.backends:
            why = BACKEND_WHY.get(backend, "the {backend} backend cannot run it").format(backend=backend)
            return False, f"{self.name} needs the real tool on the host ({'/'.join(self.backends)} backends); {why}"
        why = self.recipe.unsupported(self.params, backend)
        return (False, why) if why else (True, "ok")

    @property
    def bytes(self) -> int | None:
        return total_bytes(self.name, self.params)

    def key(self) -> str:
        """Stable identifier of recipe + params (for caches)."""
        blob = json.dumps({"name": self.name, "params": self.params}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        return {"name": self.name, "params": dict(self.params), "notes": list(self.notes),
                "metric": self.metric, "higher_is_better": self.higher_is_better}

    @classmethod
    def from_dict(cls, d: dict, config: dict | None = None) -> "RecipeSpec":
        """Re-validates: a stored spec cannot smuggle in unchecked values."""
        if not isinstance(d, dict) or not isinstance(d.get("params", {}), dict):
            raise RecipeError("a recipe spec is a dict with name and params")
        return make_recipe(d.get("name"), d.get("params", {}), config, notes=tuple(d.get("notes", ())))

    # -- templates ------------------------------------------------------------------------------
    def _recheck(self) -> dict:
        # belt and braces: templates accept only ints, bools and whitelisted enum strings
        for p in self.recipe.params:
            v = self.params.get(p.name)
            if isinstance(p, IntParam) and type(v) is not int:
                raise RecipeError(f"{p.name} is not an int")
            if isinstance(p, EnumParam) and v not in p.choices:
                raise RecipeError(f"{p.name} is not whitelisted")
            if isinstance(p, BoolParam) and not isinstance(v, bool):
                raise RecipeError(f"{p.name} is not a bool")
        return self.params

    def _file(self, scratch: str) -> str:
        return f"{scratch}/regtriage-{self.name}.dat"

    def render_guest_script(self, *, scratch: str, samples: int, warmup: int) -> str:
        """Busybox ``sh`` fragment for a guest: ``warmup`` + ``samples`` iterations, each printing
        ``WARMUP <metric>=<value>`` or ``BENCH <metric>=<value>``.  Expects the init prologue's
        ``now_ns`` (monotonic ns into ``$NOW``) and ``fail`` helpers (see bot.lab.initramfs)."""
        ok, why = self.supports("qemu")
        if not ok:
            raise RecipeError(why)
        _scratch_ok(scratch)
        for name, v in (("samples", samples), ("warmup", warmup)):
            if type(v) is not int or v < 0 or (name == "samples" and v < 1):
                raise RecipeError(f"{name} must be a positive int")
        f = self._file(scratch)
        g = self.recipe.guest_steps(self._recheck(), f)
        metric = self.metric
        if g.extract:  # the tool measures itself: its output to the console, the value from it
            out = f"{f}.out"
            # printable ASCII only: no control character (\r, ...) can start a line of its own
            show = f"awk '{{ gsub(/[^ -~]/, \"?\"); print \"OUT \" $0 }}' {out}"
            measure = (f"{g.cmd} > {out} 2>&1 || {{ {show}; fail \"{self.name} failed\"; }}\n"
                       f"  {show}\n  {g.post}\n"
                       f"  v=$(awk '{g.extract}' {out}) || fail \"no {metric} value in the {self.name} output\"")
        else:
            measure = (f"now_ns; t0=$NOW\n  {g.cmd}\n  now_ns; t1=$NOW\n  {g.post}\n"
                       f"  v=$(awk -v ns=$((t1 - t0)) 'BEGIN {{ if (ns <= 0) exit 1; printf \"%.3f\", {g.value} }}')"
                       f" || fail \"clock did not advance\"")
        return f"""REGTRIAGE_TOTAL={warmup + samples}
REGTRIAGE_WARMUP={warmup}
i=0
while [ $i -lt $REGTRIAGE_TOTAL ]; do
  {g.prep}
  {measure}
  if [ $i -lt $REGTRIAGE_WARMUP ]; then echo "WARMUP {metric}=$v"; else echo "BENCH {metric}=$v"; fi
  i=$((i + 1))
done
rm -f {f} {f}.out"""

    def host_argv(self, scratch: str) -> list[list[str]]:
        """Commands (argument lists, no shell) a host backend runs in ``scratch``: setup steps
        then the measured command last; :meth:`parse_output` reads the measured one's output."""
        _scratch_ok(scratch)
        return self.recipe.host_argv(self._recheck(), scratch, self._file(scratch))

    def parse_output(self, stdout: str, stderr: str) -> float:
        """The metric's value from the measured step's output (raises ``ParseError``)."""
        return self.recipe.parse(self.params, stdout, stderr)

    def lkp_job(self):
        """The recipe's :class:`~bot.lab.recipes.base.LkpJob` (RecipeError if it has none)."""
        return self.recipe.lkp_job(self._recheck())


def make_recipe(name: Any, params: dict | None = None, config: dict | None = None,
                notes: tuple[str, ...] = ()) -> RecipeSpec:
    """Validate ``params`` (missing ones take defaults) for registry recipe ``name``."""
    rec = recipe_class(name)
    limits = Limits.from_config(config)
    if not isinstance(params, (dict, type(None))):
        raise RecipeError("params must be a dict")
    vals = rec.validate(dict(params or {}), limits)
    if not all(isinstance(n, str) for n in notes):
        raise RecipeError("notes must be strings")
    return RecipeSpec(name, vals, tuple(notes))
