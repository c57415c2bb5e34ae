"""The setup stage: the machine (cpu, arch, memory, storage) and the configuration (filesystem,
benchmark, command line, boot parameters, mkfs and mount options, kernel config options) a
message reports.  Functions over the rule stages' per-message state ``ex`` (``rules.Extractor``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from . import patterns as P
from . import scan
from .titles import in_quoted_title

if TYPE_CHECKING:
    from .rules import Extractor

I = re.I

LKP_DISK = re.compile(r"^\s*disk:\s*(\d+(?:HDD|SSD|NVMe|BRD\w*|pmem\w*)\b)", re.M | I)
LKP_MEM_BLOCK = re.compile(r"^\s*Memory\s*:?\s*\n\s*Total\s*:\s*(\d+(?:\.\d+)?\s?[KMGT]i?B)\b", re.M | I)
MEM_LINE = re.compile(r"^\s*(?:Mem(?:ory)?|RAM|MemTotal|System memory|Total memory)\s*:\s*(?:Total:?\s*)?"
                      r"(\d+(?:\.\d+)?\s?(?:[KMGT]i?B|[KMGT]|kB))\b", re.M | I)
_CPU_BAD_AFTER = re.compile(r"\b(?:does not|doesn't|fails?|not boot|broken|crash|hangs?|problem)\b", I)
_ARCH_TITLE_PREFIX = re.compile(r"/[\w-]+:")
# an arch word that starts a commit title in a bisect log or a git log line ("[<sha>] arm64:
# defconfig: ...", "<sha> MIPS: ...") or names a tag or branch ("Merge tag 'powerpc-5.2-1'",
# "s390-next"): the area a commit touches, not the test machine
_ARCH_TITLE_HEAD = re.compile(r"(?:\[[0-9a-f]{7,40}\]|\b[0-9a-f]{7,40})[ \t]+$")
_ARCH_TAG_TAIL = re.compile(r"-(?:\d+\.\d+|next|fixes|for-)|/linux\b")  # (".../kernel/git/powerpc/linux.git": a tree)
_ARCH_NEG = re.compile(r"\b(?:not|doesn't|does not|unaffected|only on|fine on|works on)\b", I)
_ARCH_NEG2 = re.compile(r"\breproduc|affect|fine|work", I)
_MEM_MACHINE_LINE = re.compile(r"^(?:Hardware|System|Machine|Platform|Server|Test machine|Setup)\b[^\n]*?,\s*(\d+\s?[GT]i?B)\b",
                               re.M | I)
_FS_CTX = re.compile(r"mkfs\.|mount\s+-t|file\s?systems?|\bfs\b|\bon\s+\w*$|\(ro,|testcase|fs:", I)
_TESTCASE = re.compile(r"(?:testcase|Benchmark|test tools? (?:is|are)|benchmarks? (?:is|are)|tools?)\s*[:\-]?\s*"
                       r"([\w+.-]+)", I)
# an LKP report's test line: "testcase: fio-basic", "in testcase: trinity" (quoted or not)
_LKP_TESTCASE = re.compile(r"^[ \t>]*(?:in\s+)?testcase:[ \t]*([a-z][\w.+-]*[\w+])[ \t]*$", re.M)
_LKP_PARAMS = re.compile(r"^[ \t>]*((?:[\w-]+/)*testcase(?:/[\w-]+)*):[ \t]*\n[ \t>]*([^\s/]+(?:/[^\s/]+)*)[ \t]*$",
                         re.M)
_LKP_NOT_BENCH = {"boot", "kbuild", "build", "rootfs"}
_FIO_OPTION = re.compile(r"(?<![\w-])-{0,2}(ioengine|iodepth|numjobs|rw|direct|time_based|group_reporting|randrepeat|"
                         r"iodepth_batch\w*|fsync_on_close|end_fsync)\s*=")
_AND_OR = re.compile(r"\s+(?:and|or|,)")
_WEAK_AFTER1 = re.compile(r"\s+(?:if=|of=|bs=|-\w)")
_WEAK_BEFORE1 = re.compile(r"[\"'(]$")
_WEAK_AFTER2 = re.compile(r"[\"']")
_WEAK_BEFORE2 = re.compile(r"\b(?:the|a|simple|run|running|parallel|with|using)\s+$", I)
_WEAK_AFTER3 = re.compile(r"\s+(?:performance|test|process|throughput|benchmark|run)", I)
_LOOP_DONE = re.compile(r"\s*;\s*done\b.*$")
_CMD_OPT = re.compile(r"\s-{1,2}\w|\b\w+=\S")
_MAKE_J = re.compile(r"\s-j")
_CFG_LINE = re.compile(r"[ \t>|]*[+-]?(?:#\s*)?CONFIG_[A-Z0-9_]+(?:=(?:\"[^\"\n]*\"|\S*)| is not set)\s*$")
_CFG_DIFF_LINE = re.compile(r"[ \t>|]*[+-](?:#\s*)?CONFIG_")  # a line of a diff between two .config files
_CFG_FILLER = re.compile(r"[ \t>|]*(?:#.*|@@ .*)?$")  # blank or comment lines inside a .config
CONFIG_DUMP_LINES = 200  # a run this long is a whole .config (even tinyconfig writes several hundred lines)
CONFIG_EXCERPT_LINES = 3  # a run this long is text in .config format (an excerpt, a fragment)
_CFG_HEADER = re.compile(r"[ \t>|]*#\s*(?:Automatically generated (?:file|make config)|Linux/\S+ \S+ Kernel Configuration"
                         r"|Linux kernel version:)", re.I)


def config_runs(text: str) -> list[tuple[int, int, bool]]:
    """Spans of ``text`` in .config format -- runs of at least CONFIG_EXCERPT_LINES option lines
    (``CONFIG_X=y``, ``# CONFIG_X is not set``), blank and comment lines allowed between them --
    each with whether it is a whole .config: the generator's header ("# Automatically generated
    file; DO NOT EDIT.", "# Linux/x86 6.1.0 Kernel Configuration") starts it, or it runs to
    CONFIG_DUMP_LINES option lines, or it is a diff between two .config files (lines marked
    ``+``/``-``).  A whole .config lists every option of the kernel, so none of them is one the
    report names as its setup; in an excerpt the options shown as set are, the "is not set"
    lines are the rest of the file."""
    out: list[tuple[int, int, bool]] = []
    start = end = None
    count = pos = 0
    whole = False  # the run under way (or the next one, after a header) is a whole .config

    def close() -> None:
        if start is not None and count >= CONFIG_EXCERPT_LINES:
            out.append((start, end, whole or count >= CONFIG_DUMP_LINES))

    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        if _CFG_LINE.match(body):
            if start is None:
                start, count = pos, 0
            count += 1
            end = pos + len(line)
            whole = whole or bool(_CFG_DIFF_LINE.match(body))
        elif _CFG_HEADER.match(body):
            close()
            start, count, whole = None, 0, True
        elif not _CFG_FILLER.match(body):
            close()
            start, count, whole = None, 0, False
        pos += len(line)
    close()
    return out


_CFG_UNSET = re.compile(r" is not set\b")
_CFG_CODE = re.compile(r"\s*[+\-@]|\s*#\s*(?:if|ifdef|ifndef|endif|define)|.*\bIS_ENABLED\(")
# an option tested in C code right before it: "IS_REACHABLE(CONFIG_X)", "#ifdef CONFIG_X", "#if
# defined(CONFIG_X)" (a Makefile's "obj-$(CONFIG_X)" line is left in: a build report names its options so)
_CFG_IN_CODE = re.compile(r"(?:\bIS_(?:ENABLED|REACHABLE|BUILTIN|MODULE)\(|#\s*(?:el)?if(?:n?def)?\s+!?|"
                          r"\bdefined\s*\(?)$")
_CFG_SUGGEST = re.compile(r"\b(?:suggest\w*|try|could you|can you|maybe|perhaps|should|instead|alternatively|"
                          r"would|if you)\b", I)
# an LKP report's machine line when the robot tested in a VM: "test machine: qemu-system-x86_64
# -enable-kvm -cpu SandyBridge -smp 2 -m 16G" (the guest is the machine the kernel ran on)
LKP_QEMU_MEM = re.compile(r"test machine:[ \t]*qemu-system-[^\n]*?[ \t]-m[ \t]+(\d+[KMGT])\b")
# a size of something other than the machine's memory: a RAM disk ("a 4G RAM disk"), or the
# kernel's boot line of available memory ("Memory: 1034196k/1047872k available")
_MEM_NOT_MACHINE = re.compile(r"[ \t]*(?:disks?\b|drives?\b)|/\d", I)
MEM_SETTING = re.compile(r"(?<![\w-])((?:QEMU_|VM_|GUEST_)?MEM(?:ORY)?(?:_(?:MB|GB|SIZE))?=\d+[KMGT]?)\b")


def hardware(ex: Extractor) -> dict:
    hw: dict = {"cpu": None, "arch": None, "memory": None, "storage": None}
    spans: dict = {}
    _hw_cpu(ex, hw, spans)
    _hw_arch(ex, hw, spans)
    _hw_memory(ex, hw, spans)
    _hw_storage(ex, hw, spans)
    return hw, spans


def _hw_cpu(ex: Extractor, hw: dict, spans: dict) -> None:
    """The cpu: the first cpu pattern that matches; of several named, one near a bad cue."""
    clean = ex.clean
    cpus = []
    mt = ex.mt
    for rx in P.CPU_PATTERNS:
        for m in mt.finditer(rx):
            val = " ".join(m.group(1).split()).strip(" ,.")
            if len(val) < 3:
                continue
            cpus.append((m.start(1), m.end(1), val))
        if cpus:
            break
    if cpus:
        chosen = cpus[0]
        if len({c[2] for c in cpus}) > 1:
            for c in cpus:
                after = clean[c[1]:c[1] + 120]
                if _CPU_BAD_AFTER.search(after):
                    chosen = c
                    break
        hw["cpu"] = chosen[2]
        spans["cpu"] = (chosen[0], chosen[1])


def _arch_scores(ex: Extractor) -> tuple[dict[str, float], dict[str, tuple]]:
    """Architecture words scored (subject 3, body 1), with the first body span of each."""
    clean = ex.clean
    mt = ex.mt
    arch_scores: dict[str, float] = {}
    arch_span: dict[str, tuple] = {}
    for rx, name in P.ARCH_WORDS:
        for m in rx.finditer(ex.subject):
            arch_scores[name] = arch_scores.get(name, 0) + 3
        for m in mt.finditer(rx):
            if _ARCH_TITLE_PREFIX.match(clean, m.end(), m.end() + 20) or _ARCH_TAG_TAIL.match(clean, m.end()) or (
                    clean.startswith(":", m.end())
                    and _ARCH_TITLE_HEAD.search(clean, max(0, m.start() - 48), m.start())):
                continue  # a commit-title prefix ("x86/efi: ...") names a subsystem, not the test machine
            ctx = clean[max(0, m.start() - 60):m.end() + 10]
            if _ARCH_NEG.search(ctx) and _ARCH_NEG2.search(ctx):
                continue
            w = 1.0
            if name == "arm" and not re.search(r"\bARM\b", m.group(0)) and m.group(0) != "arm":
                w = 1.0
            arch_scores[name] = arch_scores.get(name, 0) + w
            arch_span.setdefault(name, (m.start(), m.end()))
    return arch_scores, arch_span


def _hw_arch(ex: Extractor, hw: dict, spans: dict) -> None:
    """The architecture: the best-scored word, else one implied by the cpu.  Two architectures
    named about equally often leave it (and the cpu) unset."""
    arch_scores, arch_span = _arch_scores(ex)
    fam_tot: dict[str, float] = {}
    for a, v in arch_scores.items():
        f = "x86" if a in ("x86_64", "i386", "x86") else "sparc" if a in ("sparc", "sparc64") else a
        fam_tot[f] = fam_tot.get(f, 0) + v
    if arch_scores:
        # specific beats generic x86 when both present
        if "x86" in arch_scores and ({"x86_64", "i386"} & set(arch_scores)):
            arch_scores.pop("x86")
        if "sparc" in arch_scores and "sparc64" in arch_scores:
            arch_scores["sparc64"] += arch_scores.pop("sparc")
        best = max(arch_scores, key=lambda k: arch_scores[k])
        ranked = sorted(fam_tot.values(), reverse=True)
        if len(ranked) > 1 and ranked[1] >= 0.6 * ranked[0] and not any(rx.search(ex.subject) for rx, n in P.ARCH_WORDS if n == best):
            # two architectures named about equally often (a comparison of the two):
            # which one is meant is not clear (and no machine named elsewhere says it either)
            best = None
            ex.arch_compared = True
            if hw["cpu"]:
                hw["cpu"] = None
                spans.pop("cpu", None)
        if best:
            hw["arch"] = best
            spans["arch"] = arch_span.get(best)
    elif hw["cpu"] and re.search(r"\b(?:Intel|AMD|Xeon|EPYC|Core|i[3579]-)", hw["cpu"]):
        hw["arch"] = "x86_64" if re.search(r"Xeon|EPYC|Opteron", hw["cpu"]) else "x86"
        spans["arch"] = spans.get("cpu")
    elif hw["cpu"] and re.search(r"BCM27[1-9]\d|Cortex-A(?:5[3-9]|7\d)|Neoverse|Graviton|Altra", hw["cpu"]):
        hw["arch"] = "arm64"
        spans["arch"] = spans.get("cpu")


def _hw_memory(ex: Extractor, hw: dict, spans: dict) -> None:
    """The memory size: the memory patterns, a machine line, then LKP and meminfo forms."""
    mt = ex.mt
    clean = ex.clean
    if "test machine:" in mt.low:
        m = mt.search(LKP_QEMU_MEM)
        if m:
            hw["memory"] = m.group(1)
            spans["memory"] = (m.start(1), m.end(1))
            return
    for rx in P.MEMORY_PATTERNS:
        m = next((m for m in mt.finditer(rx) if not _MEM_NOT_MACHINE.match(clean, m.end())), None)
        if m:
            hw["memory"] = " ".join(m.group(1).split())
            spans["memory"] = (m.start(1), m.end(1))
            break
    if hw["memory"] is None:
        m = mt.search(_MEM_MACHINE_LINE)
        if m:
            hw["memory"] = m.group(1)
            spans["memory"] = (m.start(1), m.end(1))
    if hw["memory"] is None:
        # "Memory:\n  Total: 187 GB" / "MemTotal: 196608 kB" / "Memory: 16 GB" / "QEMU_MEM_MB=14336"
        for rx in (LKP_MEM_BLOCK, MEM_LINE, MEM_SETTING):
            m = next((m for m in mt.finditer(rx) if not _MEM_NOT_MACHINE.match(clean, m.end(1))), None)
            if m:
                hw["memory"] = " ".join(m.group(1).split())
                spans["memory"] = (m.start(1), m.end(1))
                break


def qualifiers(clean: str, pos: int, accept, strip: str = ",()") -> tuple[int, list[str]]:
    """The words in front of ``pos`` on its line (at most 5) that qualify the noun there: taken
    nearest first while ``accept`` takes them (stripped of ``strip``), stopping at an lsblk /
    table column ("sda 8:0 0 931.5G 0 disk": a count of 0 or a major:minor is not a qualifier).
    Returns the line's start and the words in text order."""
    line_start = clean.rfind("\n", 0, pos) + 1
    mods: list[str] = []
    for t in reversed(clean[line_start:pos].split()[-5:]):
        tt = t.strip(strip)
        if tt == "0" or ":" in tt or not accept(tt):
            break
        mods.insert(0, t)
    return line_start, mods


def _hw_storage(ex: Extractor, hw: dict, spans: dict) -> None:
    """The storage: the best-qualified storage noun, or an LKP ``disk:`` parameter."""
    clean = ex.clean
    mt = ex.mt
    best = None
    for m in mt.finditer(P.STORAGE_HEAD):
        _line_start, mods = qualifiers(clean, m.start(), lambda tt: bool(P.STORAGE_MOD.match(tt)
                                                                         or P.STORAGE_ACRO.match(tt)))
        if not mods:
            continue
        text = " ".join(mods + [m.group(1)]) + (m.group(2) or "")
        score = len(mods) + (2 if re.search(r"\d", text) else 0)
        start = m.start() - len(" ".join(mods)) - 1
        if best is None or score > best[0]:
            best = (score, " ".join(text.split()), max(start, 0), m.end())
    m = mt.search(LKP_DISK)
    if m and (best is None or best[0] < 3):
        # an LKP job parameter ("disk: 1HDD", "disk: 4SSD") names the test storage exactly
        best = (9, m.group(1), m.start(1), m.end(1))
    if best:
        hw["storage"] = best[1]
        spans["storage"] = (best[2], best[3])


def config(ex: Extractor, kind: str | None) -> tuple[dict, dict]:
    cfg: dict = {"filesystem": None, "benchmark": None, "command": None, "kernel_config": []}
    spans: dict = {}
    _cfg_filesystem(ex, kind, cfg, spans)
    _cfg_benchmark(ex, kind, cfg, spans)
    _cfg_command(ex, cfg, spans)
    _setup_facts(ex)
    _cfg_kernel_config(ex, cfg, spans)
    return cfg, spans


def _cfg_filesystem(ex: Extractor, kind: str | None, cfg: dict, spans: dict) -> None:
    """The filesystem: the best-scored name (subject 4, body 2 near a filesystem cue, else 0.5)."""
    clean = ex.clean
    mt = ex.mt
    fs_scores: dict[str, float] = {}
    fs_span: dict[str, tuple] = {}
    for m in P.FS_RE.finditer(ex.subject):
        fs_scores[m.group(1).lower()] = fs_scores.get(m.group(1).lower(), 0) + 4
    for m in mt.finditer(P.FS_RE):
        name = m.group(1).lower()
        ctx = clean[max(0, m.start() - 20):m.end() + 20]
        w = 0.5
        if _FS_CTX.search(ctx):
            w = 2.0
        fs_scores[name] = fs_scores.get(name, 0) + w
        fs_span.setdefault(name, (m.start(), m.end()))
    if fs_scores:
        name = max(fs_scores, key=lambda k: fs_scores[k])
        if fs_scores[name] >= 2 or (kind == "performance" and fs_scores[name] >= 0.5):
            cfg["filesystem"] = name
            spans["filesystem"] = fs_span.get(name)


def _cfg_benchmark(ex: Extractor, kind: str | None, cfg: dict, spans: dict) -> None:
    """The benchmark: a ``testcase:`` line, else the best-scored name (subject 3, body 1)."""
    clean = ex.clean
    mt = ex.mt
    b_scores: dict[str, float] = {}
    b_first: dict[str, int] = {}
    b_span: dict[str, tuple] = {}
    tc = mt.search(_TESTCASE)
    if tc and P.BENCH_RE.fullmatch(tc.group(1)):
        n = tc.group(1).lower()
        b_scores[n] = 3 if _AND_OR.match(clean, tc.end(1)) else 10
        b_first[n] = tc.start(1)
        b_span[n] = (tc.start(1), tc.end(1))
    lkp = _lkp_testcase(ex) if ex.is_robot else None
    if lkp:
        # a robot report's own test line names the test it ran, listed or not: decisive
        cfg["benchmark"], spans["benchmark"] = lkp
        return
    for text, w0, subj in ((ex.subject, 3.0, True), (clean, 1.0, False)):
        for m in (P.BENCH_RE.finditer(text) if subj else mt.finditer(P.BENCH_RE)):
            name = m.group(1).lower()
            if name in P.BENCH_WEAK:
                after = text[m.end():m.end() + 25]
                before = text[max(0, m.start() - 12):m.start()]
                if not (_WEAK_AFTER1.match(after) or _WEAK_BEFORE1.search(before)
                        or _WEAK_AFTER2.match(after) or _WEAK_BEFORE2.search(before)
                        or _WEAK_AFTER3.match(after)):
                    continue
            if name in P.BENCH_TESTS and kind != "performance":
                continue
            b_scores[name] = b_scores.get(name, 0) + w0
            if not subj:
                b_first.setdefault(name, m.start())
                b_span.setdefault(name, (m.start(), m.end()))
            else:
                b_first.setdefault(name, -1)
    if b_scores:
        name = max(b_scores, key=lambda k: (b_scores[k], -b_first.get(k, 0)))
        cfg["benchmark"] = {"fs_mark": "fsmark"}.get(name, name)
        spans["benchmark"] = b_span.get(name)
    elif kind == "performance" and ("iodepth" in mt.low or "ioengine" in mt.low or "numjobs" in mt.low) \
            and len({m.group(1).lower() for m in mt.finditer(_FIO_OPTION)}) >= 3:
        # a fio job written out without the tool's name ("ioengine=libaio", "iodepth=32", "rw=randrw")
        m = mt.search(_FIO_OPTION)
        cfg["benchmark"], spans["benchmark"] = "fio", (m.start(1), m.end(1))


def _lkp_testcase(ex: Extractor):
    """The test an LKP report ran: its "testcase: <name>" line, else the "testcase" column of
    its parameter block ("compiler/.../testcase:" over "gcc-12/.../fio-basic").  (name, span)."""
    m = ex.mt.search(_LKP_TESTCASE)
    if m and m.group(1).lower() not in _LKP_NOT_BENCH:
        return m.group(1).lower(), (m.start(1), m.end(1))
    m = ex.mt.search(_LKP_PARAMS)
    if m:
        keys, vals = m.group(1).split("/"), m.group(2).split("/")
        if len(keys) == len(vals):
            n = vals[keys.index("testcase")].lower()
            if re.fullmatch(r"[a-z][\w.+-]*", n) and n not in _LKP_NOT_BENCH:
                s = m.start(2) + m.group(2).rfind(vals[keys.index("testcase")])
                return n, (s, s + len(n))
    return None


def _cfg_command(ex: Extractor, cfg: dict, spans: dict) -> None:
    """The command: the benchmark command line as written (continuation lines joined)."""
    clean = ex.clean
    mt = ex.mt
    best = None
    bench = cfg.get("benchmark")
    for m in (mt.finditer(P.COMMAND_LINE) if mt.search(P.TOOL_ANY) else ()):
        line = m.group(1)
        end = m.end(1)
        while line.rstrip().endswith("\\"):
            nl = clean.find("\n", end + 1)
            nxt = clean[end + 1:nl if nl >= 0 else len(clean)]
            if not nxt.strip():
                break
            line = line.rstrip()[:-1] + " " + nxt.strip()
            end = nl if nl >= 0 else len(clean)
        cmd = " ".join(line.split()).rstrip("\\ ")
        cmd = _LOOP_DONE.sub("", cmd)  # the body of a shell loop
        toks = cmd.split()
        tool = next((t for t in toks if t in P.COMMAND_TOOLS or t.startswith("./")), toks[0])
        score = 0.0
        if bench and (tool == bench or tool.replace("_", "") == bench):
            score += 3
        if _CMD_OPT.search(cmd):
            score += 1
        if tool == "make" and not _MAKE_J.search(cmd):
            score -= 2
        if ex.mt.depth_at(m.start(1)) > 0:
            score -= 0.5
        if best is None or score > best[0]:
            best = (score, cmd, m.start(1), end)
    if best is None:
        m = mt.search(P.INLINE_COMMAND)
        if m:
            best = (0, " ".join(m.group(1).split()), m.start(1), m.end(1))
    if best is not None:
        cfg["command"] = best[1][:300]
        spans["command"] = (best[2], best[3])


def _setup_facts(ex: Extractor) -> None:
    """Boot parameters, mkfs and mount options: kept as facts in ``ex.setup_facts`` (not contract fields)."""
    clean = ex.clean
    mt = ex.mt
    ex.setup_facts = []
    low = clean.lower()
    for name, rx, hint in (("boot_params", P.BOOT_PARAMS, ("cmdline", "command line", "boot param", "boot opt")),
                           ("mkfs", P.MKFS_LINE, ("mkfs",)), ("mount_options", P.MOUNT_OPTS, ("mount",))):
        if not any(h in low for h in hint):
            continue
        m = mt.search(rx)
        if m:
            ex.setup_facts.append((name, " ".join(m.group(1).split())[:300], (m.start(1), m.end(1))))


def _cfg_kernel_config(ex: Extractor, cfg: dict, spans: dict) -> None:
    """Kernel config options named as part of the setup (not those of an attached .config)."""
    mt = ex.mt
    seen: dict[str, str] = {}
    runs = config_runs(mt.clean) if "CONFIG_" in mt.clean else []
    for m in mt.finditer(P.CONFIG_OPT):
        run = next((whole for a, b, whole in runs if a <= m.start() < b), None)
        if run:
            continue  # an attached .config lists every option
        if run is not None and _CFG_UNSET.match(mt.clean, m.start() + len(m.group(1))):
            continue  # "# CONFIG_X is not set" in a .config excerpt: an option not chosen
        if _CFG_IN_CODE.search(mt.clean, max(0, m.start() - 16), m.start()):
            continue
        u = ex.mt.unit_at(m.start())
        utext = u.text if u else ""
        if u and u.structured and _CFG_CODE.match(utext):
            continue
        if _CFG_SUGGEST.search(utext):
            continue
        if in_quoted_title(mt.clean, m.start()):
            continue  # part of a commit title ("kconfig: only write '# CONFIG_FOO is not set'")
        name = m.group(1)
        written = m.group(0)
        if name not in seen or ("=" in written and "=" not in seen[name]):
            seen[name] = written
            spans.setdefault("kernel_config", (m.start(), m.end()))
    cfg["kernel_config"] = list(seen.values())


# cue patterns with a \b(?=\w) check in front (scan.word_led: same matches, faster scans)
_CFG_SUGGEST = scan.word_led(_CFG_SUGGEST)
