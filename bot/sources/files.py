"""Local mail files: single messages (.eml), mbox (mboxrd / mboxo, gzipped too), maildirs and
directories of those.  Yields raw messages; never parses them (bot.sources.mail does).

Files are hostile input too.  Only regular files are read (FIFOs, devices, sockets and symlinks
to them are skipped with a reason, never opened for reading); every read is bounded by the
``[ingest]`` limits (bot.sources.limits): a message larger than ``max_message_bytes`` comes out as a
prefix plus the sha256 and size of the whole, to be quarantined; a file longer than
``max_file_bytes`` or a gzip stream expanding beyond ``max_decompressed_bytes`` (or
``max_compression_ratio``) is cut there, the message it was in quarantined with the reason.
Lines are read in bounded pieces, so a file without newlines costs no more memory than one with.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bot.sources.limits import DEFAULT_LIMITS, MIB, IngestLimits

GZIP_MAGIC = b"\x1f\x8b"
FROM_LINE = re.compile(rb"^From \S*.*$")
ESCAPED_FROM = re.compile(rb"^>+From ")
HEADER_LINE = re.compile(rb"^[!-9;-~]+:")  # printable, no colon, then ':'
# Never mail, when met while walking a directory (given explicitly, a file is always tried).
SKIP_SUFFIXES = {".json", ".jsonl", ".md", ".py", ".csv", ".yaml", ".yml", ".toml", ".html", ".sqlite3"}
READ_CHUNK = 1 * MIB
MAX_LINE = 1 * MIB  # longer lines are handed on in pieces of this size
RATIO_FLOOR = 16 * MIB  # the compression ratio limit applies once this much was decompressed


class InputError(Exception):
    """An input that cannot be read at all; the message is a one-line reason."""


class InputWarning(InputError):
    """Something skipped or cut while reading (a FIFO in a directory, junk after the gzip
    data); the walk goes on and the run does not fail for it."""


@dataclass
class RawItem:
    raw: bytes
    origin: str
    reject: str | None = None  # quarantine with this reason instead of parsing
    problems: list[str] = field(default_factory=list)  # noted on the message when stored
    sha256: str | None = None  # of the whole input when ``raw`` is only a prefix of it
    size: int | None = None    # likewise


def shown_path(path: Path | str) -> str:
    """A path as text that any terminal and database takes: bytes of a file name that are not
    UTF-8 are written as \\xNN escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


