"""Triage of a large batch runs the extractor in worker processes and stores exactly what the
in-process path stores."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from bot.triage import runner as triage

CORPUS = Path(__file__).resolve().parent.parent / "bench" / "corpus" / "train"


def claims(db: Path) -> dict[str, tuple]:
    with sqlite3.connect(db) as c:
        tables = {r[0] for r in c.execute("select name from sqlite_master where type='table'")}
        assert "claims" in tables
        rows = c.execute("select message_id, is_regression, kind, culprit, claim from claims").fetchall()
    return {r[0]: (r[1], r[2], r[3], json.loads(r[4]) if r[4] else None) for r in rows}


def test_worker_pool_stores_the_same_claims_as_one_process(cli, tmp_path, monkeypatch):
    files = sorted(CORPUS.glob("*.eml"))[:120]
    assert len(files) > triage.PARALLEL_MIN
    used = []
    real_run = triage.Extraction.run

    def spy(self, items):
        used.append((self.workers, len(items)))
        return real_run(self, items)
    monkeypatch.setattr(triage.Extraction, "run", spy)
    out = {}
    for workers in (1, 2):
        db = tmp_path / f"w{workers}.sqlite3"
        cfg = tmp_path / f"w{workers}.toml"
        cfg.write_text(f"[triage]\nworkers = {workers}\n")
        res = cli("--config", cfg, "ingest", "--json", *files, db=f"sqlite:///{db}")
        assert res.exit_code == 0, res.output
        out[workers] = claims(db)
    assert used and {w for w, _ in used} == {1, 2} and max(n for _, n in used) >= triage.PARALLEL_MIN
    assert len(out[1]) == len(files) and out[1] == out[2]
    assert sum(1 for v in out[2].values() if v[0]) > 20


def test_a_failing_message_does_not_stop_the_pool(monkeypatch):
    import extractors

    real = extractors.extract

    def boom(subject, body, model=None):
        if "BOOM" in (subject or ""):
            raise RuntimeError("bad input")
        return real(subject, body)
    monkeypatch.setattr(extractors, "extract", boom)
    items = [(f"m{i}@x", "BOOM" if i == 3 else "regression in 6.1", "it broke") for i in range(10)]
    recs = triage.Extraction(workers=1).run(items)
    assert len(recs) == 10 and "extractor failed: RuntimeError" in recs[3]["claim"]["error"]
    assert all("error" not in (r["claim"] or {}) for i, r in enumerate(recs) if i != 3)


class _DyingPool:
    """A pool whose worker dies (as one killed by the OOM killer would)."""

    def map(self, *a, **k):
        from concurrent.futures.process import BrokenProcessPool
        raise BrokenProcessPool("a child process terminated abruptly")

    def shutdown(self, *a, **k):
        pass


def test_a_dead_worker_costs_no_message():
    items = [(f"m{i}@x", "regression in 6.1", "it broke since 6.1, 6.0 works") for i in range(triage.PARALLEL_MIN)]
    ex = triage.Extraction(workers=2)
    ex._pool = _DyingPool()
    recs = ex.run(items)
    assert len(recs) == len(items) and all(r["is_regression"] for r in recs)
    assert ex._pool is None  # a fresh pool next time
