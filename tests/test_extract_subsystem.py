"""Subsystem rules: commit-title prefixes, report subjects, paths, keywords (messages written for the tests)."""

import pytest

import extractors
from extractors.subsystems import from_path, from_prefix, subsystem_for


@pytest.mark.parametrize("title,expected", [
    ("mm/slub: avoid a lock", "mm"),
    ("slab: remove cpu partial slabs", "mm"),
    ("XArray: add a helper", "lib"),
    ("blk-mq: fix tag leak", "block"),
    ("io_uring: cancel on exit", "io_uring"),
    ("sched/fair: Implement delayed dequeue", "kernel/sched"),
    ("locking/rwsem: spin less", "kernel/locking"),
    ("rcu: speed up grace periods", "kernel/rcu"),
    ("x86/mm/tlb: Open-code on_each_cpu_cond_mask()", "arch/x86/mm"),
    ("x86/irq: Convey vector as argument", "arch/x86"),
    ("arm64: mm: use contiguous hints", "arch/arm64/mm"),
    ("powerpc: Factor do_feature_fixup calls", "arch/powerpc"),
    ("drm/i915/gt: flush earlier", "drivers/gpu/drm/i915"),
    ("drm/amdgpu: fix suspend", "drivers/gpu/drm/amd"),
    ("net/mlx5e: fix rx", "drivers/net"),
    ("net: stmmac: fix dma", "drivers/net"),
    ("tcp: get rid of sysctl_tcp_adv_win_scale", "net"),
    ("ipv6: fix route lookup", "net"),
    ("ext4: use s_extent_max_zeroout_kb", "fs/ext4"),
    ("xfs: don't block in busy flushing", "fs/xfs"),
    ("btrfs: do not strictly require dirty metadata threshold", "fs/btrfs"),
    ("f2fs: fix gc", "fs/f2fs"),
    ("nfs: fix readdir", "fs/nfs"),
    ("fuse: fix writeback", "fs/fuse"),
    ("ovl: fix copy up", "fs/overlayfs"),
    ("iomap: fix dio", "fs/iomap"),
    ("nvme-pci: disable write zeroes", "drivers/nvme"),
    ("scsi: sd: fix", "drivers/scsi"),
    ("usb: xhci: fix resume", "drivers/usb"),
    ("PCI: fix ASPM", "drivers/pci"),
    ("ACPI: EC: fix", "drivers/acpi"),
    ("cpufreq: intel_pstate: fix", "drivers/cpufreq"),
    ("thermal: core: fix", "drivers/thermal"),
    ("efi: Allow drivers to reserve boot services forever", "drivers/firmware/efi"),
    ("soc: fsl: qe: drop broken lazy call", "drivers/soc"),
    ("virtio_net: fix", "drivers/net"),
    ("virtio: fix ring", "drivers/virtio"),
    ("KVM: x86: fix tsc", "arch/x86/kvm"),
    ("KVM: fix memslots", "virt/kvm"),
    ("perf/core: fix", "kernel/events"),
    ("perf tools: fix build", "tools/perf"),
    ("bpf: fix verifier", "kernel/bpf"),
    ("cgroup: fix rstat", "kernel/cgroup"),
    ("RTC: Rework RTC code to use timerqueue for events", "drivers/rtc"),
    ("iwlwifi: mvm: fix NVM check", "drivers/net/wireless"),
    ("Merge tag 'usb-6.8-rc1'", None),
    ("random words without a prefix", None),
])
def test_from_prefix(title, expected):
    assert from_prefix(title) == expected


@pytest.mark.parametrize("path,expected", [
    ("fs/ext4/inode.c", "fs/ext4"),
    ("fs/namei.c", "fs"),
    ("mm/slub.c", "mm"),
    ("kernel/sched/fair.c", "kernel/sched"),
    ("drivers/gpu/drm/i915/", "drivers/gpu/drm/i915"),
    ("drivers/net/wireless/intel/iwlwifi/mvm/fw.c", "drivers/net/wireless"),
    ("drivers/nvme/host/pci.c", "drivers/nvme"),
    ("arch/x86/kernel/irq.c", "arch/x86"),
    ("Documentation/foo.rst", None),
])
def test_from_path(path, expected):
    assert from_path(path) == expected


def test_report_subject_written_like_a_commit_title():
    assert subsystem_for("Re: [REGRESSION] slab: sheaves slow down my box", None, "text", None, "performance",
                         None) == "mm"


