"""bot.lab.stats: verdicts on simulated samples, and the `stats` command contract."""

import json

import numpy as np
import pytest

from bot.lab.stats import (CONFIRMED, INCONCLUSIVE, NOT_REPRODUCED, higher_is_better, judge,
                           lkp_changed, next_step)


def samples(mean, cv, n, seed):
    return np.random.default_rng(seed).normal(mean, mean * cv, n)


def test_clear_throughput_drop_is_confirmed():
    j = judge(samples(100, 0.012, 10, 1), samples(96.5, 0.012, 10, 2), claimed_change_percent=-3.5)
    assert j.verdict == CONFIRMED
    assert -5 < j.change_percent < -2 and j.ci[1] < 0 and j.p_value < 0.01
    assert j.reasons and "smaller than claimed" not in " ".join(j.reasons)


def test_improvement_is_not_a_confirmed_regression():
    j = judge(samples(100, 0.01, 10, 3), samples(110, 0.01, 10, 4))
    assert j.verdict != CONFIRMED and j.change_percent > 5


def test_direction_lower_is_better():
    good, bad = samples(10, 0.01, 10, 5), samples(11, 0.01, 10, 6)  # latency went up
    assert judge(good, bad, higher_is_better=False).verdict == CONFIRMED
    assert judge(good, bad, higher_is_better=True).verdict != CONFIRMED


def test_same_distribution_within_noise_is_not_reproduced():
    j = judge(samples(100, 0.003, 20, 7), samples(100, 0.003, 20, 8))
    assert j.verdict == NOT_REPRODUCED and -1 <= j.ci[0] and j.ci[1] <= 1


def test_claimed_size_ruled_out_is_not_reproduced():
    # noisy enough that +-1% is not reached, but a 13.6% drop would have been obvious
    j = judge(samples(100, 0.02, 10, 9), samples(100, 0.02, 10, 10), claimed_change_percent=-13.6)
    assert j.verdict == NOT_REPRODUCED and "claimed" in " ".join(j.reasons)


def test_too_noisy_is_inconclusive_and_extended_up_to_cap():
    j = judge(samples(100, 0.08, 4, 11), samples(97, 0.08, 4, 12))
    assert j.verdict == INCONCLUSIVE
    assert next_step(j, max_runs=30) == 10
    assert next_step(j, max_runs=6) == 2
    assert next_step(judge(samples(100, 0.01, 10, 1), samples(90, 0.01, 10, 2))) == 0


def test_one_outlier_does_not_confirm():
    good = [100.0, 100.2, 99.9, 100.1, 99.8, 100.0, 100.3, 99.7]
    bad = [100.1, 99.9, 100.0, 100.2, 99.8, 100.1, 99.9, 60.0]
    assert judge(good, bad).verdict != CONFIRMED


def test_bad_input():
    with pytest.raises(ValueError):
        judge([1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        judge([0.0, 0.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        judge([1.0, float("nan")], [1.0, 2.0])


def test_metric_direction_names():
    assert higher_is_better("aim7.jobs-per-min") and higher_is_better("MB/s")
    assert higher_is_better("fio.write_iops")
    assert not higher_is_better("boot-time.boot") and not higher_is_better("latency_ns")
    assert not higher_is_better("fsmark.app_overhead")


def test_lkp_rule():
    assert lkp_changed([100, 101, 99, 100], [90, 91, 89, 90])
    assert not lkp_changed([100, 101, 99, 100], [100, 102, 98, 100])


def test_stats_command_contract(tmp_path, cli):
    (tmp_path / "g").write_text("\n".join(f"{x:.3f}" for x in samples(135.7, 0.012, 10, 21)) + "\n")
    (tmp_path / "b").write_text("# bad build\n" + "\n".join(f"{x:.3f}" for x in samples(131.0, 0.012, 10, 22)))
    r = cli("stats", "--good", tmp_path / "g", "--bad", tmp_path / "b", "--higher-is-better", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert list(out) == ["verdict", "change_percent", "ci", "p_value", "n_good", "n_bad"]
    assert out["verdict"] == "confirmed" and out["n_good"] == 10 and out["n_bad"] == 10
    assert out["ci"][0] < out["change_percent"] < out["ci"][1] < 0
    r = cli("stats", "--good", tmp_path / "g", "--bad", tmp_path / "b", "--lower-is-better", "--json")
    assert json.loads(r.stdout)["verdict"] != "confirmed"
    (tmp_path / "x").write_text("12\nabc\n")
    r = cli("stats", "--good", tmp_path / "g", "--bad", tmp_path / "x", "--json")
    assert r.exit_code != 0 and "not a number" in r.stderr
