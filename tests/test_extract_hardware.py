"""Hardware rules: LKP test-machine lines, disk parameter, memory blocks, ambiguity (messages written for the tests)."""

import extractors
from extractors.mentions import find_commits

LKP = """Hello,

kernel test robot noticed a -9.1% regression of fio.read_iops on:

commit: 0123456789abcdef0123456789abcdef01234567 ("block: merge less")

testcase: fio-basic
config: x86_64-rhel-9.4
test machine: 96 threads 2 sockets Intel(R) Xeon(R) Platinum 8260L CPU @ 2.40GHz (Cascade Lake) with 512G memory
parameters:

\tdisk: 2SSD
\tfs: ext4
\trw: randread
"""


def test_lkp_test_machine_and_disk_parameter():
    c = extractors.extract("[linus:master] [block]  0123456789: fio.read_iops -9.1% regression", LKP)
    hw = c.hardware
    assert "Xeon(R) Platinum 8260L" in hw["cpu"]
    assert hw["memory"] == "512G"  # the size as written, without the noun
    assert hw["storage"] == "2SSD"
    assert c.config["filesystem"] == "ext4"


def test_memory_block_with_total_line():
    body = ("fio randread got slower after the update from 6.1 to 6.6.\n\nSystem:\nCPU: 32 cores\nMemory:\n"
            "Total: 187 GB\nSwap: 4 GB\n\nIOPS dropped from 100k to 90k.\n")
    c = extractors.extract("[REGRESSION] fio randread slower in 6.6", body)
    assert c.hardware["memory"] == "187 GB"


def test_memory_setting_of_a_vm():
    body = "The guest is started with QEMU_MEM_MB=8192 and boots fine on 6.1 but hangs on 6.2.\n"
    c = extractors.extract("boot hang in 6.2", body)
    assert c.hardware["memory"] == "QEMU_MEM_MB=8192"


def test_two_architectures_compared_give_no_arch_and_no_cpu():
    body = ("The slowdown shows up on our Graviton3 (arm64) and Intel (x86_64) machines alike, 6.18 vs 7.0.\n"
            "arm64: -12% ops/sec, x86_64: -10% ops/sec.\n")
    c = extractors.extract("[REGRESSION] mmap slower in 7.0", body)
    assert c.hardware["arch"] is None
    assert c.hardware["cpu"] is None


def test_one_architecture_with_a_passing_mention_of_another_keeps_it():
    body = ("On my i386 box 6.2 no longer boots, 6.1 was fine. x86 only, the x86 early code changed.\n"
            "(Unlike some broken MIPS pipeline.)\n")
    c = extractors.extract("i386 boot failure in 6.2", body)
    assert c.hardware["arch"] == "i386"


def test_commit_id_split_by_hard_wrapping():
    text = 'the root cause is commit "633\n260fa143bbed05e65dc557a492667dfdc45bb(x86/irq: foo)"'
    ids = [m.text for m in find_commits(text)]
    assert "633260fa143bbed05e65dc557a492667dfdc45bb" in ids
    assert "260fa143bbed05e65dc557a492667dfdc45bb" not in ids


def test_wrapped_pieces_that_do_not_make_a_full_id_are_not_joined():
    text = "version 1234\nabcdef12 is a short id"
    ids = [m.text for m in find_commits(text)]
    assert all(len(i) < 20 for i in ids)


def test_less_common_architectures_are_named():
    c = extractors.extract("pipe throughput regression on ia64",
                           "Since 2.6.40-rc1 the pipe benchmark is much slower on our Itanium boxes.\n")
    assert c.hardware["arch"] == "ia64"
    c = extractors.extract("Boot hang on sparc64 with 3.9",
                           "My UltraSPARC-IIIi machine hangs at boot since 3.9; 3.8 boots fine.\n"
                           "The hang is somewhere in arch/sparc/kernel/setup_64.c.\n")
    assert c.hardware["arch"] == "sparc64"
    c = extractors.extract("parisc: kernel panic since 4.2", "The PA-RISC box panics at boot since 4.2.\n")
    assert c.hardware["arch"] == "parisc"


def _config_report(block: str) -> str:
    return ("Since v6.8 my box hangs at boot; v6.7 was fine. This is a regression.\n\n"
            "The relevant part of my config:\n\n" + block + "\nThanks,\nA User\n")


