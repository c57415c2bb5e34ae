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
* **The unit is the boot** (the batch): with ``samples_per_batch`` > 1 the runs of one batch
  share one boot of the kernel (one guest, one KASLR layout, one page-cache state), and a
  second boot of the very same kernel can differ by more than the runs within a boot do (an A/A
  rerun on QEMU came out -2.5% with a within-boot CV of 0.6%).  Runs within a boot are not
  independent replicates, so each batch is reduced to one value (its geometric mean; the
  arithmetic mean if a value is not positive) and the tests, the CV, the boundaries and the
  looks count batches.  A look with fewer than 2 batches per build cannot estimate the
  boot-to-boot variation: it is never a decision, only "continue" (or ``inconclusive`` at the
  last look).  With one sample per batch (the default) units and runs are the same.

:func:`decide` is the one function the scheduler calls at every look;
:func:`bot.lab.power.simulate` runs the very same loop on simulated samples (``regtriage lab
power``, ``bench/stats_power.py``).
Direction comes from the metric: for throughput (higher is better) a regression is a negative
change, for time or latency (lower is better) a positive one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from bot.lab.boundaries import PAIRED_PATHS, SPENDING, boundaries, paired_boundaries  # noqa: F401 (API)

CONFIRMED, IMPROVED, NOT_REPRODUCED, INCONCLUSIVE = "confirmed", "improved", "not-reproduced", "inconclusive"
VERDICTS = (CONFIRMED, IMPROVED, NOT_REPRODUCED, INCONCLUSIVE)
MWU_GUARD = 0.05
LOWER_IS_BETTER_HINTS = ("latency", "time", "duration", "seconds", "overhead", "usecs", "msecs",
                         "nsecs", "_ns", "_us", "_ms", "boot", "elapsed", "wait", "cycles")
# [lab] options of the design, with defaults (bot.lab.plan validates and stores them in the plan)
ANALYSES = ("paired", "welch")
DESIGN_DEFAULTS = {"alpha": 0.01, "spending": "pocock", "futility_power": 0.10, "max_cv_percent": 5.0,
                   "allow_emulated": False, "noise_percent": 1.0, "analysis": "paired"}


def higher_is_better(metric: str | None) -> bool:
    """Direction of a metric from its name (LKP convention: throughput up is good)."""
    if not metric:
        return True
    m = metric.lower()
    if any(h in m for h in ("per_sec", "per-sec", "/s", "ops", "throughput", "bandwidth", "bw",
                            "iops", "jobs-per-min", "score", "mb/s", "gb/s", "kb/s", "files_per_sec")):
        return True
    return not any(h in m for h in LOWER_IS_BETTER_HINTS)


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
    analysis: str = "paired"
    per_unit: int = 1  # samples per batch (one boot): the batch is the unit of analysis

    def __post_init__(self):
        if not self.looks or any(n < 2 for n in self.looks) or list(self.looks) != sorted(set(self.looks)):
            raise ValueError("looks must be increasing run counts >= 2")
        if self.spending not in SPENDING:
            raise ValueError(f"spending must be one of {', '.join(SPENDING)}")
        if self.analysis not in ANALYSES:
            raise ValueError(f"analysis must be one of {', '.join(ANALYSES)}")
        if self.per_unit < 1:
            raise ValueError("per_unit (samples per batch) must be >= 1")

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
        return cls(tuple(looks), per_unit=max(int(s.get("samples_per_batch") or 1), 1), **kw)

    @property
    def max_runs(self) -> int:
        return self.looks[-1]

    def rounds(self, n: int) -> list[int]:
        """Batch sizes of ``n`` runs per build taken as the scheduler takes them: the first
        round of ``looks[0]`` runs, then one round per look, each cut into batches of
        ``per_unit`` (the last batch of a round carries the remainder, as
        :meth:`bot.lab.backends.base.RunSpec.schedule` does; runs past the last look form
        a round of their own)."""
        sizes: list[int] = []
        done = 0
        for m in [*self.looks, max(n, self.looks[-1])]:
            step = min(m, n) - done
            if step <= 0:
                continue
            per = min(self.per_unit, step)
            k = math.ceil(step / per)
            sizes += [per] * (k - 1) + [step - per * (k - 1)]
            done += step
        return sizes

    @property
    def unit_looks(self) -> tuple[int, ...]:
        """Batches (units) per build at each look."""
        return tuple(len(self.rounds(n)) for n in self.looks)

    def levels(self, paired: bool | None = None) -> tuple[float, ...]:
        """Nominal one-sided level of each look, per direction, for the paired t statistic
        (``paired``; default: this design's analysis) or Welch's, calibrated on the batches per
        look.  Looks with fewer than 2 batches spend nothing (they cannot test): their share of
        alpha passes to the first look that can."""
        units = self.unit_looks
        valid = tuple(u for u in units if u >= 2)
        if not valid:
            return (0.0,) * len(units)
        if self.analysis == "paired" if paired is None else paired:
            lv = paired_boundaries(valid, self.alpha / 2, self.spending)
        else:
            lv = boundaries(valid, self.alpha / 2, self.spending)
        return (0.0,) * (len(units) - len(valid)) + tuple(lv)

    def look_index(self, n: int) -> int:
        """0-based index of the look that ``n`` runs per side have reached (the last planned
        look <= n; a short first round counts as the first look)."""
        k = 0
        for i, m in enumerate(self.looks):
            if n >= m:
                k = i
        return k

    def to_dict(self) -> dict:
        return {**asdict(self), "looks": list(self.looks), "unit_looks": list(self.unit_looks),
                "levels": list(self.levels())}


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
    analysis: str = "welch"  # "paired": the i-th samples of both builds as pairs; "welch": two samples
    units_good: int = 0  # batches (boots) judged: with per_unit > 1 each batch is one value
    units_bad: int = 0
    per_unit: int = 1

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


