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

from . import patterns as P
from . import scan
from .features import Candidate, phrase_feats, with_rule_candidate
from .hwconfig import _LKP_PARAMS, qualifiers

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
    r"\b(" + _VENDOR + r"(?:\s+(?:SSD|NVMe|DC|model:?))*\s+(?!(?:Power|POWER|Xeon|Core|Atom|Pentium|Celeron))"
    r"[A-Z]*[\w-]*\d[\w-]*"
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


# a singular device noun used as a count's adjective: "20 drive array", "4 disk raid5"
_ARRAY_AFTER = re.compile(r"[ \t]+(?:(?:RAID|raid)-?\d+(?:[ \t]+(?:array|set))?|arrays?|stripes?|sets?|JBOD)\b")


def _head_phrases(clean: str, mt) -> list[tuple[int, int, str, str]]:
    """Storage nouns with the qualifiers in front of them (or a strong noun alone)."""
    out = []
    for m in mt.finditer(HEAD_RE):
        line_start, mods = qualifiers(clean, m.start(), _qualifies, ",()*")
        head = m.group(1)
        if not mods and not _STRONG_ALONE.match(head) and not m.group(2):
            continue
        text = " ".join(mods + [head]) + (m.group(2) or "")
        end = m.end()
        if mods and not m.group(2) and head.lower() in ("disk", "drive", "spindle") and mods[-1][:1].isdigit():
            a = _ARRAY_AFTER.match(clean, end)
            if a:
                text, end = text + a.group(0), a.end()
        start = m.start() - len(" ".join(mods)) - 1 if mods else m.start()
        out.append((max(start, line_start), end, " ".join(text.split()).strip(" ,(*"), "head"))
    return out


_IO_BENCH = frozenset({"fio", "dd", "fsmark", "fs_mark", "dbench", "iozone", "bonnie++", "postmark", "tiobench",
                       "filebench", "fxmark", "sysbench", "aim7", "xfstests"})


def io_message_feats(ex) -> set[str]:
    """Whether the message is about I/O at all (a filesystem, an I/O benchmark, an I/O unit
    named): the filesystem a report names is the one under test where it measures or breaks I/O.
    (Tried for the storage ranker too: CV precision fell.)"""
    mt = ex.mt
    low = mt.low
    benches = {m.group(1).lower() for m in mt.finditer(P.BENCH_RE)}
    return {f"smsg:fs={bool(mt.finditer(P.FS_RE))}", f"smsg:iobench={bool(benches & _IO_BENCH)}",
            f"smsg:iounit={'iops' in low or 'mb/s' in low or 'mib/s' in low}"}


def lkp_disk(ex) -> Candidate | None:
    """The disk parameter of an LKP job ("disk: 1HDD", "disk: NVMe PCIe3 SSD *4", or the column of a
    test path ".../1SSD/xfs/..."), as a candidate: decisive, the robot's own setup."""
    low = ex.mt.low
    if "disk:" in low:
        m = ex.mt.search(LKP_DISK_LINE)
        if m is not None:
            v = " ".join(m.group(1).split())
            return Candidate(v, [(m.start(1), m.end(1), False)], {"lkp_disk"}, v.lower())
    if "hdd" in low or "ssd" in low or "brd" in low or "nvme" in low or "pmem" in low:
        m = ex.mt.search(LKP_PATH_DISK)
        if m is not None:
            return Candidate(m.group(1), [(m.start(1), m.end(1), False)], {"lkp_disk"}, m.group(1).lower())
    return None


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
    if rule_storage:
        # the rule's phrase cut short of a longer candidate phrase ("20 drive" / "20 drive array")
        low_rule = rule_storage.lower()
        if low_rule not in found:
            longer = next((k for k in found if k.startswith(low_rule + " ")), None)
            rule_storage = found[longer].value if longer else rule_storage
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


# ------------------------------------------------------------------------------ filesystem

