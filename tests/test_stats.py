"""bot.lab.stats and bot.lab.power: the group-sequential design, its verdicts on simulated samples, its error
rates (seeded simulations of the whole procedure), and the `stats` / `lab power` commands."""

import json
import re

import numpy as np
import pytest

from bot.lab.power import lkp_changed, power, run_order, simulate, wilson
from bot.lab.stats import (CONFIRMED, IMPROVED, INCONCLUSIVE, NOT_REPRODUCED, Design, boundaries, decide,
                           higher_is_better, judge, paired_boundaries)

DESIGN = Design.from_settings({"runs": 5, "extend_step": 5, "max_runs": 20})


def samples(mean, cv, n, seed):
    return np.random.default_rng(seed).normal(mean, mean * cv, n)


# ---------------------------------------------------------------------------------- the design
def test_looks_come_from_the_plan():
    assert DESIGN.looks == (5, 10, 15, 20) and DESIGN.max_runs == 20
    assert Design.from_settings({"runs": 3, "extend_step": 3, "max_runs": 6}).looks == (3, 6)
    assert Design.from_settings({"runs": 5, "extend_step": 5, "max_runs": 8}).looks == (5, 8)
    assert Design.from_settings({"runs": 10, "extend_step": 5, "max_runs": 4}).looks == (10,)
    assert [DESIGN.look_index(n) for n in (3, 5, 9, 10, 20, 25)] == [0, 0, 0, 1, 3, 3]
    with pytest.raises(ValueError):
        Design((5, 10), spending="bonferroni")


def test_boundaries_spend_alpha_over_the_looks():
    from scipy.stats import norm

    assert boundaries((10,), 0.005, "pocock") == pytest.approx((0.005,))
    poc = boundaries((5, 10, 15, 20), 0.005, "pocock")
    obf = boundaries((5, 10, 15, 20), 0.005, "obrien-fleming")
    # each look is stricter than a lone test at 0.005, the sum of the nominal levels exceeds the
    # budget only by the looks' correlation
    assert all(a < 0.005 for a in poc + obf) and sum(poc) > 0.005
    assert obf[0] < 1e-6 < obf[-1] and list(obf) == sorted(obf)  # O'Brien-Fleming: strict early
    assert max(poc) / min(poc) < 1.5  # Pocock-type: about constant
    # the joint probability of crossing, by simulation of the normal look statistics
    rng = np.random.default_rng(0)
    incr = rng.standard_normal((200_000, 4))
    z = np.cumsum(incr, axis=1) / np.sqrt(np.arange(1, 5))
    for levels in (poc, obf):
        crossed = (z > norm.isf(np.array(levels))).any(axis=1).mean()
        assert crossed == pytest.approx(0.005, abs=0.0006)


def test_false_positive_rate_of_the_whole_procedure():
    """A/A pairs through all looks: confirmed or improved in <= 1% (seeded).  Once with the
    efficacy boundaries alone (no futility, no not-reproduced stop: the worst case the design
    bounds), once with the default rules and a claimed change."""
    for analysis in ("paired", "welch"):
        bare = Design(DESIGN.looks, futility_power=0.0, noise_percent=0.0, max_cv_percent=1000.0, analysis=analysis)
        r = simulate(bare, cv_percent=1.2, change_percent=0.0, trials=6000, seed=11)
        fp = r["rates"][CONFIRMED] + r["rates"][IMPROVED]
        # the budget, within the simulation's own error (paired: 1.0-1.1% over 3 x 20,000 trials, README)
        assert wilson(round(fp * 6000), 6000)[0] <= 0.01 and fp <= 0.0125, (analysis, fp)
        assert r["rates"][CONFIRMED] <= 0.0075
        assert r["mean_runs"] > 19  # nothing else stops it
    p = power(DESIGN, cv_percent=1.2, change_percent=-3.5, trials=2000, seed=3)
    assert p["false_positive_rate"] <= 0.01
    assert p["power"] >= 0.95 and p["mean_runs"] <= 12 and p["max_runs"] == 20