def clean_samples(samples) -> np.ndarray:
    arr = np.asarray([float(x) for x in samples], dtype=float)
    if arr.size and not np.all(np.isfinite(arr)):
        raise ValueError("samples must be finite numbers")
    return arr


def fmt_pct(x: float | None) -> str:
    """One end of an interval for people: ``-3.21%``; beyond +-1000% (a throughput cannot fall
    below -100%, so only the upper end) or missing, the interval is open on that side."""
    if x is None or not math.isfinite(x):
        return "unbounded"
    if abs(x) >= 1000:
        return ">+1000%" if x > 0 else "<-1000%"
    return f"{x:+.2f}%"


def to_units(x: np.ndarray, sizes: list[int]) -> np.ndarray:
    """One value per batch (the unit): the geometric mean of its runs, the arithmetic mean when
    a value is not positive.  ``sizes``: the batch sizes in order (:meth:`Design.rounds`)."""
    if len(sizes) == len(x):
        return x
    if sum(sizes) != len(x):
        raise ValueError(f"{len(x)} samples do not fill batches of {sizes}")
    parts = np.split(x, np.cumsum(sizes)[:-1])
    if np.all(x > 0):
        return np.asarray([math.exp(float(np.log(p).mean())) for p in parts])
    return np.asarray([float(p.mean()) for p in parts])


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


def _paired(g: np.ndarray, b: np.ndarray) -> tuple[float, float, float, bool, np.ndarray]:
    """(estimate, standard error, df, log scale?, the pair differences) of the change bad vs
    good from the i-th good and the i-th bad sample taken as a pair.  The backends run the
    batches alternately (abab / abba), so the i-th samples of the two builds ran next to each
    other: a host load that drifts or switches during the rerun moves both members of a pair
    and cancels in their difference, where the two-sample test would count it as signal."""
    log = bool(np.all(g > 0) and np.all(b > 0))
    if log:
        d = np.log(b) - np.log(g)
    else:
        d = (b - g) / abs(float(g.mean()))
    n = len(d)
    return float(d.mean()), float(d.std(ddof=1)) / math.sqrt(n), float(n - 1), log, d


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


@dataclass
class _Test:
    """The test statistic of one look: the change on the analysis scale, its standard error and
    df, the look's nominal level and the one-sided p-values (regression / improvement side)."""
    g: np.ndarray
    b: np.ndarray
    higher_is_better: bool
    paired: bool
    levels: tuple[float, ...]
    a_k: float
    est: float
    se: float
    df: float
    log: bool
    diffs: np.ndarray | None
    sign: float  # regression = sign * change > 0
    p_reg: float = 1.0
    p_imp: float = 1.0
    half: float = 0.0  # half-width of the repeated interval

    @property
    def name(self) -> str:
        return "paired t" if self.paired else "Welch"

    @property
    def rank(self) -> str:
        return "signed-rank" if self.paired else "Mann-Whitney"

    @property
    def reg(self) -> float:  # > 0: worse
        return self.sign * self.est

    def rank_p(self, worse: bool) -> float:
        """One-sided rank test (only where a boundary is crossed): signed-rank on the pair
        differences, else Mann-Whitney U.  Its smallest attainable p is also the procedure's
        minimum of evidence: a one-sided signed-rank test on n pairs cannot go below 2**-n, so
        a paired verdict needs at least 5 units (boots) per build."""
        from scipy import stats

        if np.ptp(np.concatenate([self.g, self.b])) == 0:
            return 1.0
        bad_less = self.higher_is_better == worse  # "worse" for throughput: bad less than good
        alternative = "less" if bad_less else "greater"
        if self.diffs is not None:  # Wilcoxon signed-rank on the pair differences (bad - good)
            if not np.any(self.diffs):
                return 1.0
            return float(stats.wilcoxon(self.diffs, alternative=alternative).pvalue)
        return float(stats.mannwhitneyu(self.b, self.g, alternative=alternative).pvalue)


