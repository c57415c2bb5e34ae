"""dd recipes (bot/lab/recipes/dd.py): GNU dd's summary parsed from outputs captured on Debian 12
(tests/data/lab/), and a real ``dd`` run through the recipe's host argv.  The busybox guest form
runs under QEMU in tests/test_qemu_backend.py (test_real_dd_recipes), the ssh form in
tests/test_ssh_backend.py."""

from __future__ import annotations

import pytest

from bot.lab.parsers import ParseError
from bot.lab.recipes import make_recipe
from bot.lab.recipes.dd import parse_dd
from tests.recipe_runs import DATA, run_local


def test_parse_dd_captured_outputs():
    r = parse_dd((DATA / "dd-seqwrite-fsync.stderr").read_text())
    assert r["bytes"] == 67108864 and r["seconds"] == pytest.approx(0.0352342)
    assert r["bytes_per_sec"] == pytest.approx(67108864 / 0.0352342)
    assert r["records_out"] == (64, 0)
    tiny = parse_dd((DATA / "dd-tiny.stderr").read_text())  # "512 bytes copied, 6.9744e-05 s"
    assert tiny["bytes"] == 512 and tiny["seconds"] == pytest.approx(6.9744e-05)
    for name in ("dd-seqread.stderr", "dd-seqwrite-small.stderr", "dd-direct.stderr"):
        assert parse_dd((DATA / name).read_text())["bytes_per_sec"] > 0
    with pytest.raises(ParseError, match="no dd summary"):
        parse_dd((DATA / "dd-error.stderr").read_text())
    with pytest.raises(ParseError, match="zero"):
        parse_dd("1+0 records in\n1+0 records out\n512 bytes copied, 0 s, 1 B/s\n")
    spec = make_recipe("dd-seqwrite")
    assert spec.parse_output("", (DATA / "dd-seqwrite-fsync.stderr").read_text()) == \
        pytest.approx(67108864 / 0.0352342 / 1e6)


@pytest.mark.parametrize("name,params", [("dd-seqwrite", {"bs": "64k", "count": 64, "sync": "fsync"}),
                                         ("dd-seqread", {"bs": "4k", "count": 256})])
def test_real_dd_run(tmp_path, name, params):
    spec = make_recipe(name, params)
    value, _, stderr = run_local(spec, tmp_path)
    nbytes = int(stderr.split(" bytes", 1)[0].rsplit("\n", 1)[-1])
    assert nbytes == spec.bytes and value > 0
