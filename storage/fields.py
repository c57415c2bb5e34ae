"""The mapping view the storage dataclasses share: a record reads as a read-only mapping of its
fields (``rec["status"]``, ``{**rec}``, Jinja2's ``rec.status``), so templates, JSON documents
and older callers take it as they took a row."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any, Iterator


class Fields(Mapping):
    """Read-only mapping view of a dataclass's fields (``None`` detail lists left out)."""

    _details: tuple[str, ...] = ()

    def __getitem__(self, key: str) -> Any:
        if key in self._name_set():
            value = getattr(self, key)
            if value is None and key in self._details:
                raise KeyError(key)
            return value
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        # Mapping.get, without the exception for a missing detail (a list page's entries call
        # it some 1,500 times per request)
        if key in self._name_set():
            value = getattr(self, key)
            return default if value is None and key in self._details else value
        return default

    @classmethod
    def _names(cls) -> tuple[str, ...]:
        names = cls.__dict__.get("_field_names")
        if names is None:
            names = tuple(f.name for f in fields(cls))
            cls._field_names = names
            cls._field_set = frozenset(names)
        return names

    @classmethod
    def _name_set(cls) -> frozenset[str]:
        found = cls.__dict__.get("_field_set")
        if found is None:
            cls._names()
            found = cls.__dict__["_field_set"]
        return found

    def __iter__(self) -> Iterator[str]:
        return (k for k in self._names() if not (k in self._details and getattr(self, k) is None))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def to_dict(self) -> dict[str, Any]:
        return {k: self[k] for k in self}
