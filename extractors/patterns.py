"""Regular expressions and small vocabularies for kernel-list entities and cue phrases.

Everything here is general kernel / benchmarking knowledge, nothing is taken from a
particular message.
"""

from __future__ import annotations

import re

from .scan import word_led

# --------------------------------------------------------------------------------- ids
HEX_ID = re.compile(r"(?<![\w./:=@#-])(?:(?:commit|sha1?|id)[ :=]+)?([0-9a-f]{7,40})(?![\w@-])")
HEX_UNDERSCORE = re.compile(r"(?<=_)([0-9a-f]{6,12})(?![\w.])")
DESCRIBE = re.compile(r"(?<![\w.])(v?\d+\.\d+(?:\.\d+)?(?:-rc\d+)?-\d+-g([0-9a-f]{7,40}))(?![\w])")

# ----------------------------------------------------------------------------- versions
VERSION = re.compile(
    r"""(?:(?<=\.\.)|(?<![\w.\-/@]))
    (?>
      (?P<next>next-\d{8})
    | (?P<ver>v?[2-9]\.\d{1,2}(?:\.\d{1,3}){0,2}(?:-rc\d{1,2})?
        (?:-next-\d{8}|-git\d*|-next|\+
          |-\d+(?:\.\d+)+\.(?:el|fc)\d+[\w.]*          # distro builds: 5.14.0-427.13.1.el9_4.x86_64
          |-\d+-(?:generic|lowlatency|aws|azure|gcp|oracle|kvm))?)
    )
    (?![\w]|\.\d|\.[xy]\b\.)""", re.X)
BARE_RC = re.compile(r"(?<![\w.])(-rc\d{1,2}\+?)(?![\w])")
TOOL_BEFORE = re.compile(
    r"\b(?:gcc|clang|llvm|make|glibc|binutils|python\d?|perl|gdb|qemu|bash|iozone|fio|sysbench|"
    r"stress-ng|firmware|bios|version|openssl|systemd|mesa|xorg|rustc|ld|as|gnu|libc|kmod|"
    r"util-linux|e2fsprogs|xfsprogs|btrfs-progs|mdadm|lvm|docker|java|go|node|ubuntu|debian|"
    r"fedora|centos|rhel|sles|opensuse|android|chrome|firefox|grub|u-boot|uefi|acpi|pci|usb|"
    r"bluetooth|spec|mtu|tls|ssl|http|ipv|nfsv?|smb|cifs|protocol)\s*$", re.I)

# ------------------------------------------------------------------------------- config
CONFIG_OPT = re.compile(r"(?<![\w])(CONFIG_[A-Z0-9_]{2,})(=(?:[ymn]\b|\"[^\"]*\"|[\w.-]+))?")

# ------------------------------------------------------------------------------ numbers
PERCENT = re.compile(r"(?<![\w.])([+-−]?\d+(?:\.\d+)?)\s?%")
UNIT_WORDS = (
    r"[KMGT]i?B/s(?:ec)?|[KMGT]b/s|[KMGT]bps|[KMGT]bit/s|bytes/s(?:ec)?|MB/sec|IOPS|iops|ops/s(?:ec)?|"
    r"ops/sec|ops|req/s|requests/s(?:ec)?|transactions/s(?:ec)?|tps|fps|pps|Kpps|Mpps|"
    r"usecs?|us|µs|ms|msecs?|ns|nsecs?|seconds?|secs?|s|minutes?|mins?|hours?|cycles|"
    r"jobs/min|files/sec|files/s|MHz|GHz")
# The throughput/rate subset of UNIT_WORDS (no time units): names a metric on its own.
RATE_UNITS = (r"[KMGT]i?B/s(?:ec)?|[KMGT]b/s|[KMGT]bps|[KMGT]bits?/s(?:ec)?|IOPS|iops|ops/s(?:ec)?|req/s|"
              r"transactions/s(?:ec)?|tps|fps|pps|files/s(?:ec)?")
PAIR_VS = re.compile(
    r"(?<![\w.])(\d+(?:\.\d+)?)\s*(" + UNIT_WORDS + r")?\s+(?:vs\.?|versus|->|=>|→)\s+(\d+(?:\.\d+)?)\s*("
    + UNIT_WORDS + r")(?![\w/])")
