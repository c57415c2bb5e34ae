"""Kernel subsystem hint from a commit-title prefix, a robot ``[tag]``, paths or keywords.

The tables are general knowledge of kernel subject-prefix conventions (``mm:``, ``xfs:``,
``sched/fair:``, ``x86/mm:``, ``drm/i915:``, ``ARM: dts:`` ...), not taken from any message.
"""

from __future__ import annotations

import re

from . import kernel_paths, scan
from .patterns import FILESYSTEMS

ARCHES = {"x86": "x86", "arm64": "arm64", "arm": "arm", "powerpc": "powerpc", "ppc": "powerpc",
          "riscv": "riscv", "s390": "s390", "mips": "mips", "loongarch": "loongarch", "sparc": "sparc",
          "parisc": "parisc", "m68k": "m68k", "sh": "sh", "alpha": "alpha", "ia64": "ia64", "um": "um"}

PREFIX = {
    # memory management
    "mm": "mm", "mempolicy": "mm", "memcg": "mm/memcontrol", "memcontrol": "mm/memcontrol", "slab": "mm", "slub": "mm", "slob": "mm",
    "vmscan": "mm", "hugetlb": "mm", "page_alloc": "mm", "swap": "mm", "zswap": "mm", "zsmalloc": "mm",
    "zram": "drivers/block/zram", "thp": "mm", "khugepaged": "mm", "memory-failure": "mm", "kasan": "mm",
    "kmsan": "mm", "kfence": "mm", "vmalloc": "mm", "mmap": "mm", "mlock": "mm", "mremap": "mm", "shmem": "mm",
    "tmpfs": "mm", "userfaultfd": "mm", "damon": "mm", "ksm": "mm", "memblock": "mm", "percpu": "mm",
    "compaction": "mm", "migrate": "mm", "mglru": "mm", "readahead": "mm", "filemap": "mm", "gup": "mm",
    "maple_tree": "lib", "xarray": "lib", "radix-tree": "lib", "lib": "lib", "kobject": "lib",
    "bitmap": "lib", "string": "lib", "vsprintf": "lib", "lockref": "lib", "scatterlist": "lib",
    # core kernel
    "sched": "kernel/sched", "sched_ext": "kernel/sched", "eevdf": "kernel/sched", "cpuset": "kernel/cgroup",
    "locking": "kernel/locking", "lockdep": "kernel/locking", "mutex": "kernel/locking", "rwsem": "kernel/locking",
    "futex": "kernel/futex", "rcu": "kernel/rcu", "srcu": "kernel/rcu", "timers": "kernel/time",
    "time": "kernel/time", "hrtimer": "kernel/time", "clocksource": "kernel/time", "tick": "kernel/time",
    "nohz": "kernel/time", "irq": "kernel/irq", "genirq": "kernel/irq", "workqueue": "kernel/workqueue",
    "cgroup": "kernel/cgroup", "cgroups": "kernel/cgroup", "perf": "kernel/events", "perf/core": "kernel/events",
    "bpf": "kernel/bpf", "tracing": "kernel/trace", "ftrace": "kernel/trace", "tracepoint": "kernel/trace",
    "printk": "kernel/printk", "kthread": "kernel", "fork": "kernel", "exit": "kernel", "signal": "kernel",
    "ptrace": "kernel", "pid": "kernel", "seccomp": "kernel", "module": "kernel/module", "kexec": "kernel",
    "kprobes": "kernel/kprobes", "livepatch": "kernel/livepatch", "cpu/hotplug": "kernel/cpu",
    "smp": "kernel", "audit": "kernel/audit", "pm": "kernel/power", "power": "kernel/power",
    "hibernate": "kernel/power", "suspend": "kernel/power", "dma-mapping": "kernel/dma", "dma": "kernel/dma",
    "swiotlb": "kernel/dma", "static_call": "kernel", "jump_label": "kernel", "entry": "kernel/entry",
    # filesystems and vfs
    "fs": "fs", "vfs": "fs", "pipe": "fs", "iomap": "fs/iomap", "writeback": "fs", "dcache": "fs",
    "namei": "fs", "fsnotify": "fs/notify", "inotify": "fs/notify", "fanotify": "fs/notify", "eventpoll": "fs",
    "epoll": "fs", "aio": "fs", "splice": "fs", "exec": "fs", "binfmt_elf": "fs", "fs/proc": "fs/proc",
    "fuse": "fs/fuse", "nfs": "fs/nfs", "nfsd": "fs/nfsd", "sunrpc": "net/sunrpc", "lockd": "fs/lockd",
    "cifs": "fs/smb", "smb": "fs/smb", "ksmbd": "fs/smb", "ceph": "fs/ceph", "overlayfs": "fs/overlayfs",
    "ovl": "fs/overlayfs", "proc": "fs/proc", "procfs": "fs/proc", "sysfs": "fs/sysfs", "kernfs": "fs/kernfs",
    "debugfs": "fs/debugfs", "configfs": "fs/configfs", "jbd2": "fs/jbd2", "quota": "fs/quota",
    "netfs": "fs/netfs", "fscrypt": "fs/crypto", "fsverity": "fs/verity", "dax": "fs", "libfs": "fs",
    "io_uring": "io_uring",
    # block and storage
    "block": "block", "blk-mq": "block", "blk": "block", "bio": "block", "blk-cgroup": "block",
    "blk-throttle": "block", "blk-wbt": "block", "wbt": "block", "cfq-iosched": "block", "cfq": "block",
    "bfq": "block", "bfq-iosched": "block", "mq-deadline": "block", "kyber": "block", "elevator": "block",
    "partitions": "block", "loop": "drivers/block", "nbd": "drivers/block", "rbd": "drivers/block",
    "virtio_blk": "drivers/block", "virtio-blk": "drivers/block", "null_blk": "drivers/block",
    "ublk": "drivers/block", "brd": "drivers/block", "drbd": "drivers/block", "nvme": "drivers/nvme",
    "nvmet": "drivers/nvme", "nvme-pci": "drivers/nvme", "nvme-tcp": "drivers/nvme", "nvme-fc": "drivers/nvme",
    "nvme-rdma": "drivers/nvme", "scsi": "drivers/scsi", "sd": "drivers/scsi", "sg": "drivers/scsi",
    "megaraid_sas": "drivers/scsi", "mpt3sas": "drivers/scsi", "lpfc": "drivers/scsi", "qla2xxx": "drivers/scsi",
    "ufs": "drivers/ufs", "md": "drivers/md", "raid1": "drivers/md", "raid10": "drivers/md",
    "raid5": "drivers/md", "raid6": "drivers/md", "dm": "drivers/md", "dm-crypt": "drivers/md",
    "dm-thin": "drivers/md", "bcache": "drivers/md/bcache", "ata": "drivers/ata", "libata": "drivers/ata",
    "ahci": "drivers/ata", "mmc": "drivers/mmc", "mtd": "drivers/mtd", "ubi": "drivers/mtd",
    # networking
    "net": "net", "netdev": "net", "tcp": "net", "udp": "net", "ipv4": "net", "ipv6": "net", "inet": "net",
    "netfilter": "net", "nft": "net", "nf_tables": "net", "sctp": "net", "xfrm": "net", "af_unix": "net",
    "unix": "net", "sock": "net", "skbuff": "net", "mptcp": "net", "tls": "net", "bridge": "net", "vxlan": "drivers/net",
    "tun": "drivers/net", "veth": "drivers/net", "bonding": "drivers/net", "macvlan": "drivers/net",
    "virtio_net": "drivers/net", "virtio-net": "drivers/net", "net_sched": "net", "net/sched": "net",
    "xdp": "net", "page_pool": "net", "gro": "net", "rtnetlink": "net", "netlink": "net", "packet": "net",
    "vsock": "net", "rxrpc": "net", "smc": "net", "rds": "net", "openvswitch": "net", "ethtool": "net",
    "wifi": "drivers/net/wireless", "iwlwifi": "drivers/net/wireless", "ath9k": "drivers/net/wireless",
    "ath10k": "drivers/net/wireless", "ath11k": "drivers/net/wireless", "ath12k": "drivers/net/wireless",
    "mt76": "drivers/net/wireless", "rtw88": "drivers/net/wireless", "rtw89": "drivers/net/wireless",
    "rtlwifi": "drivers/net/wireless", "brcmfmac": "drivers/net/wireless", "mwifiex": "drivers/net/wireless",
    "mac80211": "net/mac80211", "cfg80211": "net/wireless", "bluetooth": "net/bluetooth",
    "bluetooth/btusb": "drivers/bluetooth", "btusb": "drivers/bluetooth", "can": "net/can",
    "e1000e": "drivers/net", "igb": "drivers/net", "igc": "drivers/net", "ixgbe": "drivers/net",
    "i40e": "drivers/net", "ice": "drivers/net", "mlx4": "drivers/net", "mlx5": "drivers/net",
    "net/mlx5": "drivers/net", "net/mlx5e": "drivers/net", "bnxt": "drivers/net", "bnxt_en": "drivers/net",
    "r8169": "drivers/net", "tg3": "drivers/net", "stmmac": "drivers/net", "ena": "drivers/net",
    "gve": "drivers/net", "sfc": "drivers/net", "phy": "drivers/net/phy", "phylink": "drivers/net/phy",
    "rdma": "drivers/infiniband", "ib": "drivers/infiniband", "ib_core": "drivers/infiniband",
    # build
    "kbuild": "kbuild", "kconfig": "kbuild", "modpost": "kbuild", "objtool": "tools/objtool",
    "scripts": "scripts", "selftests": "tools/testing/selftests", "perf tools": "tools/perf",
    "perf-tools": "tools/perf", "tools/perf": "tools/perf", "perf stat": "tools/perf", "perf record": "tools/perf",
    # drivers
    "drm": "drivers/gpu/drm", "fbdev": "drivers/video/fbdev", "fbcon": "drivers/video/fbdev",
    "i915": "drivers/gpu/drm/i915", "amdgpu": "drivers/gpu/drm/amd", "radeon": "drivers/gpu/drm/radeon",
    "nouveau": "drivers/gpu/drm/nouveau", "usb": "drivers/usb", "xhci": "drivers/usb", "xhci-hcd": "drivers/usb",
    "ehci": "drivers/usb", "dwc3": "drivers/usb", "dwc2": "drivers/usb", "typec": "drivers/usb",
    "thunderbolt": "drivers/thunderbolt", "usb-storage": "drivers/usb/storage", "uas": "drivers/usb/storage",
    "pci": "drivers/pci", "pcie": "drivers/pci", "acpi": "drivers/acpi", "cpufreq": "drivers/cpufreq",
    "intel_pstate": "drivers/cpufreq", "amd-pstate": "drivers/cpufreq", "cpuidle": "drivers/cpuidle",
    "intel_idle": "drivers/idle", "iommu": "drivers/iommu", "iommu/vt-d": "drivers/iommu",
    "iommu/amd": "drivers/iommu", "gpio": "drivers/gpio", "pinctrl": "drivers/pinctrl", "i2c": "drivers/i2c",
    "spi": "drivers/spi", "tty": "drivers/tty", "serial": "drivers/tty", "vt": "drivers/tty",
    "input": "drivers/input", "hid": "drivers/hid", "sound": "sound", "alsa": "sound", "asoc": "sound",
    "alsa: hda": "sound", "virtio": "drivers/virtio", "vhost": "drivers/vhost", "vfio": "drivers/vfio",
    "kvm": "virt/kvm", "xen": "drivers/xen", "hyperv": "drivers/hv", "hv": "drivers/hv",
    "thermal": "drivers/thermal", "hwmon": "drivers/hwmon", "watchdog": "drivers/watchdog",
    "rtc": "drivers/rtc", "clk": "drivers/clk", "regulator": "drivers/regulator", "mfd": "drivers/mfd",
    "firmware": "drivers/firmware", "efi": "drivers/firmware/efi", "efivarfs": "fs/efivarfs",
    "of": "drivers/of", "driver core": "drivers/base", "driver-core": "drivers/base", "base": "drivers/base",
    "devres": "drivers/base", "regmap": "drivers/base/regmap", "firmware_loader": "drivers/base/firmware_loader",
    "soc": "drivers/soc", "media": "drivers/media", "v4l2": "drivers/media", "uvcvideo": "drivers/media",
    "dmaengine": "drivers/dma", "edac": "drivers/edac", "nvdimm": "drivers/nvdimm", "libnvdimm": "drivers/nvdimm",
    "cxl": "drivers/cxl", "tpm": "drivers/char/tpm", "random": "drivers/char", "char": "drivers/char",
    "platform/x86": "drivers/platform/x86", "leds": "drivers/leds", "backlight": "drivers/video/backlight",
    "power: supply": "drivers/power/supply", "mailbox": "drivers/mailbox", "remoteproc": "drivers/remoteproc",
    "irqchip": "drivers/irqchip", "clocksource/drivers": "drivers/clocksource", "perf/x86": "arch/x86/events",
    # security, crypto, misc
    "security": "security", "selinux": "security/selinux", "apparmor": "security/apparmor",
    "smack": "security/smack", "landlock": "security/landlock", "lsm": "security", "ima": "security/integrity",
    "keys": "security/keys", "crypto": "crypto", "init": "init", "ipc": "ipc", "sysctl": "kernel",
    "rust": "rust", "docs": "Documentation", "documentation": "Documentation",
}
FS_PREFIX = {f: f"fs/{f}" for f in FILESYSTEMS}
FS_PREFIX.update({"squashfs": "fs/squashfs", "ntfs3": "fs/ntfs3", "cephfs": "fs/ceph", "hugetlbfs": "fs/hugetlbfs",
                  "tmpfs": "mm", "nfs": "fs/nfs", "fuse": "fs/fuse", "overlayfs": "fs/overlayfs", "cifs": "fs/smb",
                  "gfs2": "fs/gfs2", "ocfs2": "fs/ocfs2", "orangefs": "fs/orangefs", "afs": "fs/afs",
                  "9p": "fs/9p", "zonefs": "fs/zonefs", "isofs": "fs/isofs", "fat": "fs/fat", "hfsplus": "fs/hfsplus"})
