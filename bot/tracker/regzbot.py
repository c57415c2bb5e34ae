"""``#regzbot`` commands in mail bodies (pure: no I/O).

Syntax and meaning follow regzbot's docs/reference.md (the kernel's regression tracker by
Thorsten Leemhuis):

* a command starts a line (leading blanks tolerated) with ``#regzbot`` (any case), then the
  command word, an optional colon, and the parameters: ``#regzbot introduced: v6.1..v6.2``,
  ``#regzbot introduced v6.1..v6.2`` and ``#REGZBOT Introduced:  v6.1..v6.2`` are the same;
* several commands may be in one mail, and several on one line separated by ``; #regzbot``;
* only unquoted text counts: lines starting with ``>`` (quoted replies) are skipped, and so is
  everything after the signature separator ``-- ``;
* one command per line: a wrapped continuation line is not joined (write the command on one
  line, as regzbot's docs ask: separated from the rest of the mail by blank lines).

Aliases regzbot itself accepts are mapped to the canonical names (``^introduced`` ->
``introduced`` with pointer ``^``; ``subject``/``summary`` -> ``title``; ``dupof``/
``duplicate-of`` -> ``dup-of``; ``fixed-by``/``fixedby`` -> ``fix``; ``resolved``/``invalid``
-> ``resolve``; ``related`` -> ``monitor``; ``unrelated`` -> ``unmonitor``; ``back-burner``/
``backburn`` -> ``backburner``; ``activity-ignore`` -> ``ignore-activity``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

COMMANDS = ("introduced", "title", "dup-of", "dup", "fix", "resolve", "inconclusive", "link", "unlink",
            "monitor", "unmonitor", "backburner", "unbackburn", "ignore-activity", "poke")

ALIASES = {
    "^introduced": "introduced", "introduced^": "introduced",
    "subject": "title", "summary": "title",
    "dupof": "dup-of", "duplicate-of": "dup-of", "duplicateof": "dup-of",
    "duplicate": "dup",
    "fixed-by": "fix", "fixedby": "fix", "fixed": "fix",
    "resolved": "resolve", "invalid": "resolve",
    "related": "monitor", "relate": "monitor",
    "unrelated": "unmonitor", "unrelate": "unmonitor",
    "back-burner": "backburner", "backburn": "backburner",
    "unback-burner": "unbackburn", "unbackburner": "unbackburn", "un-backburn": "unbackburn",
    "activity-ignore": "ignore-activity", "ignoreactivity": "ignore-activity",
}

_START = re.compile(r"^[ \t]*#regzbot\b", re.I)
_SPLIT = re.compile(r";\s*(?=#regzbot\b)", re.I)
_CMD = re.compile(r"#regzbot[ \t]+([\^\w-]+\^?)[ \t]*(:)?[ \t]*(.*)$", re.I | re.S)
_HEX = re.compile(r"[0-9a-f]{7,40}")
_REF = re.compile(r"[\w.^~+-]{1,128}")


@dataclass(frozen=True)
class RegzbotCommand:
    name: str  # canonical command name (see COMMANDS), or the word as written when unknown
    args: str  # parameters as written (stripped)
    line_no: int  # 1-based line of the body the command is on
    seq: int  # 0 for the first command on its line, 1 for the next after "; #regzbot", ...
    raw: str  # the command text as written
    known: bool = True

    # -- typed views of the parameters -------------------------------------------------------
    @property
    def introduced(self) -> "Introduced | None":
        return parse_introduced(self.args) if self.name == "introduced" else None

    @property
    def pointer(self) -> str | None:
        """``^``, a URL, or None: where the report is (``introduced`` only)."""
        if self.name != "introduced":
            return None
        if self.raw.lower().lstrip().startswith(("#regzbot ^introduced", "#regzbot introduced^")):
            return "^"
        intro = self.introduced
        return intro.pointer if intro else None

    @property
    def url(self) -> str | None:
        """First parameter of link/unlink/monitor/unmonitor/dup/dup-of."""
        parts = self.args.split(maxsplit=1)
        return parts[0].strip("<>") if parts else None

    @property
    def link_title(self) -> str | None:
        parts = self.args.split(maxsplit=1)
        return parts[1].strip() if len(parts) > 1 else None

    @property
    def fix(self) -> tuple[str | None, str | None]:
        """(commit id, subject) of a ``fix`` command; either may be None."""
        return parse_fix(self.args)


@dataclass(frozen=True)
class Introduced:
    culprit: str | None  # a commit id (7..40 hex, lower case)
    good: str | None
    bad: str | None
    pointer: str | None  # "^", a URL, or None


def parse_introduced(args: str) -> Introduced | None:
    """``<commit-id|range> [^|url]``.  A range is ``good..bad`` (``...`` tolerated); a single
    non-hex value (a tag such as ``v6.8-rc1``) is the first bad version."""
    parts = args.split()
    if not parts:
        return None
    spec, pointer = parts[0].strip(",;"), None
    for extra in parts[1:2]:
        if extra in ("^", "/", "~") or extra.lower().startswith(("http://", "https://")):
            pointer = extra
    if spec in ("^",):  # "#regzbot introduced: ^ v6.1..v6.2" is not valid regzbot; be lenient
        return None
    if ".." in spec:
        good, _, bad = spec.partition("...") if "..." in spec else spec.partition("..")
        good, bad = good.strip(), bad.strip()
        if not (_REF.fullmatch(good) and _REF.fullmatch(bad)):
            return None
        return Introduced(None, _norm_ref(good), _norm_ref(bad), pointer)
    if _HEX.fullmatch(spec.lower()):
        return Introduced(spec.lower(), None, None, pointer)
    if _REF.fullmatch(spec):
        return Introduced(None, None, spec, pointer)
    return None


def _norm_ref(ref: str) -> str:
    return ref.lower() if _HEX.fullmatch(ref.lower()) else ref


def parse_fix(args: str) -> tuple[str | None, str | None]:
    m = re.match(r"([0-9a-fA-F]{7,40})\b\s*(.*)$", args.strip(), re.S)
    if m:
        subject = _unquote_subject(m.group(2)) or None
        return m.group(1).lower(), subject
    subject = _unquote_subject(args.strip())
    return None, subject or None


def _unquote_subject(s: str) -> str:
    s = s.strip()
    for a, b in (("(", ")"), ('"', '"'), ("'", "'")):
        if len(s) >= 2 and s.startswith(a) and s.endswith(b):
            s = s[1:-1].strip()
    return s


def _strip_signature(lines: list[str]) -> int:
    for i, line in enumerate(lines):
        if line.rstrip("\r") == "-- ":
            return i
    return len(lines)


def parse_commands(body: str | None) -> list[RegzbotCommand]:
    """Every ``#regzbot`` command in the unquoted text of a mail body, in order."""
    if not body or "#regzbot" not in body.lower():
        return []
    lines = body.split("\n")
    out: list[RegzbotCommand] = []
    for idx in range(_strip_signature(lines)):
        line = lines[idx].rstrip("\r")
        if not _START.match(line):
            continue
        for seq, piece in enumerate(_SPLIT.split(line.strip())):
            piece = piece.strip()
            m = _CMD.match(piece)
            if m is None:
                continue
            word = m.group(1).lower()
            name = ALIASES.get(word, word)
            args = m.group(3).strip()
            out.append(RegzbotCommand(name, args, idx + 1, seq, piece, name in COMMANDS))
    # regzbot processes "introduced" first within a mail (it may create the record the others
    # act on); keep the written order otherwise
    return sorted(out, key=lambda c: (c.name != "introduced",))