def _test(g: np.ndarray, b: np.ndarray, design: Design, k: int, higher_is_better: bool) -> _Test:
    from scipy.special import stdtr, stdtrit

    paired = design.analysis == "paired" and len(g) == len(b)
    levels = design.levels(paired)
    if paired:
        est, se, df, log, diffs = _paired(g, b)
    else:
        (est, se, df, log), diffs = _welch(g, b), None
    t = _Test(g, b, higher_is_better, paired, levels, levels[k], est, se, df, log, diffs,
              -1.0 if higher_is_better else 1.0)
    if se > 0:
        t_stat = t.reg / se
        t.p_reg, t.p_imp = float(stdtr(df, -t_stat)), float(stdtr(df, t_stat))
        t.half = -float(stdtrit(df, t.a_k)) * se if t.a_k > 0 else math.inf
    else:  # both sides constant
        t.p_reg = 0.0 if t.reg > 0 else 1.0
        t.p_imp = 0.0 if t.reg < 0 else 1.0
    return t


def _gate_problems(cv: float, design: Design, emulated: bool) -> list[str]:
    """Why the noise gate fails (empty: it passes)."""
    out = []
    if cv > design.max_cv_percent:
        out.append(f"CV {cv:.1f}% > {design.max_cv_percent:g}%")
    if emulated and not design.allow_emulated:
        out.append("emulated machine")
    return out