def test_uncorrected_looks_would_inflate_the_rate():
    """The same simulation with each look at the fixed-test level (the old scheduler): about
    three times the false positives (2.77% over 20,000 trials) -- what the spending prevents."""
    class Naive(Design):
        def levels(self, paired=None):
            return (self.alpha / 2,) * len(self.looks)

    naive = Naive(DESIGN.looks, futility_power=0.0, noise_percent=0.0, max_cv_percent=1000.0)
    r = simulate(naive, cv_percent=1.2, change_percent=0.0, trials=2000, seed=11)
    assert r["rates"][CONFIRMED] + r["rates"][IMPROVED] > 0.015


def test_paired_boundaries_hold_for_the_paired_t_statistic():
    """The calibrated levels, applied to paired t statistics simulated independently of the
    calibration (another seed, other noise), let alpha_side through over all looks; the normal
    approximation's levels let more through with 4 df at the first look."""
    from scipy.special import stdtr

    looks = DESIGN.looks
    rng = np.random.default_rng(99)
    d = rng.normal(0.0, 3.0, (200_000, looks[-1]))
    crossed = {}
    for name, levels in (("paired", paired_boundaries(looks, 0.005, "pocock")),
                         ("normal", boundaries(looks, 0.005, "pocock"))):
        alive = np.ones(len(d), dtype=bool)
        for n, a in zip(looks, levels):
            t = d[:, :n].mean(axis=1) / (d[:, :n].std(axis=1, ddof=1) / np.sqrt(n))
            alive &= ~(stdtr(n - 1, -t) < a)
        crossed[name] = 1 - alive.mean()
    assert crossed["paired"] == pytest.approx(0.005, abs=0.0005)
    assert crossed["normal"] > crossed["paired"] + 0.0003
    # seeded: a fresh computation (not the cached one) gives the same levels every time
    first = paired_boundaries(looks, 0.005, "pocock")
    paired_boundaries.cache_clear()
    assert paired_boundaries(looks, 0.005, "pocock") == first


def test_pairs_follow_the_run_order():
    assert run_order(3, "abab") == ["good", "bad"] * 3
    assert run_order(4, "abba") == ["good", "bad", "bad", "good", "good", "bad", "bad", "good"]
    assert run_order(2, "blocked") == ["good", "good", "bad", "bad"]


def test_paired_analysis_sees_through_a_drifting_host():
    """Runs alternate and the host slows down during the rerun (other jobs start): every run is
    a few % slower than the one before.  The bad build is 3% slower.  The two-sample test counts
    the drift as noise and cannot tell; the pairs, which ran side by side, can.  The same drift
    on an A/A pair is not called a regression."""
    rng = np.random.default_rng(4)
    for change, expect in ((-3.0, CONFIRMED), (0.0, None)):
        labels = run_order(10, "abba")
        speed = 100 * np.exp(-0.015 * np.arange(len(labels)))  # -1.5% per run: -26% over the rerun
        vals = {"good": [], "bad": []}
        for lab, s in zip(labels, speed):
            vals[lab].append(s * (1 + change / 100 if lab == "bad" else 1) * (1 + rng.normal(0, 0.003)))
        paired = decide(vals["good"], vals["bad"], DESIGN, claimed_change_percent=-3)
        welch = decide(vals["good"], vals["bad"], Design(DESIGN.looks, analysis="welch"), claimed_change_percent=-3)
        assert paired.analysis == "paired" and welch.analysis == "welch"
        assert welch.verdict == INCONCLUSIVE
        if expect:
            assert paired.verdict == expect and paired.ci[1] < 0 and "paired t" in paired.reasons[0]
            assert "signed-rank" in paired.reasons[0]
        else:
            assert paired.verdict not in (CONFIRMED, IMPROVED)
    # unequal counts cannot be paired: the two-sample test, said so in the judgement
    assert decide([100, 101, 99, 100, 102], [97, 96, 98, 97], DESIGN).analysis == "welch"