PAIR_FROM_TO = re.compile(
    r"\bfrom\s+(?:about\s+|roughly\s+|around\s+|~)?(\d+(?:\.\d+)?)\s*(" + UNIT_WORDS +
    r")?\s+(?:down\s+|up\s+)?to\s+(?:about\s+|roughly\s+|around\s+|~)?(\d+(?:\.\d+)?)\s*(" + UNIT_WORDS +
    r")?(?![\w/.])")
UNIT_LONG = {
    "megabytes per second": "MB/s", "megabyte per second": "MB/s", "gigabits per second": "Gbps",
    "gigabytes per second": "GB/s", "kilobytes per second": "KB/s", "megabits per second": "Mbps",
    "operations per second": "ops/s", "requests per second": "req/s",
    "transactions per second": "tps", "iops": "IOPS",
}
UNIT_LONG_RE = re.compile(r"\b(" + "|".join(re.escape(k) for k in UNIT_LONG) + r")\b", re.I)
THROUGHPUT_UNIT = re.compile(r"(?:[KMGT]i?B/s|[KMGT]b/s|[KMGT]bps|bit/s|ops/s|IOPS|iops|req/s|tps|"
                             r"jobs-per-min|per_sec|per_thread_ops|per_process_ops|_ops\b|throughput|"
                             r"ops|score|bandwidth|files_per_sec|\bbw\b)", re.I)
TIME_METRIC = re.compile(r"(?:latency|time|duration|elapsed|\bsecs?\b|\bms\b|\bus\b|usecs?|nsecs?|"
                         r"seconds|runtime|cycles|as long|overhead|(?<![a-z])lat(?![a-z])|_(?:ns|us|ms)\b)", re.I)

# ------------------------------------------------------------------------------ robots
ROBOT_SUBJECT = re.compile(
    r"(?:^|\]\s*)([0-9a-f]{7,40}):\s+([\w.\-/:+]+?)\s+([+-]?\d+(?:\.\d+)?)%\s+(regression|improvement)",
    re.I)
ROBOT_BODY = re.compile(
    r"(?:we|robot) noticed (?:an? )?([+-]?\d+(?:\.\d+)?)%\s+(regression|improvement) of ([\w.\-/:+]+)", re.I)
ROBOT_MARK = re.compile(r"kernel test robot|FYI, we noticed|lkp@intel\.com|\[LKP\]|0-?day|KernelCI|syzbot",
                        re.I)
ROBOT_COMMIT_LINE = re.compile(r"^commit:\s*([0-9a-f]{7,40})\b", re.M)

