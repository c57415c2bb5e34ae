"""Unit tests of the extraction engine on hand-written messages (one per pattern)."""

from __future__ import annotations

import pytest

import extractors
from extractors import Claim, extract, merge_thread, prefilter

ROBOT_REG = """Greeting,

FYI, we noticed a -21.4% regression of fio.write_iops due to commit:

commit: 1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d ("ext4: rework the block allocator")
https://git.kernel.org/cgit/linux/kernel/git/torvalds/linux.git master

in testcase: fio-basic
on test machine: 96 threads 2 sockets Intel(R) Xeon(R) Gold 6252 CPU @ 2.10GHz with 256G memory

commit:
  0f9e8d7c6b ("ext4: prepare the allocator")
  1a2b3c4d5e ("ext4: rework the block allocator")
"""


def test_robot_regression_report():
    c = extract("[ext4] 1a2b3c4d5e: fio.write_iops -21.4% regression", ROBOT_REG)
    assert c.is_regression and c.confidence > 0.8
    assert c.kind == "performance"
    assert c.culprit_commit == "1a2b3c4d5e"
    assert c.culprit_subject == "ext4: rework the block allocator"
    assert c.metric == "fio.write_iops" and c.change_percent == -21.4
    assert c.good == "0f9e8d7c6b" and c.bad == "1a2b3c4d5e"
    assert c.subsystem == "fs/ext4"
    assert c.hardware["cpu"].startswith("Intel(R) Xeon(R) Gold 6252")
    assert c.hardware["memory"].startswith("256G")
    assert c.hardware["arch"] == "x86_64"
    roles = {m.commit: m.role for m in c.mentioned_commits}
    assert roles.get("0f9e8d7c6b") != "culprit"


def test_robot_improvement_is_not_a_regression():
    body = ROBOT_REG.replace("-21.4% regression", "34.5% improvement")
    c = extract("[ext4] 1a2b3c4d5e: fio.write_iops 34.5% improvement", body)
    assert not c.is_regression
    assert c.culprit_commit is None and c.kind is None
    assert c.confidence < 0.2


def test_bisect_result_first_bad_commit():
    body = """Hi,

Since v6.7 my NUC fails to boot (black screen after grub). v6.6 works fine.
I bisected v6.6..v6.7 and got:

abcdef0123456789abcdef0123456789abcdef01 is the first bad commit
commit abcdef0123456789abcdef0123456789abcdef01
Author: Some One <some@example.org>
Date:   Mon Oct 2 10:00:00 2023 +0200

    drm/xe: enable the display engine by default

Reverting it on top of v6.7 makes the machine boot again.
"""
    c = extract("[REGRESSION] boot failure on v6.7", body)
    assert c.is_regression and c.kind == "functional"
    assert c.culprit_commit == "abcdef0123456789abcdef0123456789abcdef01"
    assert c.culprit_subject == "drm/xe: enable the display engine by default"
    assert (c.good, c.bad) == ("v6.6", "v6.7")
    assert c.subsystem == "drivers/gpu/drm/xe"


def test_range_forms():
    for text, good, bad in [
        ("After upgrading 2.6.30 -> 2.6.32 the write throughput regressed badly.", "2.6.30", "2.6.32"),
        ("I bisected between v5.13 and v5.14 and the regression is clear.", "v5.13", "v5.14"),
        ("The boot failure shows up on next-20211006 but next-20211005 is fine.", "next-20211005", "next-20211006"),
        ("v6.1.76 works fine but v6.1.77 crashes on boot, a regression.", "v6.1.76", "v6.1.77"),
    ]:
        c = extract("Regression report", text)
        assert c.is_regression, text
        assert (c.good, c.bad) == (good, bad), (text, c.good, c.bad)


def test_quoted_culprit_keeps_depth_and_span():
    body = """On Tue, Someone wrote:
> The regression was introduced by commit 0123abcd4567 ("mm: change the reclaim order").
> With it, kernel builds are 20% slower.

Thanks, I can reproduce the slowdown here as well.
"""
    c = extract("Re: kernel build slowdown in 6.9", body)
    assert c.is_regression
    assert c.culprit_commit == "0123abcd4567"
    f = c.fact("culprit")
    assert f is not None and f.quote_depth == 1
    assert body[f.start:f.end] == "0123abcd4567"
    assert "introduced by commit" in f.sentence
    assert c.subsystem == "mm"


