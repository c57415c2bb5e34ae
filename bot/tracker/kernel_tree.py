"""Access to local kernel git trees (GitPython): commit resolution, MAINTAINERS
lookup and detection of fix commits.

Everything here is meant to work on real kernel trees (1M+ commits, bare
mirrors included) and on untrusted input taken from mail:

* commit ids are validated as 6..40 hex digits *before* git is touched; nothing
  from mail is ever handed to git as an option or a revision expression.  Only
  full shas computed by git itself, or validated hex prefixes in a
  ``--disambiguate=<hex>``/``--contains=<hex>`` form, reach the command line;
* lookups use ``rev-parse --disambiguate``, the persistent ``cat-file`` process
  of GitPython's object database and ``merge-base --is-ancestor``; nothing
  iterates over the history to resolve an id;
* results are cached.  Immutable facts (subject, author, touched files, a
  parsed MAINTAINERS blob) are cached by object id; facts that change when a
  tree is fetched (containment, first release tag, which objects exist) are
  dropped automatically when a tree's tip or its tag refs change, or
  explicitly with :meth:`KernelTrees.refresh`.

Public API: :class:`TreeSpec`, :class:`KernelTrees`, :class:`CommitInfo`,
:class:`Resolution`/:class:`ResolveStatus`, :class:`Maintainers`,
:class:`Section`, :class:`PathMatch`, :class:`SubsystemMatch`,
:class:`FixRecord`, :class:`FixScan` and the helpers
:func:`normalize_commit_id`, :func:`release_tag_key`,
:func:`parse_trailers` (Message-IDs in trailers: :class:`bot.msgid.MessageId`).
"""

from __future__ import annotations

import enum
import os
import re
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import git
from git.exc import GitCommandError
from git.objects import Commit

from bot.msgid import MessageId

__all__ = [
    "TreeSpec",
    "KernelTrees",
    "CommitInfo",
    "Resolution",
    "ResolveStatus",
    "Maintainers",
    "Section",
    "PathMatch",
    "SubsystemMatch",
    "FixRecord",
    "FixScan",
    "Trailer",
    "normalize_commit_id",
    "release_tag_key",
    "parse_trailers",
]

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


# ---------------------------------------------------------------------------
# MAINTAINERS
# ---------------------------------------------------------------------------

_FIELD_RE = re.compile(r"^([A-Z]):\s*(.*?)\s*$")
_GLOB_CHARS = frozenset("*?[")
#: top-level directories whose F: patterns only name a section's headers,
#: docs, tests... they are used for the key only when nothing else is there
_AUX_DIRS = frozenset({"include", "Documentation", "tools", "samples", "scripts", "LICENSES"})