def decide(good, bad, design: Design, *, higher_is_better: bool = True,
           claimed_change_percent: float | None = None, emulated: bool = False) -> Judgement:
    """The verdict at the current look (the number of runs per build so far picks it) and how
    many runs per build to add before the next look (0: stop).  See the module docstring."""
    g, b = clean_samples(good), clean_samples(bad)
    if len(g) < 2 or len(b) < 2:
        raise ValueError("need at least 2 samples per side")
    if g.mean() == 0:
        raise ValueError("the good build's mean is 0: a % change is undefined")
    n = min(len(g), len(b))
    k = design.look_index(n)
    gu, bu = to_units(g, design.rounds(len(g))), to_units(b, design.rounds(len(b)))
    if min(len(gu), len(bu)) < 2:
        return _one_boot(g, b, gu, bu, design, k, n, higher_is_better, claimed_change_percent, emulated)
    t = _test(gu, bu, design, k, higher_is_better)
    sign, log, a_k, p_reg, p_imp = t.sign, t.log, t.a_k, t.p_reg, t.p_imp
    lo, hi = t.est - t.half, t.est + t.half
    ci = (_pct(lo, log), _pct(hi, log)) if math.isfinite(t.half) else (-math.inf, math.inf)
    reg_lo, reg_hi = min(sign * lo, sign * hi), max(sign * lo, sign * hi)  # regression-side ends
    cv = _cv_percent(gu, bu)
    gate_problems = _gate_problems(cv, design, emulated)
    where = (f"CV {cv:.1f}% over {_runs_text(g, b, gu, bu)}" + (" on an emulated machine" if emulated else ""))
    ci_text = (f"{(1 - design.alpha) * 100:g}% repeated interval [{fmt_pct(ci[0])}, {fmt_pct(ci[1])}]")
    look_text = f"look {k + 1}/{len(design.looks)}"
    claimed = abs(claimed_change_percent) if claimed_change_percent else None

    def to_reg(p: float) -> float:  # a regression of p% -> the regression-side analysis scale
        return sign * _unpct(max(sign * p, -99.9), log)  # a throughput cannot fall by 100% or more

    def from_reg(r: float) -> float:  # the inverse: size of the regression in %
        return sign * _pct(sign * r, log)

    reasons: list[str] = []
    cp = None
    next_runs = 0
    p_mwu = t.rank_p(True) if p_reg < a_k else math.nan
    p_mwu_imp = t.rank_p(False) if p_imp < a_k else math.nan
    if p_reg < a_k and p_mwu <= MWU_GUARD:
        verdict = CONFIRMED
        reasons.append(f"bad build worse at {look_text}: {t.name} p={p_reg:.2g} < {a_k:.2g} (boundary), "
                       f"{t.rank} p={p_mwu:.2g}; {ci_text} excludes 0 ({where})")
        if claimed:
            if reg_hi < to_reg(claimed / 2):
                reasons.append(f"smaller than claimed: at most {from_reg(reg_hi):.1f}% vs {claimed:.1f}% claimed")
            elif reg_lo > to_reg(claimed * 2):
                reasons.append(f"larger than claimed: at least {from_reg(reg_lo):.1f}% vs {claimed:.1f}% claimed")
    elif p_imp < a_k and p_mwu_imp <= MWU_GUARD:
        verdict = IMPROVED
        reasons.append(f"bad build BETTER at {look_text}: {t.name} p={p_imp:.2g} < {a_k:.2g} (boundary), "
                       f"{t.rank} p={p_mwu_imp:.2g}; {ci_text} lies on the improvement side ({where})")
    else:
        if p_reg < a_k or p_imp < a_k:  # the t-test crossed, the rank test did not agree
            side = "worse" if p_reg < a_k else "better"
            undecided = (f"{t.name} p={min(p_reg, p_imp):.2g} crosses the boundary {a_k:.2g} ({side}) but "
                         f"{t.rank} p={np.nanmin([p_mwu, p_mwu_imp]):.2g} > {MWU_GUARD} disagrees (an outlier, "
                         f"or too few runs for the rank test)")
        else:
            undecided = f"no boundary crossed ({t.name} p={p_reg:.2g}, boundary {a_k:.2g})"
        if claimed:
            rules_out = reg_hi < to_reg(claimed / 2) and not p_reg < a_k
            what = (f"rules out half of the claimed {claimed:.1f}% regression (at most "
                    f"{max(from_reg(reg_hi), 0):.1f}%)")
        else:
            rules_out = -design.noise_percent <= ci[0] and ci[1] <= design.noise_percent
            what = f"lies within the +-{design.noise_percent:g}% noise band"
        interest = to_reg(claimed if claimed else 2 * design.noise_percent)
        verdict, cp, next_runs, reason = _undecided(
            t, design, n, k, rules_out=rules_out, gate_problems=gate_problems, cv=cv, claimed=claimed,
            interest=interest, texts={"what": what, "where": where, "ci": ci_text, "look": look_text,
                                      "undecided": undecided, "runs": f"{len(g)}+{len(b)}"}, ci=ci)
        reasons.append(reason)
    return Judgement(verdict, round(_pct(t.est, log), 3), (round(ci[0], 3), round(ci[1], 3)), p_reg, p_imp,
                     p_mwu_imp if verdict == IMPROVED else p_mwu,
                     len(g), len(b), higher_is_better, float(g.mean()), float(b.mean()), float(np.median(g)),
                     float(np.median(b)), float(g.std(ddof=1)), float(b.std(ddof=1)), round(cv, 3), k + 1,
                     list(design.looks), a_k, design.alpha, 1 - design.alpha, emulated, not gate_problems, cp,
                     next_runs, claimed_change_percent, reasons, analysis="paired" if t.paired else "welch",
                     units_good=len(gu), units_bad=len(bu), per_unit=design.per_unit)


def _cv_percent(*sides: np.ndarray) -> float:
    """The larger side's coefficient of variation, in % (infinite for a side whose mean is 0)."""
    return max(float(x.std(ddof=1) / abs(x.mean())) * 100 if x.mean() else math.inf for x in sides)


def _runs_text(g: np.ndarray, b: np.ndarray, gu: np.ndarray, bu: np.ndarray) -> str:
    if len(gu) == len(g) and len(bu) == len(b):
        return f"{len(g)}+{len(b)} runs"
    return f"{len(gu)}+{len(bu)} boots ({len(g)}+{len(b)} runs)"