def test_fix_patch_is_not_a_report():
    body = """Commit 0123abcd4567 ("mm: change the reclaim order") introduced a regression
in kswapd wakeups. This patch fixes the regression by restoring the old order.

Fixes: 0123abcd4567 ("mm: change the reclaim order")
Reported-by: Someone <s@example.org>
Signed-off-by: Dev <d@example.org>
---
 mm/vmscan.c | 2 +-
diff --git a/mm/vmscan.c b/mm/vmscan.c
--- a/mm/vmscan.c
+++ b/mm/vmscan.c
@@ -1,3 +1,3 @@
-	old();
+	new();
"""
    assert not prefilter("[PATCH] mm: fix kswapd wakeup regression", body)
    c = extract("[PATCH] mm: fix kswapd wakeup regression", body)
    assert not c.is_regression and c.culprit_commit is None


def test_no_regressions_test_report():
    body = """Compiled and booted on my x86_64 test machines. No regressions found.

Tested-by: Tester <t@example.org>
"""
    c = extract("Re: [PATCH 6.6 000/150] 6.6.20-rc1 review", body)
    assert not c.is_regression


def test_improvement_claim_with_percent_not_regression():
    body = """This series makes the allocator lock-free. On my box hackbench is 12% faster
and the page fault benchmark improves by 8.5% compared to v6.8.
"""
    c = extract("[PATCH 0/3] mm: lock-free allocator", body)
    assert not c.is_regression


def test_change_computed_from_two_values():
    body = """Hi,

Write throughput of my NVMe drive decreased from 2000 MB/s to 1500 MB/s
after upgrading from 6.1 to 6.2 kernel, measured with fio.

fio --name=seq --rw=write --bs=1M --size=4G
"""
    c = extract("ext4 write performance regression in 6.2", body)
    assert c.is_regression and c.kind == "performance"
    assert c.change_percent == -25.0
    assert c.metric == "MB/s"
    assert c.config["benchmark"] == "fio"
    assert c.config["command"].startswith("fio --name=seq")
    assert (c.good, c.bad) == ("6.1", "6.2")
    assert c.config["filesystem"] == "ext4"


def test_kernel_config_options_named_in_setup():
    body = """My kernel is built with CONFIG_PREEMPT_RT=y and CONFIG_HZ_1000=y and since v6.5
cyclictest latency regressed from 20 us to 45 us. Maybe try CONFIG_NO_HZ_FULL=y instead?
"""
    c = extract("latency regression with v6.5", body)
    assert c.is_regression
    assert set(c.config["kernel_config"]) == {"CONFIG_PREEMPT_RT=y", "CONFIG_HZ_1000=y"}


def test_attached_config_is_not_a_list_of_named_options():
    """A .config pasted or attached to the report lists every option of the kernel; only the
    options the text names count, and the dump's own lines do not."""
    dump = "\n".join(f"CONFIG_OPT_{i}=y" if i % 3 else f"# CONFIG_OPT_{i} is not set" for i in range(60))
    body = f"""Since v6.7 fio randread is 20% slower here (CONFIG_PREEMPT_NONE=y, the rest below).

.config:
#
# Automatically generated file; DO NOT EDIT.
#
{dump}
"""
    c = extract("fio randread regression in v6.7", body)
    assert c.is_regression
    assert c.config["kernel_config"] == ["CONFIG_PREEMPT_NONE=y"]
    # a short list of options in the setup is not a dump
    short = "\n".join(f"CONFIG_OPT_{i}=y" for i in range(5))
    c = extract("fio randread regression in v6.7", f"Since v6.7 fio randread is 20% slower with\n{short}\n")
    assert len(c.config["kernel_config"]) == 5


def test_cpuinfo_dump_and_memory():
    body = """Performance regression in 6.3: the database benchmark is 15% slower than on 6.2.

Test box: 64G memory, running on 2T NVMe disk

# cat /proc/cpuinfo
processor : 0
vendor_id : GenuineIntel
model name : Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz
cpu MHz : 800.000
"""
    c = extract("sysbench regression in 6.3", body)
    assert c.is_regression
    assert c.hardware["cpu"] == "Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz"
    assert c.hardware["memory"].startswith("64G")
    assert "NVMe" in (c.hardware["storage"] or "")
    assert c.change_percent == -15.0
    assert (c.good, c.bad) == ("6.2", "6.3")


