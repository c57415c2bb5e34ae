"""Architecture from the board, SoC or machine a report names.

A report often gives only the hardware ("i.MX28 board", "MT8173 Chromebook", "PowerBook G4",
"Raspberry Pi 5"); the kernel's own tree knows which architecture each belongs to: the SoC
families below are the directory and compatible-string prefixes under ``arch/*/boot/dts`` and
the machine names of ``arch/*/Kconfig`` (``ARCH_MXS`` = i.MX23/28 = arm, ``ARCH_MEDIATEK``
MT81xx = arm64, ``PPC_PMAC`` = PowerMac/PowerBook = powerpc, ...).  Only families whose
architecture is unambiguous are listed: a name that exists on two architectures (Tegra,
Exynos, OMAP generations, i.MX as a whole) is resolved by its model number.
"""

from __future__ import annotations

import re

from .scan import fold, iter_matches, may_match

# (pattern, arch); first match in the text wins, most specific patterns first
TABLE: list[tuple[re.Pattern, str]] = [(re.compile(p, re.I), a) for p, a in [
    # NXP / Freescale i.MX: 1/2x/3x/5x/6/7 are 32-bit ARM, 8/9/91/93/95 are arm64
    (r"\bi\.?MX\s?(?:8|9)\w*", "arm64"),
    (r"\bi\.?MX\s?(?:1|2[13578]|3[15]|5[0137]|6|7)\w*", "arm"),
    (r"\bLayerscape\b|\bLS(?:1012|1028|1043|1046|1088|2088|2160)A?\b", "arm64"),
    # Microchip / Atmel
    (r"\b(?:at91\w*|sama5\w*|sam9\w*|sama7\w*)\b", "arm"),
    # MediaTek: MT81xx/MT67xx/MT79xx SoCs are arm64, MT65xx/MT7623/MT7629 are arm
    (r"\bMT(?:81\d\d|67\d\d|68\d\d|798\d|7622)\w*", "arm64"),
    (r"\bMT(?:65\d\d|7623|7629)\w*", "arm"),
    # Rockchip
    (r"\bRK(?:3308|3326|3328|3368|3399|3566|3568|3576|3588)\w*", "arm64"),
    (r"\bRK(?:2928|3036|3066|3128|3188|3228|3229|3288)\w*", "arm"),
    # Allwinner
    (r"\bsun50i\w*|\bAllwinner\s+(?:A64|H5|H6|H313|H616|H618|A100|A133|T507)\b", "arm64"),
    (r"\bsun[4-9]i\w*|\bAllwinner\s+(?:A10|A13|A20|A23|A31|A33|A83T|H2\+?|H3|R40|V3s)\b", "arm"),
    # Broadcom / Raspberry Pi
    (r"\bBCM(?:2711|2712|2837|4908|6858)\w*|\bRaspberry\s*Pi\s*(?:[345]|Zero\s*2)\b|\bRPi\s?[345]\b", "arm64"),
    (r"\bBCM(?:2835|2836|47\d\d|53\d\d)\w*|\bRaspberry\s*Pi\s*(?:[12]|Zero(?!\s*2))\b", "arm"),
    # Qualcomm
    (r"\b(?:SDM\d{3}|SM\d{4}|SC[78]\d{3}\w*|QCS\d{3,4}|MSM8916|MSM8992|MSM8994|MSM8996|MSM8998|"
     r"APQ8016|APQ8096|IPQ(?:5018|6018|8074|9574)|X1E\d*|Snapdragon\s+(?:8[1-9]\d|8cx\w*|X\w*))\b", "arm64"),
    (r"\b(?:MSM8660|MSM8960|MSM8974|APQ8064|APQ8084|IPQ(?:4019|806\d))\b", "arm"),
    # NVIDIA Tegra
    (r"\bTegra\s?(?:X1|X2|186|194|210|234)\b|\bJetson\s+(?:Nano|TX[12]|Xavier|Orin|AGX)\b", "arm64"),
    (r"\bTegra\s?(?:2|3|4|20|30|114|124)\b", "arm"),
    # Samsung Exynos
    (r"\bExynos\s?(?:5433|7\d{3}|8\d{3}|9\d{3}|850|2100|2200)\b", "arm64"),
    (r"\bExynos\s?(?:3250|4210|4412|5250|5260|5410|5420|5422|5800)\b|\bOdroid-?(?:XU\d?|U3|X2)\b", "arm"),
    # TI
    (r"\b(?:AM6[2-5]\w*|AM68\w*|AM69\w*|J7(?:21|22|84)\w*|TDA4\w*)\b", "arm64"),
    (r"\b(?:OMAP\s?[345]\d*|AM33\d\d|AM335x|AM43\d\d|AM57\d\d|DRA7\d\w*|BeagleBone\w*|Pandaboard)\b", "arm"),
    # Xilinx / Altera / Marvell / others
    (r"\bZynq\s?(?:MP|UltraScale)\w*|\bVersal\b|\bAgilex\b|\bStratix\s?10\b|\bArmada\s?(?:37\d\d|7k|8k|[78]0\d\d)\b|"
     r"\bCN9\d{3}\b|\bOcteon\s?(?:TX|10)\b|\bThunderX\d?\b|\bKunpeng\s?\d*\b|\bAmpere\s+(?:Altra|One|eMAG)\w*|"
     r"\bGraviton\s?\d?\b|\bNeoverse[- ]\w+|\bApple\s+M[1-4]\b|\bCortex-A(?:3[45]|5[357]|6[05]|7[2-8]|7[1-9]\w*|510|520|7\d\d|X\d)\b", "arm64"),
    (r"\bZynq(?:-7000)?\b|\bCyclone\s?V\b|\bArria\s?(?:V|10)\b|\bArmada\s?(?:370|375|38\d|39\d|XP)\b|\bKirkwood\b|"
     r"\bOrion5x\b|\bSTM32MP1\w*|\bCortex-A(?:5|7|8|9|12|15|17)\b|\bARM926\w*|\bARM11\w*|\bXScale\b|\bStrongARM\b", "arm"),
    # RISC-V
    (r"\b(?:JH71[01]0|VisionFive\s?2?|HiFive\s?\w+|SiFive\s?\w+|StarFive\w*|Allwinner\s+D1|C906|C910|SG20\d\d|"
     r"Milk-V\s?\w+|K230|TH1520|SpacemiT\w*)\b", "riscv"),
    # PowerPC machines and cores
    (r"\b(?:PowerBook|iBook|PowerMac|Power\s?Mac|eMac|Mac\s?mini\s?G4|Xserve\s?G[45]|Pegasos\w*|AmigaOne|"
     r"MPC\d{3,4}\w*|PPC\d{3,4}\w*|e500(?:mc|v2)?|e5500|e6500|QorIQ\s?P\d+|T[124]0[248]0|(?-i:POWER)\s?(?:[4-9]|10|11)\b|"
     r"pSeries|PowerNV|Cell\s+B\.?E)\b", "powerpc"),
    # MIPS
    (r"\b(?:Octeon(?!\s?(?:TX|10))\w*|Loongson-?[23]\w*|MT7621\w*|MT7628\w*|AR71\d\d|AR9\d{3}|QCA9\d{3}|"
     r"Ingenic\s?\w+|JZ47\d\d|BCM63\d\d|Lantiq\w*|MIPS\s+Malta)\b", "mips"),
    (r"\bLoongson-?3A[56]000\w*|\bLoongson\s+3A[56]000\b|\b3A[56]000\b", "loongarch"),
    # x86: an oops' register line says which (RIP with code segment 0010 is a 64-bit kernel, EIP
    # a 32-bit one); CPU families sold only in the 64-bit era (the kernel may still be 32-bit:
    # the trained gate decides whether to keep these)
    (r"\bRIP:\s?0010:|\bRIP:\s?\[<ffffffff", "x86_64"),
    (r"\bEIP:\s?0060:|\bEIP:\s?\[<c0", "i386"),
    (r"\b(?:Ryzen|EPYC|Threadripper)\b|\bXeon\(?R?\)?\s+(?:Platinum|Gold|Silver|Bronze|Max|W-\d{4}|"
     r"E[357]-\d{4}\w*\s+v\d|E-2\d{3})|\bCore\(?T?M?\)?\s+(?:i[3579]-\d{4,5}\w*|Ultra\s+\d)", "x86_64"),
    # s390 / others
    (r"\b(?:z/?Architecture|IBM\s+z\d{2}|zSeries|z/VM|LinuxONE)\b", "s390"),
    (r"\b(?:UltraSPARC\w*|SPARC\s?T\d|SPARC\s?M\d|Sun\s+Fire\s+T\d+)\b", "sparc64"),
    (r"\b(?:PA-?8[0-9]00|PA-RISC|HP\s+C3[0-9]00|HP\s+J[56]\d00|HP\s+rp\d{4})\b", "parisc"),
    (r"\b(?:Amiga\s+(?:[1-4]000|A[1-4]000)|Atari\s+(?:TT|Falcon)|Mac\s+IIci|680[2346]0)\b", "m68k"),
]]