# arch sub-areas that are directories of their own under arch/<arch>/ ("x86/mm" -> arch/x86/mm)
ARCH_SUBDIRS = {"mm", "kvm", "boot", "entry", "crypto", "net", "pci", "power", "platforms", "events", "kernel",
                "lib", "include", "xen", "hyperv", "virt", "um", "realmode"}
# x86 sub-prefixes that name a file area of arch/x86/kernel (kept at arch/x86)
DRIVER_WORDS = re.compile(
    r"\b(i915|amdgpu|nouveau|radeon|iwlwifi|ath1[012]k|ath9k|mt76|rtw8[89]|brcmfmac|mlx5|e1000e|igb|igc|ixgbe|"
    r"i40e|r8169|nvme|xhci|ahci|libata|btusb|cpufreq|intel_pstate|amd-pstate|cpuidle|thunderbolt|"
    r"uvcvideo|btrfs|ext4|xfs|f2fs|bcachefs|nfsd?|cifs|overlayfs|fuse|io_uring|kvm|virtio|zram|zswap|"
    r"iommu|ACPI|EFI|Xarray|XArray|KVM|NVMe|USB|PCIe?)\b")

KEYWORDS = [
    (re.compile(r"\busb[- ]storage\b", re.I), "drivers/usb/storage"),
    (re.compile(r"\b(?:block-mq|blk-mq|block layer|(?:I/O|IO|io) schedulers?|elevator|mq-deadline|bfq|kyber|cfq|queue/scheduler)\b",
                re.I), "block"),
    (re.compile(r"\b(?:USB|xhci|ehci|uhci)\b"), "drivers/usb"),
    (re.compile(r"(?<!I/O )(?<!IO )(?<!io )(?<!/)\b(?:(?:CPU |task |process )?scheduler|sched(?:uler)?/|DELAY_DEQUEUE|"
                r"EEVDF|CFS)\b"), "kernel/sched"),
    (re.compile(r"\b(?:TCP|UDP|netperf|iperf|socket|network(?:ing)?)\b", re.I), "net"),
    (re.compile(r"\b(?:page allocator|reclaim|compaction|zonelist|THP|hugepages?|slab allocator|SLUB|memcg)\b",
                re.I), "mm"),
    (re.compile(r"\b(?:writeback|page cache|VFS)\b", re.I), "fs"),
]


