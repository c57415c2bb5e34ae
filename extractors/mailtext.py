"""Mail-aware segmentation: lines, quote depth, sentence-like units, and a "clean" text.

The body is cut into *segments* (a line, or a piece of a flattened one-line archive copy),
each with its quote depth (number of ``>`` markers) and the body offset of its content.
The contents are joined with ``\\n`` into one *clean* text (quote markers removed) with an
offset map back to the body, so regexes can run on clean text and still give body spans.

Segments are then grouped into *units*: a prose paragraph is split into sentences, while
structured lines (tables, key: value lines, logs, bisect logs, diffs, cpuinfo dumps) are one
unit each.  Pure Python, no spaCy: the spaCy components in ``pipeline`` call into this.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from .patterns import WORD_GUARDS
from .scan import find_all, fold, is_word_char, match_at, search

QUOTE_PREFIX = re.compile(r"^((?:[ \t]{0,3}>)+)[ \t]?")
FLAT_QUOTE = re.compile(r"(?<=\s)((?:>[ \t]?)+)(?=\S)")
SIG_LINE = re.compile(r"^--\s?$")
SENT_SPLIT = re.compile(r"(?<=[a-z0-9)\]\"'%*][.!?])\s+(?=[A-Z\"(\[])|(?<=[.!?])\s*\n(?=[A-Z])")
ABBREV = re.compile(r"(?:\b(?:e\.g|i\.e|vs|etc|approx|cf|Mr|Dr|No|resp|incl|Fig)\.)$", re.I)

# line shapes that make a line "structured" (a unit on its own)
STRUCT_START = re.compile(
    r"""^(?:\#|\$\s|\[\s*\d+\.\d+\]|\[\s*[0-9a-f]{7,40}\]|diff\s|---|\+\+\+|@@|index\s[0-9a-f]|
    commit[\s:]|Author:|Date:|Signed-off-by:|Reported-by:|Acked-by:|Reviewed-by:|Tested-by:|Fixes:|
    Cc:|Link:|Closes:|=+\s*$|-{3,}|_{3,}|\*{3,}|\|)""", re.X)
KEY_VALUE = re.compile(r"^[A-Za-z][\w ()/.#+-]{0,34}?\s?[:=]\s*\S")
BULLET = re.compile(r"^(?:[-*+•]\s+|\d{1,2}[.)/]\s+|[a-z][.)]\s+|\(\d{1,2}\)\s+)")
_DIGIT = re.compile(r"\d")
_GAP = re.compile(r"\S\s{2,}\S")
_WORD_RUN = re.compile(r"\w+")
NUMTOK = re.compile(r"^[([]?[-+~]?\d[\d.,:%x/]*[)\]]?%?$")
_NUMTOK_MATCH = NUMTOK.match


_NOT_SCANNED = object()


@dataclass
class Segment:
    cstart: int   # start in clean text
    bstart: int   # start in body
    length: int
    depth: int
    structured: bool = False
    blank: bool = False


@dataclass
class Unit:
    cstart: int
    cend: int
    depth: int
    structured: bool
    text: str  # clean text of the unit (quote markers removed, newlines kept)
    index: int = 0


class MailText:
    """Segmented view of one mail body."""

    def __init__(self, body: str, max_chars: int = 200_000):
        self.body = body if len(body) <= max_chars else body[:max_chars]
        self.segments: list[Segment] = []
        self._build_segments()
        self.clean = self._clean_text
        self._cstarts = [s.cstart for s in self.segments]
        self.units: list[Unit] = []
        self._build_units()
        self._ustarts = [u.cstart for u in self.units]
        self._low: str | None = None
        self._scans: dict = {}
        self.memo: dict = {}  # per-message results shared by the pipeline stages

    # -- scans of the clean text (each pattern runs at most once per message) ----------------
    @property
    def low(self) -> str:
        """``scan.fold`` of the clean text (for the substring guards)."""
        if self._low is None:
            self._low = fold(self.clean)
        return self._low

    def finditer(self, rx: re.Pattern) -> list:
        """``list(rx.finditer(self.clean))``, computed once (do not modify the list)."""
        out = self._scans.get(rx)  # (a lookup, not a raised KeyError, for each first scan)
        if out is not None:
            return out
        wg = WORD_GUARDS.get(rx)
        if wg is not None:
            out = self._word_scan(rx, wg)
        else:
            out = find_all(rx, self.clean, self.low)
        self._scans[rx] = out
        return out

    def _word_scan(self, rx: re.Pattern, first_words: frozenset) -> list:
        """``list(rx.finditer(clean))`` for a ``patterns.WORD_GUARDS`` pattern: every match starts
        a word in ``first_words`` and ends before a non-word character, so it starts where a run
        of word characters (``\\w+``) is that word; the pattern is only tried there, in text order,
        resuming after each match as ``finditer`` does (these patterns never match empty)."""
        low, clean = self.low, self.clean
        runs = self.memo.get("word_runs")
        if runs is None:
            runs = self.memo["word_runs"] = frozenset(_WORD_RUN.findall(low))
        present = first_words & runs
        if not present:
            return []
        starts = set()
        n = len(low)
        for w in present:
            k = len(w)
            i = low.find(w)
            while i >= 0:
                j = i + k
                if not (i and is_word_char(low[i - 1])) and not (j < n and is_word_char(low[j])):
                    starts.add(i)
                i = low.find(w, j)
        return match_at(rx, clean, starts)

    def search(self, rx: re.Pattern):
        """``rx.search(self.clean)`` (the first match of ``finditer``)."""
        ms = self._scans.get(rx)
        if ms is not None:
            return ms[0] if ms else None
        key = (rx, "search")
        m = self._scans.get(key, _NOT_SCANNED)
        if m is not _NOT_SCANNED:
            return m
        m = search(rx, self.clean, self.low)
        self._scans[key] = m
        return m

    # -- segments ------------------------------------------------------------------------
    def _build_segments(self) -> None:
        body = self.body
        parts: list[str] = []
        cpos = 0
        pos = 0
        sig_cut = False
        for raw in body.splitlines(keepends=True):
            line = raw.rstrip("\r\n")
            lstart = pos
            pos += len(raw)
            if sig_cut:
                break  # nothing after the signature is kept
            m = QUOTE_PREFIX.match(line) if ">" in line else None
            depth, off = (m.group(1).count(">"), m.end()) if m else (0, 0)
            content = line[off:]
            if depth == 0 and content.startswith("--") and SIG_LINE.match(content):
                sig_cut = True  # signature / list footer of the author's own text
                continue
            pieces = [(depth, off, content)]
            if len(content) > 300 and len(FLAT_QUOTE.findall(content)) >= 2:
                pieces = self._split_flat(depth, off, content)
            for d, o, text in pieces:
                stripped = text.rstrip()
                seg = Segment(cpos, lstart + o, len(stripped), d)
                seg.blank = not stripped.strip()
                seg.structured = (not seg.blank) and is_structured(stripped)
                self.segments.append(seg)
                parts.append(stripped)
                cpos += len(stripped) + 1
        self._clean_text = "\n".join(parts)

    @staticmethod
    def _split_flat(depth: int, off: int, content: str) -> list[tuple[int, int, str]]:
        out = []
        last = 0
        cur_depth = depth
        for m in FLAT_QUOTE.finditer(content):
            out.append((cur_depth, off + last, content[last:m.start()]))
            cur_depth = depth + m.group(1).count(">")
            last = m.end()
        out.append((cur_depth, off + last, content[last:]))
        return [p for p in out if p[2].strip()]

    # -- units ---------------------------------------------------------------------------
    def _build_units(self) -> None:
        segs = self.segments
        clean = self.clean
        i = 0
        n = len(segs)
        while i < n:
            s = segs[i]
            if s.blank:
                i += 1
                continue
            if s.structured:
                self._add_unit(s.cstart, s.cstart + s.length, s.depth, True)
                i += 1
                continue
            # prose paragraph: following prose lines at the same depth
            j = i + 1
            while j < n:
                t = segs[j]
                if t.blank or t.structured or t.depth != s.depth:
                    break
                prev_text = clean[segs[j - 1].cstart:segs[j - 1].cstart + segs[j - 1].length]
                if prev_text.rstrip().endswith(":"):
                    break
                if BULLET.match(clean[t.cstart:t.cstart + t.length]):
                    break
                j += 1
            start, end = s.cstart, segs[j - 1].cstart + segs[j - 1].length
            self._split_sentences(start, end, s.depth)
            i = j

    def _split_sentences(self, start: int, end: int, depth: int) -> None:
        text = self.clean[start:end]
        last = 0
        for m in SENT_SPLIT.finditer(text):
            if ABBREV.search(text[max(0, m.start() - 8):m.start()]):
                continue
            if m.start() - last < 2:
                continue
            self._add_unit(start + last, start + m.start(), depth, False)
            last = m.end()
        if last < len(text):
            self._add_unit(start + last, end, depth, False)

    def _add_unit(self, cstart: int, cend: int, depth: int, structured: bool) -> None:
        text = self.clean[cstart:cend]
        if not text.strip():
            return
        self.units.append(Unit(cstart, cend, depth, structured, text, len(self.units)))

    # -- mapping -------------------------------------------------------------------------
    def to_body(self, cpos: int) -> int:
        """Body offset of clean offset ``cpos``."""
        i = bisect_right(self._cstarts, cpos) - 1
        if i < 0:
            return 0
        s = self.segments[i]
        return s.bstart + min(cpos - s.cstart, s.length)

    def span_to_body(self, cstart: int, cend: int) -> tuple[int, int]:
        return self.to_body(cstart), self.to_body(max(cstart, cend - 1)) + 1 if cend > cstart else self.to_body(cstart)

    def depth_at(self, cpos: int) -> int:
        i = bisect_right(self._cstarts, cpos) - 1
        return self.segments[i].depth if i >= 0 else 0

    def unit_at(self, cpos: int) -> Unit | None:
        i = bisect_right(self._ustarts, cpos) - 1
        if i < 0:
            return None
        u = self.units[i]
        return u if cpos <= u.cend else None

    def sentence_of(self, cpos: int) -> str:
        u = self.unit_at(cpos)
        if u is None:
            return ""
        return " ".join(u.text.split())


def is_structured(line: str) -> bool:
    s = line.strip()
    if not s:
        return False
    if STRUCT_START.match(s):
        return True
    if line[:1] in (" ", "\t") and len(line) - len(line.lstrip()) >= 4 and not s[:1].isalpha():
        return True
    toks = s.split()
    if len(toks) >= 2 and _DIGIT.search(s):  # (a number token holds a digit)
        nums = len(list(filter(_NUMTOK_MATCH, toks)))
        if nums >= 2 and nums * 2 >= len(toks):
            return True
        if nums >= 3:
            return True
    if KEY_VALUE.match(s) and len(s) < 160 and not s.endswith((".", ",")):
        return True
    if "  " in s and len(_GAP.findall(s)) >= 2:
        return True
    if s.endswith((";", "{", "}")) or s.startswith(("}", "#include", "#define", "static ", "struct ")):
        return True
    return False
