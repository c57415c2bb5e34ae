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
