"""public-inbox v2 git epochs: mirror them (``git clone --mirror`` / ``git fetch``) and walk
them incrementally.  The fast path for backfilling a whole list.

Layout (public-inbox-v2-format(5)): ``INBOX/git/N.git`` epochs, walked in numeric order; one
commit per message on ``refs/heads/master``; each commit's tree holds exactly one blob: ``m``
(a message was added: the raw message) or ``d`` (a message was deleted, e.g. ``public-inbox-learn
rm`` or purge: the removed message).  Deletions are recorded, never applied to stored mail.

Speed: one ``git rev-list --reverse`` per epoch, then one ``git cat-file --batch`` process fed
``<commit>:m`` lines from a writer thread while the main thread reads the blobs (pipelined, no
per-commit round trip, no Python commit objects).  Commits whose ``m`` is missing are asked again
as ``<commit>:d``.

Progress: the cursor ``{"epochs": {"0.git": last_commit_hex, ...}, "deleted": [...],
"deleted_total": n}`` is written by ``Ingester.flush(cursor=...)`` in the same transaction as
the messages of each chunk, so a crash never moves it past unstored messages.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.sources.ingest import Ingester
from bot.sources.limits import DEFAULT_LIMITS, IngestLimits
from bot.sources.lore import PollOutcome, SourceError, raw_msgid

EPOCH_RE = re.compile(r"^(\d+)\.git$")
CHUNK = 2000
MAX_DELETED_KEPT = 1000


# -- locating epochs -------------------------------------------------------------------------
def is_bare_repo(p: Path) -> bool:
    return (p / "objects").is_dir() and (p / "HEAD").is_file() and (p / "refs").is_dir()


def epoch_dirs(location: str | os.PathLike) -> list[tuple[str, Path]]:
    """``[(name, path)]`` of a v2 inbox dir (``git/N.git`` in numeric order) or of one epoch
    repository given directly.  ValueError when it is neither."""
    p = Path(location)
    gitdir = p / "git"
    if gitdir.is_dir():
        eps = []
        for child in gitdir.iterdir():
            m = EPOCH_RE.match(child.name)
            if m and child.is_dir():
                eps.append((int(m.group(1)), child.name, child))
        return [(name, path) for _, name, path in sorted(eps)]
    if is_bare_repo(p):
        return [(p.name if p.name.endswith(".git") else f"{p.name}.git", p)]
    if (p / ".git").is_dir() and is_bare_repo(p / ".git"):
        return [(p.name + ".git", p / ".git")]
    raise ValueError(f"{p} is neither a public-inbox v2 directory (with git/N.git) "
                     "nor a git epoch repository")


# -- walking ---------------------------------------------------------------------------------
def _git(path: Path):
    import git

    return git.Git(str(path))


def _tip(g) -> str | None:
    import git

    try:
        out = g.rev_parse("--verify", "-q", "refs/heads/master^{commit}")
    except git.GitCommandError:
        try:
            out = g.rev_parse("--verify", "-q", "HEAD^{commit}")
        except git.GitCommandError:
            return None
    return out.strip() or None


def _is_ancestor(g, old: str, new: str) -> bool:
    import git

    try:
        g.merge_base("--is-ancestor", old, new)
        return True
    except git.GitCommandError:
        return False


class CatFile:
    """A pipelined ``git cat-file --batch`` (through GitPython's process runner)."""

    def __init__(self, g) -> None:
        self.proc = g.cat_file("--batch", as_process=True, istream=subprocess.PIPE)
        self.stdin = self.proc.proc.stdin
        self.stdout = self.proc.proc.stdout

    def fetch(self, specs: list[str], limits: IngestLimits = DEFAULT_LIMITS
              ) -> Iterator[tuple[str, "bytes | Oversize | None"]]:
        """Yield ``(spec, data or None if missing)`` in order; requests are written by a
        thread so the pipe never deadlocks.  A blob larger than ``max_message_bytes`` is never
        held whole: it comes as an Oversize (a prefix, the sha256 and size of the whole)."""
        err: list[BaseException] = []

        def writer():
            try:
                self.stdin.write("".join(f"{s}\n" for s in specs).encode())
                self.stdin.flush()
            except BaseException as exc:  # noqa: BLE001
                err.append(exc)

        t = threading.Thread(target=writer, daemon=True)
        t.start()
        readline, read = self.stdout.readline, self.stdout.read
        for spec in specs:
            header = readline()
            if not header:
                raise SourceError(f"git cat-file ended early ({err[0] if err else 'EOF'})")
            parts = header.split()
            if len(parts) >= 2 and parts[-1] == b"missing":
                yield spec, None
                continue
            if len(parts) != 3:
                raise SourceError(f"git cat-file: unexpected answer {header[:80]!r}")
            size = int(parts[2])
            if size > limits.max_message_bytes:
                data = _read_oversize(read, size, limits)
            else:
                data = read(size)
            read(1)  # LF after the content
            yield spec, data if parts[1] == b"blob" else None
        t.join()

    def close(self) -> None:
        try:
            self.stdin.close()
        except OSError:
            pass
        try:
            self.proc.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            self.proc.proc.kill()


@dataclass
class Oversize:
    """A blob too large to ingest: what the quarantine keeps of it."""
    prefix: bytes
    sha256: str
    size: int
    reason: str


def _read_oversize(read, size: int, limits: IngestLimits) -> Oversize:
    h, prefix, left = hashlib.sha256(), b"", size
    while left:
        data = read(min(left, 1 << 20))
        if not data:
            raise SourceError("git cat-file ended inside a blob")
        left -= len(data)
        h.update(data)
        if len(prefix) < limits.quarantine_prefix_bytes:
            prefix += data[:limits.quarantine_prefix_bytes - len(prefix)]
    return Oversize(prefix, h.hexdigest(), size, f"message too large: {size} bytes > limit "
                    f"{limits.max_message_bytes} ([ingest] max_message_bytes)")


def walk_epoch(path: Path, last: str | None, chunk: int = CHUNK, limits: IngestLimits = DEFAULT_LIMITS
               ) -> Iterator[list[tuple[str, str, "bytes | Oversize"]]]:
    """Chunks of ``[(commit, "add"|"del", blob)]`` after commit ``last`` (oldest first).  A
    ``last`` that is no longer an ancestor of the tip (history rewritten by a purge) makes the
    walk start over: stored messages come back as duplicates, nothing is lost."""
    g = _git(path)
    tip = _tip(g)
    if tip is None or tip == last:
        return
    rng = f"{last}..{tip}" if last and _is_ancestor(g, last, tip) else tip
    commits = g.rev_list("--reverse", rng).split()
    if not commits:
        return
    cat = CatFile(g)
    try:
        for start in range(0, len(commits), chunk):
            part = commits[start:start + chunk]
            found: dict[str, tuple[str, bytes]] = {}
            missing: list[str] = []
            for spec, data in cat.fetch([f"{c}:m" for c in part], limits):
                c = spec[:-2]
                if data is None:
                    missing.append(c)
                else:
                    found[c] = ("add", data)
            if missing:
                for spec, data in cat.fetch([f"{c}:d" for c in missing], limits):
                    if data is not None:
                        found[spec[:-2]] = ("del", data)
            yield [(c, *found[c]) if c in found else (c, "skip", b"") for c in part]
    finally:
        cat.close()


def ingest_epochs(store, path_or_dirs: str | os.PathLike | Iterable[tuple[str, Path]], *,
                  cursor_key: str | None = None, origin: str | None = None,
                  chunk: int = CHUNK, progress: Callable[[dict], None] | None = None,
                  workers: int | None = None, limits: IngestLimits = DEFAULT_LIMITS) -> dict[str, Any]:
    """Walk the epochs of a local inbox (or ``[(name, path)]``) from the stored cursor on,
    ingesting every added message and recording deletions.  Returns stats; the cursor value is
    in ``stats["cursor"]``."""
    t0 = time.perf_counter()
    if isinstance(path_or_dirs, (str, os.PathLike)):
        location = os.path.abspath(path_or_dirs)
        epochs = epoch_dirs(location)
    else:
        epochs = list(path_or_dirs)
        location = str(epochs[0][1].parent) if epochs else "?"
    key = cursor_key or f"pigit:{location}"
    cursor = store.get_cursor(key) or {}
    cursor = {"epochs": dict(cursor.get("epochs") or {}), "deleted": list(cursor.get("deleted") or []),
              "deleted_total": int(cursor.get("deleted_total") or 0)}
    stats: dict[str, Any] = {"epochs": {}, "commits": 0, "added": 0, "deleted": 0}
    # created before any git pipe is opened, so its forked parse workers don't hold those pipes
    ing = Ingester(store, batch_size=chunk + 1, parallel=True, workers=workers, limits=limits)
    try:
        _walk_all(store, ing, epochs, key, cursor, location, origin, chunk, progress, stats, limits)
    finally:
        ing.close()
    stats.update(ing.stats)
    stats["stored_ids"] = ing.stored_ids
    stats["cursor"] = cursor
    stats["seconds"] = round(time.perf_counter() - t0, 3)
    return stats


def _walk_all(store, ing, epochs, key, cursor, location, origin, chunk, progress, stats,
              limits: IngestLimits = DEFAULT_LIMITS) -> None:
    for name, path in epochs:
        ep_origin = f"{origin or 'pigit:' + location}#{name}"
        n_before = stats["commits"]
        for part in walk_epoch(path, cursor["epochs"].get(name), chunk, limits):
            for commit, kind, blob in part:
                stats["commits"] += 1
                if kind == "add" and isinstance(blob, Oversize):
                    stats["added"] += 1
                    ing.add(blob.prefix, ep_origin, blob.reason, sha256=blob.sha256, size=blob.size)
                elif kind == "add":
                    stats["added"] += 1
                    ing.add(blob, ep_origin)
                elif kind == "del":
                    blob = blob.prefix if isinstance(blob, Oversize) else blob
                    stats["deleted"] += 1
                    cursor["deleted_total"] += 1
                    cursor["deleted"].append({"message_id": raw_msgid(blob), "epoch": name,
                                              "commit": commit})
            cursor["deleted"] = cursor["deleted"][-MAX_DELETED_KEPT:]
            cursor["epochs"][name] = part[-1][0]
            if len(part) >= chunk and hasattr(ing, "checkpoint"):
                # a full chunk: more is coming, let the Ingester parse the next chunk in its
                # workers while this one is written (the cursor still goes in this chunk's
                # transaction)
                ing.checkpoint((key, _copy(cursor)))
            else:
                ing.flush(cursor=(key, _copy(cursor)))
            if progress:
                progress(dict(ing.stats, commits=stats["commits"]))
        stats["epochs"][name] = stats["commits"] - n_before
    ing.flush()


def _copy(cursor: dict) -> dict:
    return {"epochs": dict(cursor["epochs"]), "deleted": list(cursor["deleted"]),
            "deleted_total": cursor["deleted_total"]}


# -- mirroring -------------------------------------------------------------------------------
def _safe(seg: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", seg) or "_"


def mirror_root(home: Path, url: str) -> tuple[Path, str, int | None]:
    """``(inbox mirror dir, inbox URL, epoch or None)`` for a git subscription URL
    (``https://host/inbox/`` or ``https://host/inbox/N``)."""
    parts = urllib.parse.urlsplit(url)
    segs = [s for s in parts.path.split("/") if s]
    epoch = None
    if segs and segs[-1].isdigit():
        epoch = int(segs.pop())
    inbox_url = f"{parts.scheme}://{parts.netloc}/" + "".join(f"{s}/" for s in segs)
    root = Path(home) / "mirrors" / _safe(parts.netloc)
    for s in segs:
        root /= _safe(s)
    return root, inbox_url, epoch


def _git_env(settings) -> dict[str, str]:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="true",
               GIT_HTTP_USER_AGENT=settings.user_agent,
               GIT_HTTP_LOW_SPEED_LIMIT="1000",
               GIT_HTTP_LOW_SPEED_TIME=str(int(max(5, settings.timeout))))
    return env


def _git_error(exc) -> str:
    text = (getattr(exc, "stderr", "") or str(exc)).strip()
    lines = [ln.strip().strip("'").strip() for ln in text.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("stderr:") or len(ln) > 8]
    msg = " / ".join(ln.removeprefix("stderr: ").strip("'") for ln in lines[-2:]) or exc.__class__.__name__
    return msg[:300]


def _clone(url: str, dest: Path, settings) -> str | None:
    """Mirror-clone ``url`` into ``dest``; None on success, else the reason."""
    import git

    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        git.Repo.clone_from(url, str(tmp), mirror=True, env=_git_env(settings))
    except git.GitCommandError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        return _git_error(exc)
    os.replace(tmp, dest)
    return None


def _fetch(path: Path, settings) -> str | None:
    import git

    try:
        git.Git(str(path)).execute(["git", "fetch", "--quiet", "--prune"], env=_git_env(settings))
    except git.GitCommandError as exc:
        return _git_error(exc)
    return None


def update_mirror(home: Path, url: str, settings) -> tuple[Path, list[str]]:
    """Clone or fetch the epochs of ``url`` under ``home/mirrors``.  Returns (the mirror dir,
    problems).  Raises SourceError when no epoch can be had at all."""
    root, inbox_url, only = mirror_root(home, url)
    gitdir = root / "git"
    problems: list[str] = []
    if only is not None:
        dest = gitdir / f"{only}.git"
        reason = _fetch(dest, settings) if dest.is_dir() else _clone(f"{inbox_url}{only}", dest, settings)
        if reason:
            if not dest.is_dir():
                raise SourceError(f"cannot clone {inbox_url}{only}: {reason}")
            problems.append(f"cannot fetch {inbox_url}{only}: {reason}")
        return root, problems
    have = sorted(int(m.group(1)) for p in (gitdir.iterdir() if gitdir.is_dir() else [])
                  if (m := EPOCH_RE.match(p.name)))
    for n in have:
        reason = _fetch(gitdir / f"{n}.git", settings)
        if reason:
            problems.append(f"cannot fetch {inbox_url}{n}: {reason}")
    n = (have[-1] + 1) if have else 0
    while True:
        reason = _clone(f"{inbox_url}{n}", gitdir / f"{n}.git", settings)
        if reason:
            if n == 0:
                raise SourceError(f"cannot clone {inbox_url}0: {reason}")
            break  # no such epoch (yet); when the server is down the fetch problems say so
        have.append(n)
        n += 1
    return root, problems


def poll_git(store, sub: dict[str, Any], settings, home: Path, progress=None) -> PollOutcome:
    """Poll one ``git`` subscription: update the mirror (URL) and walk new commits."""
    state: dict[str, Any] = dict(sub.get("state") or {})
    out = PollOutcome(state=state)
    url = sub["url"]
    problems: list[str] = []
    try:
        if re.match(r"^https?://", url):
            root, problems = update_mirror(Path(home), url, settings)
            location = root
            _, _, only = mirror_root(Path(home), url)
            dirs = epoch_dirs(root)
            if only is not None:
                dirs = [(n, p) for n, p in dirs if n == f"{only}.git"]
            state["mirror"] = str(root)
        else:
            location = Path(url)
            if not location.exists():
                raise SourceError(f"local inbox {url} does not exist any more")
            try:
                dirs = epoch_dirs(location)
            except ValueError as exc:
                raise SourceError(str(exc)) from None
        stats = ingest_epochs(store, dirs, cursor_key=f"subscription:{sub['id']}:git",
                              origin=f"pigit:{url}", progress=progress,
                              limits=getattr(settings, "limits", DEFAULT_LIMITS))
    except SourceError as exc:
        out.error = str(exc)
        return out
    state["epochs"] = stats["cursor"]["epochs"]
    state["deleted"] = stats["cursor"]["deleted"][-100:]
    state["deleted_total"] = stats["cursor"]["deleted_total"]
    out.new_messages = len(stats["stored_ids"])
    out.stats = {k: v for k, v in stats.items() if k not in ("stored_ids", "cursor")}
    if problems:
        out.error = "; ".join(problems)
    return out