def canonical(subsystem: str | None) -> str | None:
    """The name kernel people use for an area: tree paths, except that core-kernel areas go
    by their short name (``kernel/sched`` -> ``sched``, as in ``sched/fair:`` titles and the
    labelled corpus)."""
    if not subsystem:
        return None
    s = subsystem.strip().strip("/")
    rest = s[len("kernel/"):] if s.startswith("kernel/") else ""
    if rest and ("/" in rest or rest in SHORT_CORE):
        s = rest
    return s or None


# core-kernel areas that go by their short name ("sched", "locking"); others keep their path
# ("kernel/futex", "kernel/nsproxy"), and so do deeper ones' parents ("sched/fair" for kernel/sched/fair)
SHORT_CORE = {"sched", "locking", "rcu", "cgroup", "bpf", "time", "irq", "trace", "printk", "workqueue"}


def from_prefix(title: str | None) -> str | None:
    """Kernel path for a commit-title prefix ("mm/slub: ...", "KVM: x86: ...", "drm/i915: ...")."""
    if not title:
        return None
    t = title.strip()
    m = re.match(r"^((?:[A-Za-z0-9_.,+/ -]{1,40}?:\s*){1,3})", t)
    if not m:
        return None
    parts = [p.strip() for p in m.group(1).split(":") if p.strip()]
    if not parts:
        return None
    first = parts[0]
    low = first.lower()
    second = parts[1].lower() if len(parts) > 1 else ""
    path = [p for p in re.split(r"[/,]", low) if p]
    if not path:
        return None
    head = path[0].strip()
    if head in ARCHES:
        out = f"arch/{ARCHES[head]}"
        if len(path) > 1 and path[1] in ARCH_SUBDIRS:
            out += f"/{path[1]}"
        elif len(parts) > 1 and second in ("dts", "dt"):
            out += "/boot/dts"
        elif len(parts) > 1 and second in ARCH_SUBDIRS and second not in ("kernel", "include"):
            out += f"/{second}"
        return out
    if head == "kvm":
        # "KVM: x86: ..." / "KVM: arm64: ..." live under arch/<arch>/kvm, the generic part in virt/kvm
        a = path[1] if len(path) > 1 else second
        if a in ARCHES:
            return f"arch/{ARCHES[a]}/kvm"
        return "virt/kvm"
    if head in FS_PREFIX and low not in PREFIX:
        return FS_PREFIX[head]
    if head == "drm" and len(path) > 1:
        sub = path[1]
        return f"drivers/gpu/drm/{'amd' if sub in ('amd', 'amdgpu', 'amdkfd') else sub}"
    if head in ("net", "netdev", "ethernet"):
        # "net/mlx5: ..." or "net: stmmac: ..." name a network driver
        drv = path[1] if len(path) > 1 else second
        target = PREFIX.get(drv)
        if target and target.startswith("drivers/"):
            return target
        if len(path) > 1 and path[1] in ("sched", "ipv4", "ipv6", "core", "tcp", "udp", "unix", "packet"):
            return "net"
    if low in PREFIX:
        return PREFIX[low]
    if f"{low}: {second}" in PREFIX:
        return PREFIX[f"{low}: {second}"]
    if head in PREFIX:
        return PREFIX[head]
    return None


