"""stress-ng recipe (bot/lab/recipes/stress_ng.py, Debian stress-ng 0.15): the ``--metrics-brief``
parser on outputs captured here, claims (including LKP's ``stress-ng.<stressor>.ops_per_sec``
names), and real runs: in the QEMU busybox guest under two real Debian kernels, and every
whitelisted stressor's host argv as a local process."""

from __future__ import annotations

import pytest

from bot.lab.parsers import ParseError
from bot.lab.recipes import make_recipe, recipe_from_claim
from bot.lab.recipes.stress_ng import STRESSORS, parse_stress_ng
from tests.recipe_runs import DATA, assert_declined, run_in_qemu, run_local
from tests.test_qemu_backend import kernels, lab, lab_tools  # noqa: F401  (fixtures)


def test_parse_captured_outputs():
    m = parse_stress_ng((DATA / "stress-ng-getdent-2.stderr").read_text(), "getdent")
    assert m == {"bogo_ops": 15060, "real_s": 1.01, "usr_s": 0.02, "sys_s": 0.30, "ops_per_sec": 14924.45,
                 "ops_per_sec_cpu": 47062.79}
    matrix = (DATA / "stress-ng-matrix.stderr").read_text()
    assert "miscellaneous metrics" in matrix and parse_stress_ng(matrix, "matrix")["ops_per_sec"] > 0
    spec = make_recipe("stress-ng", {"stressor": "switch"})
    assert spec.parse_output("", (DATA / "stress-ng-switch.stderr").read_text()) > 0
    # later stress-ng adds "CPU used per instance (%)" and "RSS Max (KB)" (a real row quoted in LKP's parser)
    newer = ("stress-ng: metrc: [4382] flock         171659332     60.00     44.80    771.49   2860967.69"
             "      210292.23       226.75          2564\n")
    assert parse_stress_ng(newer, "flock")["ops_per_sec"] == 2860967.69
    with pytest.raises(ParseError, match="found 0"):
        parse_stress_ng(matrix, "switch")
    with pytest.raises(ParseError, match="no bogo ops"):
        parse_stress_ng("stress-ng: metrc: [7121] vm                    0      1.19      0.02      0.21"
                        "         0.00           0.00\n", "vm")


def test_claims():
    spec, reason = recipe_from_claim({}, "stress-ng --switch 4 --timeout 60s --metrics-brief", None)
    assert spec.name == "stress-ng", reason
    assert spec.params == {"stressor": "switch", "threads": 4, "time_s": 60}
    assert spec.metric == "stress-ng.switch.ops_per_sec"
    argv = spec.host_argv("/srv/scratch")[0]
    assert argv == ["stress-ng", "--switch", "4", "--timeout", "60s", "--metrics-brief", "--temp-path", "/srv/scratch"]
    spec, reason = recipe_from_claim({}, "stress-ng --getdent 2 -t 1h --temp-path /mnt/xfs", None)
    assert spec.params["time_s"] == 600 and any("/mnt/xfs" in n for n in spec.notes), reason
    assert_declined((("stress-ng --cpu 0", "one instance per CPU"), ("stress-ng --vm 2", "unsupported stress-ng"),
                     ("stress-ng --cpu 1 --switch 1", "more than one stressor"),
                     ("stress-ng --cpu 65", "threads=65 exceeds"), ("stress-ng --timeout 10", "without a vetted"),
                     ("stress-ng --cpu 1 --cpu-method all", "unsupported"),
                     ("stress-ng --sequential 1", "unsupported"), ("stress-ng --cpu x", "cannot parse")))
    spec, _ = recipe_from_claim({}, None, "stress-ng.futex.ops_per_sec")
    assert spec.params["stressor"] == "futex" and spec.params["threads"] == 1
    spec, reason = recipe_from_claim({}, None, "stress-ng")
    assert spec is None and "parameters are unknown" in reason


@pytest.mark.slow
def test_every_stressor_runs_locally(tmp_path):
    """All whitelisted stressors in one stress-ng run each of 1 s (the --temp-path is honoured)."""
    for stressor in STRESSORS:
        value, _, stderr = run_local(make_recipe("stress-ng", {"stressor": stressor, "time_s": 1}), tmp_path / stressor)
        assert f"dispatching hogs: 1 {stressor}" in stderr and value > 0, stressor


@pytest.mark.slow
def test_real_run_in_qemu_guest(lab, kernels):  # noqa: F811
    """stress-ng (and its shared libraries) copied into the busybox initramfs, run under two real
    Debian kernels; the guest's value must equal the recipe's parser on the echoed output."""
    s = run_in_qemu(lab, kernels, make_recipe("stress-ng", {"stressor": "switch", "time_s": 1}))
    print(f"\nstress-ng switch in QEMU: {dict(s)}")