# -- bounded reading -----------------------------------------------------------------------
class _Stream:
    """The bytes of one open regular file, gunzipped when they are gzip, in chunks, with the
    limits applied.  ``note`` says why the stream stopped early or what was ignored; ``cut`` is
    true when it stopped inside the data (the message being read is incomplete)."""

    def __init__(self, fh, limits: IngestLimits) -> None:
        self.fh = fh
        self.limits = limits
        self.read_bytes = 0
        self.out_bytes = 0
        self.note: str | None = None
        self.cut = False
        head = fh.read(2)
        self.read_bytes = len(head)
        self.compressed = head == GZIP_MAGIC
        self._pending = head
        self._d = zlib.decompressobj(31) if self.compressed else None
        self._members = 0

    def _raw_chunk(self) -> bytes:
        if self._pending:
            data, self._pending = self._pending, b""
            return data
        room = self.limits.max_file_bytes - self.read_bytes
        if room <= 0:
            if self.fh.read(1):
                self._stop(f"file longer than the limit of {self.limits.max_file_bytes} bytes "
                           "([ingest] max_file_bytes); the rest was not read", cut=True)
            return b""
        data = self.fh.read(min(READ_CHUNK, room))
        self.read_bytes += len(data)
        return data

    def _stop(self, note: str, cut: bool) -> None:
        if self.note is None:
            self.note = note
        self.cut = self.cut or cut

    def chunks(self) -> Iterator[bytes]:
        if not self.compressed:
            while True:
                data = self._raw_chunk()
                if not data:
                    return
                self.out_bytes += len(data)
                yield data
                if self.note:
                    return
        yield from self._gunzip()

    def _gunzip(self) -> Iterator[bytes]:
        lim = self.limits
        d = self._d
        tail = b""
        while True:
            data = tail or self._raw_chunk()
            tail = b""
            if not data:
                if self.note is None and (not d.eof or self._members == 0):
                    self._stop("truncated or corrupt compressed stream (EOFError: compressed "
                               "file ended before the end-of-stream marker was reached)", cut=True)
                return
            while data:
                try:
                    out = d.decompress(data, READ_CHUNK)
                except zlib.error as exc:
                    self._stop(f"truncated or corrupt compressed stream (zlib.error: {exc})", cut=True)
                    return
                data = d.unconsumed_tail
                if out:
                    self.out_bytes += len(out)
                    yield out
                    if self.out_bytes > lim.max_decompressed_bytes:
                        self._stop(f"gzip stream expands beyond the limit of {lim.max_decompressed_bytes} "
                                   "bytes ([ingest] max_decompressed_bytes); the rest was not read", cut=True)
                        return
                    if (self.out_bytes > RATIO_FLOOR
                            and self.out_bytes > lim.max_compression_ratio * max(self.read_bytes, 1)):
                        self._stop(f"gzip stream expands more than {lim.max_compression_ratio} times "
                                   "([ingest] max_compression_ratio): a decompression bomb? the rest "
                                   "was not read", cut=True)
                        return
                if d.eof:
                    self._members += 1
                    rest = d.unused_data
                    while len(rest) < 2:
                        more = self._raw_chunk()
                        if not more:
                            break
                        rest += more
                    if not rest or not rest.strip(b"\x00"):
                        if rest:  # zero padding after the last member: allowed by gzip
                            self._drain_zero_padding()
                        return
                    if rest[:2] != GZIP_MAGIC:
                        self._stop(f"junk after the last gzip member ignored "
                                   f"(starting {rest[:16]!r})", cut=False)
                        return
                    d = self._d = zlib.decompressobj(31)
                    tail = rest
                    break

    def _drain_zero_padding(self) -> None:
        while True:
            more = self._raw_chunk()
            if not more:
                return
            if more.strip(b"\x00"):
                self._stop("junk after the last gzip member ignored", cut=False)
                return


def _lines(chunks) -> Iterator[bytes]:
    """Lines with their ends; a line longer than MAX_LINE comes in pieces (the last piece
    of a line is the one that ends with a newline, or the end of the data)."""
    buf = b""
    for chunk in chunks:
        buf = buf + chunk if buf else chunk
        start = 0
        while True:
            nl = buf.find(b"\n", start, start + MAX_LINE)
            if nl < 0:
                if len(buf) - start >= MAX_LINE:
                    yield buf[start:start + MAX_LINE]
                    start += MAX_LINE
                    continue
                break
            yield buf[start:nl + 1]
            start = nl + 1
        buf = buf[start:]
    if buf:
        yield buf


class _Message:
    """One message being collected: whole while it is within ``max_message_bytes``, then only
    a prefix (``quarantine_prefix_bytes``) and the running sha256 and size of the whole."""

    def __init__(self, limits: IngestLimits) -> None:
        self.limits = limits
        self.parts: list[bytes] = []
        self.size = 0
        self.hash = None
        self.prefix = b""
        self.problems: list[str] = []

    def add(self, data: bytes) -> None:
        self.size += len(data)
        if self.hash is None:
            self.parts.append(data)
            if self.size > self.limits.max_message_bytes:
                whole = b"".join(self.parts)
                self.parts = []
                self.hash = hashlib.sha256(whole)
                self.prefix = whole[:self.limits.quarantine_prefix_bytes]
        else:
            self.hash.update(data)
            room = self.limits.quarantine_prefix_bytes - len(self.prefix)
            if room > 0:
                self.prefix += data[:room]

    def __bool__(self) -> bool:
        return self.size > 0

    def item(self, origin: str, reject: str | None = None, strip_blank: bool = False) -> RawItem:
        if self.hash is not None:
            reason = (f"message too large: {self.size} bytes > limit {self.limits.max_message_bytes} "
                      "([ingest] max_message_bytes)")
            if reject:
                reason += f"; {reject}"
            return RawItem(self.prefix, origin, reason, self.problems, self.hash.hexdigest(), self.size)
        data = b"".join(self.parts)
        if strip_blank:
            data = _strip_trailing_blank(data)
        return RawItem(data, origin, reject, self.problems)


