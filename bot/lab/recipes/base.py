"""The recipe registry's building blocks: limits, typed parameters, the :class:`Recipe` base
class every benchmark module subclasses, and the helpers claim parsers share.  Pure: no I/O.

A benchmark is one module in this package holding one (or a few closely related) :class:`Recipe`
subclasses decorated with :func:`register`.  The class owns everything about its benchmark:

=====================  ============================================================================
``name``, ``doc``      catalogue name and one-line description
``params``             typed, bounded parameters (:class:`IntParam`, :class:`EnumParam`,
                       :class:`BoolParam`): never free text
``tools``/``claim``    the command words it recognises in a report and the parser that maps such a
                       command line (already tokenized, never executed) onto its parameters
``aliases``            benchmark names (``hackbench``, ``stress-ng.switch.ops_per_sec``) it answers
                       to when a report gives no command; ``needs_command`` when defaults would be
                       a guess
``metric``/``higher_is_better``  the metric name and its direction
``guest_steps``        busybox ``sh`` pieces for the qemu/LAVA guest; or ``guest_tools`` (host
                       binaries copied with their libraries into the qemu guest) + ``guest_extract``
                       (an awk program reading the value from the tool's output, :func:`awk_value`)
``host_argv``          argument lists for hosts with the real tool (ssh backend)
``parse``              the measured step's stdout/stderr -> the metric's value
``lkp_job``            the LKP-tests atomic job and stats.json keys (not overridden: no LKP template)
=====================  ============================================================================

Only validated ints, bools and whitelisted enum strings ever reach a template.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

HARD_MAX_THREADS = 64
HARD_MAX_DURATION_S = 600
DEFAULT_MAX_SIZE = 1 << 30  # 1 GiB
HARD_MAX_SIZE = 1 << 40  # a configured cap may not exceed 1 TiB

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
# block-size whitelist: label -> bytes (powers of two, 512 B .. 16 MiB)
BLOCK_SIZES: dict[str, int] = {}
for _exp in range(9, 25):
    _n = 1 << _exp
    BLOCK_SIZES[f"{_n // MiB}M" if _n >= MiB else (f"{_n // KiB}k" if _n >= KiB else str(_n))] = _n
BS_BY_BYTES = {v: k for k, v in BLOCK_SIZES.items()}

SAFE_SCRATCH_RE = re.compile(r"^/[A-Za-z0-9._/-]{1,200}$")


class RecipeError(ValueError):
    """Parameters are not acceptable for a recipe; the message says why."""


class Decline(Exception):
    """A claim's command line cannot be mapped onto a vetted recipe; the message says why."""


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


def threads_param(flag: str, default: int = 1) -> IntParam:
    return IntParam("threads", 1, "max_threads", default, doc=flag)


def time_param(flag: str, default: int = 1) -> IntParam:
    return IntParam("time_s", 1, "max_duration_s", default, extent=True, doc=f"{flag} (seconds per sample)")


# --------------------------------------------------------------------------------- guest steps
@dataclass(frozen=True)
class GuestSteps:
    """One busybox iteration: ``prep`` (untimed), ``cmd`` (timed), ``post`` (untimed), and an awk
    expression of ``ns`` (the timed nanoseconds) giving the metric's value.

    Or, for a tool that measures itself (``extract`` set): ``cmd`` runs with its output in a
    file, which the guest echoes to the console as ``OUT <line>`` (so the host can check it with
    the recipe's own parser) and ``extract``, an awk program over that output, prints the value
    (see :func:`awk_value`); ``value`` is unused."""

    prep: str
    cmd: str
    post: str
    value: str = ""
    extract: str = ""


def awk_value(condition: str, value: str) -> str:
    """An awk program printing ``value`` (an awk expression such as ``$2``) of the one line
    matching ``condition``; exit 1 unless exactly one line matches and the value is > 0.  Both
    are fixed strings from the recipe module (no single quotes: the program is quoted with them)."""
    if "'" in condition + value:
        raise RecipeError("awk programs must not contain single quotes")
    return f'{condition} {{ v = {value}; n++ }} END {{ if (n != 1 || v + 0 <= 0) exit 1; printf "%.6f", v }}'


@dataclass(frozen=True)
class LkpJob:
    """An LKP-tests program for a recipe: ``suite`` (testcase), whether it is in upstream
    intel/lkp-tests, the job's program blocks ``[(key, {param: value} | None)]`` and the
    stats.json keys whose sum, times ``scale``, is the recipe's metric."""

    suite: str
    upstream: bool
    blocks: list
    stats_keys: list
    scale: float = 1.0