def _glob_to_regex(pattern: str) -> str:
    """Kernel F:/X: glob -> regex source. ``*`` and ``?`` do not cross '/',
    ``[...]`` is a character class, everything else is literal."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 2)
            if j == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : j]
                if body.startswith("!"):
                    body = "^" + body[1:]
                body = body.replace("\\", "\\\\")
                out.append("[" + body + "]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _pattern_directory(raw: str) -> str:
    """Glob-free leading directory of an F: pattern (no trailing slash)."""
    is_dir = raw.endswith("/")
    comps = raw.rstrip("/").split("/")
    if not is_dir:
        comps = comps[:-1]
    out: list[str] = []
    for c in comps:
        if not c or any(ch in _GLOB_CHARS for ch in c):
            break
        out.append(c)
    return "/".join(out)


class _FilePattern:
    """One F: or X: pattern with get_maintainer.pl / MAINTAINERS semantics.

    * ``dir/`` (trailing slash): every file in and below ``dir``;
    * otherwise the pattern must match the whole path, ``*``/``?`` staying
      within one directory level (``fs/*`` is the files directly in fs/,
      ``*/net/*`` files directly in ``<any top-level dir>/net``);
    * a glob-free pattern without trailing slash that names a directory of
      the path (``F: drivers/net/ethernet/intel``) works like ``dir/``, as
      get_maintainer.pl adds the slash to patterns that are directories.

    The regex is compiled on first use: a real MAINTAINERS has ~20k patterns
    and a lookup only touches those under the path's top-level directory.
    """

    __slots__ = ("raw", "is_dir", "_rx", "depth", "literal_len", "has_glob", "bucket")

    def __init__(self, raw: str) -> None:
        self.raw = raw
        self.is_dir = raw.endswith("/")
        self.has_glob = any(c in _GLOB_CHARS for c in raw)
        self._rx: re.Pattern[str] | None = None
        depth = raw.count("/") + (0 if self.is_dir else 1)
        if raw.startswith("*"):
            depth = -1
        self.depth = depth
        self.literal_len = sum(1 for c in raw if c not in _GLOB_CHARS)
        first = raw.split("/", 1)[0]
        self.bucket = None if any(c in _GLOB_CHARS for c in first) else first

    def matches(self, path: str) -> bool:
        rx = self._rx
        if rx is None:
            src = _glob_to_regex(self.raw)
            if self.is_dir:
                rx = re.compile(src)  # prefix match
            elif self.has_glob:
                rx = re.compile(src + r"\Z")
            else:
                rx = re.compile(src + r"(?:/|\Z)")
            self._rx = rx
        return rx.match(path) is not None

class Maintainers:
    """A parsed MAINTAINERS file.

    Matching rules (see :meth:`match_path`): a section matches a path when
    one of its ``F:`` patterns (see :class:`_FilePattern`) or ``N:`` regexes
    (searched anywhere in the path, Perl ``/x`` flavour) matches it and none
    of its ``X:`` patterns does.  Matches rank like get_maintainer.pl: by
    pattern depth (slashes, +1 for a non-directory pattern; ``*`` catch-alls
    -1; ``N:`` 0), then by number of literal characters, then file order.
    """

    def __init__(self, sections: Sequence[Section]) -> None:
        self.sections: tuple[Section, ...] = tuple(sections)
        self._by_name = {s.name: s for s in self.sections}
        # bucketed F: patterns: first literal path component -> [(pat, sec)]
        self._buckets: dict[str | None, list[tuple[_FilePattern, Section]]] = {}
        self._regexes: list[tuple[re.Pattern[str], str, Section]] = []
        self._excludes: dict[int, list[_FilePattern]] = {}
        for sec in self.sections:
            for f in sec.files:
                p = _FilePattern(f)
                self._buckets.setdefault(p.bucket, []).append((p, sec))
            for n in sec.regexes:
                try:
                    self._regexes.append((re.compile(n, re.X), n, sec))
                except re.error:
                    pass  # Perl-only syntax: skipped rather than mis-applied
            if sec.excludes:
                self._excludes[sec.index] = [_FilePattern(x) for x in sec.excludes]

    # -- parsing -----------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> "Maintainers":
        """Parse the MAINTAINERS format: blank-line separated blocks, each a
        title line followed by ``X:\\tvalue`` fields.  Blocks without fields
        (the preamble, the legend, whose lines are indented) are ignored."""
        sections: list[Section] = []
        block: list[str] = []

        def flush() -> None:
            title = None
            fields: list[tuple[str, str]] = []
            for line in block:
                m = _FIELD_RE.match(line)
                if m:
                    if m.group(2):
                        fields.append((m.group(1), m.group(2)))
                elif not fields:
                    title = line.strip()  # the line right before the fields
            block.clear()
            if not fields:
                return
            sections.append(cls._make_section(title or "", fields, len(sections)))

        for line in text.splitlines():
            if line.strip():
                block.append(line)
            else:
                flush()
        flush()
        return cls(sections)

    @classmethod
    def _make_section(cls, name: str, fields: list[tuple[str, str]], index: int) -> Section:
        def vals(t: str) -> tuple[str, ...]:
            return tuple(v for k, v in fields if k == t)

        lists = tuple(v.split()[0] for v in vals("L"))
        status = next((v for k, v in fields if k == "S"), None)
        sec = Section(
            name=name,
            maintainers=vals("M"),
            reviewers=vals("R"),
            lists=lists,
            status=status,
            trees=vals("T"),
            files=vals("F"),
            excludes=vals("X"),
            regexes=vals("N"),
            fields=tuple(fields),
            index=index,
        )
        return replace(sec, key=cls.section_key(sec))

    @staticmethod
    def section_key(sec: Section) -> str:
        """Path-style key of a section, the same for every path it matches.

        Rule: the directory (glob-free leading components, no trailing slash)
        of each ``F:`` pattern -- ``mm/`` -> ``mm``, ``mm/gup.c`` -> ``mm``,
        ``fs/*`` -> ``fs``, ``kernel/sched/`` -> ``kernel/sched``; patterns
        under include/, Documentation/, tools/, samples/, scripts/ are only
        used when the section has nothing else; the shortest directory
        (fewest components) wins, ties go to the first in file order.  A
        section with no such directory (``THE REST``: ``*``, ``*/``;
        ``N:``-only sections) gets its name lower-cased with runs of
        non-alphanumerics turned into ``-`` (``the-rest``).
        """
        best: tuple[int, int, int] | None = None
        best_dir = ""
        for i, f in enumerate(sec.files):
            d = _pattern_directory(f)
            if not d:
                continue
            rank = (1 if d.split("/", 1)[0] in _AUX_DIRS else 0, d.count("/"), i)
            if best is None or rank < best:
                best, best_dir = rank, d
        if best_dir:
            return best_dir
        slug = re.sub(r"[^a-z0-9]+", "-", sec.name.lower()).strip("-")
        return slug or "unknown"

    # -- matching ----------------------------------------------------------

    def section(self, name: str) -> Section | None:
        return self._by_name.get(name)

    def match_path(self, path: str) -> list[PathMatch]:
        """Every section matching ``path``, most specific first (one entry per
        section, with its best pattern)."""
        path = path.lstrip("/")
        best: dict[int, PathMatch] = {}
        first = path.split("/", 1)[0]
        excluded: dict[int, bool] = {}

        def is_excluded(sec: Section) -> bool:
            r = excluded.get(sec.index)
            if r is None:
                r = any(x.matches(path) for x in self._excludes.get(sec.index, ()))
                excluded[sec.index] = r
            return r

        for bucket in (first, None):
            for pat, sec in self._buckets.get(bucket, ()):
                if not pat.matches(path) or is_excluded(sec):
                    continue
                pm = PathMatch(sec, pat.raw, "F", pat.depth, pat.literal_len)
                cur = best.get(sec.index)
                if cur is None or pm.score > cur.score:
                    best[sec.index] = pm
        for rx, src, sec in self._regexes:
            if sec.index in best or rx.search(path) is None or is_excluded(sec):
                continue
            best[sec.index] = PathMatch(sec, src, "N", 0, 0)
        return sorted(best.values(), key=lambda m: (-m.depth, -m.literal_len, m.section.index))

    def best_for_path(self, path: str) -> PathMatch | None:
        matches = self.match_path(path)
        return matches[0] if matches else None

    def subsystem_for_paths(self, paths: Iterable[str]) -> SubsystemMatch | None:
        """The subsystem for a set of paths (e.g. the files of a commit).

        Each path votes for its most specific section.  Votes of catch-all
        matches (``THE REST``) count only when no path has anything better.
        The section with most votes wins; ties go to the more specific best
        pattern, then to file order.  None when nothing matches at all.
        """
        per_path: list[tuple[str, PathMatch]] = []
        for p in dict.fromkeys(paths):
            m = self.best_for_path(p)
            if m is not None:
                per_path.append((p, m))
        if not per_path:
            return None
        if any(not m.catch_all for _, m in per_path):
            voting = [(p, m) for p, m in per_path if not m.catch_all]
        else:
            voting = per_path
        tally: dict[int, list[tuple[str, PathMatch]]] = {}
        for p, m in voting:
            tally.setdefault(m.section.index, []).append((p, m))

        def rank(item: tuple[int, list[tuple[str, PathMatch]]]) -> tuple[int, tuple[int, int], int]:
            idx, hits = item
            return (len(hits), max(m.score for _, m in hits), -idx)

        ordered = sorted(tally.items(), key=rank, reverse=True)
        _, hits = ordered[0]
        top = max((m for _, m in hits), key=lambda m: m.score)
        sec = top.section
        return SubsystemMatch(
            section=sec.name,
            key=sec.key,
            lists=sec.lists,
            maintainers=sec.maintainers,
            reviewers=sec.reviewers,
            status=sec.status,
            trees=sec.trees,
            pattern=top.pattern,
            kind=top.kind,
            paths=tuple(p for p, _ in hits),
            others=tuple(h[0][1].section.name for _, h in ordered),
        )


# ---------------------------------------------------------------------------
# Kernel trees
# ---------------------------------------------------------------------------


class _Tree:
    __slots__ = ("spec", "repo")

    def __init__(self, spec: TreeSpec) -> None:
        self.spec = spec
        self.repo = git.Repo(spec.path)


class _LRU(OrderedDict):
    def __init__(self, maxsize: int) -> None:
        super().__init__()
        self.maxsize = maxsize

    def put(self, key: Any, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.maxsize:
            self.popitem(last=False)


_NOT_SET = object()


class KernelTrees:
    """The configured kernel trees.

    >>> trees = KernelTrees([TreeSpec("/srv/linux.git", "mainline", mainline=True),
    ...                      TreeSpec("/srv/linux-next.git", "next")])
    >>> info = trees.resolve("1c2b3d4e5f6a")
    """

    def __init__(
        self,
        specs: Iterable[TreeSpec | str | os.PathLike[str]],
        *,
        maintainers_tree: str | None = None,
        cache_size: int = 4096,
    ) -> None:
        self._trees: list[_Tree] = []
        names: set[str] = set()
        for s in specs:
            spec = s if isinstance(s, TreeSpec) else TreeSpec(s)
            if spec.name in names:
                raise ValueError(f"duplicate kernel tree name {spec.name!r}")
            names.add(spec.name)
            self._trees.append(_Tree(spec))
        if not self._trees:
            raise ValueError("no kernel tree configured")
        self._by_name = {t.spec.name: t for t in self._trees}
        if maintainers_tree is not None and maintainers_tree not in self._by_name:
            raise KeyError(maintainers_tree)
        self._maintainers_tree = maintainers_tree
        # immutable facts
        self._details: _LRU = _LRU(cache_size)  # sha -> (subject, name, email, date, files, parents)
        self._blobs: _LRU = _LRU(4)  # MAINTAINERS blob sha -> Maintainers
        # facts that depend on the trees' state
        self._volatile: _LRU = _LRU(cache_size)
        self._state: tuple | None = None

    @classmethod
    def from_config(cls, repos: Iterable[str | Mapping[str, Any]], **kw: Any) -> "KernelTrees":
        """Build from ``[kernel] repos = [...]``: each entry a path or a table
        ``{path = "...", name = "...", mainline = true, ref = "HEAD"}``."""
        specs = []
        for r in repos:
            if isinstance(r, Mapping):
                specs.append(TreeSpec(r["path"], r.get("name", ""), bool(r.get("mainline", False)),
                                      r.get("ref", "HEAD")))
            else:
                specs.append(TreeSpec(r))
        return cls(specs, **kw)

    # -- housekeeping --------------------------------------------------------

    @property
    def trees(self) -> tuple[TreeSpec, ...]:
        return tuple(t.spec for t in self._trees)

    def close(self) -> None:
        for t in self._trees:
            t.repo.close()

    def __enter__(self) -> "KernelTrees":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def refresh(self) -> None:
        """Forget everything that can change when a tree is fetched."""
        self._volatile.clear()
        self._state = None

    def _tip(self, t: _Tree) -> str | None:
        try:
            return t.repo.commit(t.spec.ref).hexsha
        except (ValueError, git.BadName, GitCommandError, IndexError, KeyError):
            return None  # empty repository or missing ref

    def tips(self) -> dict[str, str]:
        """Current tip sha of each tree's ref."""
        out = {}
        for t in self._trees:
            tip = self._tip(t)
            if tip:
                out[t.spec.name] = tip
        return out

    def _check_state(self) -> None:
        """Drop volatile caches when a tip or the tag refs changed."""
        state = []
        for t in self._trees:
            common = Path(t.repo.common_dir)
            stamps = []
            for p in (common / "packed-refs", common / "refs" / "tags"):
                try:
                    st = p.stat()
                    stamps.append((st.st_mtime_ns, st.st_size))
                except OSError:
                    stamps.append(None)
            state.append((self._tip(t), tuple(stamps)))
        st = tuple(state)
        if st != self._state:
            self._volatile.clear()
            self._state = st

    def _cached(self, key: tuple, compute: Any) -> Any:
        v = self._volatile.get(key, _NOT_SET)
        if v is _NOT_SET:
            v = compute()
            self._volatile.put(key, v)
        return v

    # -- object lookup -------------------------------------------------------

    @staticmethod
    def _is_commit(t: _Tree, sha: str) -> bool:
        try:
            return t.repo.odb.info(bytes.fromhex(sha)).type == b"commit"
        except (ValueError, GitCommandError):
            return False

    def _candidates_in(self, t: _Tree, prefix: str) -> tuple[str, ...]:
        """Full shas of the commits of one repository starting with
        ``prefix`` (validated hex)."""
        if len(prefix) == FULL_SHA_LEN:
            return (prefix,) if self._is_commit(t, prefix) else ()
        try:
            out = t.repo.git.rev_parse(f"--disambiguate={prefix}")
        except GitCommandError:
            return ()
        shas = [s for s in out.split() if len(s) == FULL_SHA_LEN]
        return tuple(s for s in shas if self._is_commit(t, s))

    def _candidates(self, prefix: str) -> tuple[str, ...]:
        def compute() -> tuple[str, ...]:
            found: dict[str, None] = {}
            for t in self._trees:
                for s in self._candidates_in(t, prefix):
                    found[s] = None
            return tuple(sorted(found))

        return self._cached(("cand", prefix), compute)

    def _unique(self, prefix: str) -> str | None:
        c = self._candidates(prefix)
        return c[0] if len(c) == 1 else None

    def _details_of(self, sha: str) -> tuple | None:
        d = self._details.get(sha)
        if d is not None:
            return d
        for t in self._trees:
            if not self._is_commit(t, sha):
                continue
            c = Commit(t.repo, bytes.fromhex(sha))
            parents = tuple(p.hexsha for p in c.parents)
            args = ["-r", "--name-only", "-z", "--no-commit-id", "--no-renames"]
            if parents:
                args += [parents[0], sha]
            else:
                args += ["--root", sha]
            try:
                out = t.repo.git.diff_tree(*args)
            except GitCommandError:
                out = ""  # e.g. a tree object missing from a damaged repository
            files = tuple(dict.fromkeys(f for f in out.split("\0") if f))
            d = (
                str(c.summary),
                c.author.name or "",
                c.author.email or "",
                c.authored_datetime,
                files,
                parents,
            )
            self._details.put(sha, d)
            return d
        return None

    def _contained_in(self, sha: str) -> tuple[str, ...]:
        def compute() -> tuple[str, ...]:
            names = []
            for t in self._trees:
                tip = self._tip(t)
                if tip is None or not self._is_commit(t, sha):
                    continue
                if tip == sha or t.repo.is_ancestor(sha, tip):
                    names.append(t.spec.name)
            return tuple(names)

        return self._cached(("in", sha), compute)

    def _first_tag(self, sha: str, trees: Sequence[str]) -> str | None:
        def compute() -> str | None:
            names = list(trees) or [t.spec.name for t in self._trees if self._is_commit(t, sha)]
            best: tuple | None = None
            best_tag = None
            for name in names:
                t = self._by_name[name]
                try:
                    out = t.repo.git.for_each_ref(
                        f"--contains={sha}", "--format=%(refname:strip=2)", "refs/tags/v*"
                    )
                except GitCommandError:
                    continue
                for tag in out.split():
                    k = release_tag_key(tag)
                    if k is not None and (best is None or k < best):
                        best, best_tag = k, tag
            return best_tag

        return self._cached(("tag", sha), compute)

    # -- public: resolution --------------------------------------------------

    def lookup(self, commit_id: str) -> Resolution:
        """Resolve an (abbreviated) commit id from mail.

        INVALID if it is not 6..40 hex digits (git is not run at all);
        NOT_FOUND if no configured tree has such a commit; AMBIGUOUS, with
        every candidate, if several commits start with it (objects of other
        types are ignored); FOUND with the :class:`CommitInfo` otherwise.
        """
        query = commit_id if isinstance(commit_id, str) else repr(commit_id)
        cid = normalize_commit_id(commit_id)
        if cid is None:
            return Resolution(query, ResolveStatus.INVALID)
        self._check_state()
        cands = self._candidates(cid)
        if not cands:
            return Resolution(query, ResolveStatus.NOT_FOUND)
        if len(cands) > 1:
            return Resolution(query, ResolveStatus.AMBIGUOUS, candidates=cands)
        info = self._info(cands[0])
        if info is None:  # vanished between calls
            return Resolution(query, ResolveStatus.NOT_FOUND)
        return Resolution(query, ResolveStatus.FOUND, info, cands)

    def resolve(self, commit_id: str) -> CommitInfo | None:
        """:class:`CommitInfo` for an abbreviated id, None when the id is
        invalid, unknown or ambiguous (use :meth:`lookup` to tell which)."""
        return self.lookup(commit_id).commit

    def _info(self, sha: str) -> CommitInfo | None:
        d = self._details_of(sha)
        if d is None:
            return None
        subject, name, email, date, files, parents = d
        trees = self._contained_in(sha)
        mainline = any(self._by_name[n].spec.mainline for n in trees)
        return CommitInfo(
            sha=sha,
            subject=subject,
            author_name=name,
            author_email=email,
            author_date=date,
            files=files,
            first_tag=self._first_tag(sha, trees),
            trees=trees,
            mainline=mainline,
            parents=parents,
        )

    # -- public: MAINTAINERS -------------------------------------------------

    def _default_tree(self) -> _Tree:
        if self._maintainers_tree is not None:
            return self._by_name[self._maintainers_tree]
        return next((t for t in self._trees if t.spec.mainline), self._trees[0])

    def maintainers(self, ref: str | None = None, tree: str | None = None) -> Maintainers:
        """MAINTAINERS as of ``ref`` (default: the tree's configured ref) of
        ``tree`` (default: the first mainline tree), read from the object
        database (works on bare mirrors).  ``ref`` is trusted configuration
        (branch, tag or sha), not mail text.  Empty if there is no such file.
        """
        t = self._by_name[tree] if tree is not None else self._default_tree()
        try:
            commit = t.repo.commit(ref or t.spec.ref)
            blob = commit.tree / "MAINTAINERS"
        except (KeyError, ValueError, git.BadName, GitCommandError, IndexError):
            return Maintainers(())
        m = self._blobs.get(blob.hexsha)
        if m is None:
            m = Maintainers.parse(blob.data_stream.read().decode("utf-8", "replace"))
            self._blobs.put(blob.hexsha, m)
        return m

    def subsystem_for_paths(
        self, paths: Iterable[str], ref: str | None = None, tree: str | None = None
    ) -> SubsystemMatch | None:
        return self.maintainers(ref, tree).subsystem_for_paths(paths)

    def commit_subsystem(
        self, commit_id: str, ref: str | None = None, tree: str | None = None
    ) -> SubsystemMatch | None:
        """Subsystem of the files a commit touched (None if the id does not
        resolve to exactly one commit or nothing matches)."""
        info = self.resolve(commit_id)
        if info is None or not info.files:
            return None
        return self.subsystem_for_paths(info.files, ref, tree)

    # -- public: fixes -------------------------------------------------------

    def _iter_log(self, t: _Tree, revs: list[str], max_count: int | None) -> Iterator[tuple[str, str]]:
        """(sha, message) of the commits selected by ``revs`` (full shas and
        ^shas computed here, never mail text), newest first, streamed.  Git
        pre-filters on the trailer keys so only candidate messages are read."""
        args = [
            "-z", "--no-color", "--no-show-signature", "--format=%H%n%B",
            "--regexp-ignore-case", "--extended-regexp",
            "--grep=^[[:space:]]*(link|closes|fixes)[[:space:]]*:",
        ]
        if max_count is not None:
            args.append(f"--max-count={int(max_count)}")
        args += revs + ["--"]
        handle = t.repo.git.log(*args, as_process=True)
        popen = handle.proc
        buf = b""
        try:
            while True:
                chunk = popen.stdout.read(1 << 16)
                if not chunk:
                    break
                buf += chunk
                *records, buf = buf.split(b"\0")
                for rec in records:
                    if rec.strip():
                        yield self._split_record(rec)
            if buf.strip():
                yield self._split_record(buf)
        finally:
            # also reached when the consumer stops early: git then dies of SIGPIPE
            popen.stdout.close()
            if popen.stderr is not None:
                popen.stderr.close()
            popen.wait()

    @staticmethod
    def _split_record(rec: bytes) -> tuple[str, str]:
        text = rec.decode("utf-8", "replace").lstrip("\n")
        sha, _, msg = text.partition("\n")
        return sha.strip(), msg

    def find_fixes(
        self,
        report_msgids: Iterable[str],
        culprits: Iterable[str],
        since_ref: Mapping[str, str] | None = None,
        *,
        trees: Iterable[str] | None = None,
        first_walk_limit: int | None = 20000,
    ) -> FixScan:
        """Commits whose message points at a report or fixes a culprit.

        Matches: ``Link:``/``Closes:`` whose lore / patch.msgid.link URL names
        one of ``report_msgids`` (compared without <>, case-insensitively);
        ``Fixes: <id>`` whose id and a culprit agree on their common length
        (at least 7 hex digits), or -- when both resolve uniquely in the trees
        -- name the same commit (a resolvable but different commit never
        matches, even with a common prefix).

        Incremental: ``since_ref`` maps tree name -> the tip returned by the
        previous call (``FixScan.tips``); only commits reachable from the
        current tip and not from it are examined (for a rebased tree such as
        linux-next that is everything not in the old tip).  A tree without
        an entry, or whose entry is not a known commit (e.g. garbage-collected
        after a rebase), is walked from its tip back over at most
        ``first_walk_limit`` commits carrying a Link:/Closes:/Fixes: line (git
        pre-filters on those keys; None: whole history).  One record per (commit, matching
        trailer value); a commit appearing in several trees yields a record
        per tree.
        """
        self._check_state()
        since = dict(since_ref or {})
        wanted_msgids: dict[str, str] = {}
        for m in report_msgids:
            mid = MessageId.from_header(m) if isinstance(m, str) else None
            if mid is not None:
                wanted_msgids.setdefault(mid.folded, m)
        culprit_ids: list[tuple[str, str]] = []  # (normalized, as given)
        for c in culprits:
            n = normalize_commit_id(c)
            if n is not None:
                culprit_ids.append((n, c))  # type: ignore[arg-type]
        selected = self._trees if trees is None else [self._by_name[n] for n in trees]

        fixes: list[FixRecord] = []
        tips: dict[str, str] = {}
        walked: dict[str, int] = {}
        for t in selected:
            name = t.spec.name
            tip = self._tip(t)
            if tip is None:
                continue
            tips[name] = tip
            last = normalize_commit_id(since.get(name))
            if last is not None and len(last) == FULL_SHA_LEN and last == tip:
                walked[name] = 0
                continue
            if last is not None and len(last) == FULL_SHA_LEN and self._is_commit(t, last):
                revs, limit = [tip, f"^{last}"], None
            else:
                revs, limit = [tip], first_walk_limit
            count = 0
            for sha, msg in self._iter_log(t, revs, limit):
                count += 1
                fixes.extend(self._match_commit(t, sha, msg, wanted_msgids, culprit_ids))
            walked[name] = count
        return FixScan(fixes, tips, walked)

    def _match_commit(
        self,
        t: _Tree,
        sha: str,
        msg: str,
        msgids: Mapping[str, str],
        culprits: Sequence[tuple[str, str]],
    ) -> list[FixRecord]:
        out: list[FixRecord] = []
        subject = msg.split("\n", 1)[0].strip()
        seen: set[tuple[str, str]] = set()

        def add(tr: Trailer, matched: str) -> None:
            if (tr.key, matched) in seen:
                return
            seen.add((tr.key, matched))
            out.append(FixRecord(sha, subject, tr.key, tr.value, matched, t.spec.name, t.spec.mainline))

        for tr in parse_trailers(msg):
            if tr.msgid is not None and msgids:
                given = msgids.get(tr.msgid.folded)
                if given is not None:
                    add(tr, given)
            elif tr.commit_id is not None:
                for norm, given in culprits:
                    if self._fixes_matches(tr.commit_id, norm):
                        add(tr, given)
        return out

    def _fixes_matches(self, fixes_id: str, culprit: str) -> bool:
        n = min(len(fixes_id), len(culprit))
        if fixes_id[:n] != culprit[:n]:
            return False  # different prefixes can never be the same commit
        a = self._unique(fixes_id)
        b = self._unique(culprit)
        if a is not None and b is not None:
            return a == b
        return n >= MIN_FIXES_MATCH_LEN
