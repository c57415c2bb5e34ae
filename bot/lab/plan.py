"""The rerun plan of a record: which vetted workload, which two builds, how many runs.

* **Workload**: the report's benchmark command line / benchmark name mapped onto the vetted
  recipe catalogue by :func:`bot.lab.recipes.recipe_from_claim` -- parameters validated and
  bounded (extents clamped with a note, anything else declined with the reason).  The command is
  parsed as data and never executed; only validated numbers and whitelisted words reach the
  guest's script.
* **Builds**: ``culprit^`` vs ``culprit`` (a merge: its first parent vs the merge) when the
  record names a culprit found in one of the kernel trees, built from the tree with TuxMake
  (:mod:`bot.lab.kbuild`); otherwise the record's good and bad versions (tags, ``next-YYYYMMDD``,
  versions such as ``6.1.77`` -- tried as ``v6.1.77`` too -- or commit ids) mapped through
  ``[lab.builds]``, in this order: an exact or pattern key, ``builds_dir``, a commit of one of the
  trees (built with TuxMake)::

      [lab.builds]
      trees = ["/srv/git/linux"]         # default: the paths of [kernel] repos
      base_config = "defconfig"          # or {default = "defconfig", qemu-local = "tinyconfig"}:
                                         # a defconfig name, an absolute config file, "running"
      fragments = ["CONFIG_DEBUG_INFO_NONE=y", "kvm_guest.config", "/etc/regtriage/lab.config"]
      toolchain = "gcc"                  # TuxMake's toolchain name (host compilers: --runtime null)
      jobs = 8                           # make -j (default: the cores)
      cache_dir = "/var/cache/regtriage/builds"   # default $REGTRIAGE_HOME/lab/builds
      ccache_dir = "/var/cache/regtriage/ccache"  # default <cache_dir>/ccache
      timeout_s = 3600                   # per build
      max_cache_mib = 20480              # disk budget of the build cache (LRU eviction)
      builds_dir = "/srv/kernels"        # <builds_dir>/<ref>/vmlinuz (or bzImage, vmlinuz-*)
      arch = "x86_64"                    # of image/tree builds (Debian packages carry theirs)
      "6.1.0-47" = "debian:linux-image-6.1.0-47-amd64-unsigned"     # exact ref
      "6.1.0-*-amd64" = "debian:linux-image-6.1.0-{1}-amd64-unsigned"  # * = [A-Za-z0-9._+~]+
      "v6.8**" = "image:/srv/kernels/{ref}/bzImage"                 # ** may span '-' too

  Keys other than the settings above are ref patterns; ``{ref}`` is the ref that matched and
  ``{1}``, ``{2}``... what the wildcards matched.  A ref from mail must look like a version or
  a commit id (``[A-Za-z0-9][A-Za-z0-9._+~-]{0,127}``) before it is looked up (with ``git
  rev-parse --verify --end-of-options``, an argument list), and the build spec it maps to is
  validated again (Debian package names against a strict regex, image paths absolute, kconfig
  names and fragments against strict patterns), so mail text can select among configured
  builds but never name a command.
* **Runs**: ``runs`` measured samples per build (``--runs``, ``[lab] runs``, default 5), in
  ``abab`` order (``[lab] order``), ``warmup`` discarded runs per batch (default 1),
  ``samples_per_batch`` (default 1: one guest boot per sample); the samples are judged after
  ``runs``, then every ``extend_step`` more, up to ``max_runs`` per side: a group-sequential
  design (:class:`bot.lab.stats.Design`, ``alpha``, ``spending``, ``futility_power``, noise gate
  ``max_cv_percent`` / ``allow_emulated``) decides at each look whether to stop.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.lab.backends import ORDERS, LabError, RunSpec, Timeouts
from bot.lab.builds import BuildError, BuildSpec, validate_kconfig
from bot.lab.inventory import lab_section, lab_values, normalize_arch
from bot.lab.kbuild import build_options, rev_parse
from bot.lab.recipes import RecipeError, RecipeSpec, recipe_from_claim
from bot.lab.stats import ANALYSES, DESIGN_DEFAULTS, SPENDING

REF_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+~-]{0,127}$")
HEX_RE = re.compile(r"^[0-9a-f]{7,64}$")
BUILD_SETTINGS = ("builds_dir", "tree", "trees", "arch", "base_config", "fragments", "toolchain", "jobs", "cache_dir",
                  "ccache_dir", "timeout_s", "max_cache_mib")
GONE_SETTINGS = ("build_command", "image_path")
DEBIAN_ARCH = (("-amd64", "x86_64"), ("-arm64", "aarch64"), ("-686-pae", "i386"), ("-686", "i386"),
               ("-i386", "i386"))

# the run settings, and the sequential design's (bot.lab.stats owns those defaults)
DEFAULTS = {"runs": 5, "warmup": 1, "samples_per_batch": 1, "order": "abba", "max_runs": 20, "extend_step": 5,
            "max_attempts": 3, **DESIGN_DEFAULTS}
LIMITS = {"runs": (2, 100), "warmup": (0, 20), "samples_per_batch": (1, 100), "max_runs": (2, 200),
          "extend_step": (1, 100), "max_attempts": (1, 20)}


class PlanError(ValueError):
    """A plan cannot be made; the message says why."""


def lab_settings(config: Any) -> dict[str, Any]:
    """The ``[lab]`` run settings with defaults, validated."""
    lab = lab_section(config)
    out = lab_values(config, DEFAULTS)
    for k, (lo, hi) in LIMITS.items():
        v = out[k]
        if type(v) is not int or not lo <= v <= hi:
            raise PlanError(f"[lab] {k} must be an int in [{lo}, {hi}], got {v!r}")
    if out["order"] not in ORDERS:
        raise PlanError(f"[lab] order must be one of {', '.join(ORDERS)}")
    for k, lo, hi in (("alpha", 1e-6, 0.5), ("noise_percent", 0.0, 50.0), ("futility_power", 0.0, 0.5),
                      ("max_cv_percent", 0.0, 1000.0)):
        v = out[k]
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not lo <= v <= hi:
            raise PlanError(f"[lab] {k} must be a number in [{lo}, {hi}]")
    if out["spending"] not in SPENDING:
        raise PlanError(f"[lab] spending must be one of {', '.join(SPENDING)}")
    if not isinstance(out["allow_emulated"], bool):
        raise PlanError("[lab] allow_emulated must be true or false")
    if out["analysis"] not in ANALYSES:
        raise PlanError(f"[lab] analysis must be one of {', '.join(ANALYSES)}")
    t = lab.get("timeouts", {})
    if not isinstance(t, dict) or set(t) - {"boot_s", "batch_s", "total_s"}:
        raise PlanError("[lab.timeouts] has boot_s, batch_s, total_s")
    try:
        timeouts = Timeouts(**t)
        timeouts.validate()
    except (TypeError, LabError) as exc:
        raise PlanError(f"[lab.timeouts]: {exc}") from None
    out["timeouts"] = timeouts
    return out


# ---------------------------------------------------------------------------------- builds
def _pattern_regex(key: str) -> re.Pattern:
    parts = re.split(r"(\*\*|\*)", key)
    rx = ""
    for p in parts:
        if p == "**":
            rx += r"([A-Za-z0-9._+~-]+)"
        elif p == "*":
            rx += r"([A-Za-z0-9._+~]+)"
        else:
            rx += re.escape(p)
    return re.compile(rf"^{rx}$")


def _substitute(template: str, ref: str, groups: tuple[str, ...]) -> str:
    def rep(m: re.Match) -> str:
        name = m.group(1)
        if name == "ref":
            return ref
        i = int(name)
        if not 1 <= i <= len(groups):
            raise PlanError(f"[lab.builds] template {template!r} uses {{{name}}} but the pattern has "
                            f"{len(groups)} wildcard(s)")
        return groups[i - 1]

    return re.sub(r"\{(ref|[0-9])\}", rep, template)


def _debian_arch(package: str) -> str | None:
    base = package.removesuffix("-unsigned").removesuffix("-dbg")
    for suffix, arch in DEBIAN_ARCH:
        if base.endswith(suffix):
            return arch
    return None


@dataclass
class BuildMap:
    """``[lab.builds]``: refs (versions, tags, commit ids) -> :class:`BuildSpec`."""

    patterns: list[tuple[str, re.Pattern, str]] = field(default_factory=list)  # (key, regex, template)
    builds_dir: str | None = None
    trees: list[str] = field(default_factory=list)
    arch: str = "x86_64"
    base_config: dict[str, str] = field(default_factory=lambda: {"default": "defconfig"})
    fragments: list[str] = field(default_factory=list)
    toolchain: str = "gcc"
    options: dict[str, Any] = field(default_factory=dict)  # bot.lab.kbuild.build_options

    @property
    def tree(self) -> str | None:
        return self.trees[0] if self.trees else None

    @classmethod
    def from_config(cls, config: Any) -> "BuildMap":
        b = lab_section(config).get("builds", {})
        if not isinstance(b, dict):
            raise PlanError("[lab.builds] must be a table")
        gone = [k for k in b if k in GONE_SETTINGS]
        if gone:
            raise PlanError(f"[lab.builds] {', '.join(gone)}: tree builds are made with TuxMake now; "
                            "say base_config and fragments instead (see deploy/lab-example.toml)")
        bm = cls()
        v = b.get("builds_dir")
        if v is not None and (not isinstance(v, str) or not os.path.isabs(os.path.expanduser(v))):
            raise PlanError("[lab.builds] builds_dir must be an absolute path")
        bm.builds_dir = os.path.expanduser(v) if v else None
        trees = b.get("trees")
        if trees is None:
            trees = ([b["tree"]] if b.get("tree") else []) + kernel_repo_paths(config)
        elif b.get("tree"):
            trees = [b["tree"], *trees]
        if not isinstance(trees, list) or not all(isinstance(t, str) for t in trees):
            raise PlanError("[lab.builds] trees must be a list of paths")
        for t in trees:
            t = os.path.expanduser(t)
            if not os.path.isabs(t):
                raise PlanError(f"[lab.builds] trees: {t!r} is not an absolute path")
            if t not in bm.trees:
                bm.trees.append(t)
        arch = normalize_arch(b.get("arch", "x86_64"))
        if arch is None or arch == "x86":
            raise PlanError(f"[lab.builds] arch: unknown {b.get('arch')!r}")
        bm.arch = arch
        base = b.get("base_config", "defconfig")
        bm.base_config = dict(base) if isinstance(base, dict) else {"default": base}
        bm.base_config.setdefault("default", "defconfig")
        bm.fragments = b.get("fragments", [])
        bm.toolchain = b.get("toolchain", "gcc")
        try:
            for k in bm.base_config.values():
                validate_kconfig(k, bm.fragments, bm.toolchain)
            validate_kconfig("defconfig", bm.fragments, bm.toolchain)
            bm.options = build_options(b)
        except BuildError as exc:
            raise PlanError(f"[lab.builds] {exc}") from None
        exact, globs = [], []
        for key, tpl in b.items():
            if key in BUILD_SETTINGS:
                continue
            if not isinstance(tpl, str):
                raise PlanError(f"[lab.builds] {key!r}: the value must be a build spec string "
                                "(debian:PKG, image:/path, /path, tree:/repo@REF)")
            if not re.fullmatch(r"[A-Za-z0-9._+~*-]{1,128}", key):
                raise PlanError(f"[lab.builds] {key!r}: a ref pattern has letters, digits, . _ + ~ - and * wildcards")
            (globs if "*" in key else exact).append((key, _pattern_regex(key), tpl))
        # exact refs first, then patterns with more literal text first
        globs.sort(key=lambda x: (-len(x[0].replace("*", "")), x[0]))
        bm.patterns = exact + globs
        return bm

    def kconfig_for(self, machine: str | None) -> str:
        return self.base_config.get(machine or "default", self.base_config["default"])

    def tree_spec(self, tree: str, ref: str, machine: str | None = None) -> BuildSpec:
        return BuildSpec(tree=tree, ref=ref, kconfig=self.kconfig_for(machine), fragments=list(self.fragments),
                         toolchain=self.toolchain, arch=self.arch)

    def _spec(self, text: str, ref: str, via: str) -> BuildSpec:
        kw: dict[str, Any] = {}
        if text.startswith("debian:"):
            kw["arch"] = _debian_arch(text[len("debian:"):]) or self.arch
        else:
            kw["arch"] = self.arch
        if text.startswith("tree:"):
            kw.update(kconfig=self.kconfig_for(None), fragments=list(self.fragments), toolchain=self.toolchain)
        try:
            return BuildSpec.parse(text, **kw)
        except BuildError as exc:
            raise PlanError(f"{via} maps {ref!r} to an invalid build: {exc}") from None

    def find_in_trees(self, ref: str) -> tuple[str, str] | None:
        """(tree, full commit id) of the first tree where ``ref`` (or ``v<ref>`` for a bare
        version) names a commit; None when no tree has it."""
        tries = [ref] + (["v" + ref] if ref[:1].isdigit() and not HEX_RE.match(ref) else [])
        for tree in self.trees:
            for r in tries:
                try:
                    sha = rev_parse(tree, r)
                except BuildError:
                    sha = None
                if sha:
                    return tree, sha
        return None

    def resolve(self, ref: Any) -> tuple[BuildSpec, str]:
        """``(spec, how)`` for a ref from a record; PlanError when it does not map."""
        if not isinstance(ref, str) or not REF_RE.match(ref.strip()):
            raise PlanError(f"ref {str(ref)[:60]!r} is not a version or commit id")
        ref = ref.strip()
        tries = [ref]
        if ref[:1] in "vV" and ref[1:2].isdigit():
            tries.append(ref[1:])
        elif ref[:1].isdigit():
            tries.append("v" + ref)
        for key, rx, tpl in self.patterns:
            for r in tries:
                m = rx.match(r)
                if m:
                    via = f"[lab.builds] {key!r}"
                    text = _substitute(tpl, r, m.groups())
                    return self._spec(text, r, via), f"{ref} -> {text} ({via})"
        if self.builds_dir:
            for r in tries:
                d = Path(self.builds_dir) / r
                if r in (".", "..") or not d.is_dir():
                    continue
                for name in ("vmlinuz", "bzImage", "Image"):
                    if (d / name).is_file():
                        return (BuildSpec(image=str(d / name), arch=self.arch),
                                f"{ref} -> {d / name} (builds_dir)")
                imgs = sorted(p for p in d.glob("vmlinu[xz]-*") if p.is_file())
                if imgs:
                    return BuildSpec(image=str(imgs[0]), arch=self.arch), f"{ref} -> {imgs[0]} (builds_dir)"
        found = self.find_in_trees(ref)
        if found:
            tree, sha = found
            return self.tree_spec(tree, sha), f"{ref} -> {sha[:12]} in {tree} (TuxMake)"
        where = ["[lab.builds] keys"] + ([f"{self.builds_dir}/<ref>/vmlinuz"] if self.builds_dir else [])
        if self.trees:
            raise PlanError(f"{ref!r} is in none of the kernel trees ({', '.join(self.trees)}) nor in "
                            f"{' or '.join(where)}")
        raise PlanError(f"no build for {ref!r} in {' or '.join(where)}, and no kernel tree is configured "
                        "([lab.builds] trees or [kernel] repos)")

    def culprit_pair(self, commit: Any) -> tuple[BuildSpec, BuildSpec, str, str]:
        """(parent build, culprit build, parent sha, culprit sha): the first tree holding the
        culprit; a merge's first parent is its good side."""
        if not self.trees:
            raise PlanError("the record names a culprit but no kernel tree is configured to build it in "
                            "([lab.builds] trees or [kernel] repos)")
        if not isinstance(commit, str) or not HEX_RE.match(commit.lower()):
            raise PlanError(f"culprit {str(commit)[:60]!r} is not a commit id")
        found = self.find_in_trees(commit.lower())
        if found is None:
            raise PlanError(f"culprit {commit[:12]} is in none of the kernel trees ({', '.join(self.trees)})")
        tree, sha = found
        parent = _git_rev(tree, f"{sha}^1")
        try:
            return self.tree_spec(tree, parent), self.tree_spec(tree, sha), parent, sha
        except BuildError as exc:
            raise PlanError(f"culprit build: {exc}") from None


