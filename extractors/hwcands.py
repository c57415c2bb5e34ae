"""Storage candidates for the trained storage ranker.

A report names its storage in many forms: a qualified noun ("2T NVMe disk", "6x10TB raid5",
"rotational storage", "SD card"), a device model ("Samsung SSD 970 EVO Plus 250GB",
"Intel P3600 NVMe SSD", "Kioxia CM-7 NVMe SSDs"), a controller ("PERC H740P",
"MegaRAID SAS-3 3108"), a virtual or memory-backed device (zram, virtio disk), or an LKP job
parameter ("disk: 1HDD", ".../1SSD/ext4/..." in a test path).  Every such phrase found in the
text becomes a candidate with the words around it as features; the ranker (``learned``)
picks one or none.  The vocabularies are general storage knowledge: device classes, bus and
interface names, the drive vendors, RAID levels.
"""

from __future__ import annotations

import re

from . import scan
from .features import Candidate, phrase_feats, with_rule_candidate
from .hwconfig import qualifiers

I = re.I

# device nouns: what a storage phrase ends in
_HEAD = (r"(?:disks?|drives?|SSDs?|HDDs?|NVMe(?:\s+(?:drive|disk|SSD|device|namespace)s?)?|JBODs?|eMMC|"
         r"(?:micro\s?)?SD\s?cards?|(?:hard|flash|thumb|pen)\s?(?:disks?|drives?)|pendrives?|USB\s+sticks?|"
         r"spindles?|(?:block\s+)?devices?|arrays?|volumes?|LUNs?|storage|rust|zram\d?|ramdisks?|"
         r"SAN|NAS)")
# words that qualify a storage noun (sizes, counts, buses, media, vendors, RAID levels)
_MOD = re.compile(
    r"^(?:\d+(?:\.\d+)?(?:[KMGTP]i?B?|T|x\d+\S*|krpm|rpm|RPM|-disk|-drive|-way)?|\d+x\d*\S*|x\d+|"
    r"sata\d*|sas\d*|scsi|usb\d?|nvme|ssds?|hdds?|pcie\d?|pci-?e|m\.2|u\.2|ide|pata|ata|ahci|fc|iscsi|"
    r"boot|root|rotating|rotational|spinning|physical|raw|local|remote|external|internal|enterprise|consumer|"
    r"smr|cmr|shingled|flash|optane|rust|nvdimm|pmem|virtio|virtual|emulated|loop|"
    r"raid-?\d+|md|mdraid|lvm|software|hardware|striped|mirrored|dual|single|two|three|four|six|eight|twelve|"
    r"samsung|intel|seagate|wd|western|digital|toshiba|hitachi|hgst|micron|kingston|sandisk|crucial|kioxia|"
    r"lexar|hynix|sk|solidigm|corsair|adata|sabrent|phison|"
    r"industrial|slow|fast|old|new|cheap|high-end|data|test|scratch|separate)$", I)
_ACRO = re.compile(r"^[A-Z][A-Z0-9/-]+$")
_NOT_MOD = re.compile(r"^(?:I|A|THE|AND|OR|ON|IN|OF|TO|IS|IT|MY|NO|SO|BUT|FOR)$")
HEAD_RE = re.compile(r"(?<![\w/.-])(" + _HEAD + r")(?![\w-])(\s+(?:in\s+)?(?:raid|RAID)[- ]?\d+"
                     r"(?:\s+(?:array|configuration|setup))?)?", I)
# a vendor's drive model: "Samsung SSD 970 EVO Plus 250GB", "Intel P3600 NVMe SSD", "Lexar NM790"
_VENDOR = (r"(?:Samsung|SAMSUNG|Intel(?:\s+Corporation)?|Western\s+Digital|WDC?|Seagate|ST\d|Toshiba|TOSHIBA|"
           r"Kioxia|KIOXIA|Micron|Crucial|Kingston|SanDisk|Lexar|SK\s?[Hh]ynix|Hynix|HGST|Hitachi|Corsair|ADATA|"
           r"Sabrent|Solidigm|Phison|Silicon\s+Motion|Plextor|Transcend|Optane|Maxtor|Quantum|IBM|Fujitsu)")
MODEL_RE = re.compile(
    r"\b(" + _VENDOR + r"(?:\s+(?:SSD|NVMe|DC|model:?))*\s+[A-Z]*[\w-]*\d[\w-]*"
    r"(?:\s+(?:Series|EVO|Pro|PRO|Plus|Max|NVMe|SSDs?|HDDs?|drives?|disks?|\d+(?:\.\d+)?\s?[GT]B))*)")
# RAID / HBA controllers: "PERC H740P", "MegaRAID SAS 9361-8i", "Adaptec 3154", "HPE Smart Array P440ar"
CTRL_RE = re.compile(r"\b((?:Dell\s+)?PERC\s+H\d{3}\w*|(?:LSI\s+|Broadcom\s+/?\s*)?MegaRAID(?:\s+[\w-]+){1,3}|"
                     r"Adaptec\s+\w*\d{3,5}\w*|(?:HPE?\s+)?Smart\s+Array\s+\w*\d+\w*)")
# LKP job parameters: "disk: 1HDD", "disk: NVMe PCIe3 SSD *4", a test path ".../1SSD/xfs/..."
LKP_DISK_LINE = re.compile(r"^\s*disk:\s*([^\n]{2,60}?)\s*$", re.M | I)
LKP_PATH_DISK = re.compile(r"(?<=[/-])(\d+(?:HDD|SSD|NVMe|BRD\w*|pmem\w*))(?=[/-])")
_STRONG_ALONE = re.compile(r"^(?:SSDs?|HDDs?|NVMe(?:\s+\w+)?|eMMC|(?:micro\s?)?SD\s?cards?|zram\d?|pendrives?|"
                           r"JBODs?|spindles?)$", I)

