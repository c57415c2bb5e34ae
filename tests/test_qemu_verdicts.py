"""A/A on the real QEMU backend: the same real Debian kernel booted as "good" and as "bad" (two
byte-identical copies of its vmlinuz, so the planner sees two builds) goes through
schedule_rerun and the scheduler exactly as bench/qemu_verdicts.py runs it; the verdict must not
be "confirmed" (nor "improved").  One rerun (1-3 minutes under TCG); the bench runs ten, and
the A/B pair."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from tests.test_qemu_backend import BUILD_CACHE, lab_tools  # noqa: F401 - fixture

BENCH = Path(__file__).resolve().parent.parent / "bench" / "qemu_verdicts.py"


def _bench():
    spec = importlib.util.spec_from_file_location("qemu_verdicts", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_aa_rerun_on_qemu_is_never_confirmed(tmp_path, lab_tools):  # noqa: F811
    if shutil.which("apt-get") is None:
        pytest.skip("apt-get not available: cannot download Debian kernel builds")
    out = _bench().run(1, 0, BUILD_CACHE, tmp_path, log=print)
    (r,) = out["aa"]
    assert r["state"] == "done", r
    assert r["verdict"] in ("inconclusive", "not-reproduced"), r  # never confirmed, nor improved
    assert r["n_good"] == r["n_bad"] >= 5 and r["ci"][0] <= r["change_percent"] <= r["ci"][1]
    assert r["reason"] and not r["reason"].startswith("continue")