_PREFIX_PARTS = re.compile(r"^((?:[A-Za-z0-9_.,+/ -]{1,40}?:\s*){1,3})")
# areas taken as one whole in kernel people's words: not refined into their subdirectories
_WHOLE = re.compile(r"^(?:fs/(?!smb$)[^/]+|drivers/gpu/drm/[^/]+|arch/[^/]+/boot/dts)$")


def specific_prefix(title: str | None) -> str | None:
    """``from_prefix`` made as specific as the title's own prefix words say, with the kernel
    tree's names (``kernel_paths``): "usb: dwc3: gadget:" -> drivers/usb/dwc3, "x86/mce:" ->
    arch/x86/kernel/cpu/mce, "btusb:" -> drivers/bluetooth.  A file names its directory
    ("sched/fair:" stays kernel/sched), and a driver's own directory is not split further
    ("iwlwifi: mvm:" is iwlwifi)."""
    area = from_prefix(title)
    m = _PREFIX_PARTS.match(title.strip()) if title else None
    if not m:
        return area
    words = [w.strip() for w in re.split(r"[:/,]", m.group(1)) if w.strip()]
    dash = re.match(r"\s*([\w.-]+) - ", title.strip()[m.end():])  # the older "Input: ads7846 - fix ..."
    if dash:
        words.append(dash.group(1))
    words = [w for w in words if re.fullmatch(r"[A-Za-z0-9_.+-]{2,30}", w)]
    if area is None:
        # a prefix no table knows: a module, file or directory name of the tree ("btusb:")
        if not words or not re.search(r"[0-9_-]|^[a-z0-9]+$", words[0]):
            return None
        # a short name only as a directory's ("ptp:"; "ns:" is no ns.c of some driver)
        area = kernel_paths.locate(words[0], dirs_only=len(words[0]) < 4)
        if area is None:
            return None
        words = words[1:]
    for w in words:
        if _WHOLE.match(area) or kernel_paths.is_leaf(area):
            break
        if w.lower() in area.lower().split("/"):
            continue
        # a word in capitals names a directory ("ASoC: SOF:"), not a file ("ALSA:" is no alsa.c)
        caps = w.isupper()
        loc = kernel_paths.locate(w, area, dirs_only=caps)
        if loc is None and PREFIX.get(w.lower(), "").startswith(area + "/"):
            loc = PREFIX[w.lower()]  # "mm: memcg:" -> mm/memcontrol
        if loc is None and not caps and not area.startswith("drivers/"):
            # the driver side of the same area ("Bluetooth: btusb:" -> drivers/bluetooth)
            g = kernel_paths.locate(w)
            last = area.rsplit("/", 1)[-1]
            loc = g if g and g.startswith("drivers/") and last in g.split("/") else None
        if loc and loc != area and (loc.startswith(area + "/") or not area.startswith("drivers/")
                                    and loc.startswith("drivers/")):
            area = loc
    return area


