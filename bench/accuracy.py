"""Per-field accuracy of the extraction against a labelled corpus.

Usage: .venv/bin/python bench/accuracy.py [--corpus DIR] [--json] [-v]
       (DIR holds seeds/ and dev/ subdirectories, or .eml files + labels.jsonl directly;
        a bare positional DIR works too)

Matching rules (documented so the figures can be read):

* is_regression: binary precision / recall / F1 over all messages (positive = true).
* Other fields use "slot" precision / recall / F1 over all messages: a predicted non-null
  value is a true positive if it matches the non-null label, a false positive otherwise
  (wrong value, or a value where the label is null); a non-null label not matched is a false
  negative.  Regression-specific fields (culprit, good, bad, kind, metric, change_percent) are
  scored on ALL messages, so a culprit on a hard negative costs precision.  Descriptive fields
  (hardware, config, subsystem) are scored on the messages labelled as regressions only
  (labels of negatives leave them null by convention, whatever the text says).
* Strings are compared after normalisation: lowercase, whitespace collapsed, surrounding
  quotes/punctuation stripped, a leading "v" on versions ignored.
* culprit: hex ids match if one is a prefix of the other (>= 6 chars), i.e. the same commit;
  "culprit_exact" additionally reports exact as-written equality.
* good / bad: normalised equality (commit ids by prefix).
* change_percent: |pred - label| <= 0.5.
* cpu / memory / storage: containment either way after normalisation (free-text phrases).
* arch: equality, except that the family name "x86" matches x86_64 and i386 either way.
* subsystem: equality; "subsystem_prefix" also accepts a path prefix either way (fs vs fs/xfs).
  Short names of kernel/ subsystems and their tree paths are the same subsystem ("sched" and
  "kernel/sched", "rcu" and "kernel/rcu", ...): both sides go through SUBSYSTEM_ALIASES first.
* kernel_config: micro P/R over option names (the "=value" part ignored).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._corpus import DEFAULT_CORPUS, load_corpus  # noqa: E402
import extractors  # noqa: E402

REG_FIELDS = ["culprit", "culprit_exact", "good", "bad", "kind", "metric", "change_percent"]
DESC_FIELDS = ["cpu", "arch", "memory", "storage", "filesystem", "benchmark", "subsystem", "subsystem_prefix"]


def norm(s) -> str:
    s = " ".join(str(s).split()).strip(" \"'.,;:()").lower()
    return s


def normv(s) -> str:
    s = norm(s)
    return s[1:] if len(s) > 1 and s[0] == "v" and s[1].isdigit() else s


def is_hex(s: str) -> bool:
    return len(s) >= 6 and all(c in "0123456789abcdef" for c in s)


SUBSYSTEM_ALIASES = {"sched": "kernel/sched", "locking": "kernel/locking", "rcu": "kernel/rcu",
                     "cgroup": "kernel/cgroup", "bpf": "kernel/bpf", "perf": "kernel/events",
                     "time": "kernel/time", "irq": "kernel/irq", "trace": "kernel/trace"}


def norm_subsystem(s) -> str:
    s = norm(s).strip("/")
    return SUBSYSTEM_ALIASES.get(s, s)


def match(field: str, pred, gold) -> bool:
    if field in ("culprit", "good", "bad"):
        p, g = normv(pred), normv(gold)
        if is_hex(p) and is_hex(g):
            return p.startswith(g) or g.startswith(p)
        return p == g
    if field == "culprit_exact":
        return str(pred).strip() == str(gold).strip()
    if field == "change_percent":
        return abs(float(pred) - float(gold)) <= 0.5
    if field in ("cpu", "memory", "storage"):
        p, g = norm(pred), norm(gold)
        return p in g or g in p
    if field == "arch":
        p, g = norm(pred), norm(gold)
        fam = {"x86_64", "i386", "x86"}
        return p == g or (("x86" in (p, g)) and p in fam and g in fam)
    if field == "subsystem_prefix":
        p, g = norm_subsystem(pred), norm_subsystem(gold)
        return p == g or p.startswith(g + "/") or g.startswith(p + "/")
    if field == "subsystem":
        return norm_subsystem(pred) == norm_subsystem(gold)
    return norm(pred) == norm(gold)


def pred_value(d: dict, field: str):
    if field in ("culprit", "culprit_exact"):
        return (d.get("culprit") or {}).get("commit")
    if field in ("cpu", "arch", "memory", "storage"):
        return d["hardware"][field]
    if field in ("filesystem", "benchmark"):
        return d["config"][field]
    if field == "subsystem_prefix":
        return d["subsystem"]
    return d.get(field)


def gold_value(lab: dict, field: str):
    if field in ("culprit", "culprit_exact"):
        return lab.get("culprit_commit")
    if field == "subsystem_prefix":
        return lab.get("subsystem")
    return lab.get(field)


def prf(tp: int, fp: int, fn: int) -> dict:
    p = tp / (tp + fp) if tp + fp else 1.0
    r = tp / (tp + fn) if tp + fn else 1.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": round(p, 3), "recall": round(r, 3), "f1": round(f, 3), "tp": tp, "fp": fp, "fn": fn}


def evaluate(msgs, verbose: bool = False) -> dict:
    counts = {f: [0, 0, 0] for f in ["is_regression"] + REG_FIELDS + DESC_FIELDS + ["kernel_config"]}
    errors: list[str] = []
    t0 = time.perf_counter()
    for m in msgs:
        lab = m.label
        if lab is None:
            continue
        d = extractors.extract(m.subject, m.body).to_dict()
        gold_pos = bool(lab["is_regression"])
        c = counts["is_regression"]
        if d["is_regression"] and gold_pos:
            c[0] += 1
        elif d["is_regression"]:
            c[1] += 1
            errors.append(f"{m.file}: is_regression FP (conf {d['confidence']})")
        elif gold_pos:
            c[2] += 1
            errors.append(f"{m.file}: is_regression FN (conf {d['confidence']})")
        for field in REG_FIELDS + DESC_FIELDS:
            if field in DESC_FIELDS and not gold_pos:
                continue
            p, g = pred_value(d, field), gold_value(lab, field)
            c = counts[field]
            if p is not None and g is not None and match(field, p, g):
                c[0] += 1
            else:
                if p is not None:
                    c[1] += 1
                if g is not None:
                    c[2] += 1
                if p is not None or g is not None:
                    errors.append(f"{m.file}: {field}: pred={p!r} gold={g!r}")
        if gold_pos:
            pk = {k.split("=")[0] for k in d["config"]["kernel_config"]}
            gk = {k.split("=")[0] for k in lab.get("kernel_config") or []}
            c = counts["kernel_config"]
            c[0] += len(pk & gk)
            c[1] += len(pk - gk)
            c[2] += len(gk - pk)
            if pk != gk:
                errors.append(f"{m.file}: kernel_config: pred={sorted(pk)} gold={sorted(gk)}")
    elapsed = time.perf_counter() - t0
    res = {f: prf(*v) for f, v in counts.items()}
    return {"messages": len(msgs), "seconds": round(elapsed, 3), "fields": res, "errors": errors}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("corpus_pos", nargs="?", help="corpus directory")
    ap.add_argument("--corpus", default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every mismatch")
    a = ap.parse_args(argv)
    root = a.corpus or a.corpus_pos or DEFAULT_CORPUS
    msgs = load_corpus(root)
    out = evaluate(msgs)
    if a.json:
        if not a.verbose:
            out.pop("errors")
        print(json.dumps(out, indent=2))
        return 0
    print(f"corpus: {root}  messages: {out['messages']}  extraction time: {out['seconds']}s")
    print(f"{'field':<18}{'P':>7}{'R':>7}{'F1':>7}{'tp':>5}{'fp':>5}{'fn':>5}")
    for f, r in out["fields"].items():
        print(f"{f:<18}{r['precision']:>7.3f}{r['recall']:>7.3f}{r['f1']:>7.3f}{r['tp']:>5}{r['fp']:>5}{r['fn']:>5}")
    if a.verbose:
        print("\nmismatches:")
        for e in out["errors"]:
            print("  " + e)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
