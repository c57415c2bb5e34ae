"""Typed result of the extraction: ``Fact`` (one located piece of evidence) and ``Claim``.

``Claim.to_dict()`` produces exactly the JSON contract used by the CLI and the tracker;
``Claim.from_dict()`` reads it back (spans of facts are not part of the contract, so facts
rebuilt from a dict carry start = end = -1).

``numbers``: ``[{"label", "value", "unit", "stdev", "n"}]`` - the measured values per version, commit
or column (``label``); ``stdev`` is RELATIVE (a fraction of ``value``: ``± 2%`` -> 0.02), ``n`` the
run count when stated.  Evidence holds, per field, the sentence it came from; ``kind`` and
``is_regression`` point at the sentence (or Subject line) stating the regression, while the
score explanations are the extra facts ``kind_reason`` / ``is_regression_reason``.  Setup facts
``boot_params`` / ``mkfs`` / ``mount_options`` are recorded when the text gives them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

HARDWARE_KEYS = ("cpu", "arch", "memory", "storage")
CONFIG_KEYS = ("filesystem", "benchmark", "command")
KINDS = ("performance", "functional")


@dataclass
class Fact:
    """One extracted value with where it came from.

    ``start``/``end`` are character offsets into the body text given to ``extract``
    (``-1`` when unknown, e.g. facts taken from the subject or rebuilt from JSON);
    ``quote_depth`` is 0 for the author's own text, 1 for ``>`` quoted text, and so on.
    """

    field: str
    value: Any
    sentence: str
    start: int
    end: int
    quote_depth: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "value": self.value, "sentence": self.sentence,
                "start": self.start, "end": self.end, "quote_depth": self.quote_depth}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Fact":
        return cls(d["field"], d.get("value"), d.get("sentence", ""), int(d.get("start", -1)),
                   int(d.get("end", -1)), int(d.get("quote_depth", 0)))


@dataclass
class MentionedCommit:
    """A commit id the text mentions, with the role the text gives it."""

    commit: str
    role: str  # culprit | improvement | fix | merge-base | parent | head | upstream | bad | good | other
    subject: str | None = None
    score: float = 0.0


def _empty_hw() -> dict[str, str | None]:
    return {k: None for k in HARDWARE_KEYS}


def _empty_cfg() -> dict[str, Any]:
    return {"filesystem": None, "benchmark": None, "command": None, "kernel_config": []}


@dataclass
class Claim:
    is_regression: bool = False
    confidence: float = 0.0
    kind: str | None = None
    culprit_commit: str | None = None
    culprit_subject: str | None = None
    good: str | None = None
    bad: str | None = None
    metric: str | None = None
    change_percent: float | None = None
    hardware: dict[str, str | None] = field(default_factory=_empty_hw)
    config: dict[str, Any] = field(default_factory=_empty_cfg)
    subsystem: str | None = None
    numbers: list[dict[str, Any]] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    mentioned_commits: list[MentionedCommit] = field(default_factory=list)

    # -- helpers -------------------------------------------------------------------------
    def fact(self, name: str) -> Fact | None:
        """The fact supporting field ``name`` (first one recorded), if any."""
        for f in self.facts:
            if f.field == name:
                return f
        return None

    def field_value(self, name: str) -> Any:
        if name in HARDWARE_KEYS or name in ("nic", "gpu", "board", "cores"):
            return self.hardware.get(name)
        if name in CONFIG_KEYS or name == "kernel_config":
            return self.config.get(name)
        if name == "culprit":
            return self.culprit_commit
        return getattr(self, name, None)

    # -- contract ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        evidence: dict[str, str] = {}
        for f in self.facts:
            if f.field not in evidence and f.sentence:
                evidence[f.field] = f.sentence
        culprit = None
        if self.culprit_commit:
            culprit = {"commit": self.culprit_commit, "subject": self.culprit_subject}
        return {
            "is_regression": bool(self.is_regression),
            "confidence": round(float(self.confidence), 3),
            "kind": self.kind,
            "culprit": culprit,
            "good": self.good,
            "bad": self.bad,
            "metric": self.metric,
            "change_percent": None if self.change_percent is None else round(float(self.change_percent), 1),
            "hardware": {k: self.hardware.get(k) for k in HARDWARE_KEYS},
            "config": {"filesystem": self.config.get("filesystem"),
                       "benchmark": self.config.get("benchmark"),
                       "command": self.config.get("command"),
                       "kernel_config": list(self.config.get("kernel_config") or [])},
            "subsystem": self.subsystem,
            "numbers": [{"label": n.get("label"), "value": float(n["value"]), "unit": n.get("unit"),
                         "stdev": None if n.get("stdev") is None else float(n["stdev"]),
                         "n": None if n.get("n") is None else int(n["n"])} for n in self.numbers],
            "evidence": evidence,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Claim":
        culprit = d.get("culprit") or {}
        hw = _empty_hw()
        hw.update({k: v for k, v in (d.get("hardware") or {}).items() if k in HARDWARE_KEYS})
        cfg = _empty_cfg()
        for k, v in (d.get("config") or {}).items():
            if k in cfg:
                cfg[k] = list(v or []) if k == "kernel_config" else v
        c = cls(is_regression=bool(d.get("is_regression")), confidence=float(d.get("confidence") or 0.0),
                kind=d.get("kind"), culprit_commit=culprit.get("commit"), culprit_subject=culprit.get("subject"),
                good=d.get("good"), bad=d.get("bad"), metric=d.get("metric"),
                change_percent=d.get("change_percent"), hardware=hw, config=cfg,
                subsystem=d.get("subsystem"), numbers=[dict(n) for n in d.get("numbers") or []])
        for name, sentence in (d.get("evidence") or {}).items():
            value = c.field_value(name)
            c.facts.append(Fact(name, value, sentence, -1, -1, 0))
        if c.culprit_commit:
            c.mentioned_commits.append(MentionedCommit(c.culprit_commit, "culprit", c.culprit_subject))
        return c
