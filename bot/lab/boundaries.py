"""Group-sequential boundaries: the nominal one-sided level of each look of a design, for
normal look statistics (Lan-DeMets alpha spending integrated numerically, Welch's test) and for
the paired t statistic (calibrated by a seeded simulation along the looks).  Pure functions;
:mod:`bot.lab.stats` applies them."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

SPENDING = ("pocock", "obrien-fleming")


def _spent(t: float, alpha: float, spending: str) -> float:
    """Cumulative one-sided alpha spent by information fraction ``t`` (Lan-DeMets)."""
    from scipy.stats import norm

    t = min(max(t, 0.0), 1.0)
    if t <= 0:
        return 0.0
    if spending == "pocock":
        return alpha * math.log(1 + (math.e - 1) * t)
    return float(2 * norm.sf(norm.isf(alpha / 2) / math.sqrt(t)))


@lru_cache(maxsize=64)
def boundaries(looks: tuple[int, ...], alpha_side: float, spending: str) -> tuple[float, ...]:
    """Nominal one-sided level of each look such that P(any look crosses) = ``alpha_side`` for
    normal look statistics with information proportional to ``looks``."""
    from scipy.optimize import brentq
    from scipy.special import ndtr
    from scipy.stats import norm

    if spending not in SPENDING:
        raise ValueError(f"spending must be one of {', '.join(SPENDING)}")
    info = np.asarray(looks, dtype=float)
    frac = info / info[-1]
    grid = np.linspace(-9.0, 9.0, 1201)
    h = grid[1] - grid[0]
    levels: list[float] = []
    dens = None  # density of Z_k on grid, continuing paths only
    prev_spent = 0.0
    for k in range(len(looks)):
        target = _spent(frac[k], alpha_side, spending) - prev_spent
        prev_spent += target
        if k == 0:
            c = float(norm.isf(target)) if target > 0 else math.inf
            dens = norm.pdf(grid) * (grid < c)
        else:
            r0, r1, d = math.sqrt(info[k - 1]), math.sqrt(info[k]), math.sqrt(info[k] - info[k - 1])
            keep = dens > 1e-300
            w, u = dens[keep] * h, grid[keep] * r0

            def tail(c, w=w, u=u, r1=r1, d=d):
                return float(np.dot(w, ndtr((u - c * r1) / d)))

            if target <= 0:
                c = math.inf
            else:
                c = brentq(lambda x: tail(x) - target, -5.0, 40.0, xtol=1e-7)
            x = (grid[:, None] * r1 - u[None, :]) / d
            dens = (np.exp(-0.5 * x * x) @ w) * (r1 / d / math.sqrt(2 * math.pi)) * (grid < c)
        levels.append(float(norm.sf(c)) if math.isfinite(c) else 0.0)
    return tuple(levels)


PAIRED_PATHS = 400_000  # Monte Carlo paths behind paired_boundaries (MC error ~2% of alpha at 20 runs)


@lru_cache(maxsize=64)
def paired_boundaries(looks: tuple[int, ...], alpha_side: float, spending: str,
                      paths: int = PAIRED_PATHS, seed: int = 1) -> tuple[float, ...]:
    """Nominal one-sided level of each look for the paired t statistic, such that
    P(any look crosses) = ``alpha_side`` with each look spending its share.

    With few pairs (4 df at the first look of 5 pairs) the t statistics of successive looks are
    not the joint normal law :func:`boundaries` integrates: applied to them, its levels let 1.2%
    of A/A pairs through for a 1% budget.  The paired t statistic is pivotal under normal
    noise (its law does not depend on the noise level), so the boundaries are calibrated
    exactly, once, by simulating the statistic along the looks (seeded: the same levels every
    time) and taking each look's crossing quantile among the paths that have not crossed."""
    from scipy.special import stdtr

    if spending not in SPENDING:
        raise ValueError(f"spending must be one of {', '.join(SPENDING)}")
    rng = np.random.default_rng(seed)
    paths = max(10_000, min(paths, 16_000_000 // looks[-1]))  # bounded work for long designs
    frac = np.asarray(looks, dtype=float) / looks[-1]
    s1 = np.zeros(paths)
    s2 = np.zeros(paths)
    alive = np.ones(2 * paths, dtype=bool)  # each path counts twice: t and -t (symmetry)
    levels: list[float] = []
    prev_spent, done = 0.0, 0
    for k, n in enumerate(looks):
        x = rng.standard_normal((paths, n - done))
        s1 += x.sum(axis=1)
        s2 += (x * x).sum(axis=1)
        done = n
        mean = s1 / n
        sd = np.sqrt(np.maximum(s2 - n * mean * mean, 1e-300) / (n - 1))
        t = mean / (sd / math.sqrt(n))
        tt = np.concatenate([t, -t])
        target = _spent(frac[k], alpha_side, spending) - prev_spent
        prev_spent += target
        m = int(round(target * 2 * paths))
        if m <= 0:
            levels.append(0.0)
            continue
        cand = tt[alive]
        c = float(np.partition(cand, cand.size - m)[cand.size - m]) if m < cand.size else -math.inf
        levels.append(float(stdtr(n - 1, -c)))
        alive &= tt < c
    return tuple(levels)
