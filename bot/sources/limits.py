"""Bounds on what one input may cost the ingest: the ``[ingest]`` section of the config.

Mail and mail files are hostile input.  Every read is bounded so that one file cannot exhaust
memory, fill the database or stall a batch: a message larger than ``max_message_bytes`` is
quarantined (a prefix and the sha256 of the whole), a file or a decompressed stream larger than
its limit is cut there (what was read is ingested, the rest is quarantined with the reason).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

MIB = 1024 * 1024
GIB = 1024 * MIB


class LimitError(ValueError):
    pass


@dataclass(frozen=True)
class IngestLimits:
    # one message (raw bytes); larger ones are quarantined: a prefix and the sha256 of the whole
    max_message_bytes: int = 32 * MIB
    # bytes read from one file on disk; the rest of the file is quarantined
    max_file_bytes: int = 16 * GIB
    # bytes decompressed from one gzip file, and the largest expansion of it ...
    max_decompressed_bytes: int = 4 * GIB
    # ... as decompressed / compressed (checked once 16 MiB are out): a bomb is cut there
    max_compression_ratio: int = 100
    # bytes of a quarantined input kept in the database (its sha256 and size cover the whole)
    quarantine_prefix_bytes: int = 1 * MIB
    # References ids kept per message (the first and the last ones; the header stays in raw)
    max_references: int = 64

    RANGES = {
        "max_message_bytes": (1024, 1 << 40),
        "max_file_bytes": (1024, 1 << 50),
        "max_decompressed_bytes": (1024, 1 << 50),
        "max_compression_ratio": (2, 1 << 20),
        "quarantine_prefix_bytes": (0, 1 << 40),
        "max_references": (2, 100_000),
    }

    @classmethod
    def from_section(cls, section: dict) -> "IngestLimits":
        values = {}
        for f in fields(cls):
            if f.name not in section:
                continue
            v = section.get(f.name)
            lo, hi = cls.RANGES[f.name]
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise LimitError(f"[ingest] {f.name} must be an integer in {lo}..{hi}, not {v!r}")
            values[f.name] = v
        unknown = sorted(set(section) - {f.name for f in fields(cls)})
        if unknown:
            raise LimitError(f"[ingest]: unknown option(s) {', '.join(unknown)}")
        return cls(**values)

    @classmethod
    def from_config(cls, cfg) -> "IngestLimits":
        from bot.config import ConfigError

        try:
            return cls.from_section(cfg.section("ingest"))
        except LimitError as exc:
            raise ConfigError(str(exc)) from None


DEFAULT_LIMITS = IngestLimits()
