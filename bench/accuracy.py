"""Extraction accuracy per split of the labelled corpus, scored strictly.

Usage:
    .venv/bin/python bench/accuracy.py                    # train and dev splits of bench/corpus
    .venv/bin/python bench/accuracy.py --split test       # the frozen test split (once per change!)
    .venv/bin/python bench/accuracy.py --cv 5             # 5-fold cross-validation over train+dev
    .venv/bin/python bench/accuracy.py DIR [-v] [--json]  # any folder of .eml + labels.jsonl

Scoring (the rules the project is judged by; no lenient equivalences):

* is_regression: precision / recall / F1 over all messages (positive = labelled true).
* Every other field is scored ONLY on messages that are labelled as regressions AND predicted
  as regressions.  On those, a predicted non-null value is a true positive when it matches the
  non-null label, else a false positive (wrong value, or a value where the label is null); a
  non-null label not matched is a false negative.  So a missed report costs is_regression
  recall, not every field twice.
* culprit: the same commit: hex ids equal, or one a prefix (>= 6 chars) of the other.
* good / bad: equal after lower-casing and dropping a leading ``v`` or ``linux-`` (commit ids
  as for culprit).
* change_percent: |pred - label| <= max(0.6, 5% of |label|).
* arch, kind, filesystem, benchmark: equal after lower-casing (x86 is not x86_64).
* subsystem: equal after lower-casing; a core-kernel short name and its path are one name
  (``sched`` = ``kernel/sched``), nothing else (``fs`` is not ``fs/xfs``).
* cpu, memory, storage, metric (free-text phrases "as written"): equal after lower-casing and
  collapsing spaces, or one a whole-word part of the other that covers at least half of it
  (``8 GB`` for ``8 GB RAM``; not ``Xeon`` for ``Intel Xeon Gold 6248R``).
* kernel_config: micro precision / recall over option names (``=value`` ignored).
* "mean recall (non-culprit)": the mean of the recalls of good, bad, kind, metric,
  change_percent, cpu, arch, memory, storage, filesystem, benchmark, kernel_config, subsystem.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._corpus import CORPUS_ROOT, load_dir, load_split  # noqa: E402

FIELDS = ["culprit", "good", "bad", "kind", "metric", "change_percent", "cpu", "arch", "memory",
          "storage", "filesystem", "benchmark", "subsystem", "kernel_config"]
NON_CULPRIT = [f for f in FIELDS if f != "culprit"]
PHRASE_FIELDS = ("cpu", "memory", "storage", "metric")
SUBSYSTEM_ALIASES = {"sched": "kernel/sched", "locking": "kernel/locking", "rcu": "kernel/rcu",
                     "cgroup": "kernel/cgroup", "bpf": "kernel/bpf", "perf": "kernel/events",
                     "time": "kernel/time", "irq": "kernel/irq", "trace": "kernel/trace",
                     "printk": "kernel/printk", "workqueue": "kernel/workqueue"}


def norm(s) -> str:
    return " ".join(str(s).split()).strip(" \"'.,;:()").lower()


def norm_version(s) -> str:
    s = norm(s)
    if s.startswith("linux-"):
        s = s[6:]
    if len(s) > 1 and s[0] == "v" and s[1].isdigit():
        s = s[1:]
    return s


def is_hex(s: str) -> bool:
    return len(s) >= 6 and all(c in "0123456789abcdef" for c in s)


def _words(s: str) -> list[str]:
    return re.findall(r"[\w./+@-]+", s)


def match(field: str, pred, gold) -> bool:
    if field in ("culprit", "good", "bad"):
        p, g = norm_version(pred), norm_version(gold)
        if is_hex(p) and is_hex(g):
            return p.startswith(g) or g.startswith(p)
        return p == g
    if field == "change_percent":
        g = float(gold)
        return abs(float(pred) - g) <= max(0.6, 0.05 * abs(g))
    if field == "subsystem":
        p, g = norm(pred).strip("/"), norm(gold).strip("/")
        return SUBSYSTEM_ALIASES.get(p, p) == SUBSYSTEM_ALIASES.get(g, g)
    if field in PHRASE_FIELDS:
        p, g = norm(pred), norm(gold)
        if p == g:
            return True
        pw, gw = _words(p), _words(g)
        short, long_ = (pw, gw) if len(pw) <= len(gw) else (gw, pw)
        if not short:
            return False
        n = len(short)
        inside = any(long_[i:i + n] == short for i in range(len(long_) - n + 1))
        return inside and len(" ".join(short)) * 2 >= len(" ".join(long_))
    return norm(pred) == norm(gold)


def pred_value(d: dict, field: str):
    if field == "culprit":
        return (d.get("culprit") or {}).get("commit")
    if field in ("cpu", "arch", "memory", "storage"):
        return d["hardware"][field]
    if field in ("filesystem", "benchmark"):
        return d["config"][field]
    return d.get(field)


def gold_value(lab: dict, field: str):
    if field == "culprit":
        return lab.get("culprit_commit")
    return lab.get(field)


def prf(tp: int, fp: int, fn: int) -> dict:
    p = tp / (tp + fp) if tp + fp else 1.0
    r = tp / (tp + fn) if tp + fn else 1.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": round(p, 3), "recall": round(r, 3), "f1": round(f, 3), "tp": tp, "fp": fp, "fn": fn}


def score(pairs) -> dict:
    """pairs: [(file, label dict, prediction dict)] -> figures and the list of mismatches."""
    counts = {f: [0, 0, 0] for f in ["is_regression"] + FIELDS}
    errors: list[str] = []
    for file, lab, d in pairs:
        gold_pos, pred_pos = bool(lab["is_regression"]), bool(d["is_regression"])
        c = counts["is_regression"]
        if gold_pos and pred_pos:
            c[0] += 1
        elif pred_pos:
            c[1] += 1
            errors.append(f"{file}: is_regression FP (conf {d.get('confidence')})")
        elif gold_pos:
            c[2] += 1
            errors.append(f"{file}: is_regression FN (conf {d.get('confidence')})")
        if not (gold_pos and pred_pos):
            continue
        for field in FIELDS:
            c = counts[field]
            if field == "kernel_config":
                pk = {k.split("=")[0] for k in d["config"].get("kernel_config") or []}
                gk = {k.split("=")[0] for k in lab.get("kernel_config") or []}
                c[0] += len(pk & gk)
                c[1] += len(pk - gk)
                c[2] += len(gk - pk)
                if pk != gk:
                    errors.append(f"{file}: kernel_config: pred={sorted(pk)} gold={sorted(gk)}")
                continue
            p, g = pred_value(d, field), gold_value(lab, field)
            if p is not None and g is not None and match(field, p, g):
                c[0] += 1
                continue
            if p is not None:
                c[1] += 1
            if g is not None:
                c[2] += 1
            if p is not None or g is not None:
                errors.append(f"{file}: {field}: pred={p!r} gold={g!r}")
    res = {f: prf(*v) for f, v in counts.items()}
    summary = {
        "is_regression_f1": res["is_regression"]["f1"],
        "culprit_f1": res["culprit"]["f1"],
        "mean_recall_non_culprit": round(sum(res[f]["recall"] for f in NON_CULPRIT) / len(NON_CULPRIT), 3),
        "min_precision": round(min(res[f]["precision"] for f in ["is_regression"] + FIELDS), 3),
    }
    return {"messages": len(pairs), "summary": summary, "fields": res, "errors": errors}


def predict(msgs, extract=None) -> list[tuple[str, dict, dict]]:
    if extract is None:
        import extractors
        extract = extractors.extract
    return [(m.file, m.label, extract(m.subject, m.body).to_dict()) for m in msgs if m.label is not None]


def rules_only(msgs) -> list:
    """Predictions of the rule stages alone (the learned stage switched off): the baseline."""
    import extractors
    from extractors.learned import Model
    return predict(msgs, lambda s, b: extractors.extract(s, b, model=Model()))


def cross_validate(folds: int, seed: int = 1, fresh_only: bool = False) -> dict:
    """k-fold CV over train+dev: train the model on k-1 folds (same code as ``make model``),
    score the held-out fold with it, pool the predictions of all folds.  ``fresh_only``: score
    only the messages gathered for this corpus (not the older sets the rules were written
    against), which is the fair comparison with ``--rules-only``."""
    import extractors
    from bench import train_model

    msgs = [m for m in load_split("train") + load_split("dev") if m.label is not None]
    rng = random.Random(seed)
    order = list(range(len(msgs)))
    rng.shuffle(order)
    pairs = []
    for k in range(folds):
        held = {order[i] for i in range(k, len(order), folds)}
        train = [m for i, m in enumerate(msgs) if i not in held]
        model = train_model.fit(train)
        pairs += predict([m for i, m in enumerate(msgs) if i in held and not (fresh_only and not _fresh(m))],
                         lambda s, b, model=model: extractors.extract(s, b, model=model))
    return score(pairs)


def _fresh(m) -> bool:
    return str(m.label.get("origin", "")).startswith("gathered")


def _log_test_scoring(results: dict) -> None:
    """Every scoring of the frozen test split is appended to bench/corpus/test-scorings.log
    (when, which commit, the summary), so how often it was looked at can be checked."""
    import datetime
    import subprocess

    try:
        rev = subprocess.run(["git", "-C", str(CORPUS_ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        rev = "?"
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    with open(CORPUS_ROOT / "test-scorings.log", "a", encoding="utf-8") as f:
        for name, r in results.items():
            f.write(f"{now} {rev} {name} {json.dumps(r['summary'], sort_keys=True)}\n")


def print_table(title: str, out: dict) -> None:
    s = out["summary"]
    print(f"== {title}: {out['messages']} messages")
    print(f"   is_regression F1 {s['is_regression_f1']:.3f}  culprit F1 {s['culprit_f1']:.3f}  "
          f"mean recall (non-culprit) {s['mean_recall_non_culprit']:.3f}  min precision {s['min_precision']:.3f}")
    print(f"   {'field':<16}{'P':>7}{'R':>7}{'F1':>7}{'tp':>5}{'fp':>5}{'fn':>5}")
    for f, r in out["fields"].items():
        print(f"   {f:<16}{r['precision']:>7.3f}{r['recall']:>7.3f}{r['f1']:>7.3f}{r['tp']:>5}{r['fp']:>5}{r['fn']:>5}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("corpus", nargs="?", help="a folder of .eml files + labels.jsonl")
    ap.add_argument("--split", action="append", choices=["train", "dev", "test"],
                    help="split(s) of bench/corpus to score (default: train and dev)")
    ap.add_argument("--cv", type=int, default=0, help="k-fold cross-validation over train+dev")
    ap.add_argument("--fresh", action="store_true",
                    help="only messages gathered for this corpus (not those the rules were written against)")
    ap.add_argument("--rules-only", action="store_true", help="score the rule stages alone (baseline)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every mismatch")
    a = ap.parse_args(argv)
    frozen = "test" in (a.split or []) or (a.corpus and (CORPUS_ROOT / "test").resolve() == Path(a.corpus).resolve())
    if frozen and a.verbose:
        ap.error("the test split is frozen: its mismatches are not listed (error analysis uses train and dev)")
    results: dict[str, dict] = {}
    t0 = time.perf_counter()
    if a.cv:
        results[f"cv{a.cv}" + (" fresh" if a.fresh else "")] = cross_validate(a.cv, fresh_only=a.fresh)
    else:
        run = rules_only if a.rules_only else predict
        if a.corpus:
            results[a.corpus] = score(run(load_dir(Path(a.corpus))))
        else:
            for split in a.split or ["train", "dev"]:
                msgs = [m for m in load_split(split) if not a.fresh or (m.label and _fresh(m))]
                results[split + (" fresh" if a.fresh else "") + (" (rules only)" if a.rules_only else "")] = \
                    score(run(msgs))
    if frozen:
        _log_test_scoring(results)
    if a.json:
        for r in results.values():
            if not a.verbose:
                r.pop("errors")
        print(json.dumps(results, indent=2))
        return 0
    print(f"corpus: {a.corpus or CORPUS_ROOT}  ({time.perf_counter() - t0:.1f}s)")
    for name, out in results.items():
        print_table(name, out)
        if a.verbose:
            for e in out["errors"]:
                print("     " + e)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
