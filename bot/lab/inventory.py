"""The lab inventory: machines declared in the configuration, and parsers that turn the
free-text hardware of a report (CPU, memory, storage) into comparable facts.  Pure: no I/O.

Configuration (see deploy/lab-example.toml)::

    [[lab.machines]]
    name = "qemu-tcg-1"                 # [A-Za-z0-9._-]{1,64}, unique
    arch = "x86_64"                     # x86_64 | i386 | aarch64 | arm | ppc64le | s390x | riscv64 ...
    cpu = "Intel(R) Xeon(R) Gold 6238M CPU @ 2.10GHz (Cascade Lake)"
    # cpu_vendor / cpu_family / cpu_model: optional, derived from ``cpu`` when left out
    cores = 2                           # logical CPUs the workload gets
    memory = "4G"                       # or an int of MiB
    storage = ["ram"]                   # device types (nvme ssd hdd ram pmem mmc usb network) or tables:
                                        # [{type = "nvme", model = "Samsung PM9A3", size = "3.84T"}]
    filesystems = ["tmpfs"]             # filesystems the machine can test
    backend = "qemu"                    # the lab backend that runs jobs here
    tags = ["emulated"]                 # free labels; "manual": used only when named (--machine);
                                        # "example": a machine that does not exist (must be disabled)
    scratch = "/scratch"                # scratch area for host backends (absolute, no "..")
    enabled = true
    [lab.machines.settings]             # the backend's settings for this machine; they
    work_dir = "/var/lib/regtriage/lab/qemu-tcg-1"   # override [lab.<backend>] key by key

Every value is validated when loaded (:func:`load_machines` raises :class:`InventoryError`
naming the machine and the key).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
TAG_RE = re.compile(r"^[A-Za-z0-9._:+-]{1,64}$")
SCRATCH_RE = re.compile(r"^/[A-Za-z0-9._/-]{0,200}$")
BACKEND_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
FS_NAMES = ("ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "bcachefs", "tmpfs", "nfs", "cifs", "smb3", "ocfs2",
            "gfs2", "jfs", "reiserfs", "zfs", "overlayfs", "fuse", "vfat", "exfat", "ntfs3", "erofs", "squashfs",
            "nilfs2", "udf", "ceph", "9p", "virtiofs", "hugetlbfs", "ramfs")
STORAGE_TYPES = ("nvme", "ssd", "hdd", "ram", "pmem", "mmc", "usb", "network", "virtual")
MANUAL_TAG = "manual"
EXAMPLE_TAG = "example"  # an illustration in a sample config: must be disabled (load_machines refuses it enabled)

# arch spellings -> canonical (``x86`` is a family: either x86_64 or i386)
_ARCH = {"x86_64": "x86_64", "x86-64": "x86_64", "amd64": "x86_64", "x64": "x86_64", "intel64": "x86_64",
         "i386": "i386", "i486": "i386", "i586": "i386", "i686": "i386", "ia32": "i386", "x86_32": "i386",
         "x86": "x86", "aarch64": "aarch64", "arm64": "aarch64", "armv8": "aarch64", "arm": "arm",
         "armhf": "arm", "armel": "arm", "armv7": "arm", "armv7l": "arm", "ppc64le": "ppc64le",
         "ppc64el": "ppc64le", "powerpc64le": "ppc64le", "ppc64": "ppc64", "powerpc": "powerpc", "ppc": "powerpc",
         "s390x": "s390x", "s390": "s390x", "riscv64": "riscv64", "riscv": "riscv64", "loongarch64": "loongarch64",
         "loongarch": "loongarch64", "mips": "mips", "mips64": "mips64", "sparc64": "sparc64", "m68k": "m68k"}


class InventoryError(ValueError):
    """The lab inventory in the configuration is not usable; the message says where and why."""


# ---------------------------------------------------------------------------------- parsers
def normalize_arch(value: Any) -> str | None:
    """Canonical arch name (``amd64`` -> ``x86_64``, ``arm64`` -> ``aarch64``), ``x86`` for the
    unspecific family, None when unknown."""
    if not isinstance(value, str):
        return None
    v = value.strip().lower().replace(" ", "")
    return _ARCH.get(v)


def arch_compatible(report_arch: str | None, machine_arch: str | None) -> bool:
    """Whether a machine of ``machine_arch`` can stand for a report on ``report_arch``."""
    r, m = normalize_arch(report_arch), normalize_arch(machine_arch)
    if r is None or m is None:
        return False
    if r == m:
        return True
    return r == "x86" and m in ("x86_64", "i386")


@dataclass(frozen=True)
class CpuInfo:
    vendor: str | None = None  # intel | amd | ampere | arm | amazon | apple | broadcom | hisilicon | ...
    family: str | None = None  # xeon | core | atom | epyc | ryzen | opteron | altra | cortex | neoverse ...
    model: str | None = None  # the model number, lower case: "6238m", "7763", "12700k", "a72", "n1"
    codename: str | None = None  # "cascade lake", "milan" ... when named
    text: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


_VENDOR_HINTS = (
    ("intel", r"\bintel\b|\bxeon\b|\bcore\s*\(?tm\)?|\bcore\s+i[3579]\b|\bi[3579]-\d|\batom\b|\bceleron\b|"
              r"\bpentium\b|\bcore\s+ultra\b"),
    ("amd", r"\bamd\b|\bepyc\b|\bryzen\b|\bopteron\b|\bthreadripper\b|\bathlon\b|\bturion\b"),
    ("ampere", r"\bampere\b|\baltra\b"),
    ("amazon", r"\bgraviton"),
    ("apple", r"\bapple\s+m\d"),
    ("broadcom", r"\bbcm\d{4}"),
    ("hisilicon", r"\bkunpeng\b|\bhisilicon\b"),
    ("marvell", r"\bthunderx|\bcavium\b|\bmarvell\b|\boctx?eon\b"),
    ("qualcomm", r"\bqualcomm\b|\bsnapdragon\b|\bqcom\b"),
    ("ibm", r"\bpower\s?(?:8|9|10|11)\b|\bz(?:13|14|15|16)\b"),
    ("arm", r"\bcortex-?[am]\d|\bneoverse"),
    ("qemu", r"\bqemu\b|\btcg\b"),
)
_FAMILIES = (
    "xeon", "core ultra", "core", "atom", "celeron", "pentium", "epyc", "ryzen", "threadripper", "opteron",
    "athlon", "altra", "graviton", "neoverse", "cortex", "kunpeng", "thunderx2", "thunderx", "snapdragon",
)
_CODENAMES = (
    "sandy bridge", "ivy bridge", "haswell", "broadwell", "skylake", "kaby lake", "coffee lake", "comet lake",
    "cascade lake", "cooper lake", "ice lake", "tiger lake", "alder lake", "raptor lake", "meteor lake",
    "lunar lake", "arrow lake", "sapphire rapids", "emerald rapids", "granite rapids", "sierra forest",
    "knights landing", "knights mill", "naples", "rome", "milan", "genoa", "bergamo", "turin", "zen",
    "zen 2", "zen 3", "zen 4", "zen 5",
)


def parse_cpu(text: Any, *, vendor: str | None = None, family: str | None = None,
              model: str | None = None) -> CpuInfo:
    """Vendor, family and model from a CPU description such as ``Intel(R) Xeon(R) Gold 6238M CPU
    @ 2.10GHz``, ``AMD EPYC 7763 64-Core Processor``, ``Neoverse-N1``; explicit values win."""
    if not isinstance(text, str) or not text.strip():
        return CpuInfo(_low(vendor), _low(family), _low(model), None, None)
    t = re.sub(r"\((?:r|tm|c)\)|®|™", " ", text, flags=re.I)
    low = " ".join(t.lower().split())
    v = _low(vendor)
    if v is None:
        for name, rx in _VENDOR_HINTS:
            if re.search(rx, low):
                v = name
                break
    f = _low(family)
    fam_end = None
    if f is None:
        hits = []
        for fam in _FAMILIES:  # the family named first ("EPYC 7763 64-Core": epyc, not core)
            m = re.search(rf"(?<![-\d])\b{re.escape(fam)}", low)
            if m:
                hits.append((m.start(), -len(fam), fam, m.end()))
        if hits:
            _, _, fam, fam_end = min(hits)
            f = fam.replace(" ", "-")
    mdl = _low(model)
    if mdl is None:
        rest = low[fam_end:] if fam_end is not None else low
        rest = re.sub(r"@.*$", "", rest)
        rest = re.sub(r"\b(?:cpu|processor|\d+-core|\d+\s*cores?|\d+(?:\.\d+)?\s*[gm]hz)\b", " ", rest)
        m = (re.search(r"\b(e[357]-\d{4,5}[a-z]?(?:\s+v\d)?)\b", rest)  # Xeon E5-2680 v4
             or re.search(r"\bi[3579]-(\d{3,5}[a-z]{0,3})\b", rest)  # Core i7-12700K
             or re.search(r"\b([a-z]?\d{3,5}[a-z]{0,3})\b", rest)  # Gold 6238M, EPYC 7763, Ryzen 9 7950X
             or re.search(r"-?([a-z]?\d{1,5}[a-z]{0,3})\b", rest))  # Cortex-A72, Neoverse-N1, Graviton3
        if m:
            mdl = m.group(1).strip("-")
    code = None
    for c in sorted(_CODENAMES, key=len, reverse=True):
        if re.search(rf"\b{re.escape(c)}\b", low):
            code = c
            break
    return CpuInfo(v, f, mdl, code, " ".join(text.split())[:200])


def _low(v: Any) -> str | None:
    return v.strip().lower() if isinstance(v, str) and v.strip() else None


_SIZE_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)\b", re.I)
_UNIT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def parse_memory(value: Any) -> int | None:
    """Bytes from ``"128G"``, ``"128G memory"``, ``"16 GB"``, ``"196608 kB"``, ``"QEMU_MEM_MB=14336"``;
    an int is MiB.  None when unparseable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value << 20 if value > 0 else None
    if not isinstance(value, str):
        return None
    s = value.strip()
    m = re.search(r"MEM(?:ORY)?_?(MB|GB|SIZE)?=(\d+)([KMGT]?)", s, re.I)
    if m:
        n, unit = int(m.group(2)), (m.group(3) or ("G" if (m.group(1) or "").upper() == "GB" else "M")).lower()
        return n * _UNIT[unit]
    m = _SIZE_RE.search(s)
    if not m:
        return None
    n, unit = float(m.group(1)), m.group(2).lower()
    if not unit:
        return None  # a bare number says nothing about its unit
    return int(n * _UNIT[unit])


