"""The vetted recipe registry: workloads the lab may run to confirm a regression.  Pure: no I/O.

A recipe has typed, bounded parameters (ints within limits, enums from whitelists, booleans:
never free text), a metric with a direction, the backends that can run it, and fixed templates
that render what to run.  Only validated numbers and whitelisted enum values reach a template;
every file a workload touches is under the backend's scratch directory, never a path from mail.

One module per benchmark tool in this package, each holding the :class:`~.base.Recipe` classes
that own their claim parsing, bounds, guest script, host argv, output parser and metric (see
:mod:`.base`).  Modules are discovered automatically: **adding a benchmark is one new module**
(plus its tests).  Limits: ``max_size`` default 1 GiB, configurable; threads <= 64; durations
<= 600 s (``[lab]`` ``max_size``, ``max_threads``, ``max_duration_s``, ``clamp``).

=====================  ===================================  ==================  ============
module                 recipes                              direction           backends
=====================  ===================================  ==================  ============
:mod:`.dd`             dd-seqwrite, dd-seqread              higher (MB/s)       qemu ssh lkp
:mod:`.perf_bench`     syscall-getpid                       higher (calls/s)    qemu ssh lkp
                       perf-sched-messaging                 lower (seconds)     qemu ssh
                       perf-sched-pipe                      higher (ops/s)      qemu ssh
                       perf-mem (memcpy, memset)            higher (GB/s)       qemu ssh
:mod:`.fio`            fio                                  higher (MB/s, IOPS) ssh lkp
:mod:`.sysbench`       sysbench-fileio                      higher (ops/s)      ssh lkp
                       sysbench-cpu                         higher (events/s)   qemu ssh
                       sysbench-memory                      higher (MiB/s)      qemu ssh
:mod:`.hackbench`      hackbench (rt-tests)                 lower (seconds)     qemu ssh
:mod:`.stress_ng`      stress-ng (whitelisted stressors)    higher (bogo ops/s) qemu ssh lkp
=====================  ===================================  ==================  ============

"qemu" is the busybox guest (perf, hackbench, stress-ng, sysbench: the host's binaries with
their shared libraries copied into the initramfs, ``guest_tools``); LAVA's qemu guest runs the
busybox-only ones (dd, syscall-getpid); "ssh" runs the Debian tool on a lab host; "lkp" writes
an LKP-tests job.  :func:`recipe_from_claim` maps a report's command line onto a recipe
(:mod:`.claims`); :func:`make_recipe` builds one from parameters.
"""

from __future__ import annotations

import importlib
import pkgutil

from bot.lab.recipes.base import (BLOCK_SIZES, BS_BY_BYTES, BS_PARAM, DEFAULT_MAX_SIZE, HARD_MAX_DURATION_S,
                                  HARD_MAX_SIZE, HARD_MAX_THREADS, REGISTRY, SAFE_SCRATCH_RE, BoolParam, EnumParam,
                                  GiB, IntParam, KiB, Limits, LkpJob, MiB, Recipe, RecipeError, parse_size)
from bot.lab.recipes.claims import MAX_COMMAND_CHARS, recipe_for_benchmark, recipe_from_claim
from bot.lab.recipes.spec import RecipeSpec, make_recipe, total_bytes

_INFRA = {"base", "claims", "spec"}
for _m in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _m not in _INFRA:
        importlib.import_module(f"{__name__}.{_m}")

CATALOGUE = REGISTRY  # name -> Recipe (the registry; the old name stays for callers)

__all__ = ["BLOCK_SIZES", "BS_BY_BYTES", "BS_PARAM", "CATALOGUE", "DEFAULT_MAX_SIZE",
           "HARD_MAX_DURATION_S", "HARD_MAX_SIZE", "HARD_MAX_THREADS", "MAX_COMMAND_CHARS",
           "REGISTRY", "SAFE_SCRATCH_RE", "BoolParam", "EnumParam", "GiB", "IntParam", "KiB", "Limits", "LkpJob",
           "MiB", "Recipe", "RecipeError", "RecipeSpec", "make_recipe", "parse_size", "recipe_for_benchmark",
           "recipe_from_claim", "total_bytes"]
