"""Entities of a message: the commit ids and kernel versions it mentions, and version order.

``find_commits`` / ``find_versions`` find them in any text (the subject or the clean body);
``clean_commits`` / ``clean_versions`` find them once per message (the entity stage and the
rule stages share the result).  Pure functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import patterns as P
from . import scan
from .mailtext import MailText

I = re.I

_ANY_DIGIT = re.compile(r"\d")
_ANY_AF = re.compile(r"[a-f]")
_NUM_TOKEN = re.compile(r"^[-+]?\d[\d.,%]*$")
_VKEY_NUMS = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?(?:\.(\d+))?")
_VKEY_RC = re.compile(r"-rc(\d+)")


@dataclass
class Mention:
    kind: str          # commit | version
    text: str          # as written
    value: str         # normalised value (hex for commits)
    cstart: int        # clean offsets; -1 for the subject
    cend: int
    depth: int = 0
    in_subject: bool = False
    unit: int = -1


WRAPPED_SHA = re.compile(r"(?<![\w/.-])([0-9a-f]{1,39})[ \t]*\n[ \t]*([0-9a-f]{1,39})(?![\w-])")


def find_commits(text: str, base: int = 0, in_subject: bool = False) -> list[Mention]:
    out: list[Mention] = []
    taken: list[tuple[int, int]] = []
    for m in scan.find_all(P.DESCRIBE, text):
        out.append(Mention("commit", m.group(2), m.group(2).lower(), base + m.start(2), base + m.end(2),
                           in_subject=in_subject))
        out[-1].describe = m.group(1)  # type: ignore[attr-defined]
        taken.append((m.start(), m.end()))
    for m in WRAPPED_SHA.finditer(text):
        # a full 40-char id cut in two by hard wrapping ("633\n260fa...")
        h = m.group(1) + m.group(2)
        if len(h) != 40 or not (_ANY_DIGIT.search(h) and _ANY_AF.search(h)):
            continue
        if any(a <= m.start(1) < b for a, b in taken):
            continue
        out.append(Mention("commit", h, h.lower(), base + m.start(1), base + m.end(2), in_subject=in_subject))
        taken.append((m.start(1), m.end(2)))
    for m in P.HEX_ID.finditer(text):
        h = m.group(1)
        if any(a <= m.start(1) < b for a, b in taken):
            continue
        if not (_ANY_DIGIT.search(h) and _ANY_AF.search(h)):
            continue
        out.append(Mention("commit", h, h.lower(), base + m.start(1), base + m.end(1), in_subject=in_subject))
    for m in P.HEX_UNDERSCORE.finditer(text):
        h = m.group(1)
        if _ANY_DIGIT.search(h) and _ANY_AF.search(h):
            out.append(Mention("commit", h, h.lower(), base + m.start(1), base + m.end(1), in_subject=in_subject))
    return out


UNIT_AFTER = re.compile(r"^\s*(?:%|x\b|[KMGT]i?B\b|[KMGT]b(?:ps|it)|[GM]bps|MB/s|GB/s|ms\b|us\b|s\b|secs?\b|"
                        r"seconds|GHz|MHz|W\b|V\b|times|fps|ops|vs\.?\s*\d|[-+]?\d)", I)
NUM_BEFORE = re.compile(r"(?:\d|\bvs\.?|\bx|=)\s*$", I)
KERNEL_CTX = re.compile(r"\b(?:kernels?|linux|release|version|upgrad\w*|bisect\w*|stable|mainline|rc\d|"
                        r"tree|series|LK|regress\w*|since)\b", I)


def find_versions(text: str, base: int = 0, in_subject: bool = False, allow_weak: bool = False) -> list[Mention]:
    out: list[Mention] = []
    for m in scan.find_all(P.VERSION, text):
        v = m.group(0)
        s, e = m.start(), m.end()
        strong = v.startswith("v") or v.startswith("next-") or "-rc" in v or v.count(".") >= 2 or "-git" in v
        before = text[max(0, s - 25):s]
        after = text[e:e + 12]
        if P.TOOL_BEFORE.search(before):
            continue
        if not strong:
            if UNIT_AFTER.match(after) or NUM_BEFORE.search(before):
                continue
        line_start = text.rfind("\n", 0, s) + 1
        line_end = text.find("\n", e)
        line = text[line_start:line_end if line_end >= 0 else len(text)]
        toks = line.split()
        if len(toks) >= 4 and not text[line_start:s].strip() == "":
            nums = sum(1 for t in toks if _NUM_TOKEN.match(t))
            if nums * 2 > len(toks) and not strong:
                continue
        mm = Mention("version", v, v, base + s, base + e, in_subject=in_subject)
        mm.strong = strong or bool(KERNEL_CTX.search(text[max(0, s - 30):e + 30]))  # type: ignore[attr-defined]
        out.append(mm)
    for m in scan.find_all(P.BARE_RC, text):
        mm = Mention("version", m.group(1), m.group(1), base + m.start(1), base + m.end(1), in_subject=in_subject)
        mm.strong = True  # type: ignore[attr-defined]
        out.append(mm)
    if allow_weak or any(getattr(x, "strong", False) for x in out):
        return out
    return [x for x in out if getattr(x, "strong", False)]


def clean_commits(mt: MailText) -> list[Mention]:
    """``find_commits(mt.clean)``, found once per message (the entity and rule stages share it)."""
    r = mt.memo.get("commits")
    if r is None:
        r = mt.memo["commits"] = find_commits(mt.clean)
    return list(r)


def clean_versions(mt: MailText) -> list[Mention]:
    """``find_versions(mt.clean)``, found once per message."""
    r = mt.memo.get("versions")
    if r is None:
        r = mt.memo["versions"] = find_versions(mt.clean)
    return list(r)


def version_key(v: str, base: tuple | None = None):
    s = v.lower().lstrip("v")
    if s.startswith("next-"):
        return ("next", (int(s[5:]),), 0, 0)
    m = _VKEY_NUMS.match(s)
    rc = _VKEY_RC.search(s)
    rcn = int(rc.group(1)) if rc else 999
    git = 1 if ("-git" in s or s.endswith("+") or "-next" in s) else 0
    if m:
        return ("rel", tuple(int(x or 0) for x in m.groups()), rcn, git)
    if rc:
        return ("rel", base or (999, 999, 999, 999), rcn, git)
    return None


def vcmp(a, b) -> int | None:
    if a is None or b is None or a[0] != b[0]:
        return None
    ta, tb = a[1:], b[1:]
    return (ta > tb) - (ta < tb)


# cue patterns with a \b(?=\w) check in front (scan.word_led: same matches, faster scans)
KERNEL_CTX = scan.word_led(KERNEL_CTX)
