#!/usr/bin/env python3
"""Statistical power of the rerun verdict, measured on simulated data (not a test).

  A/A: good and bad drawn from the same normal distribution (CV 1.2%): how often would we
       wrongly say "confirmed"?  Target <= 1%.
  drop: bad is 3.5% lower (CV 1.2%, the first seed report's numbers): how often do we say
       "confirmed"?  Target >= 95% with 10 runs per side.

Side by side with LKP's default change test (medians outside the other side's min..max range,
ratio > 1.01; bot.lab.stats.lkp_changed) counted only in the regression direction, on the same
simulated samples.

    .venv/bin/python bench/stats_power.py [--trials 2000] [--runs 10] [--cv 1.2] [--drop 3.5] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.lab.stats import CONFIRMED, judge, lkp_changed  # noqa: E402


def rates(trials: int, runs: int, cv: float, drop: float, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    ours = lkp = 0
    for i in range(trials):
        good = rng.normal(100.0, cv, runs)
        bad = rng.normal(100.0 - drop, cv, runs)
        if judge(good, bad, higher_is_better=True, resamples=2000, seed=i).verdict == CONFIRMED:
            ours += 1
        if lkp_changed(good, bad) and np.median(bad) < np.median(good):
            lkp += 1
    return {"regtriage": ours / trials, "lkp_rule": lkp / trials}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--cv", type=float, default=1.2, help="coefficient of variation, percent")
    ap.add_argument("--drop", type=float, default=3.5, help="simulated regression, percent")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out = {"trials": args.trials, "runs_per_side": args.runs, "cv_percent": args.cv, "drop_percent": args.drop,
           "false_positive_rate_AA": rates(args.trials, args.runs, args.cv, 0.0, 1),
           "detection_rate": rates(args.trials, args.runs, args.cv, args.drop, 2)}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{args.trials} trials, {args.runs} runs per side, CV {args.cv}%")
    print(f"{'':28s} {'regtriage':>10s} {'LKP rule':>10s}")
    fp, det = out["false_positive_rate_AA"], out["detection_rate"]
    print(f"{'A/A false positives':28s} {fp['regtriage']:10.2%} {fp['lkp_rule']:10.2%}   (target <= 1%)")
    print(f"{f'detects a {args.drop}% drop':28s} {det['regtriage']:10.2%} {det['lkp_rule']:10.2%}   (target >= 95%)")


if __name__ == "__main__":
    main()
