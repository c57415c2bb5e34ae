"""The vetted recipe catalogue: workloads the lab may run to confirm a regression.  Pure: no I/O.

A recipe has typed, bounded parameters (ints within limits, enums from whitelists, booleans:
never free text), a metric with a direction, the backends that can run it, and fixed templates
that render what to run: :meth:`RecipeSpec.render_guest_script` (busybox shell for the qemu
initramfs) and :meth:`RecipeSpec.host_argv` (argument lists for hosts with the real tools, for the
ssh/lkp backends).  Only validated numbers and whitelisted enum values reach a template; every
file the workload touches is under the backend's scratch directory, never a path from mail.

Catalogue (limits: ``max_size`` default 1 GiB, configurable; threads <= 64; durations <= 600 s)

===================  =============================  =========================  ===========
recipe               parameters                     metric (direction)         backends
===================  =============================  =========================  ===========
dd-seqwrite          bs (512..16M, powers of 2),    dd.write_MBps (higher)     qemu ssh lkp
                     count (bs*count <= max_size),
                     sync (none|fsync), direct
dd-seqread           bs, count, direct              dd.read_MBps (higher)      qemu ssh lkp
syscall-getpid       iterations (1000..10M)         syscall.calls_per_sec      qemu ssh lkp
                                                    (higher)
sysbench-fileio      size, file_num (1..1024),      sysbench-fileio.<op>_per_  ssh lkp
                     mode, block_size, io_mode,     sec (higher)
                     threads, time (1..600 s),
                     fsync_freq, direct
fio                  rw, bs, size, numjobs (1..64), fio.<dir>_bw_MBps for      ssh lkp
                     iodepth (1..256), ioengine,    sequential, fio.<dir>_iops
                     runtime (0..600 s), direct     for random (higher)
===================  =============================  =========================  ===========

``syscall-getpid``: busybox cannot call getpid(2) in a loop, so in busybox guests the workload is
``dd if=/dev/zero of=/dev/null bs=1 count=N`` (N one-byte read(2) + N write(2): 2N cheap
syscalls, dominated by syscall entry/exit like getpid) and the metric is syscalls per second.  On
hosts with perf (ssh/lkp) it is ``perf bench syscall basic --loop N`` (a real getpid loop).  Both
builds of one comparison always run on the same backend, so the two are never mixed.

Units: MB = 10^6 bytes.  ``dd`` metrics time the whole ``dd`` process (fork+exec included), which is
negligible for the default sizes (samples of ~0.1 s and more).

``recipe_from_claim`` policy for values outside the bounds (see its docstring): *extent*
parameters whose metric is a rate (count/size, iterations, runtime/time) are **clamped** to the
cap with a note recorded in ``RecipeSpec.notes`` (set ``clamp = false`` in the ``[lab]`` config
to decline instead); *shape* parameters (block size, threads/jobs, I/O mode, engine, queue
depth) outside their whitelist or bounds, unknown options, shell syntax, substitutions, and
anything unparseable are **declined** with the reason.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

HARD_MAX_THREADS = 64
HARD_MAX_DURATION_S = 600
DEFAULT_MAX_SIZE = 1 << 30  # 1 GiB
HARD_MAX_SIZE = 1 << 40  # a configured cap may not exceed 1 TiB
MAX_COMMAND_CHARS = 2000

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
# block-size whitelist: label -> bytes (powers of two, 512 B .. 16 MiB)
BLOCK_SIZES: dict[str, int] = {}
for _exp in range(9, 25):
    _n = 1 << _exp
    BLOCK_SIZES[f"{_n // MiB}M" if _n >= MiB else (f"{_n // KiB}k" if _n >= KiB else str(_n))] = _n
BS_BY_BYTES = {v: k for k, v in BLOCK_SIZES.items()}

BUSYBOX_BACKENDS = ("qemu", "ssh", "lkp")
HOST_BACKENDS = ("ssh", "lkp")
SAFE_SCRATCH_RE = re.compile(r"^/[A-Za-z0-9._/-]{1,200}$")


class RecipeError(ValueError):
    """Parameters are not acceptable for a recipe; the message says why."""


# --------------------------------------------------------------------------------------- limits
@dataclass(frozen=True)
class Limits:
    max_size: int = DEFAULT_MAX_SIZE
    max_threads: int = HARD_MAX_THREADS
    max_duration_s: int = HARD_MAX_DURATION_S
    clamp: bool = True

    @classmethod
    def from_config(cls, config: dict | None) -> "Limits":
        """``config`` is the whole configuration (``{"lab": {...}}``) or the ``[lab]`` table:
        ``max_size`` (bytes or "1G"), ``max_threads`` (<= 64), ``max_duration_s`` (<= 600),
        ``clamp`` (bool)."""
        cfg = dict(config or {})
        if isinstance(cfg.get("lab"), dict):
            cfg = cfg["lab"]
        size = cfg.get("max_size", DEFAULT_MAX_SIZE)
        if isinstance(size, str):
            parsed = parse_size(size, default_unit=1)
            if parsed is None:
                raise RecipeError(f"[lab] max_size: cannot parse {size!r}")
            size = parsed
        if type(size) is not int or not 1 * MiB <= size <= HARD_MAX_SIZE:
            raise RecipeError(f"[lab] max_size must be between 1 MiB and 1 TiB, got {size!r}")
        threads = cfg.get("max_threads", HARD_MAX_THREADS)
        if type(threads) is not int or not 1 <= threads <= HARD_MAX_THREADS:
            raise RecipeError(f"[lab] max_threads must be 1..{HARD_MAX_THREADS}, got {threads!r}")
        dur = cfg.get("max_duration_s", HARD_MAX_DURATION_S)
        if type(dur) is not int or not 1 <= dur <= HARD_MAX_DURATION_S:
            raise RecipeError(f"[lab] max_duration_s must be 1..{HARD_MAX_DURATION_S}, got {dur!r}")
        clamp = cfg.get("clamp", True)
        if not isinstance(clamp, bool):
            raise RecipeError("[lab] clamp must be true or false")
        return cls(size, threads, dur, clamp)


# ------------------------------------------------------------------------------------ parameters
@dataclass(frozen=True)
class IntParam:
    name: str
    lo: int
    hi: int | str  # an int, or a Limits attribute name ("max_threads", "max_duration_s")
    default: int
    extent: bool = False  # clampable: the metric is a rate, a smaller extent measures the same
    doc: str = ""

    def upper(self, limits: Limits) -> int:
        return getattr(limits, self.hi) if isinstance(self.hi, str) else self.hi

    def check(self, value: Any, limits: Limits) -> int:
        if type(value) is not int:  # bool is not accepted either
            raise RecipeError(f"{self.name} must be an integer, got {type(value).__name__}")
        hi = self.upper(limits)
        if not self.lo <= value <= hi:
            raise RecipeError(f"{self.name}={value} is outside [{self.lo}, {hi}]")
        return value


@dataclass(frozen=True)
class EnumParam:
    name: str
    choices: tuple[str, ...]
    default: str
    doc: str = ""

    def check(self, value: Any, limits: Limits) -> str:
        if not isinstance(value, str) or value not in self.choices:
            raise RecipeError(f"{self.name}={value!r} is not one of {', '.join(self.choices)}")
        return value


@dataclass(frozen=True)
class BoolParam:
    name: str
    default: bool = False
    doc: str = ""

    def check(self, value: Any, limits: Limits) -> bool:
        if not isinstance(value, bool):
            raise RecipeError(f"{self.name} must be true or false")
        return value


BS_PARAM = EnumParam("bs", tuple(BLOCK_SIZES), "1M", "block size (whitelist: powers of two 512..16M)")


@dataclass(frozen=True)
class Recipe:
    name: str
    params: tuple
    backends: tuple[str, ...]
    doc: str
    size_params: tuple[str, ...] = ()  # how to compute the bytes touched (checked against max_size)

    def param(self, name: str):
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def validate(self, params: dict, limits: Limits) -> dict:
        unknown = set(params) - {p.name for p in self.params}
        if unknown:
            raise RecipeError(f"{self.name}: unknown parameters {sorted(unknown)}")
        out = {}
        for p in self.params:
            out[p.name] = p.check(params.get(p.name, p.default), limits)
        size = total_bytes(self.name, out)
        if size is not None and size > limits.max_size:
            raise RecipeError(f"{self.name}: {size} bytes exceed the size cap of {limits.max_size} bytes")
        return out


def total_bytes(recipe: str, params: dict) -> int | None:
    """Bytes a recipe writes/reads per sample (None: not a data recipe).  Raises RecipeError on
    values of the wrong type (a hand-built spec), never multiplies a string."""
    def num(key: str) -> int:
        v = params.get(key)
        if type(v) is not int:
            raise RecipeError(f"{key} must be an integer")
        return v

    if recipe in ("dd-seqwrite", "dd-seqread"):
        if params.get("bs") not in BLOCK_SIZES:
            raise RecipeError("bs is not whitelisted")
        return BLOCK_SIZES[params["bs"]] * num("count")
    if recipe in ("fio", "sysbench-fileio"):
        return num("size_mib") * MiB
    return None


CATALOGUE: dict[str, Recipe] = {r.name: r for r in (
    Recipe("dd-seqwrite", (
        BS_PARAM,
        IntParam("count", 1, 1 << 24, 256, extent=True, doc="blocks per sample; bs*count <= max_size"),
        EnumParam("sync", ("none", "fsync"), "none", "conv=fsync: flush before dd exits"),
        BoolParam("direct", False, "oflag=direct (O_DIRECT; not on the qemu tmpfs scratch)"),
    ), BUSYBOX_BACKENDS, "sequential write of bs*count bytes from /dev/zero to a scratch file"),
    Recipe("dd-seqread", (
        BS_PARAM,
        IntParam("count", 1, 1 << 24, 256, extent=True, doc="blocks per sample; bs*count <= max_size"),
        BoolParam("direct", False, "iflag=direct (O_DIRECT; not on the qemu tmpfs scratch)"),
    ), BUSYBOX_BACKENDS, "sequential read of a bs*count scratch file (written untimed first)"),
    Recipe("syscall-getpid", (
        IntParam("iterations", 1000, 10_000_000, 200_000, extent=True, doc="loop iterations per sample"),
    ), BUSYBOX_BACKENDS, "cheap-syscall loop (getpid via perf bench; 1-byte read/write via busybox dd)"),
    Recipe("sysbench-fileio", (
        IntParam("size_mib", 1, 1 << 20, 1024, extent=True, doc="--file-total-size in MiB"),
        IntParam("file_num", 1, 1024, 128, doc="--file-num"),
        EnumParam("mode", ("seqwr", "seqrewr", "seqrd", "rndrd", "rndwr", "rndrw"), "rndrw", "--file-test-mode"),
        EnumParam("block_size", tuple(k for k, v in BLOCK_SIZES.items() if v <= 1 * MiB), "16k", "--file-block-size"),
        EnumParam("io_mode", ("sync", "async", "mmap"), "sync", "--file-io-mode"),
        IntParam("threads", 1, "max_threads", 1, doc="--threads"),
        IntParam("time_s", 1, "max_duration_s", 60, extent=True, doc="--time"),
        IntParam("fsync_freq", 0, 1_000_000, 100, doc="--file-fsync-freq"),
        BoolParam("direct", False, "--file-extra-flags=direct"),
    ), HOST_BACKENDS, "sysbench fileio prepare/run/cleanup in the scratch directory"),
    Recipe("fio", (
        EnumParam("rw", ("read", "write", "randread", "randwrite", "rw", "randrw"), "randwrite", "--rw"),
        EnumParam("bs", tuple(BLOCK_SIZES), "4k", "--bs (whitelist: powers of two 512..16M)"),
        IntParam("size_mib", 1, 1 << 20, 1024, extent=True, doc="--size in MiB (per job)"),
        IntParam("numjobs", 1, "max_threads", 1, doc="--numjobs"),
        IntParam("iodepth", 1, 256, 1, doc="--iodepth"),
        EnumParam("ioengine", ("sync", "psync", "libaio", "io_uring", "posixaio", "mmap"), "psync", "--ioengine"),
        IntParam("runtime_s", 0, "max_duration_s", 0, extent=True, doc="--runtime (0: until size is done)"),
        BoolParam("direct", False, "--direct=1"),
    ), HOST_BACKENDS, "fio on a scratch file, JSON output"),
)}


@dataclass(frozen=True)
class RecipeSpec:
    """A catalogue recipe with validated parameters.  Build with :func:`make_recipe`."""

    name: str
    params: dict
    notes: tuple[str, ...] = ()

    # -- metric ---------------------------------------------------------------------------------
    @property
    def metric(self) -> str:
        p = self.params
        if self.name == "dd-seqwrite":
            return "dd.write_MBps"
        if self.name == "dd-seqread":
            return "dd.read_MBps"
        if self.name == "syscall-getpid":
            return "syscall.calls_per_sec"
        if self.name == "sysbench-fileio":
            m = p["mode"]
            return ("sysbench-fileio.reads_per_sec" if m in ("seqrd", "rndrd") else
                    "sysbench-fileio.writes_per_sec" if m in ("seqwr", "seqrewr", "rndwr") else
                    "sysbench-fileio.ops_per_sec")
        rw = p["rw"]
        direction = "read" if rw in ("read", "randread", "rw", "randrw") else "write"
        return f"fio.{direction}_iops" if rw.startswith("rand") else f"fio.{direction}_bw_MBps"

    @property
    def higher_is_better(self) -> bool:
        return True  # every catalogue metric is a rate

    @property
    def backends(self) -> tuple[str, ...]:
        return CATALOGUE[self.name].backends

    def supports(self, backend: str) -> tuple[bool, str]:
        """Whether ``backend`` can run this recipe with these parameters, and why not."""
        if backend not in self.backends:
            return False, f"{self.name} needs the real tool on the host ({'/'.join(self.backends)} backends); " \
                          f"the {backend} backend only has busybox"
        if backend == "qemu" and self.params.get("direct"):
            return False, "O_DIRECT is not supported on the qemu guest's tmpfs scratch area"
        return True, "ok"

    @property
    def bytes(self) -> int | None:
        return total_bytes(self.name, self.params)

    def key(self) -> str:
        """Stable identifier of recipe + params (for caches)."""
        blob = json.dumps({"name": self.name, "params": self.params}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        return {"name": self.name, "params": dict(self.params), "notes": list(self.notes),
                "metric": self.metric, "higher_is_better": self.higher_is_better}

    @classmethod
    def from_dict(cls, d: dict, config: dict | None = None) -> "RecipeSpec":
        """Re-validates: a stored spec cannot smuggle in unchecked values."""
        if not isinstance(d, dict) or not isinstance(d.get("params", {}), dict):
            raise RecipeError("a recipe spec is a dict with name and params")
        return make_recipe(d.get("name"), d.get("params", {}), config, notes=tuple(d.get("notes", ())))

    # -- templates ------------------------------------------------------------------------------
    def _recheck(self) -> dict:
        # belt and braces: templates accept only ints, bools and whitelisted enum strings
        rec = CATALOGUE[self.name]
        for p in rec.params:
            v = self.params[p.name]
            if isinstance(p, IntParam) and type(v) is not int:
                raise RecipeError(f"{p.name} is not an int")
            if isinstance(p, EnumParam) and v not in p.choices:
                raise RecipeError(f"{p.name} is not whitelisted")
            if isinstance(p, BoolParam) and not isinstance(v, bool):
                raise RecipeError(f"{p.name} is not a bool")
        return self.params

    def render_guest_script(self, *, scratch: str, samples: int, warmup: int) -> str:
        """Busybox ``sh`` fragment for a guest: ``warmup`` + ``samples`` iterations, each printing
        ``WARMUP <metric>=<value>`` or ``BENCH <metric>=<value>``.  Expects the init prologue's
        ``now_ns`` (monotonic ns into ``$NOW``) and ``fail`` helpers (see bot.lab.initramfs)."""
        ok, why = self.supports("qemu")
        if not ok:
            raise RecipeError(why)
        if not SAFE_SCRATCH_RE.match(scratch) or ".." in scratch:
            raise RecipeError(f"unsafe scratch path {scratch!r}")
        for name, v in (("samples", samples), ("warmup", warmup)):
            if type(v) is not int or v < 0 or (name == "samples" and v < 1):
                raise RecipeError(f"{name} must be a positive int")
        p = self._recheck()
        f = f"{scratch}/regtriage-{self.name}.dat"
        if self.name == "dd-seqwrite":
            bs, count = BLOCK_SIZES[p["bs"]], p["count"]
            conv = " conv=fsync" if p["sync"] == "fsync" else ""
            prep = f'rm -f {f}; sync'
            cmd = f'dd if=/dev/zero of={f} bs={bs} count={count}{conv} 2>/dev/null || fail "dd write failed"'
            post = f'rm -f {f}'
            value = f'{bs * count} * 1000 / ns'
        elif self.name == "dd-seqread":
            bs, count = BLOCK_SIZES[p["bs"]], p["count"]
            prep = (f'[ -f {f} ] || dd if=/dev/zero of={f} bs={bs} count={count} 2>/dev/null '
                    f'|| fail "dd prepare failed"; sync')
            cmd = f'dd if={f} of=/dev/null bs={bs} count={count} 2>/dev/null || fail "dd read failed"'
            post = ":"
            value = f'{bs * count} * 1000 / ns'
        elif self.name == "syscall-getpid":
            n = p["iterations"]
            prep = ":"
            cmd = f'dd if=/dev/zero of=/dev/null bs=1 count={n} 2>/dev/null || fail "dd loop failed"'
            post = ":"
            value = f'{2 * n} * 1000000000 / ns'
        else:  # pragma: no cover - excluded by supports()
            raise RecipeError(f"{self.name} has no busybox template")
        metric = self.metric
        return f"""REGTRIAGE_TOTAL={warmup + samples}
