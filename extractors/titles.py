"""Commit titles as written next to a commit id ("abc123 ("mm: fix foo")", a git log block).

Pure functions over the clean text of a message.
"""

from __future__ import annotations

import re

from . import scan

_TITLE_STOP = re.compile(r"(?i)^(?:which|the|and|see|aka|upstream|i\.e|e\.g|HEAD|commit|from|in|on|for)\b")
_HEX_ONLY = re.compile(r"[0-9a-f]{7,40}")
_T_PAREN_QUOTED = re.compile(r"\s*\(\s*[\"“](.+?)[\"”]\s*\)", re.S)
_T_QUOTED = re.compile(r"\s*[\"“](.+?)[\"”]", re.S)
_T_PAREN = re.compile(r"\s*\(((?:[^()]|\([^()]*\))+)\)", re.S)
_T_SAME_LINE = re.compile(r"\]?[ \t]+([^\n]+)((?:\n[a-z][^\n:#$]{0,80}(?=\n\n|\n?$))?)")
_T_BLOCK = re.compile(r"[^\n]*\n(?:[#\s]*(?:Merge|Author|AuthorDate|Commit|CommitDate|Date):[^\n]*\n){1,5}[#\s]*\n?[#\s]*"
                      r"([^\n]+(?:\n[ \t#]*[a-z][^\n]{0,60}(?=\n[ \t#]*\n))?)")


TITLE_PREFIXED = re.compile(r"^[A-Za-z0-9_.,+/ -]{1,48}?:\s+\S")


def _clean_title(t: str) -> str | None:
    t = " ".join(t.replace("\n#", " ").split()).strip(" .,;")
    t = t.lstrip("# ").strip()
    if not t or len(t) < 8 or len(t) > 160:
        return None
    if _TITLE_STOP.match(t):
        return None
    if _HEX_ONLY.fullmatch(t):
        return None
    return t


def title_after(clean: str, pos: int) -> str | None:
    """Commit title written right after a commit id ending at clean offset ``pos``."""
    tail = clean[pos:pos + 400]
    m = _T_PAREN_QUOTED.match(tail)
    if m:
        return _clean_title(m.group(1))
    m = _T_QUOTED.match(tail)
    if m:
        return _clean_title(m.group(1))
    m = _T_PAREN.match(tail)
    if m and TITLE_PREFIXED.match(" ".join(m.group(1).split())):
        return _clean_title(m.group(1))
    m = _T_SAME_LINE.match(tail)
    if m and TITLE_PREFIXED.match(m.group(1).strip()):
        return _clean_title(m.group(1) + (" " + m.group(2).strip() if m.group(2) else ""))
    # commit block: "commit <id>\nAuthor: ..\nDate: ..\n\n    title"
    m = _T_BLOCK.match(tail)
    if m:
        return _clean_title(m.group(1))
    return None


def block_title_after(clean: str, pos: int) -> str | None:
    """Title of an Author:/Date: block starting at or after ``pos`` (for "this patch:" cues)."""
    tail = clean[pos:pos + 500]
    m = re.match(r"\s*(?:commit[^\n]*\n)?(?:[#\s]*(?:Author|Date|AuthorDate|Commit|CommitDate):[^\n]*\n){1,5}"
                 r"[#\s]*\n?[#\s]*([^\n]+)", tail)
    return _clean_title(m.group(1)) if m else None


# a commit title in quotes: "subsys: what it does"
_QUOTED_TITLE = re.compile(r"[\"\u201c]((?:[\w.-]+(?:/[\w.-]+)*): [^\"\u201d\n]{4,200})[\"\u201d]")


def in_quoted_title(text: str, pos: int) -> bool:
    """Is ``pos`` inside a quoted commit title on its line?"""
    ls = text.rfind("\n", 0, pos) + 1
    le = text.find("\n", pos)
    line = text[ls:le if le >= 0 else len(text)]
    return any(q.start(1) <= pos - ls < q.end(1) for q in _QUOTED_TITLE.finditer(line))


_THIS_PATCH = re.compile(r"\b(?:caused by|introduced by|bisected to|first bad commit is)\s+(?:this|the following|"
                         r"below|the below)\s+(?:patch|commit)\s*:?\s*$", re.I)


def anonymous_block_title(ex) -> str | None:
    """Title of an Author:/Date: block announced by "caused by this patch:"."""
    mt_low = ex.mt.low
    for u in ex.mt.units:
        if scan.may_match(_THIS_PATCH, u.text, mt_low[u.cstart:u.cend]) and _THIS_PATCH.search(u.text):
            t = block_title_after(ex.clean, u.cend)
            if t:
                return t
    return None