# Other evidence of the architecture a kernel was built for, each with its source (a feature of
# the trained arch gate): distro kernel flavours, cross toolchains, CI machine names, defconfigs,
# symbols and registers of an oops, CPUs sold only in the 32-bit era, and machine lines.
EXTRA: list[tuple[re.Pattern, str, str]] = [(re.compile(p, re.I if f else 0), a, src) for p, a, src, f in [
    # Debian / Ubuntu kernel flavours ("linux-image-2.6.30-1-686", "-686-pae", "-armmp", "-ppc64el")
    (r"\d-(?:[3-6]86)(?:-pae|-bigmem|-smp)?\b", "i386", "package", 0),
    (r"\d-armmp(?:-lpae)?\b|\barmel\b", "arm", "package", 0),
    (r"\bppc64el\b|\bpowerpc64(?:le)?\b", "powerpc", "package", 0),
    # cross toolchains and CI machine names ("arm-linux-gnueabihf-gcc", "qemu_arm64-virt", "qemu-x86_64")
    (r"\barm-(?:linux|none|unknown)-\w+|\bqemu[_-]arm(?![\w-]*64)", "arm", "toolchain", 0),
    (r"\bqemu[_-](?:arm64|aarch64)", "arm64", "toolchain", 0),
    (r"\bqemu[_-]x86[_-]64", "x86_64", "toolchain", 0),
    (r"\bqemu[_-]i386", "i386", "toolchain", 0),
    (r"\briscv64-(?:linux|unknown)-\w+|\bqemu[_-]riscv64", "riscv", "toolchain", 0),
    (r"\bmips\w*-(?:linux|unknown)-\w+|\bqemu[_-]mips", "mips", "toolchain", 0),
    # defconfigs named for one architecture's machines
    (r"\b(?:multi_v[57]|omap2plus|imx_v6_v7|imx_v4_v5|mxs|sunxi|exynos|davinci_all|at91_dt|sama5|sama7|"
     r"bcm2835|versatile|vexpress|mvebu_v[57]|tegra|shmobile|qcom|keystone|u8500|spear\d*|pxa\w*|s3c\w*)_defconfig\b"
     r"|\bCONFIG_THUMB2_KERNEL\b|\bCONFIG_ARM_LPAE\b", "arm", "defconfig", 0),
    (r"\b(?:pmac32|ppc64|ppc64le|ppc6xx|ppc44x|ppc40x|mpc85xx\w*|mpc83xx|mpc5200|corenet(?:32|64)_smp|g5|ps3|"
     r"pseries(?:_le)?|powernv|cell|chrp32|wii|gamecube)_defconfig\b", "powerpc", "defconfig", 0),
    (r"\bi386_defconfig\b|\bCONFIG_X86_32=y", "i386", "defconfig", 0),
    (r"\bx86_64_defconfig\b|\bCONFIG_X86_64=y", "x86_64", "defconfig", 0),
    # an oops: 64-bit x86 syscall entry symbols and registers, 32-bit ones
    (r"\b(?:__x64_sys_\w+|do_syscall_64|entry_SYSCALL_64\w*|x64_sys_call)\b|(?m:^[^\n]{0,40}\bRIP:\s)", "x86_64",
     "oops", 0),
    (r"\b(?:i386_start_kernel|do_int80_syscall_32|entry_INT80_32|sysenter_past_esp)\b|\bEIP(?: is at|:)\s",
     "i386", "oops", 0),
    # x86 CPUs sold only before 64-bit x86 (a kernel on them is 32-bit)
    (r"\b(?:Pentium\s?(?:II|III|Pro|MMX|M|[1-9]\d{1,2}(?:\s?MHz)?)\b|Pentium\s?(?:4|IV)\b|P-?III\b|PIII\b|P4\b|"
     r"Athlon(?:\s?(?:XP|MP|Thunderbird))?(?!\s?(?:64|II|X2))\b|Duron|K6(?:-\w+)?\b|Cyrix|Crusoe|Geode|"
     r"VIA\s+C[37]|Core\s+Duo|Core\s+Solo|(?<![\w-])[34]86(?:DX\d?|SX)?\b(?=\s+(?:box|machine|PC|laptop|CPU|processor)))",
     "i386", "cpu32", 0),
    # boards and machines (the SoC tables above name the chips)
    (r"\b(?:Nokia\s+(?:N900|N950|N9|N810|N800|770|RX-51)|N900|N950|BeagleBoard\w*|Kurobox[\s-]?Pro)",
     "arm", "board", 0),
    (r"\bKurobox(?![\s-]?Pro)|\bLinkStation\b|\bMac\s?Mini\s?G4|\bPowerBook\b|\biMac\s?G[345]\b", "powerpc", "board", 0),
    (r"\b(?:Compute\s+Module\s+[345]|CM[345]\b|Pine64\w*|PinePhone\w*|Pinebook\s?Pro|Odroid-?(?:C2|C4|N2\+?|M1)|"
     r"Amlogic\s+(?:S9\d\d\w*|A311\w*|S905\w*)|S905\w*|S922X|A311D|Khadas\s+VIM\d?|Orange\s?Pi\s?(?:3|4|5|Zero\s?[23]))",
     "arm64", "board", 0),
    (r"\b(?:SGI\s+(?:Indy|Indigo2?|Octane|O2|Origin\s?\d*)|IP(?:22|27|28|30|32)\b)", "mips", "board", 0),
    (r"\bSun\s+(?:Ultra\s?\d+|Blade\s?\d+|Fire\s?V\d+)|\bNetra\s?T?\d+|\bSun4u\b|\bsun4v\b", "sparc64", "board", 0),
    (r"\b(?:AlphaServer|AlphaStation|Alpha\s?PC|EV[4-7]\d?\b|21[0-2]64\w*)", "alpha", "board", 0),
    (r"\b(?:FSL|Freescale|NXP|QorIQ)\s+P[1-5]0[1-8]\d\b|\bP[1-5]0[1-8]\d(?:RDB|DS)\b", "powerpc", "board", 0),
    # laptop and desktop lines sold with x86 CPUs (the kernel may still be 32-bit: the gate decides)
    (r"\b(?:ThinkPad|ThinkCentre|ThinkStation|IdeaPad|IdeaCentre|Legion|XPS\s?1\d|Latitude|Inspiron|Vostro|"
     r"OptiPlex|Alienware|ZBook|EliteBook|ProBook|EliteDesk|Pavilion|Spectre|OMEN|ZenBook|VivoBook|ExpertBook|"
     r"ROG\s+\w+|Aspire|TravelMate|Framework\s+(?:Laptop|Desktop|13|16)|NUC\d*|Chromebox)\b", "x86_64", "machine", 1),
]]


