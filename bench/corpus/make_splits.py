"""Lay the gathered messages out as train / dev / test, once.

    .venv/bin/python bench/corpus/make_splits.py [--seed 20261124] [--test-share 0.36]

* Messages the project had already read while writing rules (the shared corpus' seeds and dev,
  and the former bench/heldout, heldout2, heldout3 sets: ``--seen DIR`` each) go to train only.
* Newly gathered messages (``incoming/<batch>/``: .eml files + labels.jsonl, labelled by
  reading before any extractor ran on them) are shuffled with a fixed seed, stratified by
  is_regression, and dealt out: ``--test-share`` to test, a quarter of the rest to dev, the
  rest to train.  Duplicates (same source URL, or the same body) are dropped first.
* Files are renamed ``<batch>-<file>`` so that names never collide; every label keeps its
  ``source_url`` and gains ``origin`` (where it came from) and ``split``.

The test split is frozen: the script refuses to run when ``test/`` already exists.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def read_set(d: Path) -> list[tuple[Path, dict]]:
    out = []
    for line in (d / "labels.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            lab = json.loads(line)
            f = d / lab["file"]
            if f.exists():
                out.append((f, lab))
    return out


def body_key(f: Path) -> str:
    raw = f.read_bytes()
    body = raw.split(b"\n\n", 1)[-1]
    return hashlib.sha256(b" ".join(body.split())).hexdigest()


def url_key(u: str | None) -> str | None:
    if not u:
        return None
    u = u.strip().lower().rstrip("/")
    for p in ("https://", "http://", "www."):
        if u.startswith(p):
            u = u[len(p):]
    return u.replace("lkml.indiana.edu/hypermail/", "lkml.iu.edu/").replace("lkml.iu.edu/hypermail/", "lkml.iu.edu/")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=20261124)
    ap.add_argument("--test-share", type=float, default=0.36)
    ap.add_argument("--seen", action="append", default=[], help="name=DIR of a set already read")
    a = ap.parse_args(argv)
    if (HERE / "test").exists():
        print("test/ exists: the splits are frozen", file=sys.stderr)
        return 2
    seen_urls, seen_bodies = set(), set()
    seen: list[tuple[str, Path, dict]] = []
    for spec in a.seen:
        name, d = spec.split("=", 1)
        for f, lab in read_set(Path(d)):
            seen.append((name, f, lab))
            seen_urls.add(url_key(lab.get("source_url")))
            seen_bodies.add(body_key(f))
    new: list[tuple[str, Path, dict]] = []
    dropped = []
    for batch in sorted(p for p in (HERE / "incoming").iterdir() if p.is_dir()):
        for f, lab in read_set(batch):
            uk, bk = url_key(lab.get("source_url")), body_key(f)
            if (uk and uk in seen_urls) or bk in seen_bodies:
                dropped.append(f"{batch.name}/{f.name}")
                continue
            seen_urls.add(uk)
            seen_bodies.add(bk)
            new.append((batch.name, f, lab))
    rng = random.Random(a.seed)
    splits: dict[str, list] = {"train": [], "dev": [], "test": []}
    for positive in (True, False):
        group = [x for x in new if bool(x[2].get("is_regression")) == positive]
        group.sort(key=lambda x: (x[0], x[1].name))
        rng.shuffle(group)
        n_test = round(len(group) * a.test_share)
        rest = group[n_test:]
        n_dev = round(len(rest) / 4)
        splits["test"] += group[:n_test]
        splits["dev"] += rest[:n_dev]
        splits["train"] += rest[n_dev:]
    splits["train"] = [(n, f, dict(lab, origin=f"seen before this corpus: {n}")) for n, f, lab in seen] + \
        [(n, f, dict(lab, origin=f"gathered 2026-11-24, batch {n}")) for n, f, lab in splits["train"]]
    for s in ("dev", "test"):
        splits[s] = [(n, f, dict(lab, origin=f"gathered 2026-11-24, batch {n}")) for n, f, lab in splits[s]]
    for split, items in splits.items():
        out = HERE / split
        out.mkdir(parents=True, exist_ok=True)
        lines = []
        for batch, f, lab in sorted(items, key=lambda x: (x[0], x[1].name)):
            name = f"{batch}-{f.name}"
            shutil.copyfile(f, out / name)
            lines.append(json.dumps(dict(lab, file=name, split=split), ensure_ascii=False))
        (out / "labels.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        pos = sum(1 for _, _, lab in items if lab.get("is_regression"))
        print(f"{split}: {len(items)} messages, {pos} regressions")
    if dropped:
        print(f"dropped as duplicates: {len(dropped)}: {' '.join(dropped)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