# the filesystem a test ran on, written in a setup form: an LKP job parameter ("fs: xfs",
# "fs2: nfsv4", "fstype: ext4_no_jnl"), mkfs / mount commands, a mount table line
# ("/dev/sda1 on /mnt type xfs (rw,...)"), an inxi "fs: btrfs" column
LKP_FS_LINE = re.compile(r"^[ \t>]*(fs\d?|fstype):[ \t]*([a-z][\w.-]*[a-z0-9])[ \t]*$", re.M)
_FS_SETUP = re.compile(r"(?:\bmkfs\.|\bmkfs\s+-t\s+|\bmount\s+(?:-\w+\s+)*-t\s+|\btype\s+|\bfs(?:type)?[:=]\s*|"
                       r"\bfilesystem[:=]\s*|\s-t\s+)$", I)
_FS_MODULE_AFTER = re.compile(r"\((?:[EOPFGCTU+-]{1,4})\)")
_FS_WORD_AFTER = re.compile(r"\s*(?:file\s?systems?|fs\b|partitions?|volumes?|mounts?|images?|root)", I)
_FS_BEFORE_ON = re.compile(r"\b(?:on|over|with|using|under|formatted|of)\s+(?:an?\s+|the\s+)?$", I)
_FS_TABLE_EQ = re.compile(r"\|\s*$|fs=$")
_FS_PATHISH = re.compile(r"[_/.=:]$")
_FS_COMPARE = re.compile(r"\b(?:vs\.?|versus|compared|than|and|or)\b", I)


def _fs_mention_src(text: str, s: int, e: int, in_subject: bool) -> str:
    """How one filesystem name is written: a setup form, a subject tag or title prefix (the area
    of a commit), a module list entry, a name beside a filesystem noun, or a bare word."""
    before = text[max(0, s - 24):s]
    after = text[e:e + 16]
    if in_subject:
        if before.endswith("[") and after[:2] in ("]", "?]") or after.startswith(("]", "?]")):
            return "subj_tag"
        if after.startswith(":"):
            return "subj_prefix"
        return "subj_word"
    if before.endswith("] ") and text[s:e].isupper():
        return "log"  # a kernel log prefix ("[    6.06] BTRFS: device fsid ...")
    if _FS_SETUP.search(before):
        return "eq" if before.endswith("fs=") else "setup"
    if _FS_MODULE_AFTER.match(after) or (after.startswith(" ") and "Modules linked in" in text[max(0, s - 400):s]):
        return "module"
    if after.startswith(":") and (s == 0 or text[s - 1] in "\n\"( ") and not after.startswith("::"):
        return "title_prefix"
    if _FS_PATHISH.search(before) or after[:1] in "_/":
        return "path"
    if _FS_WORD_AFTER.match(after):
        return "noun"
    if _FS_BEFORE_ON.search(before):
        return "on"
    return "word"


def lkp_filesystems(ex) -> list[tuple[str, str, int, int]]:
    """The filesystem parameters of an LKP job, ``(role, value, start, end)``: role ``fs`` for
    ``fs:`` / ``fstype:``, ``fs2`` for ``fs1:`` / ``fs2:`` (a filesystem layered on the first),
    from the parameter lines and the parameter column block."""
    clean = ex.clean
    out = []
    if "fs" not in ex.mt.low:
        return out
    for m in LKP_FS_LINE.finditer(clean):
        out.append(("fs" if m.group(1) in ("fs", "fstype") else "fs2", m.group(2), m.start(2), m.end(2)))
    for m in _LKP_PARAMS.finditer(clean):
        keys, vals = m.group(1).split("/"), m.group(2).split("/")
        if len(keys) != len(vals):
            continue
        pos = m.start(2)
        for k, v in zip(keys, vals):
            if k in ("fs", "fs1", "fs2", "fstype") and _LKP_FS_VALUE.fullmatch(v):
                out.append(("fs" if k in ("fs", "fstype") else "fs2", v, pos, pos + len(v)))
            pos += len(v) + 1
    return out


