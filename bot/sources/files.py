"""Local mail files: single messages (.eml), mbox (mboxrd / mboxo, gzipped too), maildirs and
directories of those.  Yields raw messages; never parses them (bot.mail does)."""

from __future__ import annotations

import gzip
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

GZIP_MAGIC = b"\x1f\x8b"
FROM_LINE = re.compile(rb"^From \S*.*$")
ESCAPED_FROM = re.compile(rb"^>+From ")
# Never mail, when met while walking a directory (given explicitly, a file is always tried).
SKIP_SUFFIXES = {".json", ".jsonl", ".md", ".py", ".csv", ".yaml", ".yml", ".toml", ".html", ".sqlite3"}


class InputError(Exception):
    """An input that cannot be read at all; the message is a one-line reason."""


@dataclass
class RawItem:
    raw: bytes
    origin: str
    reject: str | None = None  # quarantine with this reason instead of parsing


def _open_bytes(path: Path):
    with open(path, "rb") as fh:
        head = fh.read(2)
    if head == GZIP_MAGIC:
        return gzip.open(path, "rb"), True
    return open(path, "rb"), False


def _split_mbox(fh, origin: str) -> Iterator[RawItem]:
    """Stream an mbox.  A message starts at a ``From `` line at the start of the file or after
    a blank line; ``>From `` escapes are undone one level (mboxrd; exact for mboxrd, the
    common reading for mboxo)."""
    current: list[bytes] = []
    count = 0
    prev_blank = True
    in_headers = False
    try:
        for line in fh:
            if prev_blank and line.startswith(b"From ") and FROM_LINE.match(line.rstrip(b"\r\n")):
                if current:
                    count += 1
                    yield RawItem(_strip_trailing_blank(current), f"{origin}#{count}")
                current = []
                prev_blank = False
                in_headers = True
                continue
            if in_headers and line in (b"\n", b"\r\n"):
                in_headers = False
            elif not in_headers and ESCAPED_FROM.match(line):
                line = line[1:]
            current.append(line)
            prev_blank = line in (b"\n", b"\r\n")
    except (EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
        reason = f"truncated or corrupt compressed stream ({exc.__class__.__name__}: {exc})"
        if count == 0 and not current:
            raise InputError(f"{origin}: {reason}") from None
        count += 1
        yield RawItem(b"".join(current), f"{origin}#{count}", reject=f"{reason}; message incomplete")
        return
    if current:
        count += 1
        yield RawItem(_strip_trailing_blank(current), f"{origin}#{count}")


def _strip_trailing_blank(lines: list[bytes]) -> bytes:
    data = b"".join(lines)
    # the blank line that separates mbox messages belongs to the format, not the message
    if data.endswith(b"\n\n"):
        data = data[:-1]
    elif data.endswith(b"\r\n\r\n"):
        data = data[:-2]
    return data


def to_mboxrd(messages: list[bytes]) -> bytes:
    """Messages as one mboxrd: a ``From `` separator each, ``>From `` escapes added one level
    (the inverse of ``_split_mbox``), a blank line after each message."""
    out = bytearray()
    for raw in messages:
        out += b"From mboxrd@z Thu Jan  1 00:00:00 1970\n"
        for line in raw.splitlines(keepends=True):
            if line.lstrip(b">").startswith(b"From "):
                line = b">" + line
            out += line
        if not out.endswith(b"\n"):
            out += b"\n"
        out += b"\n"
    return bytes(out)


def read_file(path: Path) -> Iterator[RawItem]:
    origin = f"file:{path}"
    try:
        fh, compressed = _open_bytes(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot open: {exc.strerror or exc}") from None
    with fh:
        try:
            head = fh.peek(5)[:5] if hasattr(fh, "peek") else b""
        except (EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
            raise InputError(f"{path}: not a readable gzip file ({exc.__class__.__name__}: {exc})") from None
        if head.startswith(b"From "):
            yield from _split_mbox(fh, origin)
            return
        try:
            data = fh.read()
        except (EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
            raise InputError(f"{path}: cannot read ({exc.__class__.__name__}: {exc})") from None
    if compressed and not data:
        raise InputError(f"{path}: empty gzip stream")
    yield RawItem(data, origin)


def is_maildir(path: Path) -> bool:
    return (path / "cur").is_dir() and (path / "new").is_dir()


def iter_paths(paths: list[str]) -> Iterator[RawItem | InputError]:
    """Every message in the given files / directories, in a stable order.  An input that
    cannot be read is yielded as an InputError and the walk goes on."""
    for p in paths:
        path = Path(p)
        if not path.exists():
            yield InputError(f"{p}: no such file or directory")
        elif path.is_dir():
            yield from _walk(path)
        else:
            yield from _guarded(path)


def _guarded(path: Path) -> Iterator[RawItem | InputError]:
    try:
        yield from read_file(path)
    except InputError as exc:
        yield exc


def _walk(root: Path) -> Iterator[RawItem | InputError]:
    if is_maildir(root):
        for sub in ("cur", "new"):
            for name in sorted(os.listdir(root / sub)):
                if not name.startswith("."):
                    yield from _guarded(root / sub / name)
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        here = Path(dirpath)
        if is_maildir(here) and here != root:
            dirnames[:] = []
            yield from _walk(here)
            continue
        for name in sorted(filenames):
            if name.startswith(".") or Path(name).suffix.lower() in SKIP_SUFFIXES:
                continue
            yield from _guarded(here / name)