def test_title_written_next_to_the_culprit_id():
    clean = 'Reverting 4f42f80a8f - "ext4: use a smaller extent" makes xfstests pass again.'
    assert subsystem_for("possible dev branch regression", None, clean, None, "functional", None,
                         "4f42f80a8f") == "fs/ext4"


def test_paths_named_twice_outside_traces():
    clean = ("The problem is in drivers/nvme/host/core.c, the retry loop there.\n"
             "Compare drivers/nvme/host/pci.c too.\n")
    assert subsystem_for("timeouts since 6.9", None, clean, None, "functional", None) == "drivers/nvme"


def test_stack_trace_paths_do_not_count():
    clean = ("RIP: foo+0x12 drivers/nvme/host/core.c:123\n"
             " bar+0x1 drivers/nvme/host/pci.c:55\n")
    assert subsystem_for("crash", None, clean, None, "functional", None) is None


def test_driver_word_in_subject_but_not_among_alternatives():
    assert subsystem_for("i915 flicker since 6.1", None, "x", None, "functional", None) == "drivers/gpu/drm/i915"
    assert subsystem_for("crashes with 6.0 i915 / ucode related", None, "x", None, "functional", None) is None


def test_io_scheduler_is_block_not_cpu_scheduler():
    clean = ("echo cfq >/sys/block/sda/queue/scheduler\n"
             "echo deadline >/sys/block/sda/queue/scheduler\n"
             "echo noop >/sys/block/sda/queue/scheduler\n")
    assert subsystem_for("dd slower", None, clean, None, "performance", None) == "block"


def test_end_to_end_robot_tag():
    body = ("Hello,\n\nkernel test robot noticed a -7.5% regression of fsmark.files_per_sec on:\n\n"
            "commit: 0123456789abcdef0123456789abcdef01234567 (\"xfs: log less\")\n")
    c = extractors.extract("[linus:master] [xfs]  0123456789: fsmark.files_per_sec -7.5% regression", body)
    assert c.subsystem == "fs/xfs"


def test_core_kernel_areas_are_named_as_kernel_people_do():
    from extractors.subsystems import canonical

    assert canonical("kernel/sched") == "sched" and canonical("kernel/locking") == "locking"
    assert canonical("fs/xfs") == "fs/xfs" and canonical("kernel") == "kernel" and canonical(None) is None
    claim = extractors.extract(
        "[REGRESSION] pipe throughput down 30% since v6.12",
        "Hi,\n\nhackbench pipe throughput dropped by 30% from v6.11 to v6.12.\n"
        "I bisected it to commit 152e11f6df29 (\"sched: Implement delayed dequeue\").\n")
    assert claim.is_regression and claim.subsystem == "sched"


# the kernel tree table (extractors/data/kernel_paths.txt.gz, built by bench/build_kernel_paths.py)
@pytest.mark.parametrize("name,under,expected", [
    ("dwc3", None, "drivers/usb/dwc3"),            # a directory of that one name
    ("dwc3", "drivers/usb", "drivers/usb/dwc3"),
    ("btusb", None, "drivers/bluetooth"),          # a source file: its directory
    ("r8169", None, "drivers/net/ethernet/realtek"),  # a module a Makefile builds
    ("xhci-pci", "drivers/usb", "drivers/usb/host"),  # '-' and '_' are one
    ("iwlwifi", None, "drivers/net/wireless/intel/iwlwifi"),
    ("gadget", "drivers/usb", "drivers/usb/gadget"),  # under/name
    ("vmscan", "mm", "mm"),                        # a core file names its directory
    ("btusb", "drivers/usb", None),                # not below the area asked about
    ("no_such_name_here", None, None),
])
def test_kernel_tree_lookup(name, under, expected):
    from extractors import kernel_paths

    assert kernel_paths.locate(name, under) == expected


def test_kernel_tree_lookup_of_an_ambiguous_name_is_none():
    from extractors import kernel_paths

    assert kernel_paths.locate("hda") is None               # sound/hda and sound/pci/hda
    assert kernel_paths.locate("i2c") is None                # many directories called i2c
    assert kernel_paths.is_leaf("drivers/net/wireless/intel/iwlwifi")
    assert not kernel_paths.is_leaf("drivers/usb")