_FS_NAMES = "|".join(P.FILESYSTEMS)
_MKFS_FS = re.compile(r"\bmkfs\.(\w+)")
_LKP_PATH_FS = re.compile(r"\d(?:HDD|SSD|NVMe|BRD\w*|pmem\w*)-(" + _FS_NAMES + r")-")
_SLASH_FS = re.compile(r"\w/(" + _FS_NAMES + r")\b", I)
_LKP_FS_VALUE = re.compile(r"[a-z][\w.-]*")


def fs_candidates(ex, rule_fs: str | None, kind: str | None = None) -> list[Candidate]:
    """The filesystems a message names as ``features.Candidate`` objects (lower case, or an LKP
    job parameter as written), each with how and where it is written; the trained filesystem
    ranker (``learned``) picks the one the test ran on, or none."""
    mt = ex.mt
    clean = ex.clean
    found: dict[str, Candidate] = {}
    srcs: dict[str, list[str]] = {}

    def add(value: str, s: int, e: int, subj: bool, src: str) -> None:
        key = value.lower()
        c = found.setdefault(key, Candidate(key, [], set(), key))
        c.spans.append((s, e, subj))
        srcs.setdefault(key, []).append(src)

    subj = ex.subject or ""
    for m in P.FS_RE.finditer(subj):
        add(m.group(1), m.start(1), m.end(1), True, _fs_mention_src(subj, m.start(1), m.end(1), True))
    for m in mt.finditer(P.FS_RE):
        if m.start() > 40000:
            break
        if m.group(1) == "EROFS":
            continue  # the errno ("EROFS (Read-only file system)")
        add(m.group(1), m.start(1), m.end(1), False, _fs_mention_src(clean, m.start(1), m.end(1), False))
    # forms the word scan leaves out: "mkfs.xfs", an LKP test path "1HDD-xfs-...", "NVMe/XFS"
    low = mt.low
    for rx, src, text, subj_ in ((_MKFS_FS, "setup", clean, False), (_LKP_PATH_FS, "lkp_path", clean, False),
                                 (_SLASH_FS, "subj_word", subj, True)):
        if not scan.may_match(rx, text, low if not subj_ else None):
            continue
        for m in rx.finditer(text):
            if m.group(1).lower() in P.FILESYSTEMS:
                add(m.group(1), m.start(1), m.end(1), subj_, src)
    lkp = lkp_filesystems(ex)
    for key, value, s, e in lkp:
        add(value, s, e, False, "lkp_" + key)
    # an LKP job's own parameter names the filesystem under test: the layered one (fs1 / fs2:
    # nfsv4 or smbv2 exported from the local fs) where there is one, else fs / fstype
    pick = min(lkp, key=lambda t: (t[0] != "fs2", t[2]), default=None)
    out = with_rule_candidate(ex, found, rule_fs)
    total = sum(len(c.spans) for c in out)
    most = max((len(c.spans) for c in out), default=0)
    msg = io_message_feats(ex) if out else set()
    for c in out:
        c.feats |= msg
        ss = srcs.get(c.norm, ["rule"])
        c.feats |= {f"fsrc:{s}" for s in ss}
        c.feats.add(f"fsrc_first:{ss[0]}")
        body = [s for s in ss if not s.startswith("subj")]
        c.feats.add(f"fs_body_n={min(len(body), 4)}")
        c.feats.add(f"fs_most={len(c.spans) == most}")
        c.feats.add(f"fs_share={min(4, int(4 * len(c.spans) / max(total, 1)))}")
        c.feats.add(f"fs_lkp_msg={bool(lkp)}")
        if pick is not None and c.norm == pick[1].lower():
            c.feats.add("fs_lkp_pick")
        c.feats.add(f"fs_kind={kind}")
        if lkp and not any(s.startswith("lkp_") for s in ss):
            c.feats.add("fs_lkp_other")
        c.feats.add(f"fname:{c.norm if c.norm in P.FILESYSTEMS else 'other'}")
        c.feats |= phrase_feats(ex, c, len(out), rule_fs, "nfs", "rule_fs")
    return out