# --------------------------------------------------------------------------- hardware
CPU_PATTERNS = [
    re.compile(r"model name\s*:\s*(.+)"),
    re.compile(r"(Intel\(R\)\s+(?:[\w-]+\((?:R|TM)\)\d?\s+)?(?:[\w-]+\s+){0,4}?(?:CPU\s+)?[\w-]*\d[\w-]*"
               r"(?:\s+CPU)?(?:\s+@\s*\d+(?:\.\d+)?\s*GHz)?)"),
    re.compile(r"\b(AMD\s+(?:EPYC|Ryzen|Opteron|Athlon|Phenom|Threadripper|Turion|Sempron|FX)(?:\(tm\))?"
               r"(?:\s+[\w-]+){1,4}?\s+Processor)", re.I),
    re.compile(r"\b(AMD\s+(?:EPYC|Ryzen|Opteron|Athlon|Phenom|Threadripper)(?:\(tm\))?\s+(?:\w+\s+)?\d{3,5}\w*)"),
    re.compile(r"\b((?:Intel\s+)?(?:Core\s+)?i[3579]-\d{4,5}[A-Z]{0,2})\b"),
    re.compile(r"\b((?:Intel\s+)?Xeon\s+(?:(?:Gold|Silver|Platinum|Bronze|Phi|E\d)\s*)?[\w-]*\d{3,5}\w*(?:\s+v\d)?)"),
    re.compile(r"\b((?:Intel\s+)?(?:Atom|Celeron|Pentium)\s+[A-Z]?\d{3,5}\w*)"),
    re.compile(r"\b((?:BCM|RK|MT|SM|SDM|MSM|APQ|Exynos\s?|Tegra\s?|i\.MX\s?|AM|OMAP|sama|SAMA|JH|SG)\d{3,4}[\w]*"
               r"(?:\s*\(?[A-Z]\d(?:\s+stepping)?\)?)?)"),
    re.compile(r"\b(Cortex-[AMR]\d{1,3}|Neoverse[- ][NVE]\d|Apple M\d(?: (?:Pro|Max|Ultra))?|Ampere Altra\w*|"
               r"Graviton\s?\d?|POWER\d{1,2}\w?|ThunderX\d?|Kunpeng\s?\d+)\b"),
    re.compile(r"\b(?:CPU|cpu|processor|Processor)\s+(?:is|:)\s+((?:an?\s+)?[A-Z][\w()\-]*(?:\s+[\w()\-]+){0,4}?)"
               r"(?=[,.;]|\s+(?:and|with|at|on)\b|$)", re.M),
    re.compile(r"\b((?:MPC|PPC)?7[44][0-9]{2}A?|e[356]00|e5500|e6500|PPC970\w*|G[45])\b(?=[^.\n]{0,40}"
               r"(?:cpuinfo|processor|CPU|cpu))"),
]
ARCH_WORDS = [
    (re.compile(r"\b(?:x86_64|x86-64|amd64|ARCH=x86_64|x64)\b"), "x86_64"),
    (re.compile(r"\b(?:i[3-6]86|ARCH=i386|x86[-_]32|32[- ]bit x86|x86 32[- ]bit)\b", re.I), "i386"),
    (re.compile(r"\b(?:arm64|aarch64|ARM64|AArch64|ARMv8|armv8)\b"), "arm64"),
    (re.compile(r"\b(?:powerpc|ppc64le|ppc64|ppc32|ppc|PowerPC|PPC(?:32|64)?|POWER\d{1,2})\b", re.I), "powerpc"),
    (re.compile(r"\b(?:riscv(?:64|32)?|RISC-V)\b", re.I), "riscv"),
    (re.compile(r"\bs390x?\b"), "s390"),
    (re.compile(r"\b(?:mips(?:64|el)?|MIPS)\b"), "mips"),
    (re.compile(r"\b(?:loongarch(?:64)?|LoongArch)\b"), "loongarch"),
    (re.compile(r"\b(?:ia64|IA-64|Itanium\s?2?)\b", re.I), "ia64"),
    (re.compile(r"\b(?:sparc64|UltraSPARC[\w-]*|SPARC64)\b"), "sparc64"),
    (re.compile(r"\b(?:sparc32|sparc|SPARC)\b"), "sparc"),
    (re.compile(r"\b(?:parisc(?:64)?|PA-RISC|hppa(?:64)?)\b", re.I), "parisc"),
    (re.compile(r"\b(?:m68k|[Mm]otorola 680[0-6]0)\b"), "m68k"),
    (re.compile(r"\b(?:DEC Alpha|alpha(?:ev\d+)?-linux|arch/alpha|Alpha (?:EV\d+|machines?|box(?:es)?|port))\b"),
     "alpha"),
    (re.compile(r"\b(?:ARM|armv7\w*|ARMv7|armhf|arm32|ARCH=arm)\b"), "arm"),
    (re.compile(r"\bx86\b"), "x86"),
]
MEMORY_PATTERNS = [
    re.compile(r"(?<![\w=])(mem=\d+[KMGT]?)\b"),
    re.compile(r"(?<![\w.])(\d+(?:\.\d+)?\s?(?:[KMGT]i?B|[KMGT])\s*(?:of\s+)?(?:RAM|[Mm]emory|MEMORY|mem|DRAM|DDR\d?\w*))\b"),
    re.compile(r"(?<![\w.])(\d+(?:\.\d+)?\s?(?:[KMGT]i?B|[KMGT]))\s+(?:of\s+)?(?:RAM|memory|mem|DRAM)\b", re.I),
]
STORAGE_HEAD = re.compile(r"(?<![\w-])(disks?|drives?|SSDs?|HDDs?|NVMe(?:\s+(?:drive|disk|SSD|device)s?)?|JBOD|"
                          r"eMMC|SD\s?cards?|(?:hard|flash)\s+disks?|spindles?)\b(\s+(?:in\s+)?(?:raid|RAID)\s?\d+"
                          r"(?:\s+(?:array|configuration))?)?", re.I)