def kernel_repo_paths(config: Any) -> list[str]:
    """The paths of ``[kernel] repos`` (entries are paths or tables with ``path``)."""
    data = getattr(config, "data", config)
    k = data.get("kernel", {}) if isinstance(data, dict) else {}
    out = []
    for r in (k.get("repos") or []) if isinstance(k, dict) else []:
        p = r.get("path") if isinstance(r, dict) else r
        if isinstance(p, str) and os.path.isabs(os.path.expanduser(p)):
            out.append(os.path.expanduser(p))
    return out


def _git_rev(tree: str, rev: str) -> str:
    try:
        p = subprocess.run(["git", "-C", tree, "rev-parse", "--verify", "--quiet", "--end-of-options", rev],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PlanError(f"git rev-parse in {tree}: {exc}") from None
    out = p.stdout.strip()
    if p.returncode != 0 or not re.fullmatch(r"[0-9a-f]{40,64}", out):
        raise PlanError(f"{rev.split('^')[0][:40]} is not a commit in {tree}")
    return out


# ---------------------------------------------------------------------------------- the plan
@dataclass
class RerunPlan:
    record_id: int | None
    recipe: RecipeSpec | None = None
    recipe_reason: str = ""
    good: BuildSpec | None = None
    bad: BuildSpec | None = None
    refs: dict[str, str | None] = field(default_factory=lambda: {"good": None, "bad": None})
    builds_reason: str = ""
    runs: int = 5
    warmup: int = 1
    samples_per_batch: int = 1
    order: str = "abba"
    timeouts: Timeouts = field(default_factory=Timeouts)
    max_runs: int = 20
    extend_step: int = 5
    alpha: float = 0.01
    noise_percent: float = 1.0
    max_attempts: int = 3
    spending: str = "pocock"
    futility_power: float = 0.10
    max_cv_percent: float = 5.0
    allow_emulated: bool = False
    analysis: str = "paired"
    claimed_change_percent: float | None = None
    declined: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.declined and self.recipe is not None and self.good is not None and self.bad is not None

    @property
    def build_arch(self) -> str | None:
        return self.good.arch if self.good is not None else None

    def run_spec(self, runs: int | None = None, label: str | None = None, *, machine: str | None = None,
                 config: Any = None) -> RunSpec:
        """The backend's run; with ``machine`` (and ``config``), tree builds take that machine's
        base config (``[lab.builds] base_config``)."""
        if not self.ok:
            raise PlanError("; ".join(self.declined) or "incomplete plan")
        good, bad = self.good, self.bad
        if machine is not None and config is not None and good.kind == "tree":
            kconfig = BuildMap.from_config(config).kconfig_for(machine)
            good = BuildSpec.from_dict({**good.to_dict(), "kconfig": kconfig})
            bad = BuildSpec.from_dict({**bad.to_dict(), "kconfig": kconfig}) if bad.kind == "tree" else bad
        return RunSpec(self.recipe, good, bad, runs=runs or self.runs,
                       samples_per_batch=min(self.samples_per_batch, runs or self.runs), warmup=self.warmup,
                       order=self.order, timeouts=self.timeouts, label=label)

    def to_dict(self) -> dict:
        return {"record_id": self.record_id,
                "recipe": self.recipe.to_dict() if self.recipe else None, "recipe_reason": self.recipe_reason,
                "builds": {"good": self.good.to_dict() if self.good else None,
                           "bad": self.bad.to_dict() if self.bad else None},
                "builds_text": {"good": self.good.describe() if self.good else None,
                                "bad": self.bad.describe() if self.bad else None},
                "refs": dict(self.refs), "builds_reason": self.builds_reason,
                "runs": self.runs, "warmup": self.warmup, "samples_per_batch": self.samples_per_batch,
                "order": self.order, "timeouts": {"boot_s": self.timeouts.boot_s, "batch_s": self.timeouts.batch_s,
                                                  "total_s": self.timeouts.total_s},
                "max_runs": self.max_runs, "extend_step": self.extend_step, "alpha": self.alpha,
                "noise_percent": self.noise_percent, "max_attempts": self.max_attempts,
                "spending": self.spending, "futility_power": self.futility_power,
                "max_cv_percent": self.max_cv_percent, "allow_emulated": self.allow_emulated,
                "analysis": self.analysis, "claimed_change_percent": self.claimed_change_percent,
                "declined": list(self.declined), "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, d: dict, config: Any = None) -> "RerunPlan":
        """Re-validates the recipe and the builds (a stored plan cannot smuggle anything in)."""
        p = cls(d.get("record_id"))
        try:
            p.recipe = RecipeSpec.from_dict(d["recipe"], lab_section(config) or None) if d.get("recipe") else None
            b = d.get("builds") or {}
            p.good = BuildSpec.from_dict(b["good"]) if b.get("good") else None
            p.bad = BuildSpec.from_dict(b["bad"]) if b.get("bad") else None
        except (RecipeError, BuildError, KeyError, TypeError) as exc:
            raise PlanError(f"stored plan is invalid: {exc}") from None
        for k in ("recipe_reason", "builds_reason", "runs", "warmup", "samples_per_batch", "order", "max_runs",
                  "extend_step", "alpha", "noise_percent", "max_attempts", "spending", "futility_power",
                  "max_cv_percent", "allow_emulated", "analysis", "claimed_change_percent"):
            if k in d:
                setattr(p, k, d[k])
        p.refs = dict(d.get("refs") or {"good": None, "bad": None})
        p.timeouts = Timeouts(**(d.get("timeouts") or {}))
        p.declined = list(d.get("declined") or [])
        p.notes = list(d.get("notes") or [])
        return p


def _design_notes(s: dict[str, Any], plan: RerunPlan) -> list[str]:
    """What the design can conclude: with several runs per boot the looks count boots, and a
    verdict needs 5 boots per build (the rank test's floor, :mod:`bot.lab.stats`)."""
    from bot.lab.stats import Design

    d = Design.from_settings({**s, "runs": plan.runs, "max_runs": plan.max_runs})
    if d.per_unit == 1:
        return []
    units = list(d.unit_looks)
    out = [f"design: {d.per_unit} runs per boot: the boot is the unit, looks at {units} boots per build"]
    if units[-1] < 5:
        out.append(f"design: at most {units[-1]} boots per build: no rerun can end confirmed or improved "
                   f"(a verdict needs 5); lower samples_per_batch or raise max_runs")
    return out


def make_plan(rec: dict[str, Any], config: Any, *, runs: int | None = None) -> RerunPlan:
    """The plan for record ``rec`` (as :func:`bot.tracker.records.get_record` returns it).  Never raises
    for what the record says: problems end up in ``plan.declined`` with the reason."""
    s = lab_settings(config)
    plan = RerunPlan(rec.get("id"), runs=s["runs"], warmup=s["warmup"], samples_per_batch=s["samples_per_batch"],
                     order=s["order"], timeouts=s["timeouts"], max_runs=s["max_runs"], extend_step=s["extend_step"],
                     alpha=float(s["alpha"]), noise_percent=float(s["noise_percent"]), max_attempts=s["max_attempts"],
                     spending=s["spending"], futility_power=float(s["futility_power"]),
                     max_cv_percent=float(s["max_cv_percent"]), allow_emulated=s["allow_emulated"],
                     analysis=s["analysis"])
    if runs is not None:
        lo, hi = LIMITS["runs"]
        if type(runs) is not int or not lo <= runs <= hi:
            raise PlanError(f"runs must be an int in [{lo}, {hi}]")
        plan.runs = runs
    plan.max_runs = max(plan.max_runs, plan.runs)
    plan.notes += _design_notes(s, plan)
    cp = rec.get("change_percent")
    plan.claimed_change_percent = float(cp) if isinstance(cp, (int, float)) and not isinstance(cp, bool) else None
    # -- workload
    cfg = rec.get("config") or {}
    command = cfg.get("command") if isinstance(cfg.get("command"), str) else None
    benchmark = cfg.get("benchmark") if isinstance(cfg.get("benchmark"), str) else None
    spec, reason = recipe_from_claim(lab_section(config) or None, command, benchmark)
    plan.recipe, plan.recipe_reason = spec, reason
    if spec is None:
        plan.declined.append(f"workload: {reason}")
    else:
        plan.notes += [f"recipe: {n}" for n in spec.notes]
    # -- builds
    try:
        bm = BuildMap.from_config(config)
    except PlanError as exc:
        plan.declined.append(f"builds: {exc}")
        return plan
    problems = []
    culprit = rec.get("culprit_commit")
    if culprit:
        try:
            g, b, gs, bs = bm.culprit_pair(culprit)
            plan.good, plan.bad = g, b
            plan.refs = {"good": f"{culprit}^", "bad": culprit}
            plan.builds_reason = f"culprit^ vs culprit: {gs[:12]} vs {bs[:12]} in {g.tree} (TuxMake)"
        except PlanError as exc:
            problems.append(str(exc))
    if plan.good is None:
        good, bad = rec.get("good"), rec.get("bad")
        if good and bad:
            try:
                g, how_g = bm.resolve(good)
                b, how_b = bm.resolve(bad)
                if g.arch != b.arch:
                    raise PlanError(f"the builds differ in arch ({g.arch} vs {b.arch})")
                if g.to_dict() == b.to_dict():
                    raise PlanError(f"good {good!r} and bad {bad!r} map to the same build")
                plan.good, plan.bad = g, b
                plan.refs = {"good": good, "bad": bad}
                plan.builds_reason = f"good/bad versions: {how_g}; {how_b}"
                if problems:
                    plan.notes.append(f"builds: culprit not used: {problems[0]}")
            except PlanError as exc:
                problems.append(str(exc))
        else:
            missing = " and ".join(k for k in ("good", "bad") if not rec.get(k))
            problems.append(f"the record has no {missing} version" + ("" if culprit else " and no culprit"))
    if plan.good is None:
        plan.declined.append("builds: " + "; ".join(problems))
    return plan