# -------------------------------------------------------------------------------------- recipe
class Recipe:
    """A vetted benchmark.  Subclasses set the class attributes and override what they support."""

    name: str = ""
    doc: str = ""
    params: tuple = ()
    tools: tuple[str, ...] = ()      # command words (argv[0]) whose lines :meth:`claim` may map
    aliases: tuple[str, ...] = ()    # benchmark names (first dotted word) meaning this recipe
    needs_command: bool = False      # a bare benchmark name says too little: refuse defaults
    higher_is_better: bool = True
    host_tool: str = ""              # the executable the ssh backend needs on the host
    guest_tools: tuple[str, ...] = ()  # host binaries copied (with their libraries) into the guest
    guest_extract: str = ""          # awk program (awk_value) reading the metric from the tool's output
    claim_doc: str = ""              # what :meth:`claim` accepts, for decline messages

    def param(self, name: str):
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def backends(self) -> tuple[str, ...]:
        out = []
        if self.guest_extract or type(self).guest_steps is not Recipe.guest_steps:
            out.append("qemu")
        out.append("ssh")
        if type(self).lkp_job is not Recipe.lkp_job:
            out.append("lkp")
        return tuple(out)

    def validate(self, params: dict, limits: Limits) -> dict:
        unknown = set(params) - {p.name for p in self.params}
        if unknown:
            raise RecipeError(f"{self.name}: unknown parameters {sorted(unknown)}")
        out = {p.name: p.check(params.get(p.name, p.default), limits) for p in self.params}
        size = self.bytes(out)
        if size is not None and size > limits.max_size:
            raise RecipeError(f"{self.name}: {size} bytes exceed the size cap of {limits.max_size} bytes")
        return out

    # -- overridable -------------------------------------------------------------------------------
    def bytes(self, p: dict) -> int | None:
        """Bytes the workload writes/reads/allocates per sample (None: not a data recipe),
        checked against ``max_size``.  Must raise RecipeError on wrongly typed values."""
        return None

    def metric(self, p: dict) -> str:
        raise NotImplementedError

    def claim(self, argv: list[str], limits: Limits) -> tuple[str, dict, list[str]] | None:
        """``(recipe name, params, notes)`` for a tokenized command line whose ``argv[0]`` is one
        of :attr:`tools`, None if the line is not this recipe's; :class:`Decline` if it is but
        cannot be vetted."""
        return None

    def from_benchmark(self, benchmark: str) -> dict | None:
        """Parameters implied by a bare benchmark name (one of :attr:`aliases`), or None when
        :attr:`needs_command`."""
        return None if self.needs_command else {}

    def guest_steps(self, p: dict, f: str) -> GuestSteps:
        """Busybox pieces for one guest iteration on scratch file ``f`` (qemu/LAVA guest).  By
        default, for a tool in :attr:`guest_tools` that measures itself: its one host step, run
        in the guest, with :attr:`guest_extract` reading the value."""
        if not self.guest_extract:
            raise RecipeError(f"{self.name} has no busybox template")
        steps = self.host_argv(p, f.rsplit("/", 1)[0], f)
        if len(steps) != 1:
            raise RecipeError(f"{self.name}: a guest run needs a single command")
        return GuestSteps(":", shlex.join(steps[0]), ":", extract=self.guest_extract)

    def host_argv(self, p: dict, scratch: str, f: str) -> list[list[str]]:
        """Setup steps then the measured step last (argument lists, run without a shell)."""
        raise NotImplementedError

    def parse(self, p: dict, stdout: str, stderr: str) -> float:
        """The metric's value from the measured step's output (``bot.lab.parsers.ParseError``)."""
        raise NotImplementedError

    def lkp_job(self, p: dict) -> LkpJob:
        raise RecipeError(f"no LKP job template for {self.name}")

    def unsupported(self, p: dict, backend: str) -> str | None:
        """Why ``backend`` cannot run these parameters although it runs the recipe (or None)."""
        return None


REGISTRY: dict[str, Recipe] = {}


def register(cls: type[Recipe]) -> type[Recipe]:
    """Class decorator: instantiate and add to the registry (names are unique)."""
    inst = cls()
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{1,40}", inst.name) or inst.name in REGISTRY:
        raise RuntimeError(f"bad or duplicate recipe name {inst.name!r}")
    REGISTRY[inst.name] = inst
    return cls


# ------------------------------------------------------------------------------- claim helpers
_SIZE_RE = re.compile(r"^([0-9]{1,15})([A-Za-z]{0,3})$")
# dd (GNU coreutils) suffixes; fio uses 1024-based for k/m/g and their "b"/"ib" spellings
_DD_UNITS = {"": 1, "c": 1, "w": 2, "b": 512, "k": KiB, "K": KiB, "kB": 1000, "KB": 1000, "KiB": KiB,
             "M": MiB, "MB": 1000 ** 2, "MiB": MiB, "G": GiB, "GB": 1000 ** 3, "GiB": GiB,
             "T": 1 << 40, "TB": 1000 ** 4, "TiB": 1 << 40}