_PATTERNS = ("head", "model", "ctrl", "lkp_line", "lkp_path")


def _qualifies(tt: str) -> bool:
    return bool(tt) and bool(_MOD.match(tt) or (_ACRO.match(tt) and not _NOT_MOD.match(tt)))


def _head_phrases(clean: str, mt) -> list[tuple[int, int, str, str]]:
    """Storage nouns with the qualifiers in front of them (or a strong noun alone)."""
    out = []
    for m in mt.finditer(HEAD_RE):
        line_start, mods = qualifiers(clean, m.start(), _qualifies, ",()*")
        head = m.group(1)
        if not mods and not _STRONG_ALONE.match(head) and not m.group(2):
            continue
        text = " ".join(mods + [head]) + (m.group(2) or "")
        start = m.start() - len(" ".join(mods)) - 1 if mods else m.start()
        out.append((max(start, line_start), m.end(), " ".join(text.split()).strip(" ,(*"), "head"))
    return out


def storage_candidates(ex, rule_storage: str | None):
    """Storage phrases as ``features.Candidate`` objects, with their features."""
    clean = ex.clean[:30000]
    mt = ex.mt
    found: dict[str, Candidate] = {}

    def add(s: int, e: int, value: str, kind: str, subj: bool = False) -> None:
        value = " ".join(value.split()).strip(" ,.;:(")
        if len(value) < 2 or len(value) > 90:
            return
        c = found.setdefault(value.lower(), Candidate(value, [], set(), value.lower()))
        c.spans.append((s, e, subj))
        c.feats.add(f"spat:{kind}")

    for s, e, v, k in _head_phrases(clean, mt):
        if s < 30000:
            add(s, e, v, k)
    low = scan.fold(clean)
    for rx, kind in ((MODEL_RE, "model"), (CTRL_RE, "ctrl"), (LKP_DISK_LINE, "lkp_line"),
                     (LKP_PATH_DISK, "lkp_path")):
        if not scan.may_match(rx, clean, low):
            continue
        for m in rx.finditer(clean):
            add(m.start(1), m.end(1), m.group(1), kind)
    subj = ex.subject or ""
    for m in HEAD_RE.finditer(subj):
        if _STRONG_ALONE.match(m.group(1)):
            add(m.start(1), m.end(1), m.group(1), "head", True)
    for m in MODEL_RE.finditer(subj):
        add(m.start(1), m.end(1), m.group(1), "model", True)
    out = with_rule_candidate(ex, found, rule_storage)
    for c in out:
        c.feats |= phrase_feats(ex, c, len(out), rule_storage, "nstorage", "rule_storage")
        c.feats |= storage_value_feats(c.value)
    # a phrase and its parts ("SSD" / "Samsung SSD 970 EVO Plus 250GB"): the labels take the
    # fullest form written
    for c in out:
        c.feats.add(f"srel:longer={any(o is not c and c.norm in o.norm for o in out)}")
        c.feats.add(f"srel:shorter={any(o is not c and o.norm in c.norm for o in out)}")
    return out


def storage_value_feats(value: str) -> set[str]:
    """The shape of a storage phrase: its head noun class, a size or count, a vendor."""
    f = {f"swords={min(len(value.split()), 5)}"}
    low = value.lower()
    for name, rx in (("ssd", r"\bssds?\b"), ("hdd", r"\bhdds?\b|hard\s?(?:disk|drive)"), ("nvme", r"nvme"),
                     ("emmc", r"emmc|sd\s?card"), ("raid", r"raid|\bmd\b|lvm|stripe"),
                     ("usb", r"usb|pen\s?drive|stick"), ("virt", r"virtio|zram|loop|ramdisk|virtual"),
                     ("size", r"\d+(?:\.\d+)?\s?(?:[kmgtp]i?b?|t)\b"), ("count", r"^\d+x?\b|\bx\d+|\*\s?\d"),
                     ("array", r"array|jbod|spindle|lun|volume"), ("generic", r"^(?:devices?|storage|disks?|drives?)$")):
        if re.search(rx, low):
            f.add(f"shas:{name}")
    if re.search(r"\b(?:block\s+)?devices?$", low):
        f.add("shead:device")
    return f


# the cue patterns, with a \b(?=\w) check in front where it is safe
MODEL_RE = scan.word_led(MODEL_RE)
CTRL_RE = scan.word_led(CTRL_RE)


_CPU_SHAPES = (("ghz", r"\d\s?[gm]hz\b"), ("brand", r"\((?:r|tm)\)"), ("vendor", r"^(?:genuine\s+)?(?:intel|amd|arm|ibm|nvidia|qualcomm|apple|ampere)\b"),
               ("family", r"xeon|core|epyc|ryzen|opteron|athlon|pentium|celeron|atom|cortex|neoverse|power\s?\d"),
               ("model_no", r"\d{3,5}"), ("lower", r"^[a-z]"))


def cpu_value_feats(value: str, others: list[str]) -> set[str]:
    """The shape of a CPU string (a full brand string with its clock, a vendor, a model number,
    lower case), and whether a longer or shorter form of it is also written."""
    low = value.lower()
    f = {f"cwords={min(len(value.split()), 6)}"}
    f |= {f"chas:{n}" for n, rx in _CPU_SHAPES if re.search(rx, low)}
    f.add(f"crel:longer={any(o != low and low in o for o in others)}")
    f.add(f"crel:shorter={any(o != low and o in low for o in others)}")
    return f
