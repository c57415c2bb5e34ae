"""fio recipe (bot/lab/recipes/fio.py): the JSON parser on outputs captured from fio 3.33
(tests/data/lab/), and the common job shapes (sequential/random read/write, block size, queue
depth, jobs) run FOR REAL with Debian's fio on a scratch file; the ssh-backend run is in
tests/test_ssh_backend.py (test_each_host_recipe_runs_with_the_real_tool)."""

from __future__ import annotations

import json

import pytest

from bot.lab.parsers import ParseError
from bot.lab.recipes import make_recipe, recipe_from_claim
from bot.lab.recipes.fio import parse_fio_json
from tests.recipe_runs import DATA, run_local


def test_parse_fio_captured_outputs():
    w = parse_fio_json((DATA / "fio-write.json").read_text())
    assert w["write"]["bw_bytes"] == 7456540444 and w["read"]["iops"] == 0
    rr = parse_fio_json("fio: some note before the json\n" + (DATA / "fio-randread-2jobs.json").read_text())
    assert rr["read"]["iops"] == pytest.approx(1024000.0) and rr["jobs"] == 1  # --group_reporting
    rw = (DATA / "fio-randrw.json").read_text()
    assert make_recipe("fio", {"rw": "randrw"}).parse_output(rw, "") == pytest.approx(11218.281718)
    assert make_recipe("fio", {"rw": "write"}).parse_output(rw, "") == pytest.approx(45737302 / 1e6)
    with pytest.raises(ParseError):
        parse_fio_json("fio: failed to open file\n")
    with pytest.raises(ParseError, match="error"):
        parse_fio_json(rw.replace('"error" : 0', '"error" : 5', 1))


@pytest.mark.parametrize("cmd,metric", [
    ("fio --rw=read --bs=1M --size=16M", "fio.read_bw_MBps"),
    ("fio --rw=write --bs=64k --size=16M", "fio.write_bw_MBps"),
    ("fio --rw=randread --bs=4k --size=8M --iodepth=4 --ioengine=psync", "fio.read_iops"),
    ("fio --rw=randwrite --bs=4k --size=8M --numjobs=2", "fio.write_iops"),
])
def test_common_job_shapes_run_for_real(tmp_path, cmd, metric):
    spec, reason = recipe_from_claim({}, cmd, "fio")
    assert spec is not None, reason
    assert spec.metric == metric
    value, stdout, _ = run_local(spec, tmp_path)
    job = json.loads(stdout[stdout.index("{"):])["jobs"][0]
    direction = metric.split(".")[1].split("_")[0]
    assert job["jobname"] == "regtriage" and job[direction]["io_bytes"] > 0
    assert job["job options"]["rw"] == spec.params["rw"] and int(job["job options"]["bs"]) == 2 ** (
        {"k": 10, "M": 20}[spec.params["bs"][-1]]) * int(spec.params["bs"][:-1])
    assert value > 0