def storage_type(text: Any) -> str | None:
    """Device class of a storage description: ``"Samsung 980 PRO NVMe SSD"`` -> ``nvme``,
    ``"1HDD"`` -> ``hdd``, ``"1BRD_48G"`` -> ``ram`` ..."""
    if not isinstance(text, str) or not text.strip():
        return None
    s = text.lower()
    if s in STORAGE_TYPES:
        return s
    if re.search(r"nvme|\bnvm\b", s):
        return "nvme"
    if re.search(r"pmem|optane dc|nvdimm|\bdax\b", s):
        return "pmem"
    if re.search(r"(?:^|[^a-z])brd|ram ?disk|\bramfs\b|\btmpfs\b|\bzram\b|\bram\b|\bmemory\b", s):
        return "ram"
    if re.search(r"ssd|solid.state|flash|optane", s):
        return "ssd"
    if re.search(r"hdd|hard ?(?:disk|drive)|rotational|spinning|\bsata\b.*disk|\bsas\b|\d+\s*rpm", s):
        return "hdd"
    if re.search(r"emmc|mmc|\bsd ?card|sdcard", s):
        return "mmc"
    if re.search(r"\busb\b", s):
        return "usb"
    if re.search(r"\bnfs\b|iscsi|\bnbd\b|\bceph\b|\brbd\b|network|\bsmb\b|\bcifs\b", s):
        return "network"
    if re.search(r"virtio|\bvirtual\b|\bqcow|\bvd[a-z]\b", s):
        return "virtual"
    return None