def _one_boot(g, b, gu, bu, design: Design, k: int, n: int, higher_is_better: bool,
              claimed_change_percent: float | None, emulated: bool) -> Judgement:
    """Fewer than 2 batches (boots) of a build so far: no test, only the estimate; continue to
    the next look, or inconclusive at the last."""
    log = bool(np.all(g > 0) and np.all(b > 0))
    est = float(np.log(bu).mean() - np.log(gu).mean()) if log else float(bu.mean() - gu.mean()) / abs(float(gu.mean()))
    last = k == len(design.looks) - 1
    why = (f"{len(gu)}+{len(bu)} boots ({len(g)}+{len(b)} runs, up to {design.per_unit} per boot): runs within "
           f"one boot are not independent, and the boot-to-boot variation cannot be estimated from one boot "
           f"per build")
    reason = (f"inconclusive: {why} (the maximum of {design.max_runs} runs was reached)" if last
              else f"continue: {why}")
    next_runs = 0 if last else design.looks[k + 1] - n
    cv = _cv_percent(g, b)
    return Judgement(INCONCLUSIVE, round(_pct(est, log), 3), (-math.inf, math.inf), 1.0, 1.0, math.nan,
                     len(g), len(b), higher_is_better, float(g.mean()), float(b.mean()), float(np.median(g)),
                     float(np.median(b)), float(g.std(ddof=1)), float(b.std(ddof=1)), round(cv, 3), k + 1,
                     list(design.looks), 0.0, design.alpha, 1 - design.alpha, emulated, False, None,
                     next_runs, claimed_change_percent, [reason], analysis=design.analysis,
                     units_good=len(gu), units_bad=len(bu), per_unit=design.per_unit)


def _undecided(t: _Test, design: Design, n: int, k: int, *, rules_out: bool, gate_problems: list[str],
               cv: float, claimed: float | None, interest: float, texts: dict[str, str],
               ci: tuple[float, float]) -> tuple[str, float | None, int, str]:
    """No efficacy boundary crossed: not-reproduced (the interval rules the claim out and the
    noise gate passes), else inconclusive by futility or at the maximum, else continue.
    Returns (verdict, conditional power, runs to add, reason)."""
    last = k == len(design.looks) - 1
    if rules_out and not gate_problems:
        return NOT_REPRODUCED, None, 0, (f"{texts['ci']} {texts['what']} at {texts['look']}; noise gate passed "
                                         f"({texts['where']})")
    if rules_out:
        label = "too noisy" if cv > design.max_cv_percent else "emulated machine"
        return INCONCLUSIVE, None, 0, (f"{label}: {texts['where']} ({', '.join(gate_problems)}); the {texts['ci']} "
                                       f"{texts['what']}, but not-reproduced needs the noise gate to pass")
    cp = None
    if t.se > 0 and not last and not (t.p_reg < t.a_k or t.p_imp < t.a_k):
        units = design.unit_looks
        cp = _conditional_power(t.reg / t.se, len(t.g), max(units[-1], len(t.g)), interest / t.se, t.levels[-1],
                                t.df)
    size = f"{claimed:.1f}% (claimed)" if claimed else f"{2 * design.noise_percent:g}%"
    if cp is not None and cp < design.futility_power:
        noisy = cv > design.max_cv_percent or t.reg > 0
        return INCONCLUSIVE, cp, 0, (f"{'too noisy' if noisy else 'futile'}: {texts['where']}; even "
                                     f"{design.max_runs}+{design.max_runs} runs would confirm a {size} regression "
                                     f"with probability {cp:.0%} (< {design.futility_power:.0%}); {texts['ci']}")
    if last:
        nr = (f"half of the claimed {claimed:.1f}% regression" if claimed
              else f"a change beyond the +-{design.noise_percent:g}% noise band")
        zero = "includes 0" if ci[0] <= 0 <= ci[1] else "excludes 0"
        return INCONCLUSIVE, cp, 0, (f"{texts['undecided']} after {texts['runs']} runs (the maximum): {texts['ci']} "
                                     f"{zero} and does not rule out {nr}; {texts['where']}")
    return INCONCLUSIVE, cp, design.looks[k + 1] - n, (
        f"continue: {texts['undecided']} at {texts['look']}; {texts['ci']}; {texts['where']}"
        + (f"; conditional power {cp:.0%}" if cp is not None else ""))


def judge(good, bad, *, higher_is_better: bool = True, claimed_change_percent: float | None = None,
          alpha: float = 0.01, noise_percent: float = 1.0, max_cv_percent: float = 5.0,
          emulated: bool = False, allow_emulated: bool = False, analysis: str = "welch") -> Judgement:
    """One look at all the samples (a fixed-size test: ``regtriage stats``): :func:`decide`
    with a single-look design at n = the smaller side.  Two samples of unknown run order are
    compared with Welch's test; ``analysis="paired"`` when the i-th values ran side by side."""
    n = max(2, min(len(good), len(bad)))
    d = Design((n,), alpha=alpha, noise_percent=noise_percent, max_cv_percent=max_cv_percent,
               allow_emulated=allow_emulated, analysis=analysis)
    return decide(good, bad, d, higher_is_better=higher_is_better, claimed_change_percent=claimed_change_percent,
                  emulated=emulated)