STORAGE_ACRO = re.compile(r"^[A-Z][A-Z0-9/-]+$")
STORAGE_MOD = re.compile(r"^(?:\d+(?:\.\d+)?(?:[KMGT]i?B?|T|x\d+\S*|krpm|RPM|rpm|GB@\S+)?|\d+x\d+\S*|sata|sas|scsi|usb|nvme|ssd|hdd|boot|rotating|"
                         r"spinning|raid\d*|external|internal|pcie|m\.2|ide|pata|rpm|\d+krpm|samsung|intel|"
                         r"seagate|wd|toshiba|hitachi|micron|kingston|sandisk|crucial|optane|dual|single|"
                         r"local|enterprise|consumer|\d+-disk|\d+x\S+)$", re.I)

FILESYSTEMS = ("ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "squashfs", "nfs", "tmpfs", "overlayfs",
               "vfat", "exfat", "ntfs3", "ntfs", "jfs", "reiserfs", "ocfs2", "gfs2", "cephfs", "cifs",
               "erofs", "zfs", "bcachefs", "hugetlbfs", "fuse", "nilfs2", "udf", "jffs2", "ubifs")
FS_RE = re.compile(r"(?<![\w/.-])(" + "|".join(FILESYSTEMS) + r")(?![\w-])", re.I)
FS_STRONG = re.compile(r"(?:mkfs\.(\w+)|mount\s+-t\s+(\w+)|\bfs:\s*(\w+)|\b(\w+)\s+(?:file\s?systems?|fs)\b|"
                       r"\bon\s+(?:an?\s+)?(\w+)\b)", re.I)

BENCHMARKS = ("sysbench", "fio", "dd", "aim7", "aim9", "will-it-scale", "fsmark", "fs_mark", "netperf",
              "iperf3", "iperf", "stress-ng", "hackbench", "unixbench", "dbench", "tbench", "iozone",
              "bonnie++", "postmark", "lmbench", "pgbench", "specjbb", "kernbench", "tiobench", "filebench",
              "vm-scalability", "reaim", "phoronix-test-suite", "redis-benchmark", "memtier_benchmark",
              "schbench", "ebizzy", "sockperf", "uperf", "blogbench", "mmtests", "perf bench",
              "sqlite", "nginx", "apachebench", "ab", "wrk", "memcached", "mysql", "postgresql",
              "specpower", "spec cpu", "stream", "lat_ctx", "pmbench", "ffsb", "compilebench",
              "xfstests", "ltp", "kselftest", "blktests", "fstests", "rt-tests", "cyclictest",
              "tinymembench", "geekbench", "coremark", "osbench", "schedbench", "pipetest",
              # LKP-tests test names (jobs/ and programs/ of intel/lkp-tests)
              "fio-basic", "fxmark", "trinity", "kernel-selftests", "mdadm-selftests", "rcutorture", "rcuscale",
              "rcuperf", "locktorture", "rt-app", "sysbench-fileio", "sysbench-cpu", "sysbench-memory",
              "sysbench-mutex", "sysbench-threads", "perf-bench-sched-pipe", "perf-bench-sched-messaging",
              "perf-bench-futex", "perf-bench-numa-mem", "perf-bench-mem", "perf-bench-syscall",
              "autonuma-benchmark", "lmbench3", "ocfs2test", "kvm-unit-tests", "netpipe", "qperf", "siege",
              "thrulay", "libmicro", "lib-micro", "chromeswap", "pbzip2", "pigz", "pixz", "plzip",
              # mmtests, phoronix and other well-known kernel / storage / network benchmarks
              "thpscale", "thpchallenge", "gitsource", "sembench", "futexbench", "specjbb2005", "specjbb2015",
              "volanomark", "vdbench", "nuttcp", "neper", "netperf3", "hdparm", "fsperf", "fsx", "fsstress",
              "dbt2", "hammerdb", "ycsb", "speedometer", "jetstream", "bonnie", "linpack", "hpcc", "stressapptest",
              "mlc", "lat_mem_rd", "bw_mem", "lat_syscall", "lat_pipe", "lat_tcp", "bw_tcp", "cachebench",
              "apachebench", "httperf", "rocksdb", "db_bench", "pmbench", "usemem", "kcbench")
# suites and fuzzers: a benchmark only for a performance report
BENCH_TESTS = {"xfstests", "ltp", "kselftest", "blktests", "fstests", "trinity", "kernel-selftests",
               "mdadm-selftests", "kvm-unit-tests", "rcutorture", "locktorture", "fsx", "fsstress", "ocfs2test"}