def test_shared_host_false_positives_and_power():
    """`lab power --load-cv`: on a host whose speed drifts (10% CV, consecutive runs correlated
    0.9), A/A pairs are still confirmed or improved about alpha of the time with the paired
    analysis, and a 3.5% regression is still found in about half the reruns, where the
    two-sample test finds almost none."""
    kw = {"cv_percent": 1.2, "change_percent": -3.5, "trials": 1500, "seed": 5, "load_cv_percent": 10.0}
    p = power(DESIGN, **kw)
    w = power(Design(DESIGN.looks, analysis="welch"), **kw)
    assert wilson(round(p["false_positive_rate"] * 1500), 1500)[0] <= 0.01
    assert p["power"] > 0.35 and w["power"] < 0.1 and p["load_cv_percent"] == 10.0


# ---------------------------------------------------------------------------------- boots as units
BOOTS = Design.from_settings({"runs": 5, "extend_step": 5, "max_runs": 20, "samples_per_batch": 5})


def test_batches_of_one_boot_are_the_units():
    """With 5 runs per boot the looks count boots: 1, 2, 3, 4 per build; a look with one boot
    per build spends nothing; rounds are cut into batches as the backends cut them."""
    assert BOOTS.per_unit == 5 and BOOTS.looks == (5, 10, 15, 20) and BOOTS.unit_looks == (1, 2, 3, 4)
    assert BOOTS.levels()[0] == 0.0 and all(x > 0 for x in BOOTS.levels()[1:])
    d = Design.from_settings({"runs": 6, "extend_step": 6, "max_runs": 12, "samples_per_batch": 4})
    assert d.rounds(6) == [4, 2] and d.rounds(12) == [4, 2, 4, 2] and d.unit_looks == (2, 4)
    assert DESIGN.per_unit == 1 and DESIGN.unit_looks == DESIGN.looks


def test_one_boot_per_build_is_never_a_verdict():
    """The A/A rerun of the third session's CI: two boots of the same kernel, 5 runs each,
    2.5% apart with a within-boot CV of 0.6%.  Runs as units call that confirmed; boots as
    units cannot judge one boot per build and ask for more."""
    good = samples(148.9, 0.006, 5, 11)
    bad = samples(145.2, 0.006, 5, 12)
    assert decide(good, bad, DESIGN, claimed_change_percent=-10).verdict == CONFIRMED  # runs as units
    j = decide(good, bad, BOOTS, claimed_change_percent=-10, emulated=True)
    assert j.verdict == INCONCLUSIVE and j.next_runs == 5 and (j.units_good, j.units_bad) == (1, 1)
    assert j.reasons[0].startswith("continue") and "boot-to-boot variation" in j.reasons[0]
    assert j.to_dict()["ci"] == [None, None]  # no interval from one boot
    last = Design.from_settings({"runs": 5, "extend_step": 5, "max_runs": 5, "samples_per_batch": 5})
    j = decide(good, bad, last, claimed_change_percent=-10)
    assert j.verdict == INCONCLUSIVE and j.stop and j.reasons[0].startswith("inconclusive")


def test_boot_means_are_judged_and_a_real_change_still_confirms():
    """Five boots per build whose means differ by boot-to-boot noise only: A/A not confirmed;
    a clear drop across every boot: confirmed, with boots in the reason."""
    rng = np.random.default_rng(3)
    d = Design.from_settings({"runs": 25, "extend_step": 5, "max_runs": 30, "samples_per_batch": 5})

    def boots(mean, k):
        return [x for _ in range(k) for x in rng.normal(mean * np.exp(rng.normal(0, 0.02)), mean * 0.005, 5)]

    aa = decide(boots(100, 5), boots(100, 5), d)
    assert aa.verdict != CONFIRMED and aa.units_good == 5
    drop = decide(boots(100, 5), boots(80, 5), d)
    assert drop.verdict == CONFIRMED and "5+5 boots (25+25 runs)" in drop.reasons[0]


