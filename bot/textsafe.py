"""Mail-derived text made inert for terminals and pages (one helper, used by every output path).

* :func:`visible` -- control characters (C0 but newline and tab, DEL, C1), escape sequences
  (their ESC), bidi embeddings/overrides/isolates (U+202A-202E, U+2066-2069), the bidi marks
  U+200E/U+200F/U+061C and the line/paragraph separators U+2028/U+2029 are written out as
  ``\\x1b`` / ``\\u202e`` text, so a subject cannot retitle the window, clear the screen, hide a
  hyperlink or reorder what is shown.  ``\\r`` is shown as ``\\r`` (it would overwrite a line).
* :func:`neutralise_bidi` -- the bidi characters alone (for HTML and the feed, where the other
  controls are already removed or escaped).
* :class:`SafeStream` -- wraps ``sys.stdout`` / ``sys.stderr`` of the CLI: everything written
  as text passes :func:`visible` (``.buffer`` stays raw, for ``show --raw``).
* :class:`SafeConsole` -- a rich Console whose text segments pass :func:`visible` while rich's
  own styling codes are kept; it writes to the unwrapped stream.
"""

from __future__ import annotations

import re
from typing import Any

BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029" + BIDI + "]")
_BIDI = re.compile("[" + BIDI + "]")


def _show(m: re.Match) -> str:
    c = m.group(0)
    o = ord(c)
    if c == "\r":
        return "\\r"
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def visible(text: Any) -> str:
    """``text`` with every terminal-active or bidi character written out (newline and tab kept)."""
    s = "" if text is None else str(text)
    return _UNSAFE.sub(_show, s)


def neutralise_bidi(text: str) -> str:
    """Bidi embeddings, overrides, isolates and marks written out as ``\\u202e`` text."""
    return _BIDI.sub(_show, text)


def json_text(text: str) -> str:
    """JSON text (from ``json.dumps(..., ensure_ascii=False)``) with the characters :func:`visible`
    would show written as JSON ``\\uXXXX`` escapes instead: still the same JSON, inert on a terminal."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


class SafeStream:
    """A text stream whose writes pass :func:`visible`; anything else is the wrapped stream's."""

    def __init__(self, raw) -> None:
        self._raw = raw

    @property
    def raw_stream(self):
        return self._raw

    def write(self, s):
        if isinstance(s, str):
            return self._raw.write(visible(s))
        return self._raw.write(s)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        return getattr(self._raw, name)


def unwrap(stream):
    return stream.raw_stream if isinstance(stream, SafeStream) else stream


def install() -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` (once)."""
    import sys

    if not isinstance(sys.stdout, SafeStream):
        sys.stdout = SafeStream(sys.stdout)
    if not isinstance(sys.stderr, SafeStream):
        sys.stderr = SafeStream(sys.stderr)


def console(stderr: bool = False):
    """A rich console for mail-derived text (see :class:`SafeConsole`)."""
    import sys

    from rich.console import Console
    from rich.segment import Segment

    class SafeConsole(Console):
        def _render_buffer(self, buffer):
            return super()._render_buffer(
                s if s.control else Segment(visible(s.text), s.style, s.control) for s in buffer)

    # emoji=False: no ":name:" in any printed string becomes an emoji (and rich._emoji_codes is
    # not loaded: start-up)
    return SafeConsole(file=unwrap(sys.stderr if stderr else sys.stdout), highlight=False, emoji=False)