def parse_cores(*texts: Any) -> int | None:
    """Logical CPU count from ``"88 threads ..."``, ``"64-Core Processor"``, ``"nproc=16"``."""
    for t in texts:
        if isinstance(t, int) and not isinstance(t, bool):
            return t if t > 0 else None
        if not isinstance(t, str):
            continue
        m = re.search(r"\b(\d{1,4})\s*(?:threads|logical cpus|cpus|hw threads|vcpus?)\b", t, re.I)
        if m:
            return int(m.group(1))
        m = re.search(r"\b(\d{1,4})[- ]cores?\b|\bnproc\s*[=:]\s*(\d{1,4})\b|-smp\s+(\d{1,4})\b", t, re.I)
        if m:
            return int(next(g for g in m.groups() if g))
    return None


# ---------------------------------------------------------------------------------- machines
@dataclass(frozen=True)
class StorageDevice:
    type: str
    model: str | None = None
    size: str | None = None

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class Machine:
    name: str
    arch: str
    backend: str
    cpu: CpuInfo = field(default_factory=CpuInfo)
    cores: int | None = None
    memory: int | None = None  # bytes
    storage: tuple[StorageDevice, ...] = ()
    filesystems: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    scratch: str | None = None
    settings: dict = field(default_factory=dict)  # the backend's settings for this machine
    enabled: bool = True

    @property
    def storage_types(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d.type for d in self.storage))

    @property
    def manual(self) -> bool:
        return MANUAL_TAG in self.tags

    def to_dict(self) -> dict:
        return {"name": self.name, "arch": self.arch, "backend": self.backend, "cpu": self.cpu.to_dict(),
                "cores": self.cores, "memory_bytes": self.memory,
                "memory": _fmt_bytes(self.memory) if self.memory else None,
                "storage": [d.to_dict() for d in self.storage], "filesystems": list(self.filesystems),
                "tags": list(self.tags), "scratch": self.scratch, "enabled": self.enabled,
                "settings": dict(self.settings)}

    def backend_config(self, config: dict | None) -> dict:
        """The ``[lab]`` table the backend is built from: the configured ``[lab]`` (recipe limits,
        ``[lab.<backend>]``) with this machine's ``settings`` laid over ``[lab.<backend>]``."""
        lab = lab_section(config)
        out = {k: v for k, v in lab.items() if k not in ("machines", "builds")}
        base = lab.get(self.backend) if isinstance(lab.get(self.backend), dict) else {}
        out[self.backend] = {**base, **self.settings}
        return out


