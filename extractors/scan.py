"""Fast scanning helpers: the results of ``re`` scans, computed without scanning where no match can be.

Python's regex engine tries most of the patterns of ``patterns`` at every offset of the text
(they open with \\b or a look-behind, or are case-insensitive alternations), which costs
~0.1-0.4 ms per scan of a mail.  Most patterns can only match where one of a few literal strings
occurs, and a substring test (``in``) is far cheaper than the scan.  ``literal_guard`` derives,
from the parsed pattern, a set of strings one of which every match must contain; ``may_match``
skips the scan when none of them is in the text; ``find_all`` / ``search`` try a match only
where one of its literal prefixes is written; ``word_led`` puts a \\b(?=\\w) check in front of
a pattern whose every match starts a word.  The result of a scan is never changed, only scans
that cannot match are left out.
"""

from __future__ import annotations

import heapq
import re
import re._constants as _C
import re._parser as _rp

_MAX_SET = 64
_MAX_GUARD = 24
# the only non-ASCII characters that match an ASCII letter under re.IGNORECASE
# (İ ı ſ K: Python's unicode case folding / re._casefix)
_FOLD_SPECIAL = (("\u0130", "i"), ("\u0131", "i"), ("\u017f", "s"), ("\u212a", "k"))


def fold(text: str) -> str:
    """Lower-cased text in which every ASCII literal matched case-insensitively by ``re`` is
    found lower-cased (used for the substring guards of re.I patterns)."""
    if not text.isascii():
        for a, b in _FOLD_SPECIAL:
            if a in text:
                text = text.replace(a, b)
    return text.lower()


def is_word_char(ch: str) -> bool:
    """``re``'s ``\\w`` for one character of a str (alphanumeric or ``_``)."""
    return ch.isalnum() or ch == "_"


def _best(cands):
    best = None
    for c in cands:
        if not c or "" in c:
            continue
        n = min(len(s) for s in c)
        key = (min(n, 4), -len(c), n)  # selective enough (4+ characters), then fewest strings
        if best is None or key > best[0]:
            best = (key, c)
    return best[1] if best else None


def _node(op, av, icase):
    """(exact, req): exact = the set of strings this node can consume (None if unknown/large);
    req = a set of non-empty strings one of which every consumed text contains (or None)."""
    C = _C
    if op is C.LITERAL:
        ch = chr(av)
        if icase:
            if not ch.isascii():
                return None, None
            ch = ch.lower()
        return frozenset((ch,)), frozenset((ch,))
    if op is C.IN:
        chars = set()
        for iop, iav in av:
            if iop is C.LITERAL:
                chars.add(chr(iav))
            elif iop is C.RANGE and iav[1] - iav[0] < 16:
                chars.update(chr(x) for x in range(iav[0], iav[1] + 1))
            else:
                return None, None
        if icase:
            if not all(c.isascii() for c in chars):
                return None, None
            chars = {c.lower() for c in chars}
        fs = frozenset(chars)
        return fs, fs
    if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
        return frozenset(("",)), None
    if op is C.SUBPATTERN:
        _group, add, dele, sub = av
        if (add | dele) & C.SRE_FLAG_IGNORECASE:
            return None, None
        return _seq(sub, icase)
    if op is C.ATOMIC_GROUP:
        return _seq(av, icase)
    if op is C.BRANCH:
        exact: set | None = set()
        req: set | None = set()
        for alt in av[1]:
            ex, rq = _seq(alt, icase)
            if exact is not None:
                if ex is None:
                    exact = None
                else:
                    exact |= ex
                    if len(exact) > _MAX_SET:
                        exact = None
            need = _best([rq, ex])
            if req is not None:
                req = None if need is None else req | need
        return (frozenset(exact) if exact is not None else None), (frozenset(req) if req else None)
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        lo, hi, sub = av
        ex, rq = _seq(sub, icase)
        if lo == 0:
            if hi == 1 and ex is not None:
                return ex | {""}, None
            return None, None
        need = _best([rq, ex])
        if lo == hi == 1:
            return ex, need
        return None, need
    return None, None