def test_flattened_one_line_message():
    body = ("On Mon, 1 Jan 2024, A wrote: > On Sun, B wrote: > > My laptop fails to boot with v6.8-rc1, "
            "v6.7 was fine. I bisected it to commit 9f8e7d6c5b4a (\"x86/boot: move the early page tables\"). "
            "> > Reverting it fixes the boot. > Thanks, looking. Please send the dmesg of the failing boot and "
            "the config you used so that we can reproduce the problem here on similar hardware soon.")
    c = extract("Re: boot failure", body)
    assert c.is_regression
    assert c.culprit_commit == "9f8e7d6c5b4a"
    f = c.fact("culprit")
    assert f.quote_depth == 2 and body[f.start:f.end] == "9f8e7d6c5b4a"
    assert (c.good, c.bad) == ("v6.7", "v6.8-rc1")
    assert c.subsystem == "arch/x86/boot"


def test_merge_thread_refines_and_prefers_unquoted():
    first = extract("Regression: suspend broken in v6.9", "Suspend is broken since v6.9, v6.8 was fine.\n")
    later = extract("Re: Regression: suspend broken in v6.9",
                    "> Suspend is broken since v6.9, v6.8 was fine.\n\n"
                    "I bisected it to commit 0a1b2c3d4e5f (\"PM: sleep: rework the freezer\").\n")
    assert first.culprit_commit is None and later.culprit_commit == "0a1b2c3d4e5f"
    merged = merge_thread([first, later])
    assert merged.is_regression
    assert merged.culprit_commit == "0a1b2c3d4e5f"
    assert merged.culprit_subject == "PM: sleep: rework the freezer"
    assert (merged.good, merged.bad) == ("v6.8", "v6.9")
    # good/bad come from the message that states them in its own words (depth 0)
    assert merged.fact("bad").quote_depth == 0


def test_to_dict_contract_and_round_trip():
    c = extract("[xfs] 68a9f5e700: aim7.jobs-per-min -13.6% regression", ROBOT_REG)
    d = c.to_dict()
    assert list(d) == ["is_regression", "confidence", "kind", "culprit", "good", "bad", "metric",
                       "change_percent", "hardware", "config", "subsystem", "numbers", "evidence"]
    assert set(d["hardware"]) == {"cpu", "arch", "memory", "storage"}
    assert set(d["config"]) == {"filesystem", "benchmark", "command", "kernel_config"}
    assert set(d["culprit"]) == {"commit", "subject"}
    assert all(isinstance(v, str) for v in d["evidence"].values())
    back = Claim.from_dict(d).to_dict()
    assert back == d


def test_regression_in_other_sense_and_prefilter():
    body = "We added 40 new regression tests to the suite; the linear regression of the timings is flat.\n"
    assert not extract("selftests: more coverage", body).is_regression
    assert not prefilter("[PATCH v3 2/9] mm: add helper", "Trivial helper.\nSigned-off-by: X <x@y.z>\n")
    assert prefilter("Re: [PATCH] mm: add helper", "This patch causes a 10% regression in hackbench.\n")


def test_nlp_is_cached_and_marks_quote_depth():
    nlp = extractors.get_nlp()
    assert nlp is extractors.get_nlp()
    from extractors.pipeline import run
    body = "Own text here.\n> quoted line with v6.1\n> > deeper quote\n"
    doc = run("s", body)
    assert doc.text == body
    depths = {t.text: t._.quote_depth for t in doc if not t.is_space}
    assert depths["Own"] == 0 and depths["quoted"] == 1 and depths["deeper"] == 2
    assert any(s.label_ == "VERSION" and s.text == "v6.1" for s in doc.spans["kernel"])
    assert len(list(doc.sents)) >= 3


def test_review_reply_reporting_a_regression_of_the_patch():
    body = ("> This patch reworks the wakeup path.\n\n"
            "This patch causes a 12% regression in hackbench on my 2-socket box compared to v6.5.\n")
    c = extract("Re: [PATCH] sched: rework wakeups", body)
    assert c.is_regression and c.kind == "performance"
    assert c.change_percent == -12.0
    assert c.config["benchmark"] == "hackbench"