BENCH_RE = re.compile(r"(?:(?<=\./)|(?<![\w/.-]))(" + "|".join(re.escape(b) for b in sorted(BENCHMARKS, key=len, reverse=True))
                      + r")(?![\w+-])", re.I)
BENCH_WEAK = {"ab", "stream", "wrk", "sqlite", "nginx", "mysql", "postgresql", "memcached", "dd", "hdparm", "mlc",
              "siege", "bonnie"}
COMMAND_TOOLS = ("sysbench", "fio", "dd", "netperf", "iperf3", "iperf", "stress-ng", "hackbench", "dbench", "tbench",
                 "iozone", "perf", "fs_mark", "fsmark", "schbench", "ebizzy", "pgbench", "make", "bonnie++",
                 "filebench", "redis-benchmark", "memtier_benchmark", "sockperf", "uperf", "ab", "wrk",
                 "lmbench", "lat_ctx", "will-it-scale", "unixbench", "kernbench", "tiobench", "compilebench")
_TOOL_ALT = "|".join(re.escape(b) for b in sorted(COMMAND_TOOLS, key=len, reverse=True))
TOOL_ANY = re.compile(r"(?<![\w-])(?:" + _TOOL_ALT + r"|\./)(?=[ \t]+-{0,2}\w)")
# a shell prompt: "$ ", "# ", "[user@host dir]$ ", "user@host:~$ "
PROMPT = r"(?:\[[^\]\n]{1,60}\][$#]\s*|[\w.-]+@[\w.-]+:[^\s$#]*[$#]\s*|[$#]\s+)"
COMMAND_LINE = re.compile(
    r"^[ \t]*(?:" + PROMPT + r"|.*?\d\d:\d\d:\d\d:\s+)?(?:for\s[^\n;]{1,80};\s*do\s+)?((?:sudo\s+)?(?:(?:/usr/bin/)?time(?:\s+-\S+(?:\s+\"[^\"\n]*\")?)*\s+)?"
    r"(?:(?:ionice|nice|taskset|numactl|chrt)(?:\s+-{1,2}\S+)*\s+)*"
    r"(?:\./|(?:" + _TOOL_ALT + r")(?=[ \t]+-{0,2}\w))[^\n]*)", re.M)
INLINE_COMMAND = re.compile(r"[`'\"]((?:sudo\s+)?(?:" + _TOOL_ALT + r")[ \t]+-{1,2}\w[^`'\"\n]{2,200})[`'\"]")
BOOT_PARAMS = re.compile(r"(?:kernel (?:command line|cmdline|boot (?:params|parameters|options))|boot (?:params|parameters|"
                         r"options)|cmdline|Command line)\s*[:=]\s*([^\n]{3,300})", re.I)
MKFS_LINE = re.compile(r"(?<![\w/])(mkfs(?:\.\w+)?\s+[^\n]{1,200})")
MOUNT_OPTS = re.compile(r"(?<![\w/])(mount\s+(?:-t\s+\w+\s+)?-o\s*\S+[^\n]{0,120}|mount options?\s*[:=]\s*[^\n]{1,120})")

# ------------------------------------------------------------------------------- cues
REGRESSION_WORD = re.compile(r"\bregress(?:ion|ions|ed|es)?\b", re.I)
BISECT = re.compile(r"\bbisect", re.I)
REGRESSION_OTHER_SENSE = re.compile(
    r"\b(?:regression[- ]test(?:s|ing|suite)?|regression[- ]suite|linear regression|logistic regression|"
    r"no (?:new )?regressions?|without (?:any )?regressions?|(?:any|potential|possible) regressions?|"
    r"regressions? (?:found|seen|noticed)\s*:\s*(?:none|0|no)|avoid (?:a )?regressions?|"
    r"(?:to |will |could |might |may )(?:cause |introduce )?(?:a )?regress|regression risk|"
    r"regression[- ]free|regression tracking|regzbot (?:report|tracking|command)|"
    # regressions as a topic of tooling / process, not a claim: "regression tracker", "CI regression data",
    # "each reported regression", "regressions@lists.linux.dev"
    r"regressions? (?:trackers?|tracking|data|detection|handling|bots?|lists?|mailing lists?)|"
    r"(?:each|every|all|most|many) (?:\w+ )?regressions?\b(?! (?:in|since|from|on|with) (?:v?\d|next-))|"
    r"regressions@)", re.I)
