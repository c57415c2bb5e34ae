"""The rerun plan of a record: which vetted workload, which two builds, how many runs.

* **Workload**: the report's benchmark command line / benchmark name mapped onto the vetted
  recipe catalogue by :func:`bot.lab.recipes.recipe_from_claim` -- parameters validated and
  bounded (extents clamped with a note, anything else declined with the reason).  The command is
  parsed as data and never executed; only validated numbers and whitelisted words reach the
  guest's script.
* **Builds**: ``culprit^`` vs ``culprit`` when the record names a culprit and ``[lab.builds]``
  names a kernel tree to build it in (both resolved to full commit ids with ``git rev-parse``,
  argument lists, no shell); otherwise the record's good and bad versions mapped through
  ``[lab.builds]``::

      [lab.builds]
      builds_dir = "/srv/kernels"        # <builds_dir>/<ref>/vmlinuz (or bzImage, vmlinuz-*)
      tree = "/srv/git/linux"            # for culprit^ vs culprit, and "tree:" values
      build_command = ["make", "-j8", "bzImage"]
      arch = "x86_64"                    # of image/tree builds (Debian packages carry theirs)
      "6.1.0-47" = "debian:linux-image-6.1.0-47-amd64-unsigned"     # exact ref
      "6.1.0-*-amd64" = "debian:linux-image-6.1.0-{1}-amd64-unsigned"  # * = [A-Za-z0-9._+~]+
      "v6.8**" = "image:/srv/kernels/{ref}/bzImage"                 # ** may span '-' too

  Keys other than the settings above are ref patterns; ``{ref}`` is the ref that matched and
  ``{1}``, ``{2}``... what the wildcards matched.  A ref from mail must look like a version or
  a commit id (``[A-Za-z0-9][A-Za-z0-9._+~-]{0,127}``) before it is looked up, and the build
  spec it maps to is validated again (Debian package names against a strict regex, image paths
  absolute), so mail text can select among configured builds but never name a command.
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
from bot.lab.builds import BuildError, BuildSpec
from bot.lab.inventory import lab_section, normalize_arch
from bot.lab.recipes import RecipeError, RecipeSpec, recipe_from_claim
from bot.lab.stats import SPENDING

REF_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+~-]{0,127}$")
HEX_RE = re.compile(r"^[0-9a-f]{7,64}$")
BUILD_SETTINGS = ("builds_dir", "tree", "build_command", "image_path", "arch")
DEBIAN_ARCH = (("-amd64", "x86_64"), ("-arm64", "aarch64"), ("-686-pae", "i386"), ("-686", "i386"),
               ("-i386", "i386"))

DEFAULTS = {"runs": 5, "warmup": 1, "samples_per_batch": 1, "order": "abab", "max_runs": 20, "extend_step": 5,
            "alpha": 0.01, "noise_percent": 1.0, "max_attempts": 3, "spending": "pocock", "futility_power": 0.10,
            "max_cv_percent": 5.0, "allow_emulated": False}
LIMITS = {"runs": (2, 100), "warmup": (0, 20), "samples_per_batch": (1, 100), "max_runs": (2, 200),
          "extend_step": (1, 100), "max_attempts": (1, 20)}


class PlanError(ValueError):
    """A plan cannot be made; the message says why."""


def lab_settings(config: Any) -> dict[str, Any]:
    """The ``[lab]`` run settings with defaults, validated."""
    lab = lab_section(config)
    out = dict(DEFAULTS)
    for k in DEFAULTS:
        if k in lab:
            out[k] = lab[k]
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
    tree: str | None = None
    build_command: list[str] | None = None
    image_path: str = "arch/x86/boot/bzImage"
    arch: str = "x86_64"

    @classmethod
    def from_config(cls, config: Any) -> "BuildMap":
        b = lab_section(config).get("builds", {})
        if not isinstance(b, dict):
            raise PlanError("[lab.builds] must be a table")
        bm = cls()
        for k in ("builds_dir", "tree"):
            v = b.get(k)
            if v is not None and (not isinstance(v, str) or not os.path.isabs(os.path.expanduser(v))):
                raise PlanError(f"[lab.builds] {k} must be an absolute path")
            setattr(bm, k, os.path.expanduser(v) if v else None)
        cmd = b.get("build_command")
        if cmd is not None and (not isinstance(cmd, list) or not cmd or not all(isinstance(a, str) for a in cmd)):
            raise PlanError("[lab.builds] build_command must be a list of strings (an argument list, no shell)")
        bm.build_command = cmd
        if b.get("image_path") is not None:
            bm.image_path = str(b["image_path"])
        arch = normalize_arch(b.get("arch", "x86_64"))
        if arch is None or arch == "x86":
            raise PlanError(f"[lab.builds] arch: unknown {b.get('arch')!r}")
        bm.arch = arch
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

    def _spec(self, text: str, ref: str, via: str) -> BuildSpec:
        kw: dict[str, Any] = {}
        if text.startswith("debian:"):
            kw["arch"] = _debian_arch(text[len("debian:"):]) or self.arch
        else:
            kw["arch"] = self.arch
        if text.startswith("tree:"):
            if not self.build_command:
                raise PlanError(f"{via} maps {ref!r} to a tree build but [lab.builds] has no build_command")
            kw["build_command"] = list(self.build_command)
            kw["image_path"] = self.image_path
        try:
            return BuildSpec.parse(text, **kw)
        except BuildError as exc:
            raise PlanError(f"{via} maps {ref!r} to an invalid build: {exc}") from None

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
        where = "[lab.builds]" + (f" or {self.builds_dir}/<ref>/vmlinuz" if self.builds_dir else "")
        raise PlanError(f"no build for {ref!r} in {where}")

    def culprit_pair(self, commit: Any) -> tuple[BuildSpec, BuildSpec, str, str]:
        """(parent build, culprit build, parent sha, culprit sha) in ``tree``."""
        if not self.tree:
            raise PlanError("the record names a culprit but [lab.builds] has no tree to build it in")
        if not self.build_command:
            raise PlanError("[lab.builds] tree is set but build_command is not")
        if not isinstance(commit, str) or not HEX_RE.match(commit.lower()):
            raise PlanError(f"culprit {str(commit)[:60]!r} is not a commit id")
        sha = _git_rev(self.tree, f"{commit.lower()}^{{commit}}")
        parent = _git_rev(self.tree, f"{sha}^1")
        mk = lambda s: BuildSpec(tree=self.tree, ref=s, build_command=list(self.build_command),  # noqa: E731
                                 image_path=self.image_path, arch=self.arch)
        try:
            return mk(parent), mk(sha), parent, sha
        except BuildError as exc:
            raise PlanError(f"culprit build: {exc}") from None


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
    order: str = "abab"
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
    claimed_change_percent: float | None = None
    declined: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.declined and self.recipe is not None and self.good is not None and self.bad is not None

    @property
    def build_arch(self) -> str | None:
        return self.good.arch if self.good is not None else None

    def run_spec(self, runs: int | None = None, label: str | None = None) -> RunSpec:
        if not self.ok:
            raise PlanError("; ".join(self.declined) or "incomplete plan")
        return RunSpec(self.recipe, self.good, self.bad, runs=runs or self.runs,
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
                "claimed_change_percent": self.claimed_change_percent,
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
                  "max_cv_percent", "allow_emulated", "claimed_change_percent"):
            if k in d:
                setattr(p, k, d[k])
        p.refs = dict(d.get("refs") or {"good": None, "bad": None})
        p.timeouts = Timeouts(**(d.get("timeouts") or {}))
        p.declined = list(d.get("declined") or [])
        p.notes = list(d.get("notes") or [])
        return p


def make_plan(rec: dict[str, Any], config: Any, *, runs: int | None = None) -> RerunPlan:
    """The plan for record ``rec`` (as :func:`bot.tracker.records.get_record` returns it).  Never raises
    for what the record says: problems end up in ``plan.declined`` with the reason."""
    s = lab_settings(config)
    plan = RerunPlan(rec.get("id"), runs=s["runs"], warmup=s["warmup"], samples_per_batch=s["samples_per_batch"],
                     order=s["order"], timeouts=s["timeouts"], max_runs=s["max_runs"], extend_step=s["extend_step"],
                     alpha=float(s["alpha"]), noise_percent=float(s["noise_percent"]), max_attempts=s["max_attempts"],
                     spending=s["spending"], futility_power=float(s["futility_power"]),
                     max_cv_percent=float(s["max_cv_percent"]), allow_emulated=s["allow_emulated"])
    if runs is not None:
        lo, hi = LIMITS["runs"]
        if type(runs) is not int or not lo <= runs <= hi:
            raise PlanError(f"runs must be an int in [{lo}, {hi}]")
        plan.runs = runs
    plan.max_runs = max(plan.max_runs, plan.runs)
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
            plan.builds_reason = f"culprit^ vs culprit: {gs[:12]} vs {bs[:12]} in {bm.tree}"
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
