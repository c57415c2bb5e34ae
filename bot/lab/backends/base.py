"""What every lab backend shares: the run specification, states, samples, errors and the
:class:`Backend` interface (see the package docstring for the protocol)."""


from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field

from bot.lab.builds import BuildError, BuildSpec
from bot.lab.recipes import RecipeError, RecipeSpec

QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
STATES = (QUEUED, RUNNING, DONE, FAILED)
BUILD_LABELS = ("good", "bad")
ORDERS = ("abab", "abba", "blocked")
LABEL_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class LabError(Exception):
    """A lab operation cannot be done; the message says why."""


def lab_table(config: dict | None) -> dict:
    """The ``[lab]`` table of a configuration (the whole config dict, or that table already)."""
    cfg = dict(config or {})
    if isinstance(cfg.get("lab"), dict):
        cfg = cfg["lab"]
    return cfg


def backend_table(config: dict | None, name: str, overrides: dict) -> tuple[dict, dict]:
    """``([lab], [lab.<name>] with overrides)`` of a configuration (a copy; a non-table is empty)."""
    lab = lab_table(config)
    table = lab.get(name, {})
    table = dict(table) if isinstance(table, dict) else {}
    table.update(overrides)
    return lab, table


@dataclass
class Timeouts:
    boot_s: float = 120.0  # from start to the guest's start marker (qemu) / connection (ssh)
    batch_s: float = 900.0  # one batch, start to end
    total_s: float = 7200.0  # the whole run, including build downloads

    def validate(self) -> None:
        for k, v in asdict(self).items():
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not 1 <= v <= 86400:
                raise LabError(f"timeout {k} must be a number of seconds in [1, 86400], got {v!r}")


@dataclass
class RunSpec:
    recipe: RecipeSpec
    good: BuildSpec
    bad: BuildSpec
    runs: int = 5
    samples_per_batch: int = 1
    warmup: int = 1
    order: str = "abab"
    timeouts: Timeouts = field(default_factory=Timeouts)
    label: str | None = None

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        if not isinstance(self.recipe, RecipeSpec):
            raise LabError("recipe must be a RecipeSpec (bot.lab.recipes.make_recipe)")
        for b in (self.good, self.bad):
            if not isinstance(b, BuildSpec):
                raise LabError("good and bad must be BuildSpec")
        for name, v, lo, hi in (("runs", self.runs, 1, 200), ("samples_per_batch", self.samples_per_batch, 1, 100),
                                ("warmup", self.warmup, 0, 20)):
            if type(v) is not int or not lo <= v <= hi:
                raise LabError(f"{name} must be an int in [{lo}, {hi}], got {v!r}")
        if self.order not in ORDERS:
            raise LabError(f"order must be one of {', '.join(ORDERS)}")
        self.timeouts.validate()
        if self.label is not None and not (isinstance(self.label, str) and LABEL_RE.match(self.label)):
            raise LabError(f"label must match {LABEL_RE.pattern}")

    def build(self, label: str) -> BuildSpec:
        if label not in BUILD_LABELS:
            raise LabError(f"unknown build label {label!r}")
        return self.good if label == "good" else self.bad

    def schedule(self) -> list[tuple[str, int]]:
        """The batches in execution order: ``[(build_label, n_samples), ...]``.

        Each build gets ``ceil(runs / samples_per_batch)`` batches; the last one of a build carries
        the remainder.  ``abab``: good, bad, good, bad...; ``abba``: good, bad, bad, good, good,
        bad... (cancels linear drift); ``blocked``: all good batches, then all bad ones."""
        n = math.ceil(self.runs / self.samples_per_batch)
        sizes = [self.samples_per_batch] * (n - 1) + [self.runs - self.samples_per_batch * (n - 1)]
        if self.order == "blocked":
            return [("good", s) for s in sizes] + [("bad", s) for s in sizes]
        out = []
        for i, s in enumerate(sizes):
            pair = [("good", s), ("bad", s)]
            if self.order == "abba" and i % 2 == 1:
                pair.reverse()
            out += pair
        return out

    def to_dict(self) -> dict:
        return {"recipe": self.recipe.to_dict(), "builds": {"good": self.good.to_dict(), "bad": self.bad.to_dict()},
                "runs": self.runs, "samples_per_batch": self.samples_per_batch, "warmup": self.warmup,
                "order": self.order, "timeouts": asdict(self.timeouts), "label": self.label}

    @classmethod
    def from_dict(cls, d: dict, config: dict | None = None) -> "RunSpec":
        """Everything is re-validated (recipe parameters against the configured limits too)."""
        if not isinstance(d, dict):
            raise LabError("a run spec is a dict")
        unknown = set(d) - {"recipe", "builds", "runs", "samples_per_batch", "warmup", "order", "timeouts", "label"}
        if unknown:
            raise LabError(f"unknown run spec keys: {sorted(unknown)}")
        try:
            recipe = RecipeSpec.from_dict(d["recipe"], config)
            builds = d["builds"]
            if not isinstance(builds, dict) or set(builds) != set(BUILD_LABELS):
                raise LabError("builds must have exactly 'good' and 'bad'")
            t = d.get("timeouts") or {}
            if not isinstance(t, dict) or set(t) - {"boot_s", "batch_s", "total_s"}:
                raise LabError("timeouts: boot_s, batch_s, total_s")
            return cls(recipe=recipe, good=BuildSpec.from_dict(builds["good"]), bad=BuildSpec.from_dict(builds["bad"]),
                       runs=d.get("runs", 5), samples_per_batch=d.get("samples_per_batch", 1),
                       warmup=d.get("warmup", 1), order=d.get("order", "abab"), timeouts=Timeouts(**t),
                       label=d.get("label"))
        except KeyError as exc:
            raise LabError(f"run spec is missing {exc}") from None
        except (RecipeError, BuildError, TypeError) as exc:
            raise LabError(f"invalid run spec: {exc}") from None


