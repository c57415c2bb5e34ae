"""The rerun procedure on simulated samples: ``regtriage lab power`` and ``bench/stats_power.py``.

:func:`simulate` runs the scheduler's loop -- :func:`bot.lab.stats.decide` at each look,
``next_runs`` more per build until it says stop -- on normal samples laid out in the order the
backends run them (:func:`run_order`), optionally on a shared host whose speed drifts
(:class:`HostLoad`); :func:`power` gives the false-positive rate on A/A pairs and the power at
a change; :func:`lkp_rates` / :func:`lkp_changed` / :func:`ranges_disjoint` are LKP's
fixed-size rules for comparison (:func:`power_table`).  Pure: numpy's seeded generator only.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from bot.lab.stats import CONFIRMED, IMPROVED, VERDICTS, Design, clean_samples, decide


def run_order(n: int, order: str = "abba") -> list[str]:
    """Build labels of ``n`` batches per build in execution order, as
    :meth:`bot.lab.backends.base.RunSpec.schedule` lays them out."""
    if order == "blocked":
        return ["good"] * n + ["bad"] * n
    out: list[str] = []
    for i in range(n):
        out += ["bad", "good"] if order == "abba" and i % 2 == 1 else ["good", "bad"]
    return out


class HostLoad:
    """A shared host's load as a slowly varying factor on every run: ``exp(L_t)`` with ``L`` an
    AR(1) process over the runs in execution order (stationary sd ``cv_percent`` / 100,
    correlation ``rho`` between consecutive runs).  0 CV: a quiet, dedicated machine."""

    def __init__(self, rng: np.random.Generator, cv_percent: float = 0.0, rho: float = 0.9):
        self.rng, self.sd, self.rho = rng, cv_percent / 100.0, rho
        self.level = float(rng.normal(0.0, self.sd)) if self.sd else 0.0

    def next(self) -> float:
        if not self.sd:
            return 1.0
        self.level = self.rho * self.level + float(self.rng.normal(0.0, self.sd * math.sqrt(1 - self.rho ** 2)))
        return math.exp(self.level)


def simulate(design: Design, *, cv_percent: float, change_percent: float, trials: int = 2000, seed: int = 0,
             claimed_change_percent: float | None = None, emulated: bool = False,
             load_cv_percent: float = 0.0, load_rho: float = 0.9, order: str = "abba",
             boot_cv_percent: float = 0.0, runs_per_boot: int | None = None) -> dict[str, Any]:
    """Run the scheduler's loop (:func:`decide` at each look, ``next_runs`` more per build until
    it says stop) on normal samples with the given CV and true change (a throughput metric,
    mean 100), the batches of each round laid out in ``order`` as the backends run them
    (``design.per_unit`` runs per batch).  With ``load_cv_percent`` the host is shared: every
    run is also scaled by :class:`HostLoad` (slow drift of the machine's speed, continuing
    across rounds); with ``boot_cv_percent`` every batch (one boot) is scaled by its own
    factor, the boot-to-boot variation.  ``runs_per_boot``: lay the runs out in batches of this
    size while the design judges by its own ``per_unit`` (what judging runs as if they were
    boots would do).  Returns the verdict rates and run counts."""
    layout = design if runs_per_boot is None else replace(design, per_unit=runs_per_boot)
    rng = np.random.default_rng(seed)
    counts = {v: 0 for v in VERDICTS}
    runs = []
    sd = cv_percent
    bad_mean = 100.0 * (1 + change_percent / 100)

    def draw(done: int, n: int, load: HostLoad) -> tuple[list[float], list[float]]:
        sizes = layout.rounds(done + n)[len(layout.rounds(done)) if done else 0:]
        out: dict[str, list[float]] = {"good": [], "bad": []}
        seen = {"good": 0, "bad": 0}
        for label in run_order(len(sizes), order):  # one batch (one boot) per label
            size, seen[label] = sizes[seen[label]], seen[label] + 1
            mean = 100.0 if label == "good" else bad_mean
            boot = math.exp(float(rng.normal(0.0, boot_cv_percent / 100))) if boot_cv_percent else 1.0
            out[label] += [float(rng.normal(mean, sd)) * boot * load.next() for _ in range(size)]
        return out["good"], out["bad"]

    for _ in range(trials):
        load = HostLoad(rng, load_cv_percent, load_rho)
        good, bad = draw(0, design.looks[0], load)
        while True:
            j = decide(good, bad, design, higher_is_better=True, claimed_change_percent=claimed_change_percent,
                       emulated=emulated)
            if j.stop:
                break
            g, b = draw(len(good), j.next_runs, load)
            good += g
            bad += b
        counts[j.verdict] += 1
        runs.append(min(len(good), len(bad)))
    r = np.asarray(runs)
    return {"trials": trials, "rates": {v: counts[v] / trials for v in VERDICTS},
            "mean_runs": float(r.mean()), "max_runs": int(r.max()),
            "stopped_at": {int(n): int((r == n).sum()) for n in design.looks if (r == n).any()}}


def wilson(k: int, n: int, z: float = 1.96) -> list[float]:
    """95% Wilson interval of a rate k/n (the simulation's own uncertainty)."""
    p = k / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(max(0.0, mid - half), 5), round(min(1.0, mid + half), 5)]


