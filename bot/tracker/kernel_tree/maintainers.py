"""MAINTAINERS, parsed (pure): sections with their file patterns, and the subsystem a set of
touched files belongs to."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Iterable, Sequence

from bot.tracker.kernel_tree.model import PathMatch, Section, SubsystemMatch

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