def _split_mbox(chunks, stream: _Stream, origin: str, limits: IngestLimits) -> Iterator[RawItem]:
    """Stream an mbox.  A message starts at a ``From `` line at the start of the file, or after
    a blank line when the next line is a header line; ``>From `` escapes are undone one level
    (mboxrd; exact for mboxrd, the common reading for mboxo).  A ``From `` line after a blank
    line that is not followed by a header line is a body line that the writer did not escape
    (mboxo): it stays in the body and the message notes it."""
    current = _Message(limits)
    count = 0
    prev_blank = True
    in_headers = False
    at_start = True  # of a line (not inside a long line's pieces)
    pending: bytes | None = None  # a candidate separator, decided by the line after it
    first = True

    def feed(line: bytes) -> None:
        nonlocal prev_blank, in_headers
        if in_headers and line in (b"\n", b"\r\n"):
            in_headers = False
        elif not in_headers and ESCAPED_FROM.match(line):
            line = line[1:]
        current.add(line)
        prev_blank = line in (b"\n", b"\r\n")

    for line in _lines(chunks):
        line_start = at_start
        at_start = line.endswith(b"\n")
        if pending is not None:
            candidate, pending = pending, None
            if HEADER_LINE.match(line):
                if current:
                    count += 1
                    yield current.item(f"{origin}#{count}", strip_blank=True)
                current = _Message(limits)
                prev_blank, in_headers = False, True
            else:
                current.problems.append("mbox: a body line starting with 'From ' was not escaped "
                                        "(mboxo); kept in the body, not split there")
                feed(candidate)
        if line_start and (first or prev_blank) and line.startswith(b"From ") \
                and FROM_LINE.match(line.rstrip(b"\r\n")):
            if first:
                first = False
                prev_blank, in_headers = False, True
                continue
            pending = line
            continue
        first = False
        feed(line)
    if pending is not None:
        current.problems.append("mbox: a body line starting with 'From ' was not escaped (mboxo); "
                                "kept in the body")
        feed(pending)
    if stream.cut:
        reason = stream.note or "input cut"
        if count == 0 and not current:
            return  # nothing read: read_file quarantines the file itself
        count += 1
        yield current.item(f"{origin}#{count}", reject=f"{reason}; message incomplete")
        return
    if current:
        count += 1
        yield current.item(f"{origin}#{count}", strip_blank=True)


def _strip_trailing_blank(data: bytes) -> bytes:
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