@dataclass
class Status:
    state: str  # queued | running | done | failed
    message: str = ""
    batches_done: int = 0
    batches_total: int = 0
    cancelled: bool = False
    updated_at: float | None = None

    @property
    def finished(self) -> bool:
        return self.state in (DONE, FAILED)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Status":
        keys = {"state", "message", "batches_done", "batches_total", "cancelled", "updated_at"}
        return cls(**{k: v for k, v in d.items() if k in keys})


class Samples(dict):
    """``{"good": [floats], "bad": [floats]}`` plus where they came from.

    ``log_path``: the raw log (host notes + every guest console, in execution order);
    ``metric``/``higher_is_better``: to pass to :func:`bot.lab.stats.judge`;
    ``order``: build label of each batch in execution order."""

    def __init__(self, samples: dict[str, list[float]], *, log_path: str, metric: str, higher_is_better: bool,
                 order: list[str] | None = None, warmups: dict[str, list[float]] | None = None):
        super().__init__(samples)
        self.log_path = log_path
        self.metric = metric
        self.higher_is_better = higher_is_better
        self.order = list(order or [])
        self.warmups = warmups or {}

    def to_dict(self) -> dict:
        return {"samples": dict(self), "log_path": self.log_path, "metric": self.metric,
                "higher_is_better": self.higher_is_better, "order": self.order, "warmups": self.warmups}


class Backend(ABC):
    """A place that runs recipes on kernel builds.  Implementations must be restart-safe: every
    method works from a handle string alone, with the state on disk (or on the remote lab)."""

    name: str = "abstract"

    @abstractmethod
    def supports(self, recipe: RecipeSpec) -> tuple[bool, str]:
        """Whether this backend can run ``recipe`` (and why not)."""

    @abstractmethod
    def submit(self, job: RunSpec) -> str:
        """Start ``job`` asynchronously; return its handle.  Raises LabError if not runnable."""

    @abstractmethod
    def poll(self, handle: str) -> Status:
        """Current status; detects dead workers (reported as failed)."""

    @abstractmethod
    def fetch_samples(self, handle: str) -> Samples:
        """Samples of a finished run (LabError if the run is not done)."""

    @abstractmethod
    def cancel(self, handle: str) -> Status:
        """Stop the run and everything it started; returns the final status."""

    @abstractmethod
    def describe(self, handle: str) -> dict:
        """JSON-serialisable state of the run (spec, status, batches, paths)."""

    def handle_state(self, handle: str) -> dict:
        """What a scheduler stores to resume polling after a restart."""
        return {"backend": self.name, "handle": handle, "status": self.poll(handle).to_dict()}

    def wait(self, handle: str, timeout: float, interval: float = 1.0) -> Status:
        """Poll until finished or ``timeout`` seconds pass (convenience for CLIs and tests)."""
        import time

        end = time.monotonic() + timeout
        while True:
            st = self.poll(handle)
            if st.finished or time.monotonic() >= end:
                return st
            time.sleep(interval)