def _seq(items, icase):
    cur = {""}
    seq_exact = True   # every item so far exact and the product small
    cands = []
    for op, av in items:
        ex, rq = _node(op, av, icase)
        if ex is not None:
            cands.append(frozenset(cur))  # a prefix of a run is consumed contiguously too
            new = {a + b for a in cur for b in ex}
            if len(new) <= _MAX_SET:
                cur = new
                continue
            cands.append(frozenset(cur))
            cur = set(ex)
            seq_exact = False
            if rq:
                cands.append(rq)
            continue
        seq_exact = False
        cands.append(frozenset(cur))
        cur = {""}
        if rq:
            cands.append(rq)
    cands.append(frozenset(cur))
    return (frozenset(cur) if seq_exact else None), _best(cands)


def _simplify(req: frozenset) -> frozenset:
    """Fewer strings for the same test: a string may be replaced by any part of it (a text
    holding the string holds the part), so parts of 4-10 characters shared by many strings
    stand in for them (greedy, deterministic)."""
    left = set(req)
    out: set = set()
    while left:
        counts: dict = {}
        for s in left:
            if len(s) <= 4:
                subs = {s}
            else:
                subs = {s[i:i + k] for k in range(4, min(len(s), 10) + 1) for i in range(len(s) - k + 1)}
            for x in subs:
                counts[x] = counts.get(x, 0) + 1
        best = max(counts, key=lambda x: (counts[x], len(x), x))
        out.add(best)
        left = {s for s in left if best not in s}
    return frozenset(out) if len(out) < len(req) else req


def literal_guard(rx: re.Pattern):
    """(icase, strings) such that every match of ``rx`` contains one of ``strings`` (compare
    with ``fold(text)`` when icase), or None when no such set is known."""
    try:
        parsed = _rp.parse(rx.pattern, rx.flags)
    except Exception:  # pragma: no cover - bytes patterns etc.
        return None
    if not isinstance(rx.pattern, str):
        return None
    icase = bool(parsed.state.flags & _C.SRE_FLAG_IGNORECASE)
    _ex, req = _seq(list(parsed), icase)
    if req:
        req = _simplify(req)
    if not req or len(req) > _MAX_GUARD:
        return None  # none known, or testing for it would cost about as much as the scan
    return icase, tuple(sorted(req, key=lambda s: (-len(s), s)))


_GUARDS: dict = {}


def may_match(rx: re.Pattern, text: str, low: str | None = None) -> bool:
    """False only when ``rx`` cannot match anywhere in ``text`` (``low`` = ``fold(text)``)."""
    try:
        g = _GUARDS[rx]
    except KeyError:
        g = _GUARDS[rx] = literal_guard(rx)
    if g is None:
        return True
    icase, strs = g
    if icase:
        t = fold(text) if low is None else low
    else:
        t = text
    for s in strs:
        if s in t:
            return True
    return False


def _first_chars(items):
    """(chars, nullable) for a parsed sequence: the characters a match can start with (a set of
    single characters and the marker "\\w"), None when unknown; nullable when it can be empty."""
    C = _C
    out: set = set()
    for op, av in items:
        if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            continue
        if op is C.LITERAL:
            return out | {chr(av)}, False
        if op is C.IN:
            for iop, iav in av:
                if iop is C.LITERAL:
                    out.add(chr(iav))
                elif iop is C.RANGE:
                    out.update(chr(x) for x in range(iav[0], iav[1] + 1))
                elif iop is C.CATEGORY and iav in (C.CATEGORY_DIGIT, C.CATEGORY_WORD):
                    out.add("\\w")
                else:
                    return None, False
            return out, False
        if op is C.SUBPATTERN:
            f, n = _first_chars(av[3])
        elif op is C.ATOMIC_GROUP:
            f, n = _first_chars(av)
        elif op is C.BRANCH:
            f, n = set(), False
            for alt in av[1]:
                ff, nn = _first_chars(alt)
                if ff is None:
                    return None, False
                f |= ff
                n = n or nn
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            f, n = _first_chars(av[2])
            n = n or av[0] == 0
        else:
            return None, False
        if f is None:
            return None, False
        out |= f
        if not n:
            return out, False
    return out, True


