"""Judge good-vs-bad benchmark samples: pure functions, no I/O.

Verdict rules (the claim is "the bad build is worse"):

* ``confirmed``: the bad build is worse with one-sided Welch's t-test p < alpha AND one-sided
  Mann-Whitney U p < alpha (both must agree: robust to an outlier and to non-normal data),
  AND the bootstrap confidence interval (level 1 - alpha) of the % change lies entirely on
  the regression side of zero.
* ``not-reproduced``: the interval lies within the noise band (default +-1%), or a claimed
  change was given and the interval rules it out (even its worst end is less than half of the
  claimed regression): a regression of the claimed size would have been seen.
* ``inconclusive``: anything else.  ``next_step`` says whether to add runs (sequential
  extension, up to a cap) before giving up.

The % change is ``100 * (mean(bad) - mean(good)) / mean(good)``, the number kernel reports
quote (LKP's %change).  Direction comes from the metric: for throughput (higher is better) a
regression is a negative change, for time or latency (lower is better) a positive one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

CONFIRMED, NOT_REPRODUCED, INCONCLUSIVE = "confirmed", "not-reproduced", "inconclusive"
LOWER_IS_BETTER_HINTS = ("latency", "time", "duration", "seconds", "overhead", "usecs", "msecs",
                         "nsecs", "_ns", "_us", "_ms", "boot", "elapsed", "wait", "cycles")


@dataclass
class Judgement:
    verdict: str
    change_percent: float
    ci: tuple[float, float]
    p_value: float  # one-sided Welch's t-test, regression direction
    p_mannwhitney: float
    n_good: int
    n_bad: int
    higher_is_better: bool
    mean_good: float
    mean_bad: float
    stdev_good: float
    stdev_bad: float
    claimed_change_percent: float | None = None
    reasons: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ci"] = [self.ci[0], self.ci[1]]
        return d


def higher_is_better(metric: str | None) -> bool:
    """Direction of a metric from its name (LKP convention: throughput up is good)."""
    if not metric:
        return True
    m = metric.lower()
    if any(h in m for h in ("per_sec", "per-sec", "/s", "ops", "throughput", "bandwidth", "bw",
                            "iops", "jobs-per-min", "score", "mb/s", "gb/s", "kb/s", "files_per_sec")):
        return True
    return not any(h in m for h in LOWER_IS_BETTER_HINTS)


def _pct_change(good_mean: np.ndarray | float, bad_mean: np.ndarray | float):
    return (bad_mean - good_mean) / good_mean * 100.0


def bootstrap_ci(good: np.ndarray, bad: np.ndarray, level: float, resamples: int = 4000,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the % change (each side resampled on its own)."""
    rng = np.random.default_rng(seed)
    g = good[rng.integers(0, len(good), size=(resamples, len(good)))].mean(axis=1)
    b = bad[rng.integers(0, len(bad), size=(resamples, len(bad)))].mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        changes = _pct_change(g, b)
    changes = changes[np.isfinite(changes)]
    if len(changes) == 0:
        return (math.nan, math.nan)
    lo, hi = np.quantile(changes, [(1 - level) / 2, 1 - (1 - level) / 2])
    return (float(lo), float(hi))


def _clean(samples) -> np.ndarray:
    arr = np.asarray([float(x) for x in samples], dtype=float)
    if arr.size and not np.all(np.isfinite(arr)):
        raise ValueError("samples must be finite numbers")
    return arr


def judge(good, bad, *, higher_is_better: bool = True, claimed_change_percent: float | None = None,
          alpha: float = 0.01, noise_percent: float = 1.0, resamples: int = 4000,
          seed: int = 0) -> Judgement:
    """Decide whether ``bad`` is worse than ``good``; see the module docstring."""
    from scipy import stats

    g, b = _clean(good), _clean(bad)
    if len(g) < 2 or len(b) < 2:
        raise ValueError("need at least 2 samples per side")
    if g.mean() == 0:
        raise ValueError("the good build's mean is 0: a % change is undefined")
    change = float(_pct_change(g.mean(), b.mean()))
    ci = bootstrap_ci(g, b, 1 - alpha, resamples, seed)
    # one-sided alternatives in the regression direction
    alternative = "less" if higher_is_better else "greater"  # bad vs good
    if np.ptp(np.concatenate([g, b])) == 0:
        p_welch = p_mwu = 1.0
    else:
        p_welch = float(stats.ttest_ind(b, g, equal_var=False, alternative=alternative).pvalue)
        if math.isnan(p_welch):  # both sides constant but different
            p_welch = 0.0 if (b.mean() < g.mean()) == higher_is_better else 1.0
        p_mwu = float(stats.mannwhitneyu(b, g, alternative=alternative).pvalue)
    sign = -1.0 if higher_is_better else 1.0  # regression = sign * change > 0
    worse_lo = min(sign * ci[0], sign * ci[1])  # least severe end of the interval
    worse_hi = max(sign * ci[0], sign * ci[1])  # most severe end
    reasons: list[str] = []
    if p_welch < alpha and p_mwu < alpha and worse_lo > 0:
        verdict = CONFIRMED
        reasons.append(f"bad build worse: Welch p={p_welch:.2g}, Mann-Whitney p={p_mwu:.2g} < {alpha}; "
                       f"{(1 - alpha) * 100:.0f}% interval [{ci[0]:+.2f}%, {ci[1]:+.2f}%] excludes 0")
        if claimed_change_percent is not None and abs(claimed_change_percent) > 0:
            claimed = abs(claimed_change_percent)
            if worse_hi < claimed / 2:
                reasons.append(f"smaller than claimed: at most {worse_hi:.1f}% vs {claimed:.1f}% claimed")
            elif worse_lo > claimed * 2:
                reasons.append(f"larger than claimed: at least {worse_lo:.1f}% vs {claimed:.1f}% claimed")
    elif -noise_percent <= ci[0] and ci[1] <= noise_percent:
        verdict = NOT_REPRODUCED
        reasons.append(f"interval [{ci[0]:+.2f}%, {ci[1]:+.2f}%] lies within the +-{noise_percent}% noise band")
    elif (claimed_change_percent is not None and abs(claimed_change_percent) > 0
          and worse_hi < abs(claimed_change_percent) / 2):
        verdict = NOT_REPRODUCED
        reasons.append(f"no regression of the claimed size: at most {max(worse_hi, 0):.1f}% "
                       f"vs {abs(claimed_change_percent):.1f}% claimed")
    else:
        verdict = INCONCLUSIVE
        reasons.append(f"Welch p={p_welch:.2g}, Mann-Whitney p={p_mwu:.2g}; interval "
                       f"[{ci[0]:+.2f}%, {ci[1]:+.2f}%] neither excludes 0 nor fits the noise band")
    return Judgement(verdict, round(change, 3), (round(ci[0], 3), round(ci[1], 3)), p_welch, p_mwu,
                     len(g), len(b), higher_is_better, float(g.mean()), float(b.mean()),
                     float(g.std(ddof=1)), float(b.std(ddof=1)), claimed_change_percent, reasons)


def next_step(j: Judgement, *, max_runs: int = 30, step: int = 10) -> int:
    """Runs to add per side (0: stop).  Only an inconclusive result is extended, up to the cap."""
    if j.verdict != INCONCLUSIVE:
        return 0
    have = min(j.n_good, j.n_bad)
    return max(0, min(step, max_runs - have))


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