def _table_source(arch: str, text: str) -> str:
    if text.startswith(("RIP", "EIP")):
        return "oops"
    return "cpu64" if arch == "x86_64" else "board"


def arch_guess(clean: str, subject: str | None, cpu: str | None) -> tuple[str, tuple[int, int] | None, str] | None:
    """``(arch, clean span, source)`` from the first board / SoC / machine / package / toolchain /
    oops evidence with a known architecture: the CPU string first, then the subject, then the
    body.  None when nothing is found.  (A pattern whose required words are absent is not run.)"""
    if cpu:
        low = fold(cpu)
        for rx, arch, src in _ALL:
            if may_match(rx, cpu, low) and rx.search(cpu):
                idx = clean.find(cpu)
                return arch, ((idx, idx + len(cpu)) if idx >= 0 else None), "cpu_" + src
    for text, is_subject in ((subject or "", True), (clean[:20000], False)):
        low = fold(text)
        best = None
        for rx, arch, src in _ALL:
            if not may_match(rx, text, low):
                continue
            build = src in _BUILD_SOURCES
            # only a match that would beat the best so far is looked for
            if best is not None and not build and not best[0][0]:
                continue  # hardware never beats build evidence
            end = len(text) if best is None or (build and best[0][0]) else best[0][1]
            # not a name inside a path or branch ("pci/controller/mt7621", "arch/arm/mach-x")
            m = next((m for m in iter_matches(rx, text, low, end) if text[m.start() - 1:m.start()] not in ("/", "_")), None)
            if m is None:
                continue
            src = src if src != "table" else _table_source(arch, m.group(0))
            # what the kernel was built for (package, toolchain, defconfig, oops) before the
            # hardware it ran on (a Raspberry Pi 4 may run a 32-bit multi_v7 kernel); then the first
            key = (src not in _BUILD_SOURCES, m.start())
            if best is None or key < best[0]:
                best = (key, arch, (m.start(), m.end()), src)
        if best is not None:
            return (best[1], None, best[3]) if is_subject else best[1:]
    return None


_BUILD_SOURCES = ("package", "toolchain", "defconfig", "oops")


def arch_from_hardware(clean: str, subject: str | None, cpu: str | None) -> tuple[str, tuple[int, int] | None] | None:
    """``(arch, clean span)`` of ``arch_guess``."""
    g = arch_guess(clean, subject, cpu)
    return (g[0], g[1]) if g is not None else None


_ALL = [(rx, a, "table") for rx, a in TABLE] + EXTRA