def power(design: Design, *, cv_percent: float, change_percent: float, trials: int = 2000, seed: int = 0,
          emulated: bool = False, load_cv_percent: float = 0.0, load_rho: float = 0.9,
          order: str = "abba", boot_cv_percent: float = 0.0) -> dict[str, Any]:
    """``regtriage lab power``: the procedure on A/A pairs (false positives: confirmed or
    improved) and on pairs with the claimed change (power: confirmed), the claim being
    ``change_percent`` in both; ``load_cv_percent``: a shared host (:class:`HostLoad`)."""
    kw = {"claimed_change_percent": change_percent, "emulated": emulated, "load_cv_percent": load_cv_percent,
          "load_rho": load_rho, "order": order, "boot_cv_percent": boot_cv_percent}
    aa = simulate(design, cv_percent=cv_percent, change_percent=0.0, trials=trials, seed=seed, **kw)
    ab = simulate(design, cv_percent=cv_percent, change_percent=change_percent, trials=trials, seed=seed + 1, **kw)
    fp = aa["rates"][CONFIRMED] + aa["rates"][IMPROVED]
    return {"cv_percent": cv_percent, "change_percent": change_percent, "trials": trials,
            "looks": list(design.looks), "alpha": design.alpha, "spending": design.spending,
            "analysis": design.analysis, "order": order,
            "load_cv_percent": load_cv_percent, "load_rho": load_rho if load_cv_percent else None,
            "runs_per_boot": design.per_unit, "boot_cv_percent": boot_cv_percent, "emulated": emulated,
            "false_positive_rate": fp, "false_positive_ci95": wilson(round(fp * trials), trials),
            "power": ab["rates"][CONFIRMED],
            "mean_runs": ab["mean_runs"], "max_runs": design.max_runs, "max_runs_observed": ab["max_runs"],
            "mean_runs_aa": aa["mean_runs"], "verdicts_aa": aa["rates"], "verdicts": ab["rates"],
            "stopped_at": ab["stopped_at"]}


TABLE_CHANGES = (-2.0, -3.5, -5.0, -10.0)


def lkp_rates(*, cv_percent: float, change_percent: float, runs: int, trials: int = 2000, seed: int = 0) -> dict:
    """LKP's rules at a fixed ``runs`` per side, counted in the regression direction only:
    false positives on A/A pairs, detections with the change.  ``false_positive_rate`` /
    ``power``: :func:`lkp_changed` (lib/changed_stat.rb: medians outside the other side's
    range, ratio > 1.01); ``ranges_false_positive_rate`` / ``ranges_power``:
    :func:`ranges_disjoint` (the rule as usually stated: the means differ and the sample ranges
    do not overlap)."""
    out = {"runs": runs}
    for key, change, sd in (("false_positive_rate", 0.0, seed), ("power", change_percent, seed + 1)):
        rng = np.random.default_rng(sd)
        hits = ranges = 0
        for _ in range(trials):
            good = rng.normal(100.0, cv_percent, runs)
            bad = rng.normal(100.0 * (1 + change / 100), cv_percent, runs)
            if lkp_changed(good, bad) and np.median(bad) < np.median(good):
                hits += 1
            if ranges_disjoint(good, bad) and bad.mean() < good.mean():
                ranges += 1
        out[key] = hits / trials
        out[f"ranges_{key}"] = ranges / trials
    return out


def ranges_disjoint(good, bad) -> bool:
    """The means differ and the two samples' min..max ranges do not overlap."""
    g, b = clean_samples(good), clean_samples(bad)
    return bool(g.mean() != b.mean() and (g.max() < b.min() or b.max() < g.min()))


def power_table(design: Design, *, cv_percent: float, changes=TABLE_CHANGES, trials: int = 2000, seed: int = 0,
                emulated: bool = False, lkp_runs: int = 10, load_cv_percent: float = 0.0, load_rho: float = 0.9,
                order: str = "abba", boot_cv_percent: float = 0.0) -> list[dict[str, Any]]:
    """:func:`power` for each change, with LKP's rule at ``lkp_runs`` per side beside it."""
    return [{**power(design, cv_percent=cv_percent, change_percent=c, trials=trials, seed=seed, emulated=emulated,
                     load_cv_percent=load_cv_percent, load_rho=load_rho, order=order,
                     boot_cv_percent=boot_cv_percent),
             "lkp": lkp_rates(cv_percent=cv_percent, change_percent=c, runs=lkp_runs, trials=trials, seed=seed)}
            for c in changes]


def lkp_changed(good, bad) -> bool:
    """LKP's default change test (lib/changed_stat.rb, as documented in
    shared/docs/lab-harnesses.md): trim n>>5 samples at each end (at most 3), take the median
    s[n/2]; changed when each side's median lies outside the other side's min..max range and
    the ratio of medians exceeds 1.01."""
    def summary(x):
        s = sorted(float(v) for v in x)
        trim = min(len(s) >> 5, 3)
        if trim:
            s = s[trim:-trim]
        return s[0], s[len(s) // 2], s[-1]

    a_min, a_med, a_max = summary(bad)
    b_min, b_med, b_max = summary(good)
    separated = (b_min > a_med and b_med > a_max) or (a_min > b_med and a_med > b_max)
    lo, hi = sorted((abs(a_med), abs(b_med)))
    return separated and lo > 0 and hi / lo > 1.01
