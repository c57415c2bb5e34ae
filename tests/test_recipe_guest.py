"""The busybox guest's reading of self-measuring tools (``guest_tools`` + ``guest_extract``, see
bot/lab/recipes/base.py): the guest script run by the host's static busybox ``sh`` against the
real tool, its awk value compared with the recipe's own parser on the output it echoed.  Fast
(about 1 s each); the same scripts run inside QEMU under real kernels in tests/test_recipe_*.py."""

from __future__ import annotations

import pytest

from bot.lab.recipes import REGISTRY, make_recipe
from tests.recipe_runs import need_tool, run_guest_script_locally


@pytest.mark.parametrize("name,params", [
    ("hackbench", {"groups": 1, "loops": 50}),
    ("perf-sched-messaging", {"groups": 1, "loops": 20}),
    ("perf-sched-pipe", {"loops": 2000}),
    ("perf-mem", {"op": "memcpy", "size": "1MB", "loops": 5}),
    ("stress-ng", {"stressor": "pipe", "time_s": 1}),
    ("sysbench-cpu", {"max_prime": 1000, "time_s": 1}),
    ("sysbench-memory", {"time_s": 1}),
])
def test_guest_reading_agrees_with_the_parser(tmp_path, name, params):
    """The guest script's awk reading of the tool's output gives what the recipe's parser reads
    from the same output (real tools, run by busybox sh as in the guest; the QEMU runs are in
    tests/test_recipe_<tool>.py)."""
    spec = make_recipe(name, params)
    need_tool(spec)
    bench, out = run_guest_script_locally(spec, tmp_path)
    assert len(bench) == 1 and bench[0] > 0
    assert spec.parse_output(out, out) == pytest.approx(bench[0], rel=1e-6)


def test_every_guest_tool_recipe_is_covered():
    import re
    from pathlib import Path

    covered = set(re.findall(r'^    \("([a-z-]+)", \{', Path(__file__).read_text(), re.M))
    assert covered == {name for name, rec in REGISTRY.items() if rec.guest_extract}