def test_boot_to_boot_variation_keeps_the_false_positive_rate():
    """`lab power --runs-per-boot 5 --boot-cv 2`: each boot shifts its 5 runs by its own
    factor (CV 2%, runs within it 0.6%); A/A pairs stay within alpha with boots as units, where
    runs as units would confirm most of them."""
    d = Design.from_settings({"runs": 25, "extend_step": 25, "max_runs": 50, "samples_per_batch": 5})
    kw = {"cv_percent": 0.6, "change_percent": 0.0, "trials": 600, "seed": 9, "boot_cv_percent": 2.0}
    boots = simulate(d, **kw)
    fp = boots["rates"][CONFIRMED] + boots["rates"][IMPROVED]
    assert wilson(round(fp * 600), 600)[0] <= 0.01
    runs = simulate(Design(d.looks), runs_per_boot=5, **kw)  # the same layout judged run by run
    assert runs["rates"][CONFIRMED] + runs["rates"][IMPROVED] > 0.2


# ---------------------------------------------------------------------------------- verdicts
def test_clear_throughput_drop_is_confirmed_at_the_first_look():
    j = decide(samples(100, 0.012, 5, 1), samples(94, 0.012, 5, 2), DESIGN, claimed_change_percent=-6)
    assert j.verdict == CONFIRMED and j.stop and j.look == 1
    assert -8 < j.change_percent < -4 and j.ci[1] < 0 and j.p_value < j.nominal_alpha
    assert "smaller than claimed" not in " ".join(j.reasons)


def test_improvement_is_its_own_verdict():
    j = decide(samples(100, 0.01, 5, 3), samples(110, 0.01, 5, 4), DESIGN)
    assert j.verdict == IMPROVED and j.stop and j.change_percent > 5 and j.ci[0] > 0
    assert "BETTER" in j.reasons[0] and "neither" not in j.reasons[0]
    j = judge(samples(10, 0.01, 10, 5), samples(9, 0.01, 10, 6), higher_is_better=False)  # latency went down
    assert j.verdict == IMPROVED


def test_direction_lower_is_better():
    good, bad = samples(10, 0.01, 10, 5), samples(11, 0.01, 10, 6)  # latency went up
    assert judge(good, bad, higher_is_better=False).verdict == CONFIRMED
    assert judge(good, bad, higher_is_better=True).verdict == IMPROVED


def test_not_reproduced_needs_the_interval_and_the_noise_gate():
    good, bad = samples(100, 0.01, 10, 9), samples(100, 0.01, 10, 10)
    j = decide(good, bad, DESIGN, claimed_change_percent=-13.6)
    assert j.verdict == NOT_REPRODUCED and j.stop and j.noise_gate
    assert "rules out half of the claimed 13.6%" in j.reasons[0]
    # the same samples on an emulated machine: inconclusive, saying why
    j = decide(good, bad, DESIGN, claimed_change_percent=-13.6, emulated=True)
    assert j.verdict == INCONCLUSIVE and j.stop and not j.noise_gate
    assert "emulated machine" in j.reasons[0] and "over 10+10 runs" in j.reasons[0]
    allowed = Design(DESIGN.looks, allow_emulated=True)
    assert decide(good, bad, allowed, claimed_change_percent=-13.6, emulated=True).verdict == NOT_REPRODUCED
    # too noisy: CV ~25% over 5+5 runs (the case) is never "not-reproduced"
    g, b = samples(100, 0.25, 5, 12), samples(100, 0.25, 5, 13)
    for claim in (-3.5, -10.0):
        j = decide(g, b, DESIGN, claimed_change_percent=claim, emulated=True)
        assert j.verdict == INCONCLUSIVE and j.stop, j.reasons
        assert j.reasons[0].startswith("too noisy: CV") and "over 5+5 runs on an emulated machine" in j.reasons[0]
    # no claim: the interval must lie within the noise band
    j = decide(samples(100, 0.002, 10, 7), samples(100, 0.002, 10, 8), DESIGN)
    assert j.verdict == NOT_REPRODUCED and -1 <= j.ci[0] and j.ci[1] <= 1