_IEC_UNITS = {"": 1, "k": KiB, "m": MiB, "g": GiB, "t": 1 << 40, "kb": KiB, "mb": MiB, "gb": GiB,
              "tb": 1 << 40, "kib": KiB, "mib": MiB, "gib": GiB, "tib": 1 << 40}


def parse_size(text: str, *, dd: bool = False, default_unit: int = 1) -> int | None:
    """ASCII digits + a known unit suffix -> bytes; None if anything else (incl. Unicode digits).
    ``dd``: GNU dd's suffixes (``MB`` = 10^6); otherwise 1024-based, case-insensitive."""
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


def parse_int(text: str) -> int | None:
    if isinstance(text, str) and text.isascii() and re.fullmatch(r"[0-9]{1,30}", text):
        return int(text)
    return None


def parse_duration(text: str) -> int | None:
    """fio/sysbench/stress-ng durations: 300, 300s, 5m, 1h -> seconds."""
    if not isinstance(text, str) or not text.isascii():
        return None
    m = re.fullmatch(r"([0-9]{1,9})(s|sec|m|min|h)?", text)
    if not m:
        return None
    return int(m.group(1)) * {None: 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}[m.group(2)]


def word(s: str) -> str:
    """A word from mail, shortened for a message."""
    return s if len(s) <= 40 else s[:37] + "..."


def clamp(rec: Recipe, name: str, value: int, limits: Limits, notes: list[str], cap: int | None = None,
          what: str = "") -> int:
    """``value`` for IntParam ``name``: below the minimum declines; above the bound an *extent*
    is clamped with a note (unless ``clamp = false``), a *shape* declines."""
    p = rec.param(name)
    hi = min(p.upper(limits), cap) if cap is not None else p.upper(limits)
    if value < p.lo:
        raise Decline(f"{name}={value} is below the minimum {p.lo}")
    if value <= hi:
        return value
    if not (p.extent and limits.clamp):
        raise Decline(f"{name}={value} exceeds the limit {hi}{what}")
    notes.append(f"{name} clamped from {value} to {hi}{what}")
    return hi


def whitelisted(rec: Recipe, name: str, value: str, option: str = "") -> str:
    if value in rec.param(name).choices:
        return value
    raise Decline(f"{option or name}={word(value)!r} is not in the whitelist")


def int_option(rec: Recipe, name: str, text: str, option: str, limits: Limits, notes: list[str]) -> int:
    n = parse_int(text)
    if n is None:
        raise Decline(f"cannot parse {option}={word(text)!r}")
    return clamp(rec, name, n, limits, notes)


def duration_option(rec: Recipe, name: str, text: str, option: str, limits: Limits, notes: list[str]) -> int:
    n = parse_duration(text)
    if n is None:
        raise Decline(f"cannot parse {option}={word(text)!r}")
    return clamp(rec, name, n, limits, notes)


def split_options(words: list[str], *, flags: set[str] = frozenset(), valued: set[str] = frozenset(),
                  tool: str = "") -> list[tuple[str, str | None]]:
    """``--k=v``, ``--k v``, ``-k v``, ``-kV`` (single-letter valued) and flag options ->
    ``[(option, value or None)]``.  Options in neither set, positional words and repeats decline."""
    out: list[tuple[str, str | None]] = []
    seen: set[str] = set()
    it = iter(words)
    for w in it:
        key, sep, val = w.partition("=") if w.startswith("--") else (w, "", "")
        if not key.startswith("-") or key in ("-", "--"):
            raise Decline(f"unexpected {tool} argument {word(w)!r}")
        if key not in flags and key not in valued and not key.startswith("--") and len(key) > 2 \
                and key[:2] in valued:
            key, sep, val = key[:2], "=", key[2:]  # -g4
        if key in seen:
            raise Decline(f"{tool} option {word(key)} given twice")
        seen.add(key)
        if key in flags and not sep:
            out.append((key, None))
        elif key in valued:
            if not sep:
                val = next(it, None)
                if val is None:
                    raise Decline(f"{tool} option {word(key)} needs a value")
            out.append((key, val))
        else:
            raise Decline(f"unsupported {tool} option {word(key)}")
    return out



def claim_table(rec: Recipe, words: list[str], limits: Limits, *, flags: dict | None = None,
                ints: dict | None = None, tool: str = "") -> tuple[dict, list[str]]:
    """Options by table: ``flags`` maps a flag to ``(param, value)``, ``ints`` an option taking a
    number to its IntParam (clamped or declined by :func:`clamp`).  -> ``(params, notes)``."""
    flags, ints = flags or {}, ints or {}
    notes: list[str] = []
    params: dict = {}
    for opt, val in split_options(words, flags=set(flags), valued=set(ints), tool=tool):
        if opt in flags:
            key, v = flags[opt]
            if params.get(key, v) != v:
                raise Decline(f"{tool} given conflicting options for {key}")
            params[key] = v
        else:
            params[ints[opt]] = int_option(rec, ints[opt], val, opt, limits, notes)
    return params, notes
