"""Local kernel git trees (GitPython): commit resolution, MAINTAINERS at a tree's tip and
detection of fix commits, with caches invalidated when a tree moves."""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import git
from git.exc import GitCommandError
from git.objects import Commit

from bot.msgid import MessageId
from bot.tracker.kernel_tree.maintainers import Maintainers
from bot.tracker.kernel_tree.model import (FULL_SHA_LEN, MIN_FIXES_MATCH_LEN, CommitInfo, FixRecord, FixScan,
                                           Resolution, ResolveStatus, SubsystemMatch, Trailer, TreeSpec,
                                           normalize_commit_id, parse_trailers, release_tag_key)

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