_ARCH_PATH = re.compile(r"\b(arch/[a-z0-9]+)/")
_TOP_DIRS = ("mm", "block", "net", "lib", "io_uring", "sound", "crypto", "security", "ipc", "init", "virt")
PATH_RE = re.compile(r"(?<![\w./-])((?:arch|drivers|fs|kernel|mm|net|block|lib|io_uring|sound|crypto|security|ipc|"
                     r"virt|init)/[\w.+-]+(?:/[\w.+-]+)*/?)")


def from_path(path: str) -> str | None:
    """Kernel subsystem for a source path ("fs/ext4/inode.c" -> fs/ext4)."""
    parts = path.strip("/").split("/")
    top = parts[0]
    trailing = path.endswith("/")

    def is_dir(i: int) -> bool:  # parts[i] is a directory, not the file
        return len(parts) > i + 1 or (trailing and len(parts) == i + 1)
    if top == "arch" and is_dir(1):
        return f"arch/{parts[1]}"
    if top == "fs":
        return f"fs/{parts[1]}" if is_dir(1) else "fs"
    if top == "kernel":
        return f"kernel/{parts[1]}" if is_dir(1) else "kernel"
    if top == "drivers" and is_dir(1):
        if parts[1] == "gpu" and len(parts) > 3 and parts[2] == "drm":
            return f"drivers/gpu/drm/{parts[3]}" if is_dir(3) else "drivers/gpu/drm"
        if parts[1] == "net" and is_dir(2) and parts[2] == "wireless":
            return "drivers/net/wireless"
        return f"drivers/{parts[1]}"
    if top in _TOP_DIRS:
        return top
    return None


def _subject_title(subject: str) -> str:
    """The subject without reply markers and [tags]: "Re: [REGRESSION] slab: ..." -> "slab: ..."."""
    s = subject or ""
    for _ in range(6):
        s2 = re.sub(r"^\s*(?:(?:Re|Fwd?|AW|SV|Antw)\s*:|\[[^\]]*\])\s*", "", s, flags=re.I)
        if s2 == s:
            break
        s = s2
    return s


def title_near_commit(clean: str, commit: str | None) -> str | None:
    """A commit title written right after the commit id: 'abc123 ("mm: foo")', 'abc123 - "ext4: bar"'."""
    if not commit or len(commit) < 7:
        return None
    for m in re.finditer(re.escape(commit[:7]) + r"[0-9a-f]*", clean):
        tail = clean[m.end():m.end() + 160]
        t = re.match(r"\s*(?:-|:|\(|\[)?\s*[\"\u201c(]{1,2}([^\"\u201d\n]{6,120})", tail)
        if t:
            return t.group(1)
        t = re.match(r"\s+((?:[A-Za-z0-9_./-]{2,30}: ){1,3}[^\n]{4,100})", tail)
        if t:
            return t.group(1)
    return None


_TREE_WORD = re.compile(r"(?<![\w./-])([A-Za-z][A-Za-z0-9]*(?:[_-][A-Za-z0-9]+)*)(\.c)?(?![\w/-])")


def _subject_tree_word(title: str) -> str | None:
    """A driver, module or source file the subject names by its tree name ("sata_sil24",
    "dwc3-qcom", "i8042.c", "asus-wmi"), or a directory of that one name ("pcmcia"): its
    directory (or the directory its name extends).  A plain word must be a directory's name
    written in capitals ("PCMCIA", "RTC")."""
    for m in _TREE_WORD.finditer(title):
        w, dot_c = m.group(1), m.group(2)
        if len(w) < 3 or w.lower() in _NOT_AREAS:
            continue
        if re.match(r"\s*/\s*\w", title[m.end():]) or re.search(r"\w\s*/\s*$", title[:m.start()]):
            continue  # "i915 / ucode related": one of several suspects
        named = bool(dot_c) or bool(re.search(r"[0-9_-]", w))
        if not named and not w.isupper():
            continue
        loc = kernel_paths.locate(w, dirs_only=not named)
        if not named and loc and not re.fullmatch(r"(?:drivers|fs)/[^/]+", loc):
            loc = None  # an acronym names a driver class or filesystem ("RTC", "NFS"), not "PPC"
        parts = re.split(r"[_-]", w)
        for i in range(len(parts) - 1, 0, -1):  # "dwc3-qcom" is a file of dwc3/, "rtw89_8852ae" of rtw89/
            if loc is None:
                loc = kernel_paths.locate("_".join(parts[:i]), dirs_only=True)
        if loc and loc.split("/")[0] in ("drivers", "sound", "fs", "net", "arch", "block", "mm"):
            return loc
    return None