_WORDCHAR = re.compile(r"\w")


def word_led(rx: re.Pattern) -> re.Pattern:
    """``rx`` with a ``\\b(?=\\w)`` check in front when every match of it starts with a word
    character (checked on the parsed pattern): the same matches, but the engine gives up at
    once at the end of every word instead of trying each alternative there.  Returns ``rx``
    itself when that cannot be shown."""
    try:
        parsed = _rp.parse(rx.pattern, rx.flags)
    except Exception:  # pragma: no cover
        return rx
    if rx.flags & re.VERBOSE or not isinstance(rx.pattern, str) or (rx.pattern.startswith("(?")
                                                                    and rx.pattern[2:3].isalpha()):
        return rx
    items = list(parsed)
    if not items or items[0] != (_C.AT, _C.AT_BOUNDARY):
        return rx  # only where the pattern itself opens with \b
    chars, nullable = _first_chars(items)
    if chars is None or nullable or not all(c == "\\w" or _WORDCHAR.match(c) for c in chars):
        return rx
    return re.compile(r"\b(?=\w)(?:" + rx.pattern + ")", rx.flags)



def _cap(prefixes):
    """A prefix set of at most _MAX_SET strings: a match starting with a string also starts with
    any beginning of it, so long sets are cut to their first 4 characters."""
    if prefixes is None or len(prefixes) <= _MAX_SET:
        return prefixes
    cut = {p[:4] for p in prefixes}
    return cut if len(cut) <= _MAX_SET else None


def _prefixes(items, icase):
    """A set of non-empty strings one of which every match of the sequence starts with (None
    when unknown)."""
    C = _C
    acc = {""}
    for k, (op, av) in enumerate(items):
        if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            continue
        ex, _rq = _node(op, av, icase)
        if ex is not None:
            new = {a + b for a in acc for b in ex}
            if len(new) > _MAX_SET:
                break
            acc = new
            continue
        sub = None
        if op is C.SUBPATTERN and (icase or not (av[1] | av[2]) & C.SRE_FLAG_IGNORECASE):
            # (compared with fold(text), a part matched case-sensitively is found lower-cased too)
            sub = _prefixes(av[3], icase)
        elif op is C.ATOMIC_GROUP:
            sub = _prefixes(av, icase)
        elif op is C.BRANCH:
            sub = set()
            for alt in av[1]:
                p = _prefixes(alt, icase)
                if p is None:
                    sub = None
                    break
                sub |= p
            sub = _cap(sub)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT) and av[0] >= 1:
            sub = _prefixes(av[2], icase)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            # optional: a match starts with the repeated part or with what follows it
            sub = _prefixes(av[2], icase)
            rest = _prefixes(items[k + 1:], icase) if sub is not None else None
            sub = None if rest is None else _cap(sub | rest)
        if sub is not None:
            new = _cap({a + b for a in acc for b in sub})
            if new is not None:
                acc = new
        break
    if not acc or "" in acc:
        return None
    return acc


