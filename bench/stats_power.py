#!/usr/bin/env python3
"""Error rates of the rerun procedure the scheduler runs, measured on simulated data (not a test).

The procedure is the group-sequential design of bot.lab.stats (looks at [lab] runs, runs +
extend_step, ... max_runs per build; Lan-DeMets alpha spending; futility; noise gate), run
through the very function the scheduler calls at each look (bot.lab.power.simulate ->
decide), exactly as ``regtriage lab power --table`` does:

  A/A: good and bad drawn from the same normal distribution (CV 1.2%) with the report's claim:
       how often does the WHOLE procedure (all looks) say "confirmed" or "improved"?
       Target <= 1%.
  change: bad is 2 / 3.5 / 5 / 10% lower: how often "confirmed", after how many runs per
       build on average?  Target >= 95% at -3.5% with a mean of <= 12 runs per build.

Side by side with LKP's rules at a fixed number of runs, counted only in the regression
direction, on samples drawn the same way: its default change test (lib/changed_stat.rb: medians
outside the other side's min..max range, ratio > 1.01; bot.lab.power.lkp_changed) and the rule
as usually stated (the means differ and the sample ranges do not overlap;
bot.lab.power.ranges_disjoint).

    .venv/bin/python bench/stats_power.py [--trials 2000] [--cv 1.2] [--lkp-runs 10]
        [--spending pocock|obrien-fleming] [--analysis paired|welch] [--load-cv 10 --load-rho 0.9] [--json]

``--load-cv``: the host is shared (other jobs come and go during a rerun), modelled as a slowly
drifting speed factor on every run (bot.lab.power.HostLoad); the paired analysis (default)
cancels it pair by pair, the two-sample Welch analysis counts it as noise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.lab.plan import lab_settings  # noqa: E402
from bot.lab.power import TABLE_CHANGES, power_table  # noqa: E402
from bot.lab.stats import SPENDING, Design  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--cv", type=float, default=1.2, help="coefficient of variation, percent")
    ap.add_argument("--lkp-runs", type=int, default=10, help="runs per build of LKP's fixed-size rule")
    ap.add_argument("--spending", choices=SPENDING, default=None, help="default: [lab] spending's default")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--analysis", choices=("paired", "welch"), default=None, help="default: [lab] analysis's default")
    ap.add_argument("--load-cv", type=float, default=0.0,
                    help="a shared host: runs also scaled by a drifting load (AR(1), this CV in %%)")
    ap.add_argument("--load-rho", type=float, default=0.9, help="the load's correlation between consecutive runs")
    ap.add_argument("--runs-per-boot", type=int, default=None,
                    help="samples per batch (one boot); the batch is the unit (default: [lab] samples_per_batch)")
    ap.add_argument("--boot-cv", type=float, default=0.0, help="boot-to-boot variation of a batch, CV in %%")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    settings = lab_settings({})  # the defaults of deploy/lab-example.toml
    if args.spending:
        settings["spending"] = args.spending
    if args.analysis:
        settings["analysis"] = args.analysis
    if args.runs_per_boot:
        settings["samples_per_batch"] = args.runs_per_boot
    design = Design.from_settings(settings)
    t0 = time.perf_counter()
    rows = power_table(design, cv_percent=args.cv, changes=TABLE_CHANGES, trials=args.trials, seed=args.seed,
                       lkp_runs=args.lkp_runs, load_cv_percent=args.load_cv, load_rho=args.load_rho,
                       order=settings["order"], boot_cv_percent=args.boot_cv)
    out = {"trials": args.trials, "cv_percent": args.cv, "design": design.to_dict(), "lkp_runs": args.lkp_runs,
           "rows": rows, "seconds": round(time.perf_counter() - t0, 1)}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{args.trials} trials per cell, CV {args.cv}%, looks {list(design.looks)} per build, "
          f"alpha {design.alpha} ({design.spending}), {design.analysis} analysis, {settings['order']} order"
          + (f", shared host: load CV {args.load_cv}% (rho {args.load_rho})" if args.load_cv else "")
          + (f", {design.per_unit} runs per boot, boot CV {args.boot_cv}% (units: boots)" if design.per_unit > 1
             or args.boot_cv else "")
          + f"; LKP's rule at {args.lkp_runs} runs per build (no host load)")
    print(f"{'':41s}sequential procedure | LKP changed_stat.rb | ranges disjoint")
    print(f"{'change':>7s} {'FP (A/A)':>9s} {'FP 95% CI':>15s} {'power':>8s} {'mean runs':>9s} {'max':>4s}"
          f" | {'FP':>7s} {'power':>7s} {'runs':>4s} | {'FP':>7s} {'power':>7s} {'runs':>4s}")
    for r in rows:
        lo, hi = r["false_positive_ci95"]
        k = r["lkp"]
        print(f"{r['change_percent']:+6.1f}% {r['false_positive_rate']:9.2%} {f'{lo:.2%}..{hi:.2%}':>15s} "
              f"{r['power']:8.2%} {r['mean_runs']:9.1f} {r['max_runs']:4d} | {k['false_positive_rate']:7.2%} "
              f"{k['power']:7.2%} {k['runs']:4d} | {k['ranges_false_positive_rate']:7.2%} {k['ranges_power']:7.2%} "
              f"{k['runs']:4d}")
    print("targets: FP <= 1.0%; power >= 95% at -3.5% with mean runs <= 12")
    print("LKP's rules at a fixed number of runs per build, regression direction only; 'ranges disjoint': the "
          "means differ and the min..max ranges do not overlap")


if __name__ == "__main__":
    main()
