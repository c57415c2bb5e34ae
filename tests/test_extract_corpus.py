"""Aggregate properties of the extraction on the labelled corpus (no per-file expectations)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._corpus import DEFAULT_CORPUS, load_corpus  # noqa: E402
from extractors import extract  # noqa: E402

pytestmark = pytest.mark.skipif(not (DEFAULT_CORPUS / "seeds").is_dir(), reason="labelled corpus not present")


@pytest.fixture(scope="module")
def results():
    return [(m, extract(m.subject, m.body)) for m in load_corpus() if m.label]


def _same(a: str, b: str) -> bool:
    a, b = a.lower(), b.lower()
    return a.startswith(b) or b.startswith(a)


def test_every_seed_is_a_regression_with_its_culprit(results):
    seeds = [(m, c) for m, c in results if m.file.startswith("s")]
    assert seeds
    for m, c in seeds:
        assert c.is_regression, m.file
        if m.label["culprit_commit"]:
            assert c.culprit_commit and _same(c.culprit_commit, m.label["culprit_commit"]), m.file


def test_hard_negatives_are_not_flagged(results):
    negs = [(m, c) for m, c in results if not m.label["is_regression"]]
    assert negs
    flagged = [m.file for m, c in negs if c.is_regression]
    assert not flagged
    assert all(c.culprit_commit is None and c.kind is None for _, c in negs)


def test_regression_recall_and_culprit_precision(results):
    pos = [(m, c) for m, c in results if m.label["is_regression"]]
    found = sum(1 for _, c in pos if c.is_regression)
    assert found / len(pos) >= 0.9
    predicted = [(m, c) for m, c in results if c.culprit_commit]
    correct = sum(1 for m, c in predicted if m.label["culprit_commit"] and _same(c.culprit_commit,
                                                                                   m.label["culprit_commit"]))
    assert predicted and correct / len(predicted) >= 0.9
    labelled = [m for m, _ in results if m.label["culprit_commit"]]
    assert correct / len(labelled) >= 0.8


def test_kind_and_change_agree_with_labels(results):
    pos = [(m, c) for m, c in results if m.label["is_regression"]]
    kind_ok = sum(1 for m, c in pos if c.kind == m.label["kind"])
    assert kind_ok / len(pos) >= 0.85
    with_change = [(m, c) for m, c in pos if m.label["change_percent"] is not None]
    ok = sum(1 for m, c in with_change if c.change_percent is not None
             and abs(c.change_percent - m.label["change_percent"]) <= 0.5)
    assert ok / len(with_change) >= 0.8


def test_facts_spans_point_into_the_body(results):
    for m, c in results:
        for f in c.facts:
            if f.start >= 0:
                assert 0 <= f.start < f.end <= len(m.body), (m.file, f)
                if f.field == "culprit":
                    assert m.body[f.start:f.end] in (c.culprit_commit or "") or \
                        (c.culprit_commit or "") in m.body[f.start:f.end] or \
                        _same(m.body[f.start:f.end], c.culprit_commit or ""), m.file