def literal_prefixes(rx: re.Pattern):
    """(icase, strings): every match of ``rx`` starts with one of ``strings`` (compare with
    ``fold(text)`` when icase), None when that cannot be shown."""
    if not isinstance(rx.pattern, str):
        return None
    try:
        parsed = _rp.parse(rx.pattern, rx.flags)
    except Exception:  # pragma: no cover
        return None
    icase = bool(parsed.state.flags & _C.SRE_FLAG_IGNORECASE)
    p = _prefixes(list(parsed), icase)
    if p is None and not icase and "(?" in rx.pattern:
        # a case-insensitive group, e.g. (?i:...): the lower-cased prefixes, looked for in
        # fold(text), find every place where a match starts (and maybe a few more)
        icase = True
        p = _prefixes(list(parsed), icase)
    if p is None:
        return None
    # drop strings that extend another one (finding the shorter finds them too)
    keep = sorted(p, key=len)
    out: list = []
    for s in keep:
        if not any(s.startswith(o) for o in out):
            out.append(s)
    return icase, tuple(out)


def scan_at(rx: re.Pattern, text: str, low: str, prefixes) -> list:
    """``list(rx.finditer(text))`` for a pattern whose every (non-empty) match starts with one
    of ``prefixes`` (``literal_prefixes``): the pattern is only tried where one occurs, in text
    order, resuming after each match as ``finditer`` does."""
    icase, strs = prefixes
    t = low if icase else text
    starts = set()
    find = t.find
    for s in strs:
        i = find(s)
        while i >= 0:
            starts.add(i)
            i = find(s, i + 1)
    return match_at(rx, text, starts)


def match_at(rx: re.Pattern, text: str, starts) -> list:
    """``rx.match`` tried at the given start positions in text order, resuming after each
    match, as ``finditer`` does."""
    out = []
    end = 0
    match = rx.match
    for p in sorted(starts):
        if p < end:
            continue
        m = match(text, p)
        if m is not None:
            out.append(m)
            end = m.end()
    return out


_SCAN_PLANS: dict = {}


def scan_plan(rx: re.Pattern):
    """The ``literal_prefixes`` used by ``find_all`` (None: a full scan)."""
    try:
        return _SCAN_PLANS[rx]
    except KeyError:
        pass
    pf = literal_prefixes(rx)
    if pf is not None and len(pf[1]) > 40:
        # many prefixes: their beginnings (a match starting with a string starts with its first
        # k characters too), the longest k that gives at most 40 strings of 4 or more characters
        for k in range(8, 3, -1):
            cut = sorted({x[:k] for x in pf[1]}, key=len)
            out: list = []
            for x in cut:
                if not any(x.startswith(o) for o in out):
                    out.append(x)
            if len(out) <= 40 and min(len(x) for x in out) >= 4:
                pf = (pf[0], tuple(out))
                break
    if pf is not None and (min(len(x) for x in pf[1]) < 2 or len(pf[1]) > 40):
        pf = None  # single characters (hex digits ...) occur everywhere: the plain scan is faster
    _SCAN_PLANS[rx] = pf
    return pf


_SCOUTS: dict = {}
# what the lower-casing of a scout cannot keep: inline flags, characters written as codes
# (\\x41, \\u0041, \\N{...}, octal), a range from an upper-case letter to another character
_NO_SCOUT = re.compile(r"\(\?[aiLmsux-]|\\[xuUN0-7]|[A-Z]-[^A-Z\]]|[^A-Z\\\[]-[A-Z]")


def scout(rx: re.Pattern):
    """For a case-insensitive (Unicode) pattern written in ASCII: the same pattern, case-sensitive and
    lower-cased (escapes kept), to run on ``fold(text)``, or None.  Where ``rx`` matches
    ``text``, the scout matches ``fold(text)`` at the same place with the same end (``fold``
    keeps lengths, lowers every character that matches an ASCII letter case-insensitively and
    keeps what ``\\w``, ``\\s``, ``\\d`` and ``\\b`` see); the engine runs case-sensitive
    alternatives several times faster (it skips one on its first character)."""
    try:
        return _SCOUTS[rx]
    except KeyError:
        pass
    sc = None
    p = rx.pattern
    if (isinstance(p, str) and rx.flags & re.IGNORECASE and not rx.flags & re.ASCII and p.isascii()
            and not _NO_SCOUT.search(p)):  # (under re.ASCII, "\u212a" is no word character but its fold is)
        out = []
        i = 0
        while i < len(p):
            if p[i] == "\\" or p.startswith("(?P", i):
                # an escape (\\S, \\W, \\B, \\D, \\A, \\Z) or a named group's "(?P" as written
                out.append(p[i:i + (2 if p[i] == "\\" else 3)])
                i += 2 if p[i] == "\\" else 3
            else:
                out.append(p[i].lower())
                i += 1
        try:
            sc = re.compile("".join(out), rx.flags & ~re.IGNORECASE)
        except re.error:  # pragma: no cover
            sc = None
    _SCOUTS[rx] = sc
    return sc


