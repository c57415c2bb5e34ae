"""Match a regression record to the lab machines that can stand for the reporter's machine.

Every machine gets a score and the reasons for it; a machine is *eligible* only if nothing
excludes it.  Hard requirements (excluded otherwise):

* **arch**: the machine's arch must be the report's (``x86`` in a report accepts x86_64 and
  i386) and the builds' (an amd64 Debian kernel boots on x86_64 only).  A report that names no
  arch is held to the builds' arch.
* the machine is enabled; a machine tagged ``manual`` is used only when asked for by name;
* its backend exists and can run the recipe (``Backend.supports``: tools, memory);
* the score reaches ``[lab] min_score`` (default 0): a machine that differs from the report in
  more than it shares is a misfit, and a rerun never runs on a misfit.

A report that names no hardware (no CPU, cores, memory, storage or filesystem; the arch alone
only excludes) matches no machine: every machine scores 0 and is at best a *stand-in*
(``MatchResult.stand_in``).  ``lab match`` then exits 1, the service never reruns such a report
on its own, and a rerun a person asks for runs on the stand-in with that said in the job and in
every verdict message.

Score (the report's facts that are unknown count 0; 100 = everything matches):

=========================  =========  ==============================================
factor                     match      mismatch
=========================  =========  ==============================================
CPU vendor                 +20        -20
CPU family                 +10        -5
CPU model                  +15        -5
CPU codename (generation)  +5         0
cores (>= the report's)    +10        -15 x (1 - machine/report)
memory (>= the report's)   +10        -15 x (1 - machine/report)
storage type               +15        -15 (nvme vs ssd: +7, both flash)
filesystem (can test it)   +15        -25
=========================  =========  ==============================================
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from bot.lab.inventory import (CpuInfo, InventoryError, Machine, arch_compatible, lab_section, load_machines,
                               make_backend, normalize_arch, parse_cores, parse_cpu, parse_memory, storage_type)

W_VENDOR, W_FAMILY, W_MODEL, W_CODENAME = 20, 10, 15, 5
W_CORES, W_MEMORY, W_STORAGE, W_FS = 10, 10, 15, 15
P_VENDOR, P_FAMILY, P_MODEL, P_STORAGE, P_FS, P_SHORT = 20, 5, 5, 15, 25, 15
FLASH = ("nvme", "ssd")


@dataclass
class Requirements:
    """What a machine should look like, from a record (and the builds of its plan)."""

    arch: str | None = None  # the report's arch (normalized; "x86" = either)
    build_arch: str | None = None  # the builds' arch: the machine must be exactly this
    cpu: CpuInfo = field(default_factory=CpuInfo)
    cores: int | None = None
    memory: int | None = None  # bytes
    storage: str | None = None  # device type
    storage_text: str | None = None
    filesystem: str | None = None

    @property
    def names_hardware(self) -> bool:
        """Whether the report names anything a machine could match (CPU, cores, memory,
        storage, filesystem).  The arch alone does not: it only excludes."""
        cpu = self.cpu
        return any(x is not None for x in (cpu.vendor, cpu.family, cpu.model, cpu.codename, self.cores,
                                            self.memory, self.storage, self.storage_text, self.filesystem))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["cpu"] = self.cpu.to_dict()
        d["names_hardware"] = self.names_hardware
        return d


def requirements_from_record(rec: dict[str, Any], build_arch: str | None = None) -> Requirements:
    hw = rec.get("hardware") or {}
    cfg = rec.get("config") or {}
    ev = rec.get("evidence") or {}
    fs = cfg.get("filesystem")
    return Requirements(
        arch=normalize_arch(hw.get("arch")),
        build_arch=normalize_arch(build_arch),
        cpu=parse_cpu(hw.get("cpu")),
        cores=parse_cores(hw.get("cores"), hw.get("cpu"), ev.get("cpu") if isinstance(ev, dict) else None),
        memory=parse_memory(hw.get("memory")),
        storage=storage_type(hw.get("storage")),
        storage_text=hw.get("storage") if isinstance(hw.get("storage"), str) else None,
        filesystem=fs.strip().lower() if isinstance(fs, str) and fs.strip() else None,
    )


@dataclass
class Candidate:
    machine: str
    score: int
    eligible: bool
    reasons: list[dict] = field(default_factory=list)  # {"factor", "points" (int|None), "text", "excludes"}
    busy_with: int | None = None  # job holding the machine now

    def add(self, factor: str, points: int | None, text: str, *, excludes: bool = False) -> None:
        self.reasons.append({"factor": factor, "points": points, "text": text, "excludes": excludes})
        if points:
            self.score += points
        if excludes:
            self.eligible = False

    @property
    def exclusions(self) -> list[str]:
        return [r["text"] for r in self.reasons if r["excludes"]]

    def summary(self) -> str:
        if self.eligible:
            return f"{self.machine} (score {self.score})"
        against = [f"{r['text']} ({r['points']:+d})" for r in self.reasons if r["points"] and r["points"] < 0]
        return f"{self.machine}: " + "; ".join(self.exclusions + against)

    def to_dict(self) -> dict:
        return {"machine": self.machine, "score": self.score, "eligible": self.eligible,
                "reasons": list(self.reasons), "busy_with": self.busy_with}


@dataclass
class MatchResult:
    requirements: Requirements
    candidates: list[Candidate]
    min_score: int = 0

    @property
    def eligible(self) -> list[Candidate]:
        return [c for c in self.candidates if c.eligible]

    @property
    def best(self) -> Candidate | None:
        e = self.eligible
        return e[0] if e else None

    @property
    def stand_in(self) -> bool:
        """The best machine is only a stand-in: the report names no hardware to match."""
        return self.best is not None and not self.requirements.names_hardware

    def why_none(self) -> str:
        """One line: why no machine fits (for the record's history)."""
        if not self.candidates:
            return "no lab machines are configured ([[lab.machines]])"
        return "no machine fits: " + " | ".join(c.summary() for c in self.candidates)

    def to_dict(self) -> dict:
        return {"requirements": self.requirements.to_dict(), "min_score": self.min_score,
                "candidates": [c.to_dict() for c in self.candidates],
                "best": self.best.machine if self.best else None,
                "exact": self.best is not None and self.requirements.names_hardware, "stand_in": self.stand_in}


NO_HARDWARE = ("the report names no hardware (CPU, cores, memory, storage, filesystem): no machine matches it, "
               "any machine is only a stand-in")


def _ratio_points(have: int, want: int, full: int, penalty: int) -> int:
    if have >= want:
        return full
    return -round(penalty * (1 - have / want))


def _fmt_size(n: int) -> str:
    from bot.lab.inventory import _fmt_bytes

    return _fmt_bytes(n)


def score_machine(req: Requirements, m: Machine, *, recipe=None, config: Any = None, named: bool = False,
                  min_score: int = 0) -> Candidate:
    """Score one machine against the requirements; see the module docstring."""
    c = Candidate(m.name, 0, True)
    _score_hard(c, req, m, recipe=recipe, config=config, named=named)
    _score_cpu(c, req, m)
    _score_size(c, req, m)
    _score_storage(c, req, m)
    if c.eligible and c.score < min_score:
        c.add("score", None, f"score {c.score} is below min_score {min_score}: a misfit", excludes=True)
    return c


def _score_hard(c: Candidate, req: Requirements, m: Machine, *, recipe, config: Any, named: bool) -> None:
    """What excludes a machine: disabled, manual, arch, the backend's recipes, no hardware named."""
    if not m.enabled:
        c.add("enabled", None, "machine is disabled in the configuration", excludes=True)
    if m.manual and not named:
        c.add("tags", None, "tagged 'manual': used only when named with --machine", excludes=True)
    if req.arch is not None:
        if arch_compatible(req.arch, m.arch):
            c.add("arch", 0, f"arch {m.arch} matches the report's {req.arch}")
        else:
            c.add("arch", None, f"arch {m.arch} is not the report's {req.arch}", excludes=True)
    if req.build_arch is not None:
        if m.arch == req.build_arch:
            if req.arch is None:
                c.add("arch", 0, f"report names no arch; the builds are {req.build_arch}, as is the machine")
        else:
            c.add("arch", None, f"the builds are {req.build_arch} kernels; the machine is {m.arch}", excludes=True)
    elif req.arch is None:
        c.add("arch", 0, "neither the report nor the builds name an arch")
    if recipe is not None:
        try:
            backend = make_backend(m.backend, m.backend_config(config))
            ok, why = backend.supports(recipe)
        except Exception as exc:  # noqa: BLE001 - a backend that cannot be built cannot run anything
            ok, why = False, str(exc)
        if ok:
            c.add("backend", 0, f"backend {m.backend} can run {recipe.name}")
        else:
            c.add("backend", None, f"backend {m.backend} cannot run {recipe.name}: {why}", excludes=True)
    if not req.names_hardware:
        c.add("hardware", 0, NO_HARDWARE)


def _score_cpu(c: Candidate, req: Requirements, m: Machine) -> None:
    """CPU vendor, family, model and generation."""
    rc, mc = req.cpu, m.cpu
    if rc.vendor is None:
        c.add("cpu_vendor", 0, "report names no CPU vendor")
    elif mc.vendor is None:
        c.add("cpu_vendor", 0, f"machine's CPU vendor unknown (report: {rc.vendor})")
    elif rc.vendor == mc.vendor:
        c.add("cpu_vendor", W_VENDOR, f"CPU vendor {mc.vendor} matches")
    else:
        c.add("cpu_vendor", -P_VENDOR, f"CPU vendor {mc.vendor} differs from the report's {rc.vendor}")
    if rc.family is not None and mc.family is not None:
        if rc.family == mc.family:
            c.add("cpu_family", W_FAMILY, f"CPU family {mc.family} matches")
        else:
            c.add("cpu_family", -P_FAMILY, f"CPU family {mc.family} differs from the report's {rc.family}")
    if rc.model is not None and mc.model is not None:
        if rc.model == mc.model and (rc.family is None or rc.family == mc.family):
            c.add("cpu_model", W_MODEL, f"CPU model {mc.model} matches")
        else:
            c.add("cpu_model", -P_MODEL, f"CPU model {mc.model} differs from the report's {rc.model}")
    if rc.codename is not None and mc.codename is not None and rc.codename == mc.codename:
        c.add("cpu_codename", W_CODENAME, f"same CPU generation ({mc.codename})")


def _score_size(c: Candidate, req: Requirements, m: Machine) -> None:
    """Cores and memory against the report's."""
    if req.cores is None:
        c.add("cores", 0, "report names no core count")
    elif m.cores is None:
        c.add("cores", 0, f"machine's core count unknown (report: {req.cores})")
    else:
        pts = _ratio_points(m.cores, req.cores, W_CORES, P_SHORT)
        c.add("cores", pts, f"{m.cores} cores {'>=' if pts > 0 else '<'} the report's {req.cores}")
    if req.memory is None:
        c.add("memory", 0, "report names no memory size")
    elif m.memory is None:
        c.add("memory", 0, f"machine's memory unknown (report: {_fmt_size(req.memory)})")
    else:
        pts = _ratio_points(m.memory, req.memory, W_MEMORY, P_SHORT)
        c.add("memory", pts, f"{_fmt_size(m.memory)} memory {'>=' if pts > 0 else '<'} the report's "
                             f"{_fmt_size(req.memory)}")


def _score_storage(c: Candidate, req: Requirements, m: Machine) -> None:
    """Storage type and filesystem."""
    types = m.storage_types
    if req.storage is None:
        c.add("storage", 0, "report names no storage type" if not req.storage_text else
              f"report's storage {req.storage_text!r} not understood")
    elif not types:
        c.add("storage", -P_STORAGE // 3, f"machine declares no storage (report: {req.storage})")
    elif req.storage in types:
        c.add("storage", W_STORAGE, f"has {req.storage} storage like the report")
    elif req.storage in FLASH and any(t in FLASH for t in types):
        c.add("storage", W_STORAGE // 2, f"flash storage ({'/'.join(types)}) like the report's {req.storage}")
    else:
        c.add("storage", -P_STORAGE, f"storage {'/'.join(types)} differs from the report's {req.storage}")
    if req.filesystem is None:
        c.add("filesystem", 0, "report names no filesystem")
    elif req.filesystem in m.filesystems:
        c.add("filesystem", W_FS, f"can test {req.filesystem}")
    else:
        have = ", ".join(m.filesystems) or "none declared"
        c.add("filesystem", -P_FS, f"cannot test {req.filesystem} (filesystems: {have})")


def match(req: Requirements, machines: list[Machine], *, recipe=None, config: Any = None,
          machine: str | None = None, busy: dict[str, int] | None = None,
          load: dict[str, int] | None = None) -> MatchResult:
    """Score ``machines`` (or only the one named ``machine``), best first: eligible ones by score,
    then by ``load`` (active jobs per machine), then name."""
    lab = lab_section(config)
    min_score = lab.get("min_score", 0)
    if type(min_score) is not int or not -1000 <= min_score <= 100:
        raise InventoryError("[lab] min_score must be an int in [-1000, 100]")
    pool = machines
    if machine is not None:
        pool = [m for m in machines if m.name == machine]
        if not pool:
            raise InventoryError(f"no lab machine named {machine!r} (see `regtriage lab list`)")
    cands = [score_machine(req, m, recipe=recipe, config=config, named=machine is not None, min_score=min_score)
             for m in pool]
    for cand in cands:
        cand.busy_with = (busy or {}).get(cand.machine)
    cands.sort(key=lambda x: (not x.eligible, -x.score, (load or {}).get(x.machine, 0), x.busy_with is not None,
                              x.machine))
    return MatchResult(req, cands, min_score)


def match_record(rec: dict[str, Any], config: Any, *, recipe=None, build_arch: str | None = None,
                 machine: str | None = None, busy: dict[str, int] | None = None,
                 load: dict[str, int] | None = None) -> MatchResult:
    return match(requirements_from_record(rec, build_arch), load_machines(config), recipe=recipe, config=config,
                 machine=machine, busy=busy, load=load)