@pytest.mark.parametrize("title,expected", [
    ("usb: dwc3: gadget: fix ep0", "drivers/usb/dwc3"),
    ("Bluetooth: btusb: add an id", "drivers/bluetooth"),
    ("iwlwifi: mvm: fix NVM check", "drivers/net/wireless/intel/iwlwifi"),  # a driver is not split
    ("Input: ads7846 - fix the irq", "drivers/input/touchscreen"),
    ("ns: fix", None),                             # a short name only as a directory's
    ("ptp: add debugfs", "drivers/ptp"),
    ("tty: serial: 8250: fix", "drivers/tty/serial/8250"),
    ("x86/mce: fix", "arch/x86/kernel/cpu/mce"),
    ("r8169: fix rx", "drivers/net/ethernet/realtek"),
    ("mm: memcg: charge less", "mm/memcontrol"),
    ("sched/fair: Implement delayed dequeue", "kernel/sched"),  # a file of a core area
    ("xfs: scrub: fix", "fs/xfs"),                 # a filesystem is one area
    ("ALSA: hda: fix", "sound/hda"),               # sound/hda (not sound/aoa's alsa.c)
    ("Regression: foo bar", None),
])
def test_specific_prefix(title, expected):
    from extractors.subsystems import specific_prefix

    assert specific_prefix(title) == expected


def test_subject_naming_a_driver_by_its_tree_name():
    assert subsystem_for("sata_sil24 broken since 2.6.23-rc4", None, "x", None, "functional", None) == "drivers/ata"
    assert subsystem_for("dwc3-qcom: tx-fifo-resize regression", None, "x", None, "functional", None) \
        == "drivers/usb/dwc3"
    # an acronym that is only some sound directory's name is not an area
    assert subsystem_for("Boot problem on PPC with 4.4-git", None, "x", None, "functional", None) is None


def test_filesystem_measured_on_makes_fs_finer():
    assert subsystem_for("fsync heavy workload got slower", None, "x", "xfs", "performance", None) == "fs/xfs"


# the subsystem ranker's candidates (subsystems.candidates): every area, at every depth the evidence supports
def _cands(subject, culprit_subject=None, clean="x", own=""):
    from extractors.subsystems import candidates

    return candidates(subject, culprit_subject, clean, None, "functional", None, None, own)


def test_candidates_offer_a_title_area_at_each_depth():
    got = _cands("slow reclaim since 3.11", "mm: vmscan: obey proportional scanning requirements")
    assert ("mm", "culprit_title") in got
    assert ("mm/vmscan", "culprit_title:file") in got           # the file the prefix names
    assert ("mm/vmscan", "culprit_title:litfull") in got        # the prefix as written
    got = _cands("hackbench slower", "block/mq-deadline: use separate insertion lists")
    assert ("block", "culprit_title") in got and ("block/mq-deadline", "culprit_title:litfull") in got


def test_candidates_from_paths_keep_where_the_path_was_written():
    clean = ("The warning comes from drivers/nvme/host/pci.c:1234\n"
             "I think drivers/nvme/host/core.c has the bug.\n")
    got = _cands("timeouts", clean=clean)
    assert ("drivers/nvme", "path_trace") in got and ("drivers/nvme/host/pci", "path_trace:file") in got
    assert ("drivers/nvme", "path_prose") in got and ("drivers/nvme/host", "path_prose:dir") in got


def test_candidates_from_driver_names_in_the_authors_text():
    got = _cands("keyboard dead after upgrade", own="Booting with i8042.nopnp makes the i8042 work again.")
    assert ("drivers/input/serio", "own_name") in got and ("drivers/input", "own_name:coarse") in got
    assert _cands("keyboard dead", own="nothing named here") == []


def test_subsystem_ranker_picks_the_culprit_titles_filesystem():
    body = ("Hi,\n\nsince v6.8 fs_mark on XFS is 20% slower. I bisected it to\n"
            "commit 0123456789ab (\"xfs: log less\").\nReverting it restores the numbers.\n")
    c = extractors.extract("[REGRESSION] fs_mark 20% slower since v6.8", body)
    assert c.is_regression and c.subsystem == "fs/xfs"


def test_area_prefix_of_a_git_log_block_title_and_of_the_reports_own_subject():
    # the blamed commit's title only as the line under its id in a git log block
    body = ("The bisect finished. The first bad commit is:\n\ncommit 54a6eb5c4765aa573a030ceeba2c14e3d2ea5706\n"
            "    mm: use zonelist_zone() to get zone\n\nReverting it on top of v6.8 restores the throughput.\n")
    c = extractors.extract("Re: [REGRESSION] page_fault1 throughput regression in will-it-scale since v6.8", body)
    assert c.subsystem == "mm"
    # the report's own subject names the area with one prefix
    c = extractors.extract("[REGRESSION] mm: page_fault2 throughput drop since v6.8",
                "Hi,\n\nSince v6.8 will-it-scale page_fault2 throughput dropped by 9% on a Xeon box. v6.7 is fine.\n")
    assert c.subsystem == "mm"