def _scouted(rx: re.Pattern, sc: re.Pattern, text: str, low: str) -> list:
    """``list(rx.finditer(text))`` from the scout's matches on ``low``: each is matched again by
    ``rx`` at its start, and must end where the scout's does (else: the full scan)."""
    out = []
    match = rx.match
    for s in sc.finditer(low):
        m = match(text, s.start())
        if m is None or m.end() != s.end():
            return list(rx.finditer(text))
        out.append(m)
    return out


def find_all(rx: re.Pattern, text: str, low: str | None = None) -> list:
    """``list(rx.finditer(text))`` (``low`` = ``fold(text)`` if known), computed the cheapest
    known way: at the places where a match can start (``literal_prefixes``), else a full scan
    unless a string every match contains is missing (``may_match``); a case-insensitive full
    scan is made by its ``scout`` on ``low``."""
    pf = scan_plan(rx)
    if pf is not None:
        if pf[0] and low is None:
            low = fold(text)
        return scan_at(rx, text, low, pf)
    if not may_match(rx, text, low):
        return []
    sc = scout(rx)
    if sc is None:
        return list(rx.finditer(text))
    return _scouted(rx, sc, text, fold(text) if low is None else low)


def search(rx: re.Pattern, text: str, low: str | None = None):
    """``rx.search(text)`` computed like ``find_all``: the places where a match can start are
    tried in text order (the next occurrence of each prefix kept in a heap)."""
    pf = scan_plan(rx)
    if pf is None:
        if not may_match(rx, text, low):
            return None
        sc = scout(rx)
        if sc is None:
            return rx.search(text)
        s = sc.search(fold(text) if low is None else low)
        if s is None:
            return None
        m = rx.match(text, s.start())
        return m if m is not None and m.end() == s.end() else rx.search(text)
    icase, strs = pf
    if icase and low is None:
        low = fold(text)
    t = low if icase else text
    heap = []
    for s in strs:
        i = t.find(s)
        if i >= 0:
            heap.append((i, s))
    heapq.heapify(heap)
    last = -1
    match = rx.match
    while heap:
        i, s = heap[0]
        if i != last:
            m = match(text, i)
            if m is not None:
                return m
            last = i
        j = t.find(s, i + 1)
        if j >= 0:
            heapq.heapreplace(heap, (j, s))
        else:
            heapq.heappop(heap)
    return None


def iter_matches(rx: re.Pattern, text: str, low: str, endpos: int):
    """``rx.finditer(text, 0, endpos)`` (``low`` = ``fold(text)``), lazily: where ``scan_plan``
    knows the prefixes a match starts with, ``rx`` is only tried where one is written."""
    pf = scan_plan(rx)
    if pf is None:
        yield from rx.finditer(text, 0, endpos)
        return
    icase, strs = pf
    t = low if icase else text
    find = t.find
    starts = set()
    for s in strs:
        i = find(s, 0, endpos)
        while i >= 0:
            starts.add(i)
            i = find(s, i + 1, endpos)
    end = 0
    match = rx.match
    for p in sorted(starts):
        if p < end:
            continue
        m = match(text, p, endpos)
        if m is not None:
            yield m
            end = m.end()