def test_config_excerpt_whole_config_and_config_diff():
    """Options in .config format: an excerpt names the options shown as set (its "is not set"
    lines are the rest of the file); a whole .config (the generator's header) and a diff of two
    .config files name none; a long hand-written list of set options is still a list."""
    excerpt = "| CONFIG_MTD_PHYSMAP=y\n| CONFIG_MTD_PHYSMAP_LEN=0x400000\n| # CONFIG_MTD_PLATRAM is not set\n"
    c = extractors.extract("[REGRESSION] mtd: flash gone since v6.8", _config_report(excerpt))
    assert sorted(c.config["kernel_config"]) == ["CONFIG_MTD_PHYSMAP=y", "CONFIG_MTD_PHYSMAP_LEN=0x400000"]
    whole = ("#\n# Automatically generated file; DO NOT EDIT.\n# Linux/x86 6.8.0 Kernel Configuration\n#\n"
             "CONFIG_CC_VERSION_TEXT=\"gcc\"\nCONFIG_CC_IS_GCC=y\nCONFIG_GCC_VERSION=120200\n# CONFIG_WERROR is not set\n")
    c = extractors.extract("[REGRESSION] boot hang since v6.8", _config_report(whole))
    assert c.config["kernel_config"] == []
    diff = "@@ -19,7 +19,7 @@\n CONFIG_IRQ_WORK=y\n-CONFIG_PAHOLE_VERSION=127\n+CONFIG_PAHOLE_VERSION=128\n CONFIG_SLUB=y\n"
    c = extractors.extract("[REGRESSION] boot hang since v6.8", _config_report(diff))
    assert c.config["kernel_config"] == []
    many = "".join(f"CONFIG_OPTION_{i}=y\n" for i in range(30))
    c = extractors.extract("[REGRESSION] boot hang since v6.8", _config_report(many))
    assert len(c.config["kernel_config"]) == 30


LKP_NFS = LKP.replace("\tfs: ext4\n", "\tfs: ext4\n\tfs2: nfsv4\n")


def test_lkp_layered_filesystem_parameter_is_the_filesystem_under_test():
    # an LKP job over NFS: fs2 names the filesystem the test ran on (exported from fs)
    c = extractors.extract("[linus:master] [nfsd]  0123456789: fio.read_iops -9.1% regression", LKP_NFS)
    assert c.config["filesystem"] == "nfsv4"


def _fs_cands(subject, body):
    from extractors.hwcands import fs_candidates
    ex = extractors.pipeline.run(subject, body, learned_stage=False)._.rules.ex
    return {c.value: c.feats for c in fs_candidates(ex, None)}


def test_filesystem_candidates_say_how_each_name_is_written():
    body = ("Setup: mkfs.xfs -f /dev/sdb, then fio.\n"
            "[    5.151249] BTRFS: device fsid 04de devid 1\n"
            "openat(AT_FDCWD, \"/mnt/f\", O_RDWR) = -1 EROFS (Read-only file system)\n"
            "   11:12   100%   ltp/1HDD-ext4-syscalls_part4/vm-snb\n")
    cands = _fs_cands("[ext3] 0123456789: aim7.jobs-per-min -9% regression", body)
    assert "fsrc:setup" in cands["xfs"]
    assert "fsrc:log" in cands["btrfs"]
    assert "fsrc:lkp_path" in cands["ext4"]
    assert "fsrc:subj_tag" in cands["ext3"]
    assert "erofs" not in cands  # the errno, not the filesystem


def test_storage_candidates_keep_a_counted_drive_array_whole():
    from extractors.hwcands import storage_candidates
    ex = extractors.pipeline.run("x", "The box has a 20 drive array (raid6) for the data.\n", learned_stage=False)._.rules.ex
    assert "20 drive array" in {c.value for c in storage_candidates(ex, None)}


def test_lkp_machine_line_gives_the_cpu_as_the_robot_writes_it():
    body = LKP.replace("Intel(R) Xeon(R) Platinum 8260L CPU @ 2.40GHz (Cascade Lake)", "Cooper Lake")
    c = extractors.extract("[linus:master] [block]  0123456789: fio.read_iops -9.1% regression", body)
    assert c.hardware["cpu"] == "Cooper Lake"


