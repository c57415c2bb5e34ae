"""Kernel-tree values (pure): commit ids and release tags validated and ordered, the data
classes the tree look-ups return, and the ``Link:`` / ``Closes:`` / ``Fixes:`` trailers of a
commit message."""

from __future__ import annotations

import enum
import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from bot.msgid import MessageId

# ---------------------------------------------------------------------------
# Commit ids
# ---------------------------------------------------------------------------

MIN_ID_LEN = 6
FULL_SHA_LEN = 40
#: Minimum common length for a ``Fixes:`` id to prefix-match a culprit when
#: the two cannot both be resolved to full shas.
MIN_FIXES_MATCH_LEN = 7

_HEX_ID_RE = re.compile(r"[0-9a-f]{%d,%d}" % (MIN_ID_LEN, FULL_SHA_LEN))


def normalize_commit_id(commit_id: object) -> str | None:
    """Return the lower-case hex id, or None when ``commit_id`` is not 6..40
    hex digits (surrounding whitespace is tolerated, nothing else)."""
    if not isinstance(commit_id, str):
        return None
    cid = commit_id.strip().lower()
    if _HEX_ID_RE.fullmatch(cid) is None:
        return None
    return cid


# ---------------------------------------------------------------------------
# Release tags
# ---------------------------------------------------------------------------

_RELEASE_TAG_RE = re.compile(r"v(\d+(?:\.\d+){1,3})(?:-rc(\d+))?")


def release_tag_key(tag: str) -> tuple[tuple[int, ...], int, int] | None:
    """Sort key for kernel release tags, None for anything else.

    ``v6.7 < v6.7.1 < v6.8-rc1 < v6.8-rc2 < v6.8-rc10 < v6.8 < v6.8.1 <
    v6.9-rc1 < v6.10-rc1``; old ``v2.6.39-rc1 < v2.6.39 < v2.6.39.4 < v3.0``.
    """
    m = _RELEASE_TAG_RE.fullmatch(tag)
    if m is None:
        return None
    nums = tuple(int(x) for x in m.group(1).split("."))
    nums = nums + (0,) * (4 - len(nums))
    if m.group(2) is not None:
        return (nums, 0, int(m.group(2)))
    return (nums, 1, 0)


# ---------------------------------------------------------------------------
# Data classes
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TreeSpec:
    """One configured kernel tree.

    ``path``: a work tree or a bare repository/mirror.  ``name`` defaults to
    the directory name (without ``.git``).  ``mainline``: commits found in this
    tree count as merged upstream (``fixed`` rather than ``fix-pending``).
    ``ref``: the branch whose history is "the tree" (containment, fix walking);
    it comes from the configuration, never from mail.
    """

    path: str | os.PathLike[str]
    name: str = ""
    mainline: bool = False
    ref: str = "HEAD"

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", os.fspath(self.path))
        if not self.name:
            base = Path(self.path).name or str(self.path)
            if base.endswith(".git") and len(base) > 4:
                base = base[:-4]
            object.__setattr__(self, "name", base)


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    subject: str
    author_name: str
    author_email: str
    author_date: datetime  # timezone-aware, in the author's offset
    files: tuple[str, ...]  # paths touched (vs. first parent for merges)
    first_tag: str | None  # earliest release tag (v*) containing it, or None
    trees: tuple[str, ...]  # names of configured trees whose ref contains it
    mainline: bool  # True if one of ``trees`` is a mainline tree
    parents: tuple[str, ...] = ()


class ResolveStatus(enum.Enum):
    FOUND = "found"
    NOT_FOUND = "not-found"
    AMBIGUOUS = "ambiguous"
    INVALID = "invalid"  # not 6..40 hex digits: git was not consulted


@dataclass(frozen=True)
class Resolution:
    """Detailed outcome of :meth:`KernelTrees.lookup`."""

    query: str
    status: ResolveStatus
    commit: CommitInfo | None = None
    #: full shas of every commit whose id starts with the query (several when
    #: AMBIGUOUS, one when FOUND)
    candidates: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status is ResolveStatus.FOUND