def _fmt_bytes(n: int) -> str:
    for unit, size in (("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= size:
            v = n / size
            return f"{v:.0f}{unit}" if v == int(v) else f"{v:.1f}{unit}"
    return f"{n}B"


def lab_section(config: Any) -> dict:
    """The ``[lab]`` table from a Config object, a whole config dict, or the table itself."""
    if config is None:
        return {}
    data = getattr(config, "data", config)
    if not isinstance(data, dict):
        return {}
    if "lab" in data:
        lab = data["lab"]
        if not isinstance(lab, dict):
            raise InventoryError("[lab] must be a table")
        return lab
    return data if ("machines" in data or "builds" in data or "qemu" in data) else {}



def lab_values(config: Any, defaults: dict[str, Any]) -> dict[str, Any]:
    """``defaults`` with the values ``[lab]`` sets for those keys (not yet validated)."""
    lab = lab_section(config)
    return {k: lab.get(k, v) for k, v in defaults.items()}

def _machine(i: int, d: Any) -> Machine:
    if not isinstance(d, dict):
        raise InventoryError(f"[[lab.machines]] #{i + 1} must be a table")
    name = d.get("name")
    where = f"[[lab.machines]] #{i + 1}" + (f" ({name})" if isinstance(name, str) else "")
    known = {"name", "arch", "cpu", "cpu_vendor", "cpu_family", "cpu_model", "cores", "memory", "storage",
             "filesystems", "backend", "tags", "scratch", "settings", "enabled", "description"}
    unknown = set(d) - known
    if unknown:
        raise InventoryError(f"{where}: unknown keys {sorted(unknown)}")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise InventoryError(f"{where}: name must match {NAME_RE.pattern}")
    arch = normalize_arch(d.get("arch"))
    if arch is None or arch == "x86":
        raise InventoryError(f"{where}: arch must be a specific architecture (x86_64, i386, aarch64 ...), "
                             f"got {d.get('arch')!r}")
    backend = d.get("backend")
    if not isinstance(backend, str) or not BACKEND_RE.match(backend):
        raise InventoryError(f"{where}: backend must be a backend name such as \"qemu\"")
    for k in ("cpu", "cpu_vendor", "cpu_family", "cpu_model", "description"):
        if d.get(k) is not None and (not isinstance(d[k], str) or len(d[k]) > 200):
            raise InventoryError(f"{where}: {k} must be a string (at most 200 characters)")
    cpu = parse_cpu(d.get("cpu"), vendor=d.get("cpu_vendor"), family=d.get("cpu_family"), model=d.get("cpu_model"))
    cores = d.get("cores")
    if cores is not None and (type(cores) is not int or not 1 <= cores <= 65536):
        raise InventoryError(f"{where}: cores must be an int in [1, 65536]")
    memory = None
    if d.get("memory") is not None:
        memory = parse_memory(d["memory"])
        if memory is None:
            raise InventoryError(f"{where}: memory must be a size such as \"64G\" or an int of MiB")
    storage = []
    raw_storage = d.get("storage", [])
    if isinstance(raw_storage, (str, dict)):
        raw_storage = [raw_storage]
    if not isinstance(raw_storage, list):
        raise InventoryError(f"{where}: storage must be a list")
    for s in raw_storage:
        if isinstance(s, str):
            t = storage_type(s)
            if t is None:
                raise InventoryError(f"{where}: unknown storage type {s!r} (one of {', '.join(STORAGE_TYPES)})")
            storage.append(StorageDevice(t, None if s.lower() == t else s))
        elif isinstance(s, dict):
            if set(s) - {"type", "model", "size"}:
                raise InventoryError(f"{where}: storage entries have type, model, size")
            t = storage_type(s.get("type")) or storage_type(s.get("model"))
            if t is None:
                raise InventoryError(f"{where}: storage entry needs a type ({', '.join(STORAGE_TYPES)})")
            for k in ("model", "size"):
                if s.get(k) is not None and not isinstance(s[k], str):
                    raise InventoryError(f"{where}: storage {k} must be a string")
            storage.append(StorageDevice(t, s.get("model"), s.get("size")))
        else:
            raise InventoryError(f"{where}: storage entries are strings or tables")
    fss = d.get("filesystems", [])
    if not isinstance(fss, list) or not all(isinstance(f, str) and re.fullmatch(r"[a-z0-9]{2,16}", f.lower())
                                            for f in fss):
        raise InventoryError(f"{where}: filesystems must be a list of names such as \"ext4\"")
    tags = d.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) and TAG_RE.match(t) for t in tags):
        raise InventoryError(f"{where}: tags must be a list of words ({TAG_RE.pattern})")
    scratch = d.get("scratch")
    if scratch is not None and (not isinstance(scratch, str) or not SCRATCH_RE.match(scratch) or ".." in scratch):
        raise InventoryError(f"{where}: scratch must be an absolute path without '..'")
    settings = d.get("settings", {})
    if not isinstance(settings, dict):
        raise InventoryError(f"{where}: settings must be a table")
    enabled = d.get("enabled", True)
    if not isinstance(enabled, bool):
        raise InventoryError(f"{where}: enabled must be true or false")
    if EXAMPLE_TAG in tags and enabled:
        raise InventoryError(f"{where}: tagged {EXAMPLE_TAG!r} (a machine that does not exist) but enabled: "
                             f"describe a real machine and drop the tag, or set enabled = false")
    return Machine(name=name, arch=arch, backend=backend, cpu=cpu, cores=cores, memory=memory,
                   storage=tuple(storage), filesystems=tuple(dict.fromkeys(f.lower() for f in fss)),
                   tags=tuple(dict.fromkeys(tags)), scratch=scratch, settings=dict(settings), enabled=enabled)