FAIL_WORDS = re.compile(
    r"\b(?:fail(?:s|ed|ing|ure)?\s+to\s+boot|(?:does|did|do)(?:n't| not) boot|no longer boots?|unbootable|"
    r"boot (?:failure|problem|issue|hang)s?|breaks? boot|broke(?:n)? (?:the )?boot|kernel panic|panic(?:s|ked)?|"
    r"oops(?:es)?|BUG:|WARNING:|crash(?:es|ed|ing)?|hangs?|hung|lock(?:s|ed)? up|lock-?ups?|deadlock|"
    r"corrupt(?:ion|ed|s)?|broken|breaks|broke|fail(?:s|ed|ure|ing)?|splat|build (?:error|failure|break)s?|"
    r"compile (?:error|failure)s?|(?:does|did)(?:n't| not) work|stopped working|no longer works?|"
    r"not working|unable to|black screen|freez(?:e|es|ing)|null pointer|segfault|error)\b", re.I)
PERF_WORDS = re.compile(
    r"\b(?:performance|throughput|latency|slow(?:er|down|s|ed)?|scalability|bandwidth|"
    r"jobs-per-min|ops/s|MB/s|Gbps|IOPS|bogo ops|twice as long|times (?:as long|slower)|"
    r"(?:perf|performance) (?:drop|loss|decrease|degradation|regression|problem)s?|benchmark|"
    r"\d+(?:\.\d+)?\s?% (?:\w+ )?(?:regression|drop|decrease|slower)|randread|randwrite|seqwrite|seqread)\b", re.I)
IMPROVE_WORDS = re.compile(
    r"\b(?:improve(?:s|d|ment|ments)?|speed(?:s|ed)?[- ]?up|faster|better|gain(?:s|ed)?|"
    r"optimi[sz](?:e|es|ed|ation)|boost(?:s|ed)?|reduc(?:e|es|ed|tion) (?:the )?(?:overhead|latency|time|cost))\b",
    re.I)
FIX_PATCH_WORDS = re.compile(
    r"\b(?:this (?:patch|commit|change|series) (?:fixes|addresses|resolves|restores|reverts|avoids)|"
    r"(?:fix|fixes|fixed|fixing|resolve|resolves|address(?:es)?) (?:the |a |this |that )?(?:performance )?"
    r"regression|reverts? commit|this reverts|to fix (?:the|a|this) )", re.I)
PATCH_SUBJECT = re.compile(r"^\s*(?:\[[^\]]*\]\s*)*\[(?:PATCH|RFC|RESEND)\b", re.I)
PULL_SUBJECT = re.compile(r"\[(?:GIT PULL|PULL|GIT\s+PULL REQUEST)\b|\bpull request\b", re.I)
REPLY_SUBJECT = re.compile(r"^\s*(?:re|aw|sv|fwd?)\s*:", re.I)
STABLE_REVIEW = re.compile(r"-stable review patch|stable review\b|\bstable-rc\b.*\breview\b", re.I)
TEST_REPORT_OK = re.compile(
    r"\b(?:no regressions? (?:found|detected|seen|noticed|observed)|(?:all )?tests? passed|"
    r"Tested-by:|builds? (?:and boots? )?(?:fine|ok|successfully)|boot(?:ed|s)? (?:fine|ok|successfully)|"
    r"no new (?:failures|warnings|issues|regressions)|PASS(?:ED)?\b)", re.I)


# Word-list patterns whose every match starts with one of these words (case-folded): they are
# only tried where one of them is written (MailText._word_scan).
_WORD_RUN = re.compile(r"\w+")


def _first_words(names) -> frozenset:
    return frozenset(_WORD_RUN.match(n).group(0).lower() for n in names)


WORD_GUARDS = {
    FS_RE: _first_words(FILESYSTEMS),
    BENCH_RE: _first_words(BENCHMARKS),
}


# the cue and word-list patterns, with a \b(?=\w) check in front (same matches, faster scans)
TOOL_BEFORE = word_led(TOOL_BEFORE)
REGRESSION_OTHER_SENSE = word_led(REGRESSION_OTHER_SENSE)
FAIL_WORDS = word_led(FAIL_WORDS)
PERF_WORDS = word_led(PERF_WORDS)
FIX_PATCH_WORDS = word_led(FIX_PATCH_WORDS)
UNIT_LONG_RE = word_led(UNIT_LONG_RE)