# words that are directory names but in a subject mostly mean something else ("DIO": direct I/O)
_NOT_AREAS = {"dio", "boot", "memory", "firmware", "power", "core", "host", "common", "generic", "test", "tests",
              "misc", "platform", "include", "lib", "tools", "kernel", "linux", "stable", "next", "master",
              "fix", "regression", "bisected", "bug", "report", "broken", "patch", "build", "performance"}


def _titles(subject: str, culprit_subject: str | None, clean: str, robot_match,
            culprit_commit: str | None) -> tuple[str | None, str | None]:
    """The commit-style title the area is read from, strongest first, and what it is: the
    culprit's title, a title written next to the culprit id, a robot's [tag], a title quoted in
    the subject, the report's own subject; (None, None) when none has a known area prefix."""
    if specific_prefix(culprit_subject):
        return culprit_subject, "culprit_title"
    t = title_near_commit(clean, culprit_commit)
    if specific_prefix(t):
        return t, "title_near_commit"
    if robot_match is not None:
        tags = re.findall(r"\[([^\]]+)\]", subject[:robot_match.start(1) + 1])
        for tag in reversed(tags):
            if tag.upper() in ("LKP", "PATCH") or tag.lower() in ("lkp",) or ":" in tag and "master" in tag:
                continue
            if specific_prefix(tag + ": x"):
                return tag + ": x", "robot_tag"
    # a commit title quoted in the subject ("... caused by patch "kbuild: ..."")
    m = re.search(r"[\"\u201c]([^\"\u201d]{8,120})[\"\u201d]", subject)
    if m and specific_prefix(m.group(1)):
        return m.group(1), "quoted_title"
    # the report's own subject written like a commit title ("[REGRESSION] slab: replace ...")
    t = _subject_title(subject)
    if specific_prefix(t):
        return t, "subject_title"
    return None, None


def subsystem_for(subject: str, culprit_subject: str | None, clean: str, filesystem: str | None,
                  kind: str | None, robot_match, culprit_commit: str | None = None) -> str | None:
    """Best guess of the kernel area, strongest evidence first; None when nothing is clear."""
    return subsystem_with_source(subject, culprit_subject, clean, filesystem, kind, robot_match, culprit_commit)[0]


def subsystem_with_source(subject: str, culprit_subject: str | None, clean: str, filesystem: str | None,
                          kind: str | None, robot_match, culprit_commit: str | None = None
                          ) -> tuple[str | None, str | None]:
    """``subsystem_for`` with the kind of evidence the area was read from (``culprit_title``,
    ``title_near_commit``, ``robot_tag``, ``quoted_title``, ``subject_title``, ``arch_path``,
    ``paths``, ``subject_driver``, ``keyword_subject``, ``keyword``, ``fs_perf``), or (None, None).
    A source ending in ``+tree`` (or ``+fs``) says the area was made finer than the title's
    table entry by the kernel tree's names (or by the filesystem measured on)."""
    title, src = _titles(subject, culprit_subject, clean, robot_match, culprit_commit)
    if title is not None:
        s = specific_prefix(title)
        # "+tree": the kernel tree's names made the title's area finer ("usb: dwc3:" -> drivers/usb/dwc3)
        return s, src + ("+tree" if s != from_prefix(title) else "")
    m = _ARCH_PATH.search(clean) if "arch/" in clean else None
    if m and not re.search(r"\.[ch]:\d+", clean[m.start():m.start() + 120].split("\n")[0]):
        return m.group(1), "arch_path"
    # source paths named in the text (not in stack traces / diffstats): one area named twice
    areas: dict[str, int] = {}
    for m in PATH_RE.finditer(clean[:20000]):
        line = clean[clean.rfind("\n", 0, m.start()) + 1:clean.find("\n", m.end()) if "\n" in clean[m.end():] else len(clean)]
        if re.search(r"\.[chS]:\d+|\|\s*\d+\s*[-+]*\s*$|^\s*(?:---|\+\+\+|diff )|\+0x[0-9a-f]+", line):
            continue
        a = from_path(m.group(1))
        if a:
            areas[a] = areas.get(a, 0) + 1
    if areas:
        best = max(areas, key=lambda k: areas[k])
        if areas[best] >= 2 and list(areas.values()).count(areas[best]) == 1:
            return best, "paths"
    # a subsystem or driver name in the subject ("i915 4.5 bugfix ...")
    st = _subject_title(subject)
    for m in DRIVER_WORDS.finditer(st):
        if re.match(r"\s*/\s*\w", st[m.end():]) or re.search(r"\w\s*/\s*$", st[:m.start()]):
            continue  # "i915 / ucode related": one of several suspects, not clear
        w = m.group(1).lower()
        w = {"pci": "pci", "pcie": "pci"}.get(w, w)
        s = PREFIX.get(w) or FS_PREFIX.get(w)
        if s:
            fine = specific_prefix(f"{w}: x")  # "iwlwifi" -> drivers/net/wireless/intel/iwlwifi
            return (fine, "subject_driver+tree") if fine and fine != s else (s, "subject_driver")
    s = _subject_tree_word(st)
    if s:
        return s, "subject_tree"
    head = clean[:8000]
    head_low = scan.fold(head)
    counts: dict = {}

    def count(rx: re.Pattern) -> int:  # len(rx.findall(head)), found once
        n = counts.get(rx)
        if n is None:
            n = counts[rx] = len(rx.findall(head)) if scan.may_match(rx, head, head_low) else 0
        return n
    for rx, name in KEYWORDS:
        if rx.search(subject):
            return name, "keyword_subject"
        if count(rx) >= 3:
            return name, "keyword"
    if filesystem and kind == "performance":
        # the filesystem the numbers were measured on ("xfs" -> fs/xfs)
        fs = FS_PREFIX.get(filesystem.lower().strip())
        return (fs, "fs_perf+fs") if fs and fs.startswith("fs/") else ("fs", "fs_perf")
    for rx, name in KEYWORDS:
        if count(rx) >= 2:
            return name, "keyword"
    return None, None