def load_machines(config: Any) -> list[Machine]:
    """The machines of ``[[lab.machines]]`` (validated; names unique)."""
    lab = lab_section(config)
    raw = lab.get("machines", [])
    if not isinstance(raw, list):
        raise InventoryError("lab.machines must be an array of tables ([[lab.machines]])")
    out: list[Machine] = []
    seen: set[str] = set()
    for i, d in enumerate(raw):
        m = _machine(i, d)
        if m.name in seen:
            raise InventoryError(f"[[lab.machines]]: machine name {m.name!r} is declared twice")
        seen.add(m.name)
        out.append(m)
    return out


EMULATED_TAG = "emulated"


def is_emulated(machine: Machine, config: Any = None) -> bool:
    """Whether samples from ``machine`` come from an emulated CPU: tagged ``emulated``, or a
    ``qemu`` machine whose accel (its settings, else ``[lab.qemu]``, default ``auto``) is not
    ``kvm`` -- ``auto`` falls back to TCG when KVM is missing, so it counts as emulated."""
    if EMULATED_TAG in machine.tags:
        return True
    if machine.backend == "qemu":
        base = lab_section(config).get("qemu") if isinstance(lab_section(config).get("qemu"), dict) else {}
        accel = machine.settings.get("accel", base.get("accel", "auto"))
        return accel != "kvm"
    return False


def get_machine(config: Any, name: str) -> Machine | None:
    for m in load_machines(config):
        if m.name == name:
            return m
    return None


# ---------------------------------------------------------------------------------- backends
def make_backend(name: str, lab_config: dict | None = None):
    """The backend ``name`` configured from ``lab_config`` (a ``[lab]`` table, as
    :meth:`Machine.backend_config` returns).  Raises bot.lab.backends.LabError."""
    from bot.lab.backends import get_backend

    return get_backend(name, dict(lab_config or {}))