def test_futility_stops_hopeless_noise_early():
    g, b = samples(100, 0.08, 5, 11), samples(97, 0.08, 5, 12)
    j = decide(g, b, DESIGN, claimed_change_percent=-3.0)
    assert j.verdict == INCONCLUSIVE and j.next_runs == 0 and j.conditional_power < 0.1
    assert "probability" in j.reasons[0] and "20+20 runs" in j.reasons[0]
    r = simulate(DESIGN, cv_percent=8.0, change_percent=0.0, claimed_change_percent=-3.0, trials=200, seed=1)
    assert r["mean_runs"] < 8  # not four rounds every time


def test_undecided_look_continues_to_the_next_one():
    g, b = [100.0, 101.5, 98.5, 100.4, 99.6], [99.0, 97.5, 100.5, 99.4, 98.6]
    j = decide(g, b, DESIGN, claimed_change_percent=-3.0)
    assert j.verdict == INCONCLUSIVE and j.next_runs == 5 and j.look == 1 and j.reasons[0].startswith("continue")
    j = decide(g * 4, b * 4, DESIGN, claimed_change_percent=-3.0)
    assert j.look == 4 and j.stop


def test_rank_test_disagreement_is_the_reason_given():
    j = judge([100, 100.5], [90, 90.4])  # t crosses; 2+2 runs cannot pass Mann-Whitney at 0.05
    assert j.verdict == INCONCLUSIVE and j.ci[1] < 0
    assert "Mann-Whitney" in j.reasons[0] and "excludes 0" in j.reasons[0] and "includes 0" not in j.reasons[0]
    assert judge([100, 100.5, 99.5], [90, 90.4, 89.6]).verdict == CONFIRMED  # 3+3 can


def test_one_outlier_does_not_confirm():
    good = [100.0, 100.2, 99.9, 100.1, 99.8, 100.0, 100.3, 99.7]
    bad = [100.1, 99.9, 100.0, 100.2, 99.8, 100.1, 99.9, 60.0]
    assert judge(good, bad).verdict != CONFIRMED


def test_claims_of_any_size_are_judged():
    g, b = samples(100, 0.01, 5, 1), samples(40, 0.01, 5, 2)
    for claim in (-60.0, -150.0, 300.0):  # twice 60%, or a mis-read claim, on a throughput metric
        assert decide(g, b, DESIGN, claimed_change_percent=claim).verdict == CONFIRMED