REGTRIAGE_WARMUP={warmup}
i=0
while [ $i -lt $REGTRIAGE_TOTAL ]; do
  {prep}
  now_ns; t0=$NOW
  {cmd}
  now_ns; t1=$NOW
  {post}
  v=$(awk -v ns=$((t1 - t0)) 'BEGIN {{ if (ns <= 0) exit 1; printf "%.3f", {value} }}') || fail "clock did not advance"
  if [ $i -lt $REGTRIAGE_WARMUP ]; then echo "WARMUP {metric}=$v"; else echo "BENCH {metric}=$v"; fi
  i=$((i + 1))
done
rm -f {f}"""

    def host_argv(self, scratch: str) -> list[list[str]]:
        """Commands (argument lists, no shell) a host backend runs in ``scratch``: setup steps
        then the measured command last.  For ssh/lkp backends; parsing their output is theirs."""
        if not SAFE_SCRATCH_RE.match(scratch) or ".." in scratch:
            raise RecipeError(f"unsafe scratch path {scratch!r}")
        p = self._recheck()
        f = f"{scratch}/regtriage-{self.name}.dat"
        if self.name == "dd-seqwrite":
            a = ["dd", "if=/dev/zero", f"of={f}", f"bs={BLOCK_SIZES[p['bs']]}", f"count={p['count']}"]
            a += ["conv=fsync"] if p["sync"] == "fsync" else []
            a += ["oflag=direct"] if p["direct"] else []
            return [a]
        if self.name == "dd-seqread":
            bs, count = BLOCK_SIZES[p["bs"]], p["count"]
            return [["dd", "if=/dev/zero", f"of={f}", f"bs={bs}", f"count={count}", "conv=fsync"],
                    ["dd", f"if={f}", "of=/dev/null", f"bs={bs}", f"count={count}"]
                    + (["iflag=direct"] if p["direct"] else [])]
        if self.name == "syscall-getpid":
            return [["perf", "bench", "syscall", "basic", "--loop", str(p["iterations"])]]
        if self.name == "sysbench-fileio":
            common = ["sysbench", "fileio", f"--file-total-size={p['size_mib']}M", f"--file-num={p['file_num']}",
                      f"--file-test-mode={p['mode']}", f"--file-block-size={BLOCK_SIZES[p['block_size']]}",
                      f"--file-io-mode={p['io_mode']}", f"--threads={p['threads']}", f"--time={p['time_s']}",
                      f"--file-fsync-freq={p['fsync_freq']}"] + (["--file-extra-flags=direct"] if p["direct"] else [])
            return [common + ["prepare"], common + ["run"], common + ["cleanup"]]
        a = ["fio", "--name=regtriage", f"--filename={f}", f"--rw={p['rw']}", f"--bs={BLOCK_SIZES[p['bs']]}",
             f"--size={p['size_mib']}M", f"--numjobs={p['numjobs']}", f"--iodepth={p['iodepth']}",
             f"--ioengine={p['ioengine']}", f"--direct={int(p['direct'])}", "--group_reporting",
             "--output-format=json"]
        if p["runtime_s"]:
            a += [f"--runtime={p['runtime_s']}", "--time_based"]
        return [a]


def make_recipe(name: Any, params: dict | None = None, config: dict | None = None,
                notes: tuple[str, ...] = ()) -> RecipeSpec:
    """Validate ``params`` (missing ones take defaults) for catalogue recipe ``name``."""
    if not isinstance(name, str) or name not in CATALOGUE:
        raise RecipeError(f"unknown recipe {name!r}; vetted recipes: {', '.join(CATALOGUE)}")
    limits = Limits.from_config(config)
    vals = CATALOGUE[name].validate(dict(params or {}), limits)
    if name == "fio" and vals["size_mib"] * MiB * vals["numjobs"] > limits.max_size:
        raise RecipeError(f"fio: size*numjobs = {vals['size_mib'] * vals['numjobs']} MiB exceeds the size cap")
    if not all(isinstance(n, str) for n in notes):
        raise RecipeError("notes must be strings")
    return RecipeSpec(name, vals, tuple(notes))


# ------------------------------------------------------------------------------- claim parsing
_SIZE_RE = re.compile(r"^([0-9]{1,15})([A-Za-z]{0,3})$")
# dd (GNU coreutils) suffixes; fio uses 1024-based for k/m/g and their "b"/"ib" spellings
_DD_UNITS = {"": 1, "c": 1, "w": 2, "b": 512, "k": KiB, "K": KiB, "kB": 1000, "KB": 1000, "KiB": KiB,
             "M": MiB, "MB": 1000 ** 2, "MiB": MiB, "G": GiB, "GB": 1000 ** 3, "GiB": GiB,
             "T": 1 << 40, "TB": 1000 ** 4, "TiB": 1 << 40}
_IEC_UNITS = {"": 1, "k": KiB, "m": MiB, "g": GiB, "t": 1 << 40, "kb": KiB, "mb": MiB, "gb": GiB,
              "tb": 1 << 40, "kib": KiB, "mib": MiB, "gib": GiB, "tib": 1 << 40}


def parse_size(text: str, *, dd: bool = False, default_unit: int = 1) -> int | None:
    """ASCII digits + a known unit suffix -> bytes; None if anything else (incl. Unicode digits)."""
    if not isinstance(text, str) or not text.isascii():
        return None
    m = _SIZE_RE.match(text.strip())
    if not m:
        return None
    num, unit = int(m.group(1)), m.group(2)
    mult = _DD_UNITS.get(unit) if dd else _IEC_UNITS.get(unit.lower())
    if mult is None:
        return None
    return num * (mult if unit else default_unit)


def _parse_int(text: str) -> int | None:
    if isinstance(text, str) and text.isascii() and re.fullmatch(r"[0-9]{1,30}", text):
        return int(text)
    return None


def _parse_duration(text: str) -> int | None:
    """fio/sysbench durations: 300, 300s, 5m, 1h -> seconds."""
    if not isinstance(text, str) or not text.isascii():
        return None
    m = re.fullmatch(r"([0-9]{1,9})(s|sec|m|min|h)?", text)
    if not m:
        return None
    return int(m.group(1)) * {None: 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}[m.group(2)]


class _Decline(Exception):
    pass


# harmless segments around a benchmark command in a pasted shell line (never executed anyway)
_PREFIX_WORDS = {"sudo", "time", "nice", "ionice", "taskset", "numactl", "command", "exec", "/usr/bin/time"}
_FILTER_CMDS = {"tail", "head", "grep", "egrep", "tee", "cat", "awk", "sort", "less"}
_BENIGN_SEGMENTS = {("sync",), ("echo", "3"), ("echo", "1"), ("echo", "2")}


def _segments(command: str) -> list[list[str]]:
    lex = shlex.shlex(command, posix=True, punctuation_chars=";&|<>()")
    lex.whitespace_split = True
    lex.commenters = ""
    tokens = list(lex)
    segs: list[list[str]] = [[]]
    redirect = False
    for tok in tokens:
        if tok in (";", "&&", "||", "|", "&", ";;", "|&"):
            segs.append([])
            redirect = False
            continue
        if tok and set(tok) <= set("<>&"):
            redirect = True  # the next word is a redirection target: not an argument
            if segs[-1] and segs[-1][-1] in ("0", "1", "2"):
                segs[-1].pop()  # the fd number of "2>&1" / "2> log"
            continue
        if tok in ("(", ")", "((", "))", "()"):
            raise _Decline("the command contains a subshell or grouping")
        if redirect:  # "> /proc/sys/vm/drop_caches", "2>&1": dropped (nothing is ever executed)
            redirect = False
            continue
        segs[-1].append(tok)
    return [s for s in segs if s]


def _strip_prefix(argv: list[str]) -> list[str]:
    i = 0
    while i < len(argv):
        w = argv[i]
        if w in _PREFIX_WORDS:
            i += 1
            # skip option-looking words and numeric args of prefixes (taskset -c 0, nice -n 10)
            while i < len(argv) and (argv[i].startswith("-") or re.fullmatch(r"[0-9,.-]+", argv[i])):
                i += 1
            continue
        if re.fullmatch(r"[A-Z_][A-Z0-9_]*=[A-Za-z0-9_./:-]*", w):  # env assignment
            i += 1
            continue
        break
    return argv[i:]


def _main_segment(command: str) -> list[str]:
    if not isinstance(command, str) or not command.strip():
        raise _Decline("empty command")
    if len(command) > MAX_COMMAND_CHARS:
        raise _Decline(f"command longer than {MAX_COMMAND_CHARS} characters")
    if any(ord(c) < 32 and c not in "\t\n" for c in command) or "\x7f" in command:
        raise _Decline("command contains control characters")
    if "$" in command or "`" in command:
        raise _Decline("command contains shell substitution or variables ($ or backtick); "
                       "only literal values can be vetted")
    if "\n" in command.strip():
        raise _Decline("multi-line command; paste one benchmark command line")
    try:
        segs = _segments(command)
    except ValueError as exc:
        raise _Decline(f"cannot tokenize the command: {exc}") from None
    main: list[str] | None = None
    for seg in segs:
        argv = _strip_prefix(seg)
        if not argv:
            continue
        if tuple(argv[:2]) in _BENIGN_SEGMENTS or tuple(argv[:1]) in _BENIGN_SEGMENTS:
            continue
        if main is not None and argv[0] in _FILTER_CMDS:
            continue
        if main is not None:
            raise _Decline(f"more than one command in the line ({main[0]!r} and {argv[0]!r})")
        main = argv
    if main is None:
        raise _Decline("no benchmark command found")
    return main


def _word(s: str) -> str:
    return s if len(s) <= 40 else s[:37] + "..."


def _clamp(rec: Recipe, name: str, value: int, limits: Limits, notes: list[str], cap: int | None = None,
           what: str = "") -> int:
    p = rec.param(name)
    hi = min(p.upper(limits), cap) if cap is not None else p.upper(limits)
    if value < p.lo:
        raise _Decline(f"{name}={value} is below the minimum {p.lo}")
    if value <= hi:
        return value
    if not (p.extent and limits.clamp):
        raise _Decline(f"{name}={value} exceeds the limit {hi}{what}")
    notes.append(f"{name} clamped from {value} to {hi}{what}")
    return hi


def _from_dd(argv: list[str], limits: Limits) -> tuple[str, dict, list[str]]:
    ops: dict[str, str] = {}
    for a in argv[1:]:
        if "=" not in a:
            raise _Decline(f"unexpected dd argument {_word(a)!r}")
        k, v = a.split("=", 1)
        if k not in ("if", "of", "bs", "ibs", "obs", "count", "conv", "oflag", "iflag", "status"):
            raise _Decline(f"unsupported dd operand {_word(k)!r}")
        if k in ops:
            raise _Decline(f"dd operand {k} given twice")
        ops[k] = v
    notes: list[str] = []
    src, dst = ops.get("if", "-"), ops.get("of", "-")
    zero_src = src in ("/dev/zero", "/dev/urandom", "/dev/random")
    null_dst = dst == "/dev/null"
    if zero_src and null_dst:
        raise _Decline("dd from /dev/zero to /dev/null is not a storage workload")
    if zero_src:
        name = "dd-seqwrite"
        notes.append(f"output {_word(dst)!r} from the report replaced by the scratch area")
    elif null_dst:
        name = "dd-seqread"
        notes.append(f"input {_word(src)!r} from the report replaced by a scratch file")
    else:
        raise _Decline("dd is neither a write from /dev/zero nor a read to /dev/null")
    if src == "/dev/urandom" or src == "/dev/random":
        notes.append("random input replaced by /dev/zero")
    bs_text = ops.get("bs") or ops.get("obs" if name == "dd-seqwrite" else "ibs")
    if bs_text is None:
        bs_bytes = 512
    else:
        bs_bytes = parse_size(bs_text, dd=True)
        if bs_bytes is None:
            raise _Decline(f"cannot parse block size {_word(bs_text)!r}")
    if bs_bytes not in BS_BY_BYTES:
        raise _Decline(f"block size {bs_bytes} bytes is not in the whitelist ({', '.join(BLOCK_SIZES)})")
    bs = BS_BY_BYTES[bs_bytes]
    rec = CATALOGUE[name]
    max_count = max(1, limits.max_size // bs_bytes)
    if "count" in ops:
        count = _parse_int(ops["count"])
        if count is None:
            raise _Decline(f"cannot parse count {_word(ops['count'])!r}")
        count = _clamp(rec, "count", count, limits, notes, max_count,
                       f" (bs={bs} x count <= {limits.max_size} bytes)")
    else:
        if not limits.clamp:
            raise _Decline("no count=: the size of the transfer is unknown")
        count = min(rec.param("count").default * MiB // bs_bytes or 1, max_count)
        notes.append(f"no count= in the report: using count={count}")
    params: dict[str, Any] = {"bs": bs, "count": count}
    flags = set()
    for k in ("conv", "oflag", "iflag"):
        for f in filter(None, ops.get(k, "").split(",")):
            flags.add((k, f))
    for k, f in flags:
        if (k, f) in (("conv", "fsync"), ("conv", "fdatasync")) and name == "dd-seqwrite":
            params["sync"] = "fsync"
            if f == "fdatasync":
                notes.append("conv=fdatasync run as conv=fsync (busybox dd)")
        elif (k, f) == ("oflag", "direct") and name == "dd-seqwrite":
            params["direct"] = True
        elif (k, f) == ("iflag", "direct") and name == "dd-seqread":
            params["direct"] = True
        elif (k, f) in (("conv", "notrunc"), ("iflag", "fullblock"), ("oflag", "sync"), ("oflag", "dsync")):
            notes.append(f"{k}={f} ignored")
        else:
            raise _Decline(f"unsupported dd flag {k}={_word(f)}")
    return name, params, notes


_FIO_IGNORED = {"name", "group_reporting", "output-format", "eta", "randrepeat", "norandommap",
                "gtod_reduce", "thread", "filename", "directory", "minimal", "output", "eta-newline",
                "end_fsync", "invalidate", "refill_buffers", "allow_mounted_write", "time_based",
                "ramp_time", "create_on_open", "overwrite"}


def _from_fio(argv: list[str], limits: Limits) -> tuple[str, dict, list[str]]:
    rec = CATALOGUE["fio"]
    notes: list[str] = []
    params: dict[str, Any] = {}
    opts: dict[str, str | None] = {}
    for a in argv[1:]:
        if not a.startswith("--"):
            raise _Decline("fio job files and positional arguments are not supported; use --options")
        k, sep, v = a[2:].partition("=")
        if k in opts:
            raise _Decline(f"fio option --{_word(k)} given twice")
        opts[k] = v if sep else None
    aliases = {"readwrite": "rw", "blocksize": "bs", "filesize": "size"}
    for k, v in list(opts.items()):
        k = aliases.get(k, k)
        if k in _FIO_IGNORED:
            if k in ("filename", "directory"):
                notes.append(f"--{k} from the report replaced by the scratch area")
            elif k == "ramp_time":
                notes.append("--ramp_time ignored (warm-up runs are separate)")
            continue
        if v is None:
            raise _Decline(f"fio option --{_word(k)} needs a value")
        if k == "rw":
            params["rw"] = v if v in rec.param("rw").choices else _bad(k, v)
        elif k == "bs":
            b = parse_size(v)
            if b is None or b not in BS_BY_BYTES:
                raise _Decline(f"fio --bs={_word(v)} is not in the whitelist ({', '.join(BLOCK_SIZES)})")
            params["bs"] = BS_BY_BYTES[b]
        elif k == "size":
            b = parse_size(v, default_unit=1)
            if b is None:
                raise _Decline(f"cannot parse fio --size={_word(v)}")
            mib = max(1, -(-b // MiB))
            params["size_mib"] = mib
        elif k == "numjobs":
            n = _parse_int(v)
            if n is None:
                raise _Decline(f"cannot parse --numjobs={_word(v)}")
            params["numjobs"] = _clamp(rec, "numjobs", n, limits, notes)
        elif k == "iodepth":
            n = _parse_int(v)
            if n is None:
                raise _Decline(f"cannot parse --iodepth={_word(v)}")
            params["iodepth"] = _clamp(rec, "iodepth", n, limits, notes)
        elif k == "ioengine":
            params["ioengine"] = v if v in rec.param("ioengine").choices else _bad(k, v)
        elif k == "runtime":
            n = _parse_duration(v)
            if n is None:
                raise _Decline(f"cannot parse --runtime={_word(v)}")
            params["runtime_s"] = _clamp(rec, "runtime_s", n, limits, notes)
        elif k == "direct":
            if v not in ("0", "1"):
                raise _Decline(f"--direct={_word(v)} must be 0 or 1")
            params["direct"] = v == "1"
        else:
            raise _Decline(f"unsupported fio option --{_word(k)}")
    if "rw" not in params:
        raise _Decline("fio command without --rw: the workload is unknown")
    if "size_mib" not in params:
        if not limits.clamp:
            raise _Decline("fio command without --size")
        notes.append(f"no --size in the report: using {rec.param('size_mib').default} MiB")
    jobs = params.get("numjobs", 1)
    size = params.get("size_mib", min(rec.param("size_mib").default, limits.max_size // MiB))
    cap_mib = max(1, limits.max_size // MiB // jobs)
    params["size_mib"] = _clamp(rec, "size_mib", size, limits, notes, cap_mib,
                                f" MiB (size x numjobs <= {limits.max_size // MiB} MiB)")
    return "fio", params, notes


def _bad(k: str, v: str):
    raise _Decline(f"{k}={_word(v)!r} is not in the whitelist")


def _from_sysbench(argv: list[str], limits: Limits) -> tuple[str, dict, list[str]]:
    rec = CATALOGUE["sysbench-fileio"]
    notes: list[str] = []
    params: dict[str, Any] = {}
    words = [a for a in argv[1:] if not a.startswith("--")]
    opts = [a for a in argv[1:] if a.startswith("--")]
    test = None
    for o in opts:
        if o.startswith("--test="):
            test = o.split("=", 1)[1]
    if "fileio" in words:
        test = "fileio"
    if test != "fileio":
        raise _Decline(f"only sysbench fileio is a vetted recipe (got {_word(str(test))!r})")
    extra = [w for w in words if w not in ("fileio", "prepare", "run", "cleanup")]
    if extra:
        raise _Decline(f"unexpected sysbench argument {_word(extra[0])!r}")
    seen = set()
    for o in opts:
        k, sep, v = o[2:].partition("=")
        if k in seen:
            raise _Decline(f"sysbench option --{_word(k)} given twice")
        seen.add(k)
        if k == "test":
            continue
        if not sep:
            raise _Decline(f"sysbench option --{_word(k)} needs a value")
        if k == "file-total-size":
            b = parse_size(v)
            if b is None:
                raise _Decline(f"cannot parse --file-total-size={_word(v)}")
            params["size_mib"] = _clamp(rec, "size_mib", max(1, -(-b // MiB)), limits, notes,
                                        limits.max_size // MiB, " MiB")
        elif k == "file-num":
            n = _parse_int(v)
            if n is None:
                raise _Decline(f"cannot parse --file-num={_word(v)}")
            params["file_num"] = _clamp(rec, "file_num", n, limits, notes)
        elif k == "file-test-mode":
            params["mode"] = v if v in rec.param("mode").choices else _bad(k, v)
        elif k == "file-block-size":
            b = parse_size(v)
            if b is None or BS_BY_BYTES.get(b) not in rec.param("block_size").choices:
                raise _Decline(f"--file-block-size={_word(v)} is not in the whitelist")
            params["block_size"] = BS_BY_BYTES[b]
        elif k == "file-io-mode":
            params["io_mode"] = v if v in rec.param("io_mode").choices else _bad(k, v)
        elif k in ("threads", "num-threads"):
            n = _parse_int(v)
            if n is None:
                raise _Decline(f"cannot parse --{k}={_word(v)}")
            params["threads"] = _clamp(rec, "threads", n, limits, notes)
        elif k in ("time", "max-time"):
            n = _parse_duration(v)
            if n is None:
                raise _Decline(f"cannot parse --{k}={_word(v)}")
            params["time_s"] = _clamp(rec, "time_s", n, limits, notes)
        elif k == "file-fsync-freq":
            n = _parse_int(v)
            if n is None:
                raise _Decline(f"cannot parse --file-fsync-freq={_word(v)}")
            params["fsync_freq"] = _clamp(rec, "fsync_freq", n, limits, notes)
        elif k == "file-extra-flags":
            if v not in ("direct", ""):
                raise _Decline(f"--file-extra-flags={_word(v)} is not supported")
            params["direct"] = v == "direct"
        elif k in ("max-requests", "events", "report-interval", "percentile", "histogram"):
            notes.append(f"--{k} ignored")
        else:
            raise _Decline(f"unsupported sysbench option --{_word(k)}")
    if "mode" not in params:
        raise _Decline("sysbench fileio without --file-test-mode: the workload is unknown")
    return "sysbench-fileio", params, notes


def _from_perf(argv: list[str], limits: Limits) -> tuple[str, dict, list[str]]:
    rest = argv[1:]
    if rest[:3] != ["bench", "syscall", "basic"] and rest[:3] != ["bench", "syscall", "getpid"]:
        raise _Decline("only 'perf bench syscall basic' is a vetted perf recipe")
    notes: list[str] = []
    params: dict[str, Any] = {}
    it = iter(rest[3:])
    for a in it:
        if a in ("-l", "--loop") or a.startswith("--loop="):
            v = a.split("=", 1)[1] if "=" in a else next(it, "")
            n = _parse_int(v)
            if n is None:
                raise _Decline(f"cannot parse --loop {_word(v)!r}")
            params["iterations"] = _clamp(CATALOGUE["syscall-getpid"], "iterations", n, limits, notes)
        else:
            raise _Decline(f"unsupported perf bench option {_word(a)!r}")
    return "syscall-getpid", params, notes


_BENCHMARK_ALIASES = {
    "dd-seqwrite": "dd-seqwrite", "dd-seqread": "dd-seqread", "syscall-getpid": "syscall-getpid",
    "sysbench-fileio": "sysbench-fileio", "fio": "fio", "fio-basic": "fio", "getpid": "syscall-getpid",
    "perf-bench-syscall": "syscall-getpid", "syscall": "syscall-getpid",
}


def recipe_from_claim(config: dict | None, command: str | None, benchmark: str | None
                      ) -> tuple[RecipeSpec | None, str]:
    """Map a report's benchmark command line (and/or benchmark name) to a vetted recipe.

    Returns ``(spec, reason)``: ``spec`` is None when declined and ``reason`` says why; on
    success ``reason`` summarises the mapping and ``spec.notes`` records every substitution
    (paths from mail replaced by the scratch area) and every clamp.  The command is tokenized
    with :func:`shlex.split`-style rules on a copy and never executed: shell substitutions
    (``$``, backticks), subshells, unknown commands chained with ``;``/``&&``/``|``, unknown
    options, non-ASCII digits and values outside the whitelists are declined.  Extent values
    (sizes, counts, iterations, durations) above the caps are clamped with a note unless the
    config says ``clamp = false``; shape values (block size, threads, engine, mode) never are.
    """
    try:
        limits = Limits.from_config(config)
    except RecipeError as exc:
        return None, f"lab configuration: {exc}"
    try:
        if command:
            argv = _main_segment(command)
            tool = argv[0].rsplit("/", 1)[-1] if argv[0].startswith("/") else argv[0]
            parsers = {"dd": _from_dd, "fio": _from_fio, "sysbench": _from_sysbench, "perf": _from_perf}
            if tool not in parsers:
                raise _Decline(f"no vetted recipe for command {_word(tool)!r} "
                               f"(vetted: dd, fio, sysbench fileio, perf bench syscall)")
            name, params, notes = parsers[tool](argv, limits)
            named = _BENCHMARK_ALIASES.get(_bench_key(benchmark or ""))
            if named and named != name and not (named.startswith("dd-") and name.startswith("dd-")):
                notes.append(f"benchmark {_word(benchmark)!r} differs from the command; the command wins")
            spec = make_recipe(name, params, config, notes=tuple(notes))
            return spec, f"{tool} command mapped to {name} {spec.params}"
        if benchmark:
            key = _bench_key(benchmark)
            name = _BENCHMARK_ALIASES.get(key)
            if name is None:
                return None, f"no vetted recipe for benchmark {_word(benchmark)!r} and no command line"
            if name in ("fio", "sysbench-fileio"):
                # "fio" alone says nothing about the workload (rw mode, block size): refuse to guess
                return None, f"benchmark {_word(benchmark)!r} without a command line: its parameters are unknown"
            spec = make_recipe(name, {}, config, notes=("default parameters: no command line in the report",))
            return spec, f"benchmark {benchmark!r} mapped to {name} with default parameters"
        return None, "the report names neither a benchmark command nor a benchmark"
    except _Decline as exc:
        return None, f"declined: {exc}"
    except RecipeError as exc:
        return None, f"declined: {exc}"


def _bench_key(benchmark: str) -> str:
    b = benchmark.strip().lower() if isinstance(benchmark, str) else ""
    return b.split(".", 1)[0]  # "fio.write_iops" -> "fio"