# ------------------------------------------------------------------------------ candidates
# Every area the message's evidence points to, with where it came from, for the subsystem
# ranker (``learned``): the cascade above picks the first by a fixed order; the ranker weighs
# them all, at every depth the evidence supports (a title's area, the area the table names,
# the file the prefix names: "mm: vmscan:" -> mm and mm/vmscan).

_PATH_TRACE = re.compile(r"\.[chS]:\d+|\+0x[0-9a-f]+|\bRIP:|\bat\s+\S+\.[ch]\b")
_PATH_DIFFSTAT = re.compile(r"\|\s*\d+\s*[-+]*\s*$")
_PATH_DIFF = re.compile(r"^\s*(?:---|\+\+\+|diff )")
_PATH_BUILD = re.compile(r"\b(?:error|warning|undefined reference|ERROR|WARNING)\b")


def _title_file(title: str, area: str | None) -> str | None:
    """The source file a title's prefix names inside its area ("mm: vmscan:" -> mm/vmscan,
    "sched/fair:" -> kernel/sched/fair, "shmem:" -> mm/shmem), else None."""
    if not area:
        return None
    m = _PREFIX_PARTS.match(title.strip())
    if not m:
        return None
    words = [w.strip() for w in re.split(r"[:/,]", m.group(1)) if w.strip()]
    for w in reversed(words):
        if not re.fullmatch(r"[A-Za-z0-9_.+-]{2,30}", w) or w.lower() in area.lower().split("/"):
            continue
        found = kernel_paths.tree().file_dir(w, area)
        if found is None:
            continue
        d, spelt = found
        if d == area and not kernel_paths.tree().is_dir(f"{d}/{spelt}"):
            return f"{d}/{spelt}"
        return None
    return None


_REVERT = re.compile(r"^\s*Revert\s+[\"\u201c](.+?)[\"\u201d]?\s*$")
_MERGE = re.compile(r"^\s*Merge\b")


def _literal_prefix(title: str) -> list[str]:
    """The title's prefix as written, as a path at each depth ("mm: vmscan: ..." -> mm,
    mm/vmscan; "block/mq-deadline: ..." -> block, block/mq-deadline): reports name an area by
    the words of its commits' titles as often as by its tree path."""
    m = _PREFIX_PARTS.match(title.strip())
    if not m:
        return []
    words = [w.strip().lower() for w in re.split(r"[:/]", m.group(1)) if w.strip()]
    if not words or not all(re.fullmatch(r"[a-z0-9][a-z0-9_.+-]{0,30}", w) for w in words):
        return []
    return ["/".join(words[:i]) for i in range(1, min(len(words), 3) + 1)]


def _robot_tags(subject: str, robot_match) -> list[str]:
    if robot_match is None:
        return []
    tags = re.findall(r"\[([^\]]+)\]", subject[:robot_match.start(1) + 1])
    return [t for t in tags if not (t.upper() in ("LKP", "PATCH") or ":" in t and "master" in t)]


def _path_kind(line: str) -> str:
    if _PATH_TRACE.search(line):
        return "trace"
    if _PATH_DIFFSTAT.search(line) or _PATH_DIFF.search(line):
        return "diff"
    if _PATH_BUILD.search(line):
        return "build"
    return "prose"


def _path_areas(path: str) -> list[tuple[str, str]]:
    """The areas a source path names, coarsest first: its subsystem (``from_path``), then each
    directory below it, then the file ("drivers/nvme/host/pci.c" -> drivers/nvme,
    drivers/nvme/host, drivers/nvme/host/pci)."""
    base = from_path(path)
    if base is None:
        return []
    out = [(base, "")]
    parts = path.strip("/").split("/")
    is_file = not path.endswith("/") and "." in parts[-1]
    dirs = parts[:-1] if is_file else parts
    n0 = base.count("/") + 1
    for i in range(n0 + 1, len(dirs) + 1):
        out.append(("/".join(dirs[:i]), ":dir"))
    if is_file and parts[-1].endswith(".c") and len(parts) >= 2:
        out.append(("/".join(dirs) + "/" + parts[-1][:-2], ":file"))
    return out


