"""Lay the gathered messages out as train / dev / test (incremental; a message never moves).

    .venv/bin/python bench/corpus/make_splits.py [--seen NAME=DIR ...]

* Messages the project had already read while writing rules (the shared corpus' seeds and dev,
  and the former bench/heldout, heldout2, heldout3 sets: ``--seen NAME=DIR`` each) go to train.
* Newly gathered messages (``incoming/<batch>/``: .eml files + labels.jsonl, labelled by
  reading, before any extractor ran on them) are dealt out by a keyed hash of their batch and
  file name (sha256 with a fixed key): 36% to test, 16% to dev, 48% to train.  The split of a
  message is thus fixed the moment it is gathered, before anyone works on it, and does not
  depend on what else was gathered; rerunning the script adds new messages and re-reads the
  labels of known ones, but never moves a message between splits.
* Duplicates (same source URL, or the same body) of a message already placed are dropped.
* Files are renamed ``<batch>-<file>``; every label keeps its ``source_url`` and gains
  ``origin`` and ``split``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def read_set(d: Path) -> list[tuple[Path, dict]]:
    out = []
    if not (d / "labels.jsonl").exists():
        return out
    for line in (d / "labels.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                lab = json.loads(line)
            except ValueError:  # a line still being written
                continue
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


KEY = b"regtriage-corpus-split-2026-11-24"


def split_of(batch: str, file: str) -> str:
    h = int.from_bytes(hashlib.sha256(KEY + f"{batch}/{file}".encode()).digest()[:8], "big") / 2**64
    return "test" if h < 0.36 else "dev" if h < 0.52 else "train"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seen", action="append", default=[], help="NAME=DIR of a set already read")
    a = ap.parse_args(argv)
    placed: dict[str, dict[str, dict]] = {}
    for split in ("train", "dev", "test"):
        placed[split] = {}
        lf = HERE / split / "labels.jsonl"
        if lf.exists():
            for line in lf.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    lab = json.loads(line)
                    placed[split][lab["file"]] = lab
    where = {name: split for split, labs in placed.items() for name in labs}
    urls = {url_key(lab.get("source_url")) for labs in placed.values() for lab in labs.values()} - {None}
    bodies = {body_key(HERE / split / name) for split, labs in placed.items() for name in labs
              if (HERE / split / name).exists()}
    incoming: list[tuple[str, Path, dict, str]] = []
    for spec in a.seen:
        name, d = spec.split("=", 1)
        incoming += [(name, f, lab, "train") for f, lab in read_set(Path(d))]
    inc = HERE / "incoming"
    for batch in sorted(p for p in inc.iterdir() if p.is_dir()) if inc.is_dir() else []:
        incoming += [(batch.name, f, lab, split_of(batch.name, f.name)) for f, lab in read_set(batch)]
    added, updated, dropped = 0, 0, []
    for batch, f, lab, split in incoming:
        name = f"{batch}-{f.name}"
        seen_set = split == "train" and any(batch == s.split("=", 1)[0] for s in a.seen)
        origin = f"seen before this corpus: {batch}" if seen_set else f"gathered 2026-11-24, batch {batch}"
        if name in where:
            split = where[name]
            new = dict(lab, file=name, split=split, origin=origin)
            if placed[split][name] != new:
                placed[split][name] = new
                shutil.copyfile(f, HERE / split / name)
                updated += 1
            continue
        uk, bk = url_key(lab.get("source_url")), body_key(f)
        if (uk and uk in urls) or bk in bodies:
            dropped.append(f"{batch}/{f.name}")
            continue
        urls.add(uk)
        bodies.add(bk)
        (HERE / split).mkdir(exist_ok=True)
        shutil.copyfile(f, HERE / split / name)
        placed[split][name] = dict(lab, file=name, split=split, origin=origin)
        where[name] = split
        added += 1
    for split, labs in placed.items():
        if not labs:
            continue
        lines = [json.dumps(labs[k], ensure_ascii=False) for k in sorted(labs)]
        (HERE / split / "labels.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        pos = sum(1 for lab in labs.values() if lab.get("is_regression"))
        print(f"{split}: {len(labs)} messages, {pos} regressions")
    print(f"added {added}, labels re-read {updated}, dropped as duplicates {len(dropped)}"
          + (f": {' '.join(dropped)}" if dropped else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