def test_lkp_disk_in_a_test_path_is_the_storage():
    body = LKP.replace("\tdisk: 2SSD\n", "") + (
        "\ncompiler/disk/fs/kconfig/rootfs/tbox_group/testcase:\n"
        "  gcc-12/1HDD/ext4/x86_64-rhel-8.3/debian-12-x86_64.cgz/lkp-icl-2sp6/fio-basic\n")
    c = extractors.extract("[linus:master] [block]  0123456789: fio.read_iops -9.1% regression", body)
    assert c.hardware["storage"] == "1HDD"


def test_storage_model_names_of_cpus_are_not_drives():
    from extractors.hwcands import storage_candidates
    ex = extractors.pipeline.run("x", "Seen on an IBM Power11 LPAR and an Intel Xeon 6248 box.\n",
                                 learned_stage=False)._.rules.ex
    assert not {c.value for c in storage_candidates(ex, None)}


def test_config_options_tested_in_code_and_quoted_config_values():
    body = ("Since 6.1 the box fails to boot, 6.0 worked. The patch did:\n"
            ">>> +#ifdef CONFIG_X86\n>>> -#if IS_REACHABLE(CONFIG_FB)\n"
            "I use CONFIG_PREEMPT=y.\n#\n# Automatically generated file; DO NOT EDIT.\n"
            "# Linux/x86 5.15.0 Kernel Configuration\n#\n"
            "CONFIG_CC_VERSION_TEXT=\"gcc (GCC) 10.2.1 20201125\"\nCONFIG_CC_IS_GCC=y\nCONFIG_GCC_VERSION=100201\n")
    c = extractors.extract("[REGRESSION] boot fails in 6.1", body)
    assert c.config["kernel_config"] == ["CONFIG_PREEMPT=y"]


LKP_BOOT = """Hello,

kernel test robot noticed a boot regression "BUG:kernel_hang_in_boot_stage" on:

commit: 0123456789abcdef0123456789abcdef01234567 ("mm: rework the page allocator")

in testcase: boot

config: i386-randconfig-062-20250101
compiler: gcc-12
test machine: qemu-system-x86_64 -enable-kvm -cpu SandyBridge -smp 2 -m 16G

The kernel hangs at boot since this commit; its parent boots fine.
"""


def test_lkp_config_line_decides_the_arch_and_the_qemu_line_the_memory():
    # the kernel was built i386 (config line) though QEMU emulates an x86_64 machine; the VM's
    # memory (-m 16G) is the test machine's memory
    c = extractors.extract("[linus:master] [mm]  0123456789: BUG:kernel_hang_in_boot_stage", LKP_BOOT)
    assert c.is_regression
    assert c.hardware["arch"] == "i386"
    assert c.hardware["memory"] == "16G"


def test_lkp_machine_line_with_an_x86_cpu_is_x86_64_without_a_config_line():
    body = LKP.replace("config: x86_64-rhel-9.4\n", "")
    c = extractors.extract("[linus:master] [block]  0123456789: fio.read_iops -9.1% regression", body)
    assert c.hardware["arch"] == "x86_64"


def test_arch_word_starting_a_bisect_log_title_or_a_tag_is_not_the_machine():
    body = ("Since 6.2 the i.MX6 board no longer finds its SD card; 6.1 was fine. git bisect log:\n"
            "# bad: [0123456789abcdef0123456789abcdef01234567] arm64: defconfig: enable the GPIO driver\n"
            "# bad: [1123456789abcdef0123456789abcdef01234567] Merge tag 'arm64-6.2-1' of git://git.kernel.org\n")
    c = extractors.extract("SD card not found on i.MX6 since 6.2", body)
    assert c.hardware["arch"] == "arm"  # the board's architecture, not the commit title's


def test_a_ram_disk_is_not_the_machine_memory():
    body = ("The server is 30% slower in pgbench since 6.8. Setup: 16 cores, 4G RAM disk for the data.\n"
            "6.7 gives 1200 tps, 6.8 gives 840 tps.\n")
    c = extractors.extract("pgbench regression in 6.8", body)
    assert c.hardware["memory"] is None


def test_boot_log_available_memory_is_not_the_machine_memory():
    body = ("2.6.20 oopses at boot, 2.6.19 was fine. dmesg:\n"
            "Memory: 1034196k/1047872k available (2498k kernel code, 13064k reserved)\n"
            "BUG: unable to handle kernel NULL pointer dereference\n")
    c = extractors.extract("2.6.20 boot oops", body)
    assert c.hardware["memory"] is None
