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

from .scan import fold, may_match

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


def arch_from_hardware(clean: str, subject: str | None, cpu: str | None) -> tuple[str, tuple[int, int] | None] | None:
    """``(arch, clean span)`` from the first board / SoC / machine name with a known
    architecture: the CPU string first, then the subject, then the body.  None when no known
    name appears.  (A pattern whose required words are absent is not run.)"""
    if cpu:
        low = fold(cpu)
        for rx, arch in TABLE:
            if may_match(rx, cpu, low) and rx.search(cpu):
                idx = clean.find(cpu)
                return arch, ((idx, idx + len(cpu)) if idx >= 0 else None)
    for text, is_subject in ((subject or "", True), (clean[:20000], False)):
        low = fold(text)
        best = None
        for rx, arch in TABLE:
            if not may_match(rx, text, low):
                continue
            m = rx.search(text)
            if m and (best is None or m.start() < best[1][0]):
                best = (arch, (m.start(), m.end()))
        if best is not None:
            return (best[0], None) if is_subject else best
    return None
