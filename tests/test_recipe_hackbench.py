"""hackbench recipe (bot/lab/recipes/hackbench.py, Debian rt-tests): the parser on outputs
captured from hackbench 2.4, claims, and a real run over SSH to the local sshd."""

from __future__ import annotations

import pytest

from bot.lab.parsers import ParseError
from bot.lab.recipes import make_recipe, recipe_from_claim
from bot.lab.recipes.hackbench import parse_hackbench
from tests.recipe_runs import DATA, assert_declined, run_local, run_over_ssh
from tests.test_ssh_backend import sshd  # noqa: F401  (fixture)


def test_parse_captured_outputs():
    assert parse_hackbench((DATA / "hackbench-process.stdout").read_text()) > 0
    text = (DATA / "hackbench-thread-pipe.stdout").read_text()
    assert "threaded mode" in text and parse_hackbench(text) == pytest.approx(0.575)
    for bad in ("", "Running in process mode with 2 groups\n", "Time: 0.000\n", text + text):
        with pytest.raises(ParseError):
            parse_hackbench(bad)


def test_claims():
    spec, reason = recipe_from_claim({}, "hackbench -g 16 -l 20000 -T -p", "hackbench.throughput")
    assert spec.name == "hackbench", reason
    assert spec.params == {"groups": 16, "fds": 20, "loops": 20000, "datasize": 100, "mode": "thread", "pipe": True}
    assert spec.host_argv("/s") == [["hackbench", "-g", "16", "-f", "20", "-l", "20000", "-s", "100", "-T", "-p"]]
    assert spec.metric == "hackbench.time_s" and not spec.higher_is_better
    spec, reason = recipe_from_claim({}, "hackbench --groups=4 --loops 100 --process -s 512", None)
    assert spec.params["groups"] == 4 and spec.params["datasize"] == 512 and spec.params["mode"] == "process", reason
    spec, reason = recipe_from_claim({}, "hackbench -g4 -l 9999999", None)
    assert spec.params["groups"] == 4 and spec.params["loops"] == 1_000_000 and "clamped" in spec.notes[0]
    assert_declined((("hackbench -g 100", "groups=100 exceeds"), ("hackbench -T -P", "conflicting options for mode"),
                     ("hackbench -F", "unsupported hackbench option"), ("hackbench 10 process 1000", "unexpected"),
                     ("hackbench -g 2 -g 3", "given twice"), ("hackbench -i", "unsupported")))
    spec, _ = recipe_from_claim({}, None, "hackbench.throughput")
    assert spec.name == "hackbench" and "default" in spec.notes[0]


@pytest.mark.slow
def test_real_run_over_ssh(sshd, tmp_path):  # noqa: F811
    s = run_over_ssh(sshd, tmp_path / "lab", make_recipe("hackbench", {"groups": 2, "loops": 200}))
    print(f"\nhackbench: {dict(s)}")


def test_thread_pipe_shape_runs_locally(tmp_path):
    value, stdout, _ = run_local(make_recipe("hackbench", {"groups": 1, "fds": 10, "loops": 100, "mode": "thread",
                                                           "pipe": True}), tmp_path)
    assert "threaded mode with 1 groups using 20 file descriptors each (== 20 tasks)" in stdout and value > 0
