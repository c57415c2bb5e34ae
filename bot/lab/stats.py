"""Judge good-vs-bad benchmark samples with a group-sequential design: pure functions, no I/O.

The scheduler looks at the accumulating samples after ``runs`` runs per build, then after every
``extend_step`` more, up to ``max_runs`` (the *looks*, e.g. 5, 10, 15, 20).  Testing each look at
alpha would inflate the false-positive rate (about 2% for 4 looks at 0.01), so the looks share
one error budget:

* **Statistic**: the change is measured on the log scale (``log(bad) - log(good)``, the change
  of the geometric means, reported in %), tested with Welch's t-test (Satterthwaite df).
  Samples that are not all positive are compared on the raw scale relative to the good mean.
* **Efficacy boundaries** (Lan-DeMets alpha spending, ``[lab] spending``): ``alpha`` (default
  0.01) is the probability, over ALL looks, that a build pair without a change is called
  ``confirmed`` or ``improved``; half of it is spent on each direction.  ``pocock`` (default)
  spends ``alpha/2 * ln(1 + (e-1) t)`` by information fraction ``t = n / max_runs``; it spends
  early, where the changes kernel reports claim (several CVs) are caught after the first 5+5
  runs, which is what saves lab time; ``obrien-fleming`` spends almost nothing early and keeps
  the last look close to a fixed test.  The per-look boundaries are computed once by recursive
  numerical integration of the joint normal law of the look statistics (independent increments)
  and applied as nominal one-sided levels to the t-test p-values.  A one-sided Mann-Whitney U
  test must agree at p <= 0.05 (a guard against one outlier; it only removes rejections, so the
  bound holds).
* **Repeated confidence interval**: at look k, ``estimate +- t(1 - a_k, df) * se`` with the
  same nominal level ``a_k``: "confirmed" is exactly "the interval lies on the regression side
  of 0", and the intervals of all looks cover the true change together with probability
  >= 1 - alpha, so stopping on what the interval says at any look keeps its meaning.
* **not-reproduced** only when the interval rules out half of the claimed change (no claim:
  the interval lies within +-``noise_percent``) AND the noise gate passes: the measured CV
  (the larger of the two sides') is at most ``max_cv_percent`` and the machine is not emulated
  (unless ``allow_emulated``).  Otherwise the job stops as ``inconclusive`` with that reason.
* **Futility** (non-binding, so it cannot raise the false-positive rate): stop as
  ``inconclusive`` when the conditional power -- the chance that the last look would still
  confirm a regression of the claimed size (no claim: 2 x ``noise_percent``), given the data
  so far and the measured noise -- is below ``futility_power`` (default 0.1).
* **Maximum n**: ``max_runs`` per build; without a crossing there the verdict is
  ``inconclusive`` (or ``not-reproduced`` per the rule above), with the reason.

:func:`decide` is the one function the scheduler calls at every look; :func:`simulate` runs
the very same loop on simulated samples (``regtriage lab power``, ``bench/stats_power.py``).
Direction comes from the metric: for throughput (higher is better) a regression is a negative
change, for time or latency (lower is better) a positive one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

CONFIRMED, IMPROVED, NOT_REPRODUCED, INCONCLUSIVE = "confirmed", "improved", "not-reproduced", "inconclusive"
VERDICTS = (CONFIRMED, IMPROVED, NOT_REPRODUCED, INCONCLUSIVE)
SPENDING = ("pocock", "obrien-fleming")
MWU_GUARD = 0.05
LOWER_IS_BETTER_HINTS = ("latency", "time", "duration", "seconds", "overhead", "usecs", "msecs",
                         "nsecs", "_ns", "_us", "_ms", "boot", "elapsed", "wait", "cycles")
# [lab] options of the design, with defaults (bot.lab.plan validates and stores them in the plan)
DESIGN_DEFAULTS = {"alpha": 0.01, "spending": "pocock", "futility_power": 0.10, "max_cv_percent": 5.0,
                   "allow_emulated": False, "noise_percent": 1.0}


def higher_is_better(metric: str | None) -> bool:
    """Direction of a metric from its name (LKP convention: throughput up is good)."""
    if not metric:
        return True
    m = metric.lower()
    if any(h in m for h in ("per_sec", "per-sec", "/s", "ops", "throughput", "bandwidth", "bw",
                            "iops", "jobs-per-min", "score", "mb/s", "gb/s", "kb/s", "files_per_sec")):
        return True
    return not any(h in m for h in LOWER_IS_BETTER_HINTS)


# ---------------------------------------------------------------------------------- boundaries
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


# ---------------------------------------------------------------------------------- the design
@dataclass(frozen=True)
class Design:
    """The looks (runs per build at each look) and the rules applied at every look."""
    looks: tuple[int, ...]
    alpha: float = 0.01
    spending: str = "pocock"
    futility_power: float = 0.10
    max_cv_percent: float = 5.0
    allow_emulated: bool = False
    noise_percent: float = 1.0

    def __post_init__(self):
        if not self.looks or any(n < 2 for n in self.looks) or list(self.looks) != sorted(set(self.looks)):
            raise ValueError("looks must be increasing run counts >= 2")
        if self.spending not in SPENDING:
            raise ValueError(f"spending must be one of {', '.join(SPENDING)}")

    @classmethod
    def from_settings(cls, s: dict[str, Any]) -> "Design":
        """From the plan (``runs``, ``extend_step``, ``max_runs`` and the DESIGN_DEFAULTS keys)."""
        runs, step = int(s.get("runs", 5)), int(s.get("extend_step", 5))
        cap = max(int(s.get("max_runs", 20)), runs)
        looks = list(range(runs, cap + 1, max(step, 1)))
        if looks[-1] != cap:
            looks.append(cap)
        kw = {k: s.get(k, v) for k, v in DESIGN_DEFAULTS.items()}
        kw = {k: (type(DESIGN_DEFAULTS[k])(v) if v is not None else DESIGN_DEFAULTS[k]) for k, v in kw.items()}
        return cls(tuple(looks), **kw)

    @property
    def max_runs(self) -> int:
        return self.looks[-1]

    def levels(self) -> tuple[float, ...]:
        """Nominal one-sided level of each look, per direction."""
        return boundaries(self.looks, self.alpha / 2, self.spending)

    def look_index(self, n: int) -> int:
        """0-based index of the look that ``n`` runs per side have reached (the last planned
        look <= n; a short first round counts as the first look)."""
        k = 0
        for i, m in enumerate(self.looks):
            if n >= m:
                k = i
        return k

    def to_dict(self) -> dict:
        return {**asdict(self), "looks": list(self.looks), "levels": list(self.levels())}


# ---------------------------------------------------------------------------------- judging
@dataclass
class Judgement:
    verdict: str
    change_percent: float
    ci: tuple[float, float]  # repeated confidence interval of the change at this look
    p_value: float  # one-sided Welch's t-test, regression direction
    p_improvement: float  # one-sided Welch's t-test, improvement direction
    p_mannwhitney: float  # one-sided, in the direction of a crossed boundary (NaN: not needed)
    n_good: int
    n_bad: int
    higher_is_better: bool
    mean_good: float
    mean_bad: float
    median_good: float
    median_bad: float
    stdev_good: float
    stdev_bad: float
    cv_percent: float  # the larger side's stdev / mean, in %
    look: int  # 1-based
    looks: list[int]
    nominal_alpha: float  # one-sided level of this look (per direction)
    alpha: float  # the whole procedure's false-positive budget
    ci_level: float  # simultaneous coverage of the repeated intervals
    emulated: bool
    noise_gate: bool
    conditional_power: float | None
    next_runs: int  # runs per build to add before the next look (0: stop)
    claimed_change_percent: float | None = None
    reasons: list[str] = field(default_factory=list)

    @property
    def stop(self) -> bool:
        return self.next_runs == 0

    def to_dict(self) -> dict:
        """JSON-safe (no NaN or infinity: PostgreSQL's JSON refuses them): those become None."""
        def safe(v):
            return v if not isinstance(v, float) or math.isfinite(v) else None

        d = {k: safe(v) for k, v in asdict(self).items()}
        d["ci"] = [safe(self.ci[0]), safe(self.ci[1])]
        return d


def _clean(samples) -> np.ndarray:
    arr = np.asarray([float(x) for x in samples], dtype=float)
    if arr.size and not np.all(np.isfinite(arr)):
        raise ValueError("samples must be finite numbers")
    return arr


def _welch(g: np.ndarray, b: np.ndarray) -> tuple[float, float, float, bool]:
    """(estimate, standard error, df, log scale?) of the change bad vs good."""
    log = bool(np.all(g > 0) and np.all(b > 0))
    if log:
        x, y = np.log(g), np.log(b)
        est = float(y.mean() - x.mean())
        scale = 1.0
    else:
        x, y = g, b
        scale = abs(float(g.mean()))
        est = float(y.mean() - x.mean()) / scale
    vx, vy = float(x.var(ddof=1)) / len(x), float(y.var(ddof=1)) / len(y)
    se = math.sqrt(vx + vy) / scale
    den = (vx * vx / (len(x) - 1) if vx else 0.0) + (vy * vy / (len(y) - 1) if vy else 0.0)
    df = (vx + vy) ** 2 / den if den > 0 else float(len(x) + len(y) - 2)
    return est, se, df, log


def _pct(x: float, log: bool) -> float:
    return 100.0 * math.expm1(x) if log else 100.0 * x


def _unpct(p: float, log: bool) -> float:
    return math.log1p(p / 100.0) if log else p / 100.0


def _conditional_power(z: float, n: int, n_max: int, delta_over_se: float, level_last: float, df: float) -> float:
    """P(the last look confirms | data so far, a regression of the size of interest), ignoring
    the looks in between (so a slight under-estimate: futility errs towards stopping)."""
    from scipy.special import ndtr, stdtrit

    if n >= n_max:
        return 0.0
    w = n / n_max
    c = -float(stdtrit(max(df * n_max / n, 1.0), level_last))
    # the remaining runs alone estimate delta with se_rest = se * sqrt(n / (n_max - n))
    drift_rest = delta_over_se * math.sqrt((n_max - n) / n)
    return float(ndtr(-(c - math.sqrt(w) * z - math.sqrt(1 - w) * drift_rest) / math.sqrt(1 - w)))


def decide(good, bad, design: Design, *, higher_is_better: bool = True,
           claimed_change_percent: float | None = None, emulated: bool = False) -> Judgement:
    """The verdict at the current look (the number of runs per build so far picks it) and how
    many runs per build to add before the next look (0: stop).  See the module docstring."""
    from scipy import stats
    from scipy.special import stdtr, stdtrit

    g, b = _clean(good), _clean(bad)
    if len(g) < 2 or len(b) < 2:
        raise ValueError("need at least 2 samples per side")
    if g.mean() == 0:
        raise ValueError("the good build's mean is 0: a % change is undefined")
    n = min(len(g), len(b))
    k = design.look_index(n)
    last = k == len(design.looks) - 1
    levels = design.levels()
    a_k = levels[k]
    sign = -1.0 if higher_is_better else 1.0  # regression = sign * change > 0
    est, se, df, log = _welch(g, b)
    reg = sign * est  # > 0: worse
    if se > 0:
        t_stat = reg / se
        p_reg, p_imp = float(stdtr(df, -t_stat)), float(stdtr(df, t_stat))
        half = -float(stdtrit(df, a_k)) * se if a_k > 0 else math.inf
    else:  # both sides constant
        p_reg = 0.0 if reg > 0 else 1.0
        p_imp = 0.0 if reg < 0 else 1.0
        half = 0.0
    def mwu(worse: bool) -> float:  # one-sided Mann-Whitney U, only where a boundary is crossed
        if np.ptp(np.concatenate([g, b])) == 0:
            return 1.0
        bad_less = higher_is_better == worse  # "worse" for throughput: bad less than good
        return float(stats.mannwhitneyu(b, g, alternative="less" if bad_less else "greater").pvalue)

    lo, hi = est - half, est + half
    ci = (_pct(lo, log), _pct(hi, log)) if math.isfinite(half) else (-math.inf, math.inf)
    reg_lo, reg_hi = min(sign * lo, sign * hi), max(sign * lo, sign * hi)  # regression-side ends
    change = _pct(est, log)
    cvs = [float(x.std(ddof=1) / abs(x.mean())) * 100 if x.mean() else math.inf for x in (g, b)]
    cv = max(cvs)
    gate_problems = []
    if cv > design.max_cv_percent:
        gate_problems.append(f"CV {cv:.1f}% > {design.max_cv_percent:g}%")
    if emulated and not design.allow_emulated:
        gate_problems.append("emulated machine")
    gate = not gate_problems
    where = (f"CV {cv:.1f}% over {len(g)}+{len(b)} runs" + (" on an emulated machine" if emulated else ""))
    ci_text = (f"{(1 - design.alpha) * 100:g}% repeated interval [{ci[0]:+.2f}%, {ci[1]:+.2f}%]")
    look_text = f"look {k + 1}/{len(design.looks)}"
    claimed = abs(claimed_change_percent) if claimed_change_percent else None
    # size of interest on the analysis scale (for futility and not-reproduced)
    def to_reg(p: float) -> float:  # a regression of p% -> the regression-side analysis scale
        return sign * _unpct(max(sign * p, -99.9), log)  # a throughput cannot fall by 100% or more

    def from_reg(r: float) -> float:  # the inverse: size of the regression in %
        return sign * _pct(sign * r, log)

    interest = to_reg(claimed if claimed else 2 * design.noise_percent)
    reasons: list[str] = []
    cp = None
    next_runs = 0
    p_mwu = mwu(True) if p_reg < a_k else math.nan
    p_mwu_imp = mwu(False) if p_imp < a_k else math.nan
    if p_reg < a_k and p_mwu <= MWU_GUARD:
        verdict = CONFIRMED
        reasons.append(f"bad build worse at {look_text}: Welch p={p_reg:.2g} < {a_k:.2g} (boundary), "
                       f"Mann-Whitney p={p_mwu:.2g}; {ci_text} excludes 0 ({where})")
        if claimed:
            if reg_hi < to_reg(claimed / 2):
                reasons.append(f"smaller than claimed: at most {from_reg(reg_hi):.1f}% vs {claimed:.1f}% claimed")
            elif reg_lo > to_reg(claimed * 2):
                reasons.append(f"larger than claimed: at least {from_reg(reg_lo):.1f}% vs {claimed:.1f}% claimed")
    elif p_imp < a_k and p_mwu_imp <= MWU_GUARD:
        verdict = IMPROVED
        reasons.append(f"bad build BETTER at {look_text}: Welch p={p_imp:.2g} < {a_k:.2g} (boundary), "
                       f"Mann-Whitney p={p_mwu_imp:.2g}; {ci_text} lies on the improvement side ({where})")
    else:
        verdict = INCONCLUSIVE
        if p_reg < a_k or p_imp < a_k:  # the t-test crossed, the rank test did not agree
            side = "worse" if p_reg < a_k else "better"
            undecided = (f"Welch p={min(p_reg, p_imp):.2g} crosses the boundary {a_k:.2g} ({side}) but "
                         f"Mann-Whitney p={np.nanmin([p_mwu, p_mwu_imp]):.2g} > {MWU_GUARD} disagrees (an outlier, "
                         f"or too few runs for the rank test)")
        else:
            undecided = f"no boundary crossed (Welch p={p_reg:.2g}, boundary {a_k:.2g})"
        if claimed:
            rules_out = reg_hi < to_reg(claimed / 2) and not p_reg < a_k
            what = (f"rules out half of the claimed {claimed:.1f}% regression (at most "
                    f"{max(from_reg(reg_hi), 0):.1f}%)")
        else:
            rules_out = -design.noise_percent <= ci[0] and ci[1] <= design.noise_percent
            what = f"lies within the +-{design.noise_percent:g}% noise band"
        if rules_out and gate:
            verdict = NOT_REPRODUCED
            reasons.append(f"{ci_text} {what} at {look_text}; noise gate passed ({where})")
        elif rules_out:
            label = "too noisy" if cv > design.max_cv_percent else "emulated machine"
            reasons.append(f"{label}: {where} ({', '.join(gate_problems)}); the {ci_text} {what}, but "
                           f"not-reproduced needs the noise gate to pass")
        else:
            if se > 0 and not last and not (p_reg < a_k or p_imp < a_k):
                cp = _conditional_power(reg / se, n, design.max_runs, interest / se, levels[-1], df)
            size = f"{claimed:.1f}% (claimed)" if claimed else f"{2 * design.noise_percent:g}%"
            if cp is not None and cp < design.futility_power:
                noisy = cv > design.max_cv_percent or reg > 0
                reasons.append(f"{'too noisy' if noisy else 'futile'}: {where}; even {design.max_runs}+"
                               f"{design.max_runs} runs would confirm a {size} regression with probability "
                               f"{cp:.0%} (< {design.futility_power:.0%}); {ci_text}")
            elif last:
                nr = (f"half of the claimed {claimed:.1f}% regression" if claimed
                      else f"a change beyond the +-{design.noise_percent:g}% noise band")
                zero = "includes 0" if ci[0] <= 0 <= ci[1] else "excludes 0"
                reasons.append(f"{undecided} after {len(g)}+{len(b)} runs (the maximum): {ci_text} {zero} "
                               f"and does not rule out {nr}; {where}")
            else:
                next_runs = design.looks[k + 1] - n
                reasons.append(f"continue: {undecided} at {look_text}; {ci_text}; {where}"
                               + (f"; conditional power {cp:.0%}" if cp is not None else ""))
    return Judgement(verdict, round(change, 3), (round(ci[0], 3), round(ci[1], 3)), p_reg, p_imp,
                     p_mwu_imp if verdict == IMPROVED else p_mwu,
                     len(g), len(b), higher_is_better, float(g.mean()), float(b.mean()), float(np.median(g)),
                     float(np.median(b)), float(g.std(ddof=1)), float(b.std(ddof=1)), round(cv, 3), k + 1,
                     list(design.looks), a_k, design.alpha, 1 - design.alpha, emulated, gate, cp, next_runs,
                     claimed_change_percent, reasons)


def judge(good, bad, *, higher_is_better: bool = True, claimed_change_percent: float | None = None,
          alpha: float = 0.01, noise_percent: float = 1.0, max_cv_percent: float = 5.0,
          emulated: bool = False, allow_emulated: bool = False) -> Judgement:
    """One look at all the samples (a fixed-size test: ``regtriage stats``): :func:`decide`
    with a single-look design at n = the smaller side."""
    n = max(2, min(len(good), len(bad)))
    d = Design((n,), alpha=alpha, noise_percent=noise_percent, max_cv_percent=max_cv_percent,
               allow_emulated=allow_emulated)
    return decide(good, bad, d, higher_is_better=higher_is_better, claimed_change_percent=claimed_change_percent,
                  emulated=emulated)


# ---------------------------------------------------------------------------------- simulation
def simulate(design: Design, *, cv_percent: float, change_percent: float, trials: int = 2000, seed: int = 0,
             claimed_change_percent: float | None = None, emulated: bool = False) -> dict[str, Any]:
    """Run the scheduler's loop (:func:`decide` at each look, ``next_runs`` more per build until
    it says stop) on normal samples with the given CV and true change (a throughput metric,
    mean 100).  Returns the verdict rates and run counts."""
    rng = np.random.default_rng(seed)
    counts = {v: 0 for v in VERDICTS}
    runs = []
    sd = cv_percent
    for _ in range(trials):
        good = list(rng.normal(100.0, sd, design.looks[0]))
        bad = list(rng.normal(100.0 * (1 + change_percent / 100), sd, design.looks[0]))
        while True:
            j = decide(good, bad, design, higher_is_better=True, claimed_change_percent=claimed_change_percent,
                       emulated=emulated)
            if j.stop:
                break
            good += list(rng.normal(100.0, sd, j.next_runs))
            bad += list(rng.normal(100.0 * (1 + change_percent / 100), sd, j.next_runs))
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
          emulated: bool = False) -> dict[str, Any]:
    """``regtriage lab power``: the procedure on A/A pairs (false positives: confirmed or
    improved) and on pairs with the claimed change (power: confirmed), the claim being
    ``change_percent`` in both."""
    aa = simulate(design, cv_percent=cv_percent, change_percent=0.0, trials=trials, seed=seed,
                  claimed_change_percent=change_percent, emulated=emulated)
    ab = simulate(design, cv_percent=cv_percent, change_percent=change_percent, trials=trials, seed=seed + 1,
                  claimed_change_percent=change_percent, emulated=emulated)
    fp = aa["rates"][CONFIRMED] + aa["rates"][IMPROVED]
    return {"cv_percent": cv_percent, "change_percent": change_percent, "trials": trials,
            "looks": list(design.looks), "alpha": design.alpha, "spending": design.spending,
            "emulated": emulated,
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
    g, b = _clean(good), _clean(bad)
    return bool(g.mean() != b.mean() and (g.max() < b.min() or b.max() < g.min()))


def power_table(design: Design, *, cv_percent: float, changes=TABLE_CHANGES, trials: int = 2000, seed: int = 0,
                emulated: bool = False, lkp_runs: int = 10) -> list[dict[str, Any]]:
    """:func:`power` for each change, with LKP's rule at ``lkp_runs`` per side beside it."""
    return [{**power(design, cv_percent=cv_percent, change_percent=c, trials=trials, seed=seed, emulated=emulated),
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
