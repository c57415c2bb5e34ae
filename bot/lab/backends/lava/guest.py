"""The busybox guest of a LAVA run (pure but for reading busybox): ``/init`` that leaves LAVA a
shell prompt, the recipe's workload script, and the script that reports each value with
``lava-test-case``; packed into a gzip'd newc initramfs."""

from __future__ import annotations

import gzip
import re
import subprocess
from pathlib import Path

from bot.lab import initramfs as initramfs_mod
from bot.lab.backends.base import LabError
from bot.lab.recipes import RecipeSpec

METRIC_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")

# the guest's /init: LAVA needs a shell at a prompt on the console; the overlay is in the archive
INIT = """#!/bin/busybox sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts 2>/dev/null
mkdir -p {scratch} && mount -t tmpfs -o size={scratch_mib}m scratch {scratch}
echo 1 > /proc/sys/kernel/printk
echo "REGTRIAGE-BOOTED $(uname -r)"
exec setsid cttyhack sh
"""

BENCH_HEAD = """#!/bin/sh
# regtriage workload (generated from a validated recipe; numbers only)
fail() {
  echo "RESULT fail $*"
  exit 1
}
"""+initramfs_mod.CLOCK_SH+"""mountpoint -q {scratch} 2>/dev/null || grep -q " {scratch} tmpfs" /proc/mounts || fail "no tmpfs scratch area"
echo "REGTRIAGE-START recipe={recipe} kernel=$(uname -r) samples={samples} warmup={warmup} clock=$REGTRIAGE_CLOCK"
"""

BENCH_TAIL = """
echo "REGTRIAGE-END"
echo "RESULT ok"
"""

REPORT = """#!/bin/sh
# regtriage: run the workload, report each value to LAVA (lava-test-case is on PATH in the test shell)
out=/tmp/regtriage-bench.out
sh /regtriage/bench.sh > $out 2>&1
rc=$?
cat $out
rel=$(uname -r | tr -c 'A-Za-z0-9._\\n-' '_')
lava-test-case "uname-$rel" --result pass
n=0
w=0
while read -r kind kv; do
  v=${kv#*=}
  case "$kind" in
    BENCH)
      n=$((n + 1))
      lava-test-case "{metric}-$n" --result pass --measurement "$v" --units "{units}" ;;
    WARMUP)
      w=$((w + 1))
      lava-test-case "warmup-{metric}-$w" --result pass --measurement "$v" --units "{units}" ;;
  esac
done < $out
if [ $rc -eq 0 ] && grep -q "^RESULT ok" $out; then
  lava-test-case regtriage-result --result pass
else
  lava-test-case regtriage-result --result fail
fi
rm -f $out
"""


def units_for(metric: str) -> str:
    """LAVA ``--units`` for a catalogue metric."""
    if metric.endswith("_MBps"):
        return "MB/s"
    if metric.endswith("_iops"):
        return "IOPS"
    if metric.endswith("per_sec"):
        return "1/s"
    return "value"


def render_guest_files(recipe: RecipeSpec, *, samples: int, warmup: int, scratch_mib: int) -> dict[str, str]:
    """``/init``, ``/regtriage/bench.sh`` and ``/regtriage/report.sh`` for one batch size."""
    for name, v, lo, hi in (("samples", samples, 1, 1000), ("warmup", warmup, 0, 100),
                            ("scratch_mib", scratch_mib, 16, 1 << 20)):
        if type(v) is not int or not lo <= v <= hi:
            raise LabError(f"{name} must be an int in [{lo}, {hi}], got {v!r}")
    metric = recipe.metric
    if not METRIC_RE.match(metric):
        raise LabError(f"unexpected metric name {metric!r}")
    scratch = initramfs_mod.SCRATCH
    workload = recipe.render_guest_script(scratch=scratch, samples=samples, warmup=warmup)
    head = (BENCH_HEAD.replace("{scratch}", scratch).replace("{recipe}", recipe.name)
            .replace("{samples}", str(samples)).replace("{warmup}", str(warmup)))
    return {
        "init": INIT.replace("{scratch_mib}", str(scratch_mib)).replace("{scratch}", scratch),
        "regtriage/bench.sh": head + workload + BENCH_TAIL,
        "regtriage/report.sh": REPORT.replace("{metric}", metric).replace("{units}", units_for(metric)),
    }


def build_initramfs(files: dict[str, str], busybox: str) -> bytes:
    """gzip'd newc archive: static busybox with every applet linked, plus ``files``."""
    problem = initramfs_mod.busybox_problem(busybox)
    if problem:
        raise LabError(problem)
    proc = subprocess.run([busybox, "--list-full"], capture_output=True, text=True, timeout=30)
    applets = sorted({ln.strip() for ln in proc.stdout.splitlines()
                      if re.fullmatch(r"[a-z0-9_./\[-]+", ln.strip() or "-") and ln.strip() != "bin/busybox"})
    dirs = ["bin", "sbin", "usr", "usr/bin", "usr/sbin", "dev", "proc", "sys", "tmp", "root", "etc", "regtriage",
            initramfs_mod.SCRATCH.lstrip("/")]
    entries: list[tuple] = [(d, "dir", None) for d in dirs]
    entries += [("dev/console", "chardev", (5, 1)), ("dev/null", "chardev", (1, 3)),
                ("bin/busybox", "exe", Path(busybox).read_bytes())]
    for a in applets:
        if a.split("/")[0] in ("bin", "sbin", "usr") and ".." not in a:
            entries.append((a, "symlink", "/bin/busybox"))
    for path, text in files.items():
        entries.append((path, "exe", text.encode()))
    return gzip.compress(initramfs_mod.newc_archive(entries), compresslevel=6, mtime=0)