@dataclass(frozen=True)
class Section:
    """One MAINTAINERS section."""

    name: str
    maintainers: tuple[str, ...] = ()  # M:
    reviewers: tuple[str, ...] = ()  # R:
    lists: tuple[str, ...] = ()  # L: (address only, notes dropped)
    status: str | None = None  # S:
    trees: tuple[str, ...] = ()  # T:
    files: tuple[str, ...] = ()  # F:
    excludes: tuple[str, ...] = ()  # X:
    regexes: tuple[str, ...] = ()  # N:
    fields: tuple[tuple[str, str], ...] = ()  # every field, in file order
    index: int = 0  # position in the file
    key: str = ""  # path-style subsystem key, see Maintainers.section_key


@dataclass(frozen=True)
class PathMatch:
    """A section matching one path (the result rows of get_maintainer.pl)."""

    section: Section
    pattern: str  # the F: pattern, or the N: regex
    kind: str  # "F" or "N"
    #: get_maintainer.pl's pattern depth: number of '/' in the pattern, +1
    #: when it does not end with '/', -1 for patterns starting with '*'
    #: (THE REST), 0 for N: regexes
    depth: int
    literal_len: int  # non-wildcard characters in the pattern (tie-break)

    @property
    def score(self) -> tuple[int, int]:
        return (self.depth, self.literal_len)

    @property
    def catch_all(self) -> bool:
        return self.depth < 0


@dataclass(frozen=True)
class SubsystemMatch:
    section: str
    key: str  # e.g. "mm", "fs/xfs", "kernel/sched", "net"
    lists: tuple[str, ...]
    maintainers: tuple[str, ...]
    reviewers: tuple[str, ...]
    status: str | None
    trees: tuple[str, ...]
    pattern: str  # most specific pattern that matched one of ``paths``
    kind: str  # "F" or "N"
    paths: tuple[str, ...]  # the given paths attributed to this section
    #: every section that won at least one path, best first (for CCs)
    others: tuple[str, ...] = ()


@dataclass(frozen=True)
class Trailer:
    key: str  # canonical: "Link", "Closes" or "Fixes"
    value: str  # raw value
    msgid: str | None = None  # Link/Closes: Message-ID behind a lore URL
    commit_id: str | None = None  # Fixes: lower-case hex id
    subject: str | None = None  # Fixes: ("subject")


@dataclass(frozen=True)
class FixRecord:
    sha: str  # the fix commit
    subject: str
    trailer: str  # "Link", "Closes" or "Fixes"
    value: str  # the raw trailer value
    #: what it matched: the report Message-ID or the culprit exactly as given
    #: by the caller
    matched: str
    tree: str
    mainline: bool


@dataclass(frozen=True)
class FixScan:
    fixes: list[FixRecord]
    #: tree name -> tip sha walked up to; pass it back as ``since_ref``
    tips: dict[str, str]
    #: tree name -> number of commits examined (those with trailer keys)
    walked: dict[str, int] = field(default_factory=dict)


# ---------------------------------------------------------------------------
# Trailers / Message-IDs
# ---------------------------------------------------------------------------


_LINK_RE = re.compile(r"^[ \t]*(link|closes)[ \t]*:[ \t]*(\S.*?)[ \t]*$", re.I | re.M)
_FIXES_RE = re.compile(
    r"^[ \t]*fixes[ \t]*:[ \t]*(?:commit[ \t]+)?([0-9a-f]{%d,%d})\b[ \t]*(.*?)[ \t]*$"
    % (MIN_ID_LEN, FULL_SHA_LEN),
    re.I | re.M,
)


def parse_trailers(message: str) -> list[Trailer]:
    """``Link:``, ``Closes:`` and ``Fixes:`` lines of a commit message."""
    out: list[Trailer] = []
    for m in _LINK_RE.finditer(message):
        key = "Link" if m.group(1).lower() == "link" else "Closes"
        out.append(Trailer(key, m.group(2), msgid=MessageId.from_ref(m.group(2), bare=False)))
    for m in _FIXES_RE.finditer(message):
        rest = m.group(2)
        subj = None
        sm = re.match(r'\(\s*"?(.*?)"?\s*\)\s*$', rest)
        if sm:
            subj = sm.group(1)
        out.append(
            Trailer("Fixes", (m.group(1) + (" " + rest if rest else "")),
                    commit_id=m.group(1).lower(), subject=subj)
        )
    return out


