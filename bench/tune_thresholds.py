"""Calibrate the learned models' keep thresholds on cross-validation over train+dev.

    .venv/bin/python bench/tune_thresholds.py [--folds 5] [--min-precision 0.9] [--fresh]

The rule stages run once per message; each fold's models are trained (the code of
``make model``) on the other folds and decide the held-out fold once per threshold tried.
For every model it prints the pooled CV precision / recall of the field it decides at each
threshold (the others held at their current values) and the lowest threshold whose precision
reaches ``--min-precision``: the value to put in ``bench/train_model.py``'s THRESHOLDS.
Never reads the test split.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import accuracy, train_model  # noqa: E402
from bench._corpus import load_split  # noqa: E402
from extractors import learned, prefilter  # noqa: E402
from extractors.claim import Claim  # noqa: E402
from extractors.pipeline import run  # noqa: E402

# model name -> the scored field(s) it decides
# ("good.pair": the pair threshold of the good ranker, see learned.choose_range)
FIELD_OF = {"is_regression": ["is_regression"], "culprit": ["culprit"], "good": ["good"], "bad": ["bad"],
            "good.pair": ["good", "bad"], "bad.pair": ["good", "bad"],
            "cpu": ["cpu"], "storage": ["storage"], "subsystem": ["subsystem"], **{f"gate_{f}": [f] for f in learned.GATED_FIELDS if f != "cpu"}}
GRID = [0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--min-precision", type=float, default=0.9)
    ap.add_argument("--fresh", action="store_true", help="score only messages gathered for this corpus")
    ap.add_argument("--only", action="append", help="model name(s) to sweep")
    a = ap.parse_args(argv)
    msgs = [m for m in load_split("train") + load_split("dev") if m.label is not None]
    ctxs = {}
    for i, m in enumerate(msgs):
        if prefilter(m.subject, m.body or ""):
            ctxs[i] = run(m.subject, m.body, learned_stage=False)._.rules
    rng = random.Random(1)  # the folds of bench/accuracy.py --cv
    order = list(range(len(msgs)))
    rng.shuffle(order)
    folds = []
    for k in range(a.folds):
        held = {order[i] for i in range(k, len(order), a.folds)}
        model = train_model.fit([m for i, m in enumerate(msgs) if i not in held])
        folds.append((held, model))

    def score(overrides: dict[str, float]) -> dict:
        pairs = []
        for held, model in folds:
            saved = {n: (lm.threshold, lm.pair_threshold) for n, lm in model.models.items()}
            for n, t in overrides.items():
                base, _, attr = n.partition(".")
                if base in model.models:
                    setattr(model.models[base], "pair_threshold" if attr == "pair" else "threshold", t)
            for i in sorted(held):
                m = msgs[i]
                if a.fresh and not str(m.label.get("origin", "")).startswith("gathered"):
                    continue
                c = learned.decide(ctxs[i], model) if i in ctxs else Claim(is_regression=False)
                pairs.append((m.file, m.label, c.to_dict()))
            for n, (t, pt) in saved.items():
                model.models[n].threshold, model.models[n].pair_threshold = t, pt
        return accuracy.score(pairs)

    base = score({})
    s = base["summary"]
    print(f"current thresholds: is_regression F1 {s['is_regression_f1']}  culprit F1 {s['culprit_f1']}  "
          f"mean recall {s['mean_recall_non_culprit']}  min precision {s['min_precision']}")
    for name, fields in FIELD_OF.items():
        if a.only and name not in a.only:
            continue
        base, _, attr = name.partition(".")
        cur = folds[0][1].models.get(base)
        if cur is None:
            continue
        print(f"== {name} (now {cur.pair_threshold if attr == 'pair' else cur.threshold})")
        pick = None
        for t in GRID:
            r = score({name: t})
            for f in fields:
                fr = r["fields"][f]
                print(f"   t={t:<5} {f:<14} P {fr['precision']:.3f}  R {fr['recall']:.3f}  F1 {fr['f1']:.3f}  "
                      f"tp {fr['tp']} fp {fr['fp']} fn {fr['fn']}   mean recall {r['summary']['mean_recall_non_culprit']}")
                if pick is None and fr["precision"] >= a.min_precision:
                    pick = t
        print(f"   lowest threshold with precision >= {a.min_precision}: {pick}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