def _kind(mode: int) -> str | None:
    """None for a regular file, else what it is."""
    if stat.S_ISREG(mode):
        return None
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _open_regular(path: Path):
    """Open ``path`` for reading if it is a regular file (following symlinks); never blocks on
    a FIFO or opens a device for reading.  Raises InputWarning for what is not a regular file,
    InputError when it cannot be opened."""
    shown = shown_path(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise InputError(f"{shown}: cannot open: {exc.strerror or exc}") from None
    kind = _kind(st.st_mode)
    if kind:
        raise InputWarning(f"{shown}: skipped, {kind}")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise InputError(f"{shown}: cannot open: {exc.strerror or exc}") from None
    kind = _kind(os.fstat(fd).st_mode)  # replaced since the stat: check what was opened
    if kind:
        os.close(fd)
        raise InputWarning(f"{shown}: skipped, {kind}")
    return os.fdopen(fd, "rb", buffering=0)


def read_file(path: Path, limits: IngestLimits = DEFAULT_LIMITS) -> Iterator[RawItem | InputWarning]:
    """Every message of one file (an mbox, or one message), then an InputWarning when the
    stream was cut or had junk after its end.  A file with nothing readable in it is yielded
    as one item to quarantine (a prefix of its bytes and their sha256)."""
    origin = f"file:{shown_path(path)}"
    fh = _open_regular(path)
    got = False
    with fh:
        try:
            stream = _Stream(fh, limits)
            chunks = stream.chunks()
            head: list[bytes] = []
            while sum(map(len, head)) < 5:
                chunk = next(chunks, None)
                if chunk is None:
                    break
                head.append(chunk)
            replay = itertools.chain(head, chunks)
            if b"".join(head).startswith(b"From "):
                for item in _split_mbox(replay, stream, origin, limits):
                    got = True
                    yield item
            else:
                msg = _Message(limits)
                for chunk in replay:
                    msg.add(chunk)
                got = bool(msg) or not stream.compressed
                if got:
                    reject = f"{stream.note}; message incomplete" if stream.cut else None
                    yield msg.item(origin, reject=reject)
        except OSError as exc:
            raise InputError(f"{shown_path(path)}: cannot read: {exc.strerror or exc}") from None
    if not got:
        reason = stream.note if stream.note else "empty gzip stream"
        yield _whole_file(path, origin, limits, f"no message could be read: {reason}")
    elif stream.note:
        yield InputWarning(f"{shown_path(path)}: {stream.note}")


def _whole_file(path: Path, origin: str, limits: IngestLimits, reason: str) -> RawItem:
    """The file's own bytes, to quarantine: a prefix, and the sha256 and size of it all (up to
    max_file_bytes)."""
    h = hashlib.sha256()
    prefix = b""
    size = 0
    try:
        with _open_regular(path) as fh:
            while size < limits.max_file_bytes:
                data = fh.read(min(READ_CHUNK, limits.max_file_bytes - size))
                if not data:
                    break
                h.update(data)
                size += len(data)
                if len(prefix) < limits.quarantine_prefix_bytes:
                    prefix += data[:limits.quarantine_prefix_bytes - len(prefix)]
    except InputError:
        pass
    return RawItem(prefix, origin, reason, [], h.hexdigest(), size)


def is_maildir(path: Path) -> bool:
    return (path / "cur").is_dir() and (path / "new").is_dir()


def iter_paths(paths: list[str], limits: IngestLimits = DEFAULT_LIMITS) -> Iterator[RawItem | InputError]:
    """Every message in the given files / directories, in a stable order.  An input that
    cannot be read is yielded as an InputError and the walk goes on; something skipped or cut
    on the way (a FIFO met in a directory, junk after gzip data) as an InputWarning."""
    for p in paths:
        path = Path(p)
        if not os.path.lexists(path):
            yield InputError(f"{shown_path(p)}: no such file or directory")
        elif path.is_dir():
            yield from _walk(path, limits)
        else:
            yield from _guarded(path, limits, explicit=True)


def _guarded(path: Path, limits: IngestLimits, explicit: bool = False) -> Iterator[RawItem | InputError]:
    try:
        yield from read_file(path, limits)
    except InputWarning as exc:
        yield exc if not explicit else InputError(str(exc))
    except InputError as exc:
        yield exc


def _walk(root: Path, limits: IngestLimits) -> Iterator[RawItem | InputError]:
    if is_maildir(root):
        for sub in ("cur", "new"):
            for name in sorted(os.listdir(root / sub)):
                if not name.startswith("."):
                    yield from _guarded(root / sub / name, limits)
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        here = Path(dirpath)
        if is_maildir(here) and here != root:
            dirnames[:] = []
            yield from _walk(here, limits)
            continue
        for name in sorted(filenames):
            if name.startswith(".") or Path(name).suffix.lower() in SKIP_SUFFIXES:
                continue
            yield from _guarded(here / name, limits)
