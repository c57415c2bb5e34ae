"""The labelled corpus keeps its promises: every gathered message sits in the split its keyed
hash gives (nobody chose test messages by hand), no message is in two splits, the test split
is large enough to quote, and every label has the fields the scorer reads."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench" / "corpus"))

import make_splits  # noqa: E402

CORPUS = ROOT / "bench" / "corpus"
KEYS = {"file", "source_url", "role", "is_regression", "kind", "culprit_commit", "culprit_subject", "good", "bad",
        "metric", "change_percent", "cpu", "arch", "memory", "storage", "filesystem", "benchmark",
        "kernel_config", "subsystem", "notes", "origin", "split"}


def labels(split: str) -> list[dict]:
    return [json.loads(line) for line in (CORPUS / split / "labels.jsonl").read_text().splitlines() if line.strip()]


def test_splits_follow_the_keyed_hash_and_do_not_overlap():
    seen_files, urls, bodies = set(), {}, {}
    for split in ("train", "dev", "test"):
        for lab in labels(split):
            assert KEYS <= set(lab), lab["file"]
            assert lab["split"] == split and (CORPUS / split / lab["file"]).exists()
            assert lab["file"] not in seen_files
            seen_files.add(lab["file"])
            if lab["origin"].startswith("gathered"):
                batch, name = lab["file"].split("-", 1)
                assert make_splits.split_of(batch, name) == split, lab["file"]
            else:
                assert split == "train"  # what the rules were written against is never held out
            u = make_splits.url_key(lab["source_url"])
            if u:
                assert urls.setdefault(u, split) == split, lab["file"]
            b = make_splits.body_key(CORPUS / split / lab["file"])
            assert bodies.setdefault(b, lab["file"]) == lab["file"]
    assert len(seen_files) >= 400


def test_test_split_is_large_and_mixed():
    test = labels("test")
    assert len(test) >= 120
    pos = [x for x in test if x["is_regression"]]
    assert len(pos) >= 40 and len(test) - len(pos) >= 20
    assert {x["kind"] for x in pos} == {"performance", "functional"}


def test_split_of_is_stable():
    assert make_splits.split_of("robots", "r001.eml") == make_splits.split_of("robots", "r001.eml")
    shares = [make_splits.split_of("b", f"{i}.eml") for i in range(3000)]
    assert 0.32 < shares.count("test") / 3000 < 0.40 and 0.13 < shares.count("dev") / 3000 < 0.19