def test_json_safe_and_bad_input():
    j = judge([1.0, 1.0, 1.0], [2.0, 2.0, 2.0])
    assert j.verdict == IMPROVED and json.dumps(j.to_dict(), allow_nan=False)
    with pytest.raises(ValueError):
        judge([1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        judge([0.0, 0.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        judge([1.0, float("nan")], [1.0, 2.0])
    j = judge([0.0, 1.0, 2.0, 1.0], [5.0, 6.0, 5.5, 6.5])  # not all positive: raw scale
    assert j.verdict == IMPROVED and j.change_percent == pytest.approx(475.0)


def test_metric_direction_names():
    assert higher_is_better("aim7.jobs-per-min") and higher_is_better("MB/s")
    assert higher_is_better("fio.write_iops")
    assert not higher_is_better("boot-time.boot") and not higher_is_better("latency_ns")
    assert not higher_is_better("fsmark.app_overhead")


def test_lkp_rule():
    assert lkp_changed([100, 101, 99, 100], [90, 91, 89, 90])
    assert not lkp_changed([100, 101, 99, 100], [100, 102, 98, 100])


# ---------------------------------------------------------------------------------- commands
def test_stats_command_contract(tmp_path, cli):
    (tmp_path / "g").write_text("\n".join(f"{x:.3f}" for x in samples(135.7, 0.012, 10, 21)) + "\n")
    (tmp_path / "b").write_text("# bad build\n" + "\n".join(f"{x:.3f}" for x in samples(131.0, 0.012, 10, 22)))
    r = cli("stats", "--good", tmp_path / "g", "--bad", tmp_path / "b", "--higher-is-better", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert list(out) == ["verdict", "change_percent", "ci", "p_value", "n_good", "n_bad", "cv_percent", "reasons",
                         "analysis"]
    assert out["verdict"] == "confirmed" and out["n_good"] == 10 and out["n_bad"] == 10
    assert out["ci"][0] < out["change_percent"] < out["ci"][1] < 0
    assert out["analysis"] == "welch"  # two files of unknown run order: two samples
    r = cli("stats", "--good", tmp_path / "g", "--bad", tmp_path / "b", "--paired", "--json")
    assert json.loads(r.stdout)["analysis"] == "paired" and "paired t" in json.loads(r.stdout)["reasons"][0]
    r = cli("stats", "--good", tmp_path / "g", "--bad", tmp_path / "b", "--lower-is-better", "--json")
    assert json.loads(r.stdout)["verdict"] == "improved"
    (tmp_path / "x").write_text("12\nabc\n")
    r = cli("stats", "--good", tmp_path / "g", "--bad", tmp_path / "x", "--json")
    assert r.exit_code != 0 and "not a number" in r.stderr


def test_lab_power_command(tmp_path, cli):
    (tmp_path / "regtriage.toml").write_text(
        '[lab]\nruns = 5\nextend_step = 5\nmax_runs = 15\n'
        '[[lab.machines]]\nname = "tcg"\narch = "x86_64"\nbackend = "qemu"\n'
        '[lab.machines.settings]\naccel = "tcg"\n')
    r = cli("lab", "power", "--cv", "1.2", "--change", "-3.5", "--trials", "300", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    for k in ("false_positive_rate", "power", "mean_runs", "max_runs"):
        assert k in out
    assert out["looks"] == [5, 10, 15] and out["max_runs"] == 15 and not out["emulated"]
    assert out["power"] >= 0.95 and out["false_positive_rate"] <= 0.02
    # the same code path: the numbers are simulate() on the config's design
    d = Design.from_settings({"runs": 5, "extend_step": 5, "max_runs": 15})
    assert out["power"] == power(d, cv_percent=1.2, change_percent=-3.5, trials=300)["power"]
    r = cli("lab", "power", "--cv", "1.2", "--change", "-3.5", "--trials", "300", "--machine", "tcg", "--json")
    out = json.loads(r.stdout)
    assert out["emulated"] and out["verdicts_aa"]["not-reproduced"] == 0  # the gate on an emulated machine
    r = cli("lab", "power", "--cv", "1.2", "--table", "--trials", "200", "--json")
    rows = json.loads(r.stdout)["rows"]
    assert [x["change_percent"] for x in rows] == [-2.0, -3.5, -5.0, -10.0] and "lkp" in rows[0]
    assert cli("lab", "power", "--cv", "1.2").exit_code != 0
    assert cli("lab", "power", "--cv", "1.2", "--change", "-3", "--machine", "nope").exit_code != 0
    # five runs per boot with boot-to-boot noise: the looks count boots (1, 2, 3), never 5 per build
    r = cli("lab", "power", "--cv", "0.6", "--change", "-3.5", "--runs-per-boot", "5", "--boot-cv", "2",
            "--trials", "200", "--json")
    out = json.loads(r.stdout)
    assert out["runs_per_boot"] == 5 and out["boot_cv_percent"] == 2.0
    assert out["power"] == 0.0 and out["false_positive_rate"] == 0.0


def test_interval_ends_for_people():
    from bot.lab.stats import fmt_pct

    assert fmt_pct(-3.214) == "-3.21%" and fmt_pct(12.0) == "+12.00%"
    assert fmt_pct(6586160835821.97) == ">+1000%" and fmt_pct(float("inf")) == "unbounded" and fmt_pct(None) == "unbounded"
    # two boots per build (1 df): the interval is honest but open above, and says so
    d = Design.from_settings({"runs": 6, "extend_step": 6, "max_runs": 12, "samples_per_batch": 3})
    j = decide([100, 101, 99, 60, 61, 59], [58, 59, 57, 35, 36, 34], d, claimed_change_percent=-30)
    assert (j.units_good, j.units_bad) == (2, 2) and "e+" not in j.reasons[0]
    assert all(len(x) < 9 for x in re.findall(r"[+-][\d.]+%", j.reasons[0]))