def test_regzbot_introduced_line_names_the_culprit():
    c = extract("Re: boot regression", "#regzbot introduced: 0f1e2d3c4b5a\n#regzbot title: boot hang on v6.8\n")
    assert c.is_regression and c.culprit_commit == "0f1e2d3c4b5a"


def test_command_inside_a_shell_loop():
    body = """Sequential writes to a raid5 array got slower between 6.1 and 6.2:

mdadm --create /dev/md0 /dev/sd[b-e] -n 4 -l 5
for i in `seq 1 5`; do dd if=/dev/zero of=/dev/md0 bs=1024k count=2048; done

6.1: 170 MB/s, 6.2: 140 MB/s.
"""
    c = extract("raid5 write performance regression in 6.2", body)
    assert c.config["benchmark"] == "dd"
    assert c.config["command"] == "dd if=/dev/zero of=/dev/md0 bs=1024k count=2048"


def test_regression_tooling_discussion_is_not_a_report():
    body = ("We built a dashboard that collects CI results from several labs and links each\n"
            "reported regression to the boards it was seen on, since a reported regression has a\n"
            "life cycle: it is detected, bisected, fixed. Feedback is welcome.\n")
    c = extract("Kernel regression tracking/reporting dashboard", body)
    assert not c.is_regression


def test_later_verdict_moves_the_blame_end_to_end():
    body = ("My router no longer boots with 5.3-rc2. git bisect pointed to commit 1a2b3c4d5e6f.\n"
            "\n"
            "Looking closer, the bisect step before it was wrong, so 9f8e7d6c5b4a is most likely the\n"
            "real bad commit. Reverting it on top of 5.3-rc2 makes the board boot again.\n")
    c = extract("Boot failure with 5.3-rc2 - bisected to commit 1a2b3c4d5e6f", body)
    assert c.culprit_commit == "9f8e7d6c5b4a"


def test_later_verdict_moves_the_blame_to_another_commit():
    body = ("My router no longer boots with 5.3-rc2. git bisect pointed to commit 1a2b3c4d5e6f.\n"
            "\n"
            "Looking closer, the bisect step before it was wrong, so 9f8e7d6c5b4a is most likely the\n"
            "real bad commit. Reverting it on top of 5.3-rc2 makes the board boot again.\n")
    subject = "Boot failure with 5.3-rc2 - bisected to commit 1a2b3c4d5e6f"
    assert extract(subject, body).is_regression
    # the rule layer's opinion, which the trained culprit ranker receives as a feature (the
    # ranker itself decides from what the labelled corpus taught it)
    from extractors.pipeline import run
    rules = run(subject, body, learned_stage=False)._.rules
    assert rules.rule_claim.culprit_commit == "9f8e7d6c5b4a"
    assert "after1" in rules.rule_culprit.cues


def test_version_that_does_badly_compared_with_earlier_kernels_is_bad():
    body = ("The 3.14-rc2 kernel scores very badly in the lmbench context switch test compared\n"
            "with earlier kernels on our quad core box.\n")
    c = extract("context switch performance regression", body)
    assert c.is_regression and c.bad == "3.14-rc2"


def test_commit_that_introduces_a_failure_and_an_after_before_window():
    body = ("Still chasing this. The change that introduces the hangs for me landed\n"
            "somewhere after 4.1, but before 4.2-rc1. I am trying a narrower range now.\n")
    c = extract("Re: random freezes on my desktop", body)
    assert c.is_regression and c.kind == "functional"
    assert c.good == "4.1" and c.bad == "4.2-rc1"


def test_naming_the_commit_that_caused_the_failure_is_a_claim():
    body = "Took a week, but now I know the change which caused the lockups on my file server.\n"
    c = extract("Re: file server lockups", body)
    assert c.is_regression


def _rule_culprit(subject: str, body: str):
    from extractors.pipeline import run
    return run(subject, body, learned_stage=False)._.rules.rule_claim.culprit_commit


