"""Train the extractor's decision models and write extractors/data/model.json.

    make model                                   # = .venv/bin/python bench/train_model.py
    .venv/bin/python bench/train_model.py --check   # exit 1 if the shipped model differs

Reads the TRAIN split of bench/corpus only (dev is for error analysis, test is frozen), runs
the rule stages of the extractor on every message (``extractors.extract`` without the learned
stage), turns each message and each candidate into the feature sets that
``extractors.learned`` uses at run time, and fits one L2-regularised logistic regression per
decision with scikit-learn (liblinear, fixed seed: the same corpus gives the same weights).
Features seen fewer than ``MIN_COUNT`` times are dropped.  The weights are written as sorted
JSON, rounded, so the file is reproducible byte for byte.

Why no value-swapped training variants: every number, version and commit id is reduced to
its shape before it becomes a feature (``features.shape``), so a variant with other values
would produce the very same features; the models can only learn contexts.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._corpus import load_split  # noqa: E402
from extractors import learned, prefilter  # noqa: E402
from extractors.pipeline import run  # noqa: E402

MIN_COUNT = 2
# regularisation per decision (inverse strength); message models see many sparse words
C_VALUES = {"is_regression": 0.5, "kind": 0.5}
C_DEFAULT = 0.3
# keep thresholds, calibrated on 5-fold CV over train+dev (bench/tune_thresholds.py, third run of
# 2026-11-24 on 884 messages): the lowest value whose pooled CV precision reaches 0.9 where that
# keeps the hand-written behaviour tests (is_regression 0.5 not 0.6: a review reply reporting a
# regression; culprit 0.4, metric 0.5, memory 0.4), else the best F1: subsystem 0.5 (no threshold
# reaches 0.8: recall 0.31 at P 0.74 against 0.22 at P 0.77), filesystem 0.5; arch, storage and
# change stay where the tests' clear cases (an LKP x86_64 line, "2T NVMe disk", a computed -50%)
# are kept (0.75 / 0.75 / 0.7 would buy CV precision 0.90-0.93 for 5-9 points of recall)
# hardware (x-hw, same sweep with the storage ranker added): cpu 0.75 and storage 0.7 are the lowest
# values at CV precision ~0.9 (0.915 / 0.898); arch 0.6 (no threshold below 0.9 reaches precision
# 0.9: most of its false positives are x86_64 for a machine the batch left null, README judgment calls)
THRESHOLDS = {"is_regression": 0.5, "kind": 0.5, "culprit": 0.4, "good": 0.8, "bad": 0.7, "cpu": 0.75, "storage": 0.7,
              "gate_metric": 0.5, "gate_memory": 0.4, "gate_storage": 0.5, "gate_subsystem": 0.5,
              "gate_filesystem": 0.5, "gate_arch": 0.6}
# metric: 0.65 once the metric candidates grew (rate pairs, a metric named in prose, the measured
# quantity a report names): pooled 5-fold CV P 0.915 R 0.614 against P 0.861 R 0.676 at 0.5
# (bench/tune_thresholds.py --only gate_metric, fourth run of 2026-11-24); 0.7 (P 0.955 R 0.605)
# drops the hand-written test's "open_close_ns, lower is better" metric
THRESHOLDS["gate_metric"] = 0.65
# subsystem: a ranker over every area the message points to, at every depth its evidence supports
# (learned._decide_subsystem, replacing the gate over the rule cascade's one area). The labels name one
# area at several depths ("mm" or "mm/vmscan" for an "mm: vmscan:" culprit), so confidence buys
# precision slowly (bench/tune_thresholds.py --only subsystem, 5-fold CV over train+dev of 2026-11-25,
# 1,039 messages, with the one-word culprit-prefix rule of _decide_subsystem that the tests' clear
# cases need): P 0.776 R 0.394 at 0.5 (the old gate: P 0.73 R 0.36), 0.876 / 0.251 at 0.8,
# 0.895 / 0.220 at 0.85, 0.885 / 0.175 at 0.9, 0.921 / 0.151 at 0.95
THRESHOLDS["subsystem"] = 0.85
# good / bad: the threshold of an end that forms an ordered range with the other end (alone: good
# 0.8, bad 0.7; in a pair: good 0.75, bad 0.65; with the range-context features CV precision and
# recall are above those of 0.8 / 0.65 / 0.65; no setting reaches CV precision 0.9 without losing
# 10+ points of recall)
PAIR_THRESHOLDS = {"good": 0.75, "bad": 0.65}
GATE_THRESHOLD = 0.35


def examples(msgs) -> dict[str, list[tuple[set[str], int]]]:
    out: dict[str, list] = {}
    for m in msgs:
        if m.label is None:
            continue
        doc = run(m.subject, m.body, learned_stage=False)
        ex = learned.training_examples(doc._.rules, m.label)
        if not prefilter(m.subject, m.body):
            # the prefilter answers for these at run time: only the message model sees them
            ex = {"is_regression": ex["is_regression"]}
        for k, v in ex.items():
            out.setdefault(k, []).extend(v)
    return out


def fit_one(name: str, data: list[tuple[set[str], int]]) -> dict | None:
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression

    ys = [y for _, y in data]
    if len(set(ys)) < 2:
        return None
    counts = Counter(f for feats, _ in data for f in feats)
    keep = {f for f, n in counts.items() if n >= MIN_COUNT}
    rows = [{f: 1 for f in sorted(feats) if f in keep} for feats, _ in data]
    vec = DictVectorizer(sort=True)
    X = vec.fit_transform(rows).tocsr()
    X.indices = X.indices.astype("int32")  # liblinear takes 32-bit sparse indices only
    X.indptr = X.indptr.astype("int32")
    clf = LogisticRegression(C=C_VALUES.get(name, C_DEFAULT), solver="liblinear", random_state=0,
                             class_weight="balanced" if name in ("culprit", "good", "bad", "cpu", "storage") else None,
                             max_iter=1000)
    clf.fit(X, ys)
    weights = {f: round(float(w), 5) for f, w in zip(vec.get_feature_names_out(), clf.coef_[0])
               if abs(w) >= 1e-5}
    thr = THRESHOLDS.get(name, GATE_THRESHOLD)
    out = {"bias": round(float(clf.intercept_[0]), 5), "threshold": thr,
            "examples": len(ys), "positives": int(sum(ys)), "weights": dict(sorted(weights.items()))}
    if name in PAIR_THRESHOLDS:
        out["pair_threshold"] = PAIR_THRESHOLDS[name]
    return out


def fit(msgs) -> learned.Model:
    return learned.Model.from_dict(fit_dict(msgs))


def fit_dict(msgs) -> dict:
    data = examples(msgs)
    models = {}
    for name in sorted(data):
        m = fit_one(name, data[name])
        if m is not None:
            models[name] = m
    return {"format": 1, "models": models}


def corpus_digest(msgs) -> str:
    h = hashlib.sha256()
    for m in msgs:
        h.update(m.file.encode())
        h.update(json.dumps(m.label, sort_keys=True).encode())
        h.update((m.subject or "").encode() + b"\0" + m.body.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def build() -> str:
    msgs = load_split("train")
    d = fit_dict(msgs)
    d["trained_on"] = {"split": "train", "messages": len(msgs), "sha256": corpus_digest(msgs)}
    return json.dumps(d, indent=0, sort_keys=True) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the shipped model, write nothing")
    ap.add_argument("--out", default=str(learned.MODEL_FILE))
    a = ap.parse_args(argv)
    text = build()
    out = Path(a.out)
    if a.check:
        same = out.exists() and out.read_text(encoding="utf-8") == text
        print("shipped model is up to date" if same else "shipped model differs from a fresh build: run make model")
        return 0 if same else 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    d = json.loads(text)
    for name, m in d["models"].items():
        print(f"{name:<22} examples {m['examples']:>6}  positives {m['positives']:>5}  weights {len(m['weights']):>6}")
    print(f"wrote {out} ({out.stat().st_size // 1024} KiB) from {d['trained_on']['messages']} train messages")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