_SUBJECT_WORD = re.compile(r"(?<![\w./-])([A-Za-z][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*)(?![\w/-])")
# table words that in a subject are mostly plain English ("power went out", "sound is gone")
_COMMON_WORDS = {"time", "exit", "signal", "power", "random", "input", "sound", "block", "char", "base", "entry",
                 "init", "security", "pipe", "packet", "swap", "loop", "fork", "exec", "suspend", "keys", "docs",
                 "documentation", "smp", "tick", "print", "module", "firmware", "pid", "audit", "can", "ice",
                 "percpu", "string", "bitmap", "soc", "media", "scripts", "unix", "sock", "bridge", "fs", "net",
                 "mm", "sched", "perf", "dma", "lib", "proc", "bio", "init", "quota", "aio", "cpu"}


_OWN_NAME = re.compile(r"(?<![\w./-])([A-Za-z][A-Za-z0-9]*(?:[_-][A-Za-z0-9]+)+|[A-Za-z]+[0-9][A-Za-z0-9]*)(?:\.c|\.ko)?"
                       r"(?![\w/-])")
_OWN_TOPS = ("drivers", "sound", "fs", "net", "block", "mm", "lib")


def _own_names(own: str) -> list[str]:
    """Areas named by a driver, module or file name in the author's own text ("i8042",
    "snd_hda_intel", "ehci-hcd"), once per mention."""
    out = []
    seen: dict[str, str | None] = {}
    for m in _OWN_NAME.finditer(own):
        w = m.group(1)
        if len(w) < 4 or len(seen) > 300 and w not in seen:
            continue
        if w not in seen:
            loc = None
            if not re.fullmatch(r"[0-9a-f]+|[A-Z0-9_]+|CONFIG_\w+|v?\d.*", w):
                loc = kernel_paths.locate(w)
            seen[w] = loc if loc and loc.split("/")[0] in _OWN_TOPS else None
        if seen[w]:
            out.append(seen[w])
    return out


def candidates(subject: str, culprit_subject: str | None, clean: str, filesystem: str | None,
               kind: str | None, robot_match, culprit_commit: str | None = None, own: str = ""
               ) -> list[tuple[str, str]]:
    """Every (area, source) the message points to, canonical names, in order of strength of
    source (a title's prefix, a robot's tag, paths, names in the subject, keywords, names in
    the author's own text ``own``); an area may come more than once."""
    subject = subject or ""
    out: list[tuple[str, str]] = []

    def add(area: str | None, src: str) -> None:
        a = canonical(area)
        if a:
            out.append((a, src))

    titles: list[tuple[str, str]] = []
    if culprit_subject:
        titles.append((culprit_subject, "culprit_title"))
    t = title_near_commit(clean, culprit_commit)
    if t:
        titles.append((t, "title_near_commit"))
    titles += [(tag + ": x", "robot_tag") for tag in _robot_tags(subject, robot_match)]
    m = re.search(r"[\"\u201c]([^\"\u201d]{8,120})[\"\u201d]", subject)
    if m:
        titles.append((m.group(1), "quoted_title"))
    titles.append((_subject_title(subject), "subject_title"))
    for title, src in titles:
        rv = _REVERT.match(title)
        if rv:
            title = rv.group(1)  # a revert is in the area of the commit it reverts
        elif _MERGE.match(title):
            continue  # a merge's title names branches, not an area ("Merge branch into tip/master: ...")
        s = specific_prefix(title)
        if s is None:
            continue
        add(s, src)
        coarse = from_prefix(title)
        if coarse and coarse != s:
            add(coarse, src + ":coarse")
        add(_title_file(title, s), src + ":file")
        lits = _literal_prefix(title)
        for lit in lits:
            add(lit, src + (":litfull" if lit == lits[-1] else ":lit"))
    for pm in PATH_RE.finditer(clean[:30000]):
        ls = clean.rfind("\n", 0, pm.start()) + 1
        le = clean.find("\n", pm.end())
        how = _path_kind(clean[ls:le if le >= 0 else len(clean)])
        for area, depth in _path_areas(pm.group(1)):
            add(area, "path_" + how + depth)
    st = _subject_title(subject)
    for dm in DRIVER_WORDS.finditer(st):
        w = dm.group(1).lower()
        s = PREFIX.get(w) or FS_PREFIX.get(w)
        if s:
            add(s, "subject_driver")
            fine = specific_prefix(f"{w}: x")
            if fine and fine != s:
                add(fine, "subject_driver:fine")
    add(_subject_tree_word(st), "subject_tree")
    for wm in _SUBJECT_WORD.finditer(st):
        w = wm.group(1)
        low = w.lower()
        if low in _NOT_AREAS or low in _COMMON_WORDS or not (w.isupper() or re.search(r"[0-9_]", w) or len(w) >= 4):
            continue
        add(PREFIX.get(low) or FS_PREFIX.get(low), "subject_word")
    head = clean[:8000]
    head_low = scan.fold(head)
    for rx, name in KEYWORDS:
        if rx.search(subject):
            add(name, "keyword_subject")
        n = len(scan.find_all(rx, head, head_low))  # (tried only where a keyword can start)
        if n >= 2:
            add(name, "keyword" + ("3" if n >= 3 else "2"))
    if filesystem and kind == "performance":
        fs = FS_PREFIX.get(filesystem.lower().strip())
        add(fs if fs and fs.startswith("fs/") else "fs", "fs_perf")
    for area in _own_names(own[:20000]):
        add(area, "own_name")
        coarse = from_path(area + "/")
        if coarse and coarse != area:
            add(coarse, "own_name:coarse")
    return out