@pytest.mark.parametrize("body, culprit", [
    # the bisect's verdict on a line of its own after the id and title
    ("Since 6.3-rc1 the board hangs at boot. Git bisect reports\n"
     "a1b2c3d4e5f6 spi: imx: drop the old dma path\n"
     "as the first bad commit. Later 0a9b8c7d6e5f fixed another hang.\n", "a1b2c3d4e5f6"),
    # a bisect that "terminated on" a commit, a bisect result block in brackets
    ("I bisected between v6.1 and v6.2-rc3, and it terminated on 5d4c3b2a1f0e\n"
     "(\"net: rework the rx ring\").\n", "5d4c3b2a1f0e"),
    ("I ran git bisect over the merge window. The result is as follows.\n\n"
     "[7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d] clk: imx8: switch to the new pll driver\n\n"
     "The board boots when CONFIG_CLK_IMX8 is off, but that is no fix.\n",
     "7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d"),
    # traced / tracked to, a regression tracker's "caused directly or indirectly by a change"
    ("Networking stopped working after the update. I tracked this to commit 9e8d7c6b5a4f\n"
     "(\"ixgbe: defer link setup\"), which went in for 6.5.\n", "9e8d7c6b5a4f"),
    ("I noticed a report about a regression that appears to be caused directly or\n"
     "indirectly by a change of yours:\n\n3c2b1a0f9e8d7c (\"mm: batch the lru drain\") [v6.9-rc2]\n",
     "3c2b1a0f9e8d7c"),
    # "the breakage is because of <id>"
    ("Builds of the arm tree fail since yesterday. The breakage in linux-next is because of\n"
     "4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e.\n", "4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e"),
])
def test_more_ways_of_naming_the_blamed_commit(body, culprit):
    assert _rule_culprit("Re: regression on my board", body) == culprit


def test_later_verdict_marks_the_revised_blame():
    from extractors.features import commit_candidates
    from extractors.pipeline import run
    body = ("Boot hangs since 6.4-rc1. git bisect pointed to commit 1a2b3c4d5e6f.\n\n"
            "But that bisect had a bad step; 9f8e7d6c5b4a is actually the real culprit, reverting\n"
            "it makes the board boot again.\n")
    rules = run("Boot hang on 6.4-rc1", body, learned_stage=False)._.rules
    cands = {c.norm: c.feats for c in commit_candidates(rules.ex, rules.groups, rules.rule_culprit)}
    assert "verdict:revised" in cands["1a2b3c4d5e6f"] and "verdict:revises" in cands["9f8e7d6c5b4a"]
    assert extract("Boot hang on 6.4-rc1", body).culprit_commit == "9f8e7d6c5b4a"


@pytest.mark.parametrize("body, sha", [
    # a CI report's metadata names the tested head, a regzbot fix line the fix, a format-patch
    # header and a diff's index line the patch itself, a build id no commit at all
    ("Boot test failures on next-20240102.\n\nmetadata:\n  git branch: master\n"
     "  git commit: 0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d\n  git describe: next-20240102\n",
     "0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d"),
    ("The wifi regression is gone with rc4, so this can be closed:\n\n"
     "#regzbot fix: 5e6f7a8b9c0d (\"wifi: iwlwifi: fix the default version\")\n", "5e6f7a8b9c0d"),
    ("The raid1 array no longer starts degraded. A patch is below.\n\n"
     "From 1f2e3d4c5b6a7f8e9d0c1b2a3f4e5d6c7b8a9f0e Mon Sep 17 00:00:00 2001\nFrom: A Hacker <a@example.org>\n",
     "1f2e3d4c5b6a7f8e9d0c1b2a3f4e5d6c7b8a9f0e"),
])
def test_ids_named_in_another_role_are_no_culprit(body, sha):
    from extractors.features import commit_candidates
    from extractors.learned import _named_in_another_role
    from extractors.pipeline import run
    rules = run("Re: regression on next", body, learned_stage=False)._.rules
    cands = {c.norm: c for c in commit_candidates(rules.ex, rules.groups, rules.rule_culprit)}
    assert _named_in_another_role(cands[sha])
    assert extract("Re: regression on next", body).culprit_commit is None


def test_bisected_to_these_commits():
    body = ("For the write latency problem, I bisected it to these commits:\n\n"
            "4ad5e6f7 md: count pending writes per cpu\n210a9b8 percpu-refcount: switch to atomic mode\n")
    assert _rule_culprit("Re: higher write latency since 4.14", body) == "4ad5e6f7"


def test_patch_that_introduces_the_error_is():
    body = ("Using git bisect, the patch that introduces this build error is:\n\n"
            " 7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b is first bad commit\n"
            "diff-tree 7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b (from 0f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6)\n")
    assert _rule_culprit("Re: compile error in latest git", body) == "7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b"
