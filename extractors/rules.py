"""Rule-based scorers: from a segmented mail (``MailText``) to a ``Claim``.

The spaCy components in ``pipeline`` run these in stages; every function here is pure.
Decisions are made from cue phrases around entities (commit ids, versions, numbers), the
subject line, quote depth and the overall shape of the message (patch, pull, robot report).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from . import patterns as P
from .claim import Claim, Fact
from . import numbers as NUM_T
from .mailtext import MailText
from .patterns import fold, may_match

I = re.I

# ------------------------------------------------------------------------------ entities


_ANY_DIGIT = re.compile(r"\d")
_ANY_AF = re.compile(r"[a-f]")
_NUM_TOKEN = re.compile(r"^[-+]?\d[\d.,%]*$")
_VKEY_NUMS = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?(?:\.(\d+))?")
_VKEY_RC = re.compile(r"-rc(\d+)")
_TITLE_STOP = re.compile(r"(?i)^(?:which|the|and|see|aka|upstream|i\.e|e\.g|HEAD|commit|from|in|on|for)\b")
_HEX_ONLY = re.compile(r"[0-9a-f]{7,40}")
_T_PAREN_QUOTED = re.compile(r"\s*\(\s*[\"“](.+?)[\"”]\s*\)", re.S)
_T_QUOTED = re.compile(r"\s*[\"“](.+?)[\"”]", re.S)
_T_PAREN = re.compile(r"\s*\(((?:[^()]|\([^()]*\))+)\)", re.S)
_T_SAME_LINE = re.compile(r"\]?[ \t]+([^\n]+)((?:\n[a-z][^\n:#$]{0,80}(?=\n\n|\n?$))?)")
_T_BLOCK = re.compile(r"[^\n]*\n(?:[#\s]*(?:Merge|Author|AuthorDate|Commit|CommitDate|Date):[^\n]*\n){1,5}[#\s]*\n?[#\s]*"
                      r"([^\n]+(?:\n[ \t#]*[a-z][^\n]{0,60}(?=\n[ \t#]*\n))?)")
_REVERT = re.compile(r"\brevert", I)
_REVERT_W = re.compile(r"\brevert\w*", I)


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


@dataclass
class CommitGroup:
    hex: str
    mentions: list[Mention] = field(default_factory=list)
    score: float = 0.0
    role: str = "other"
    subject: str | None = None
    first: int = 10**9
    best_evidence: tuple[int, int] | None = None  # clean span of the deciding cue
    cues: set = field(default_factory=set)  # which cue patterns fired around its mentions


WRAPPED_SHA = re.compile(r"(?<![\w/.-])([0-9a-f]{1,39})[ \t]*\n[ \t]*([0-9a-f]{1,39})(?![\w-])")


def find_commits(text: str, base: int = 0, in_subject: bool = False) -> list[Mention]:
    out: list[Mention] = []
    taken: list[tuple[int, int]] = []
    for m in P.find_all(P.DESCRIBE, text):
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
    for m in P.find_all(P.VERSION, text):
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
    for m in P.find_all(P.BARE_RC, text):
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


# ---------------------------------------------------------------------------- titles

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


# ------------------------------------------------------------------------------ hardware lines

LKP_DISK = re.compile(r"^\s*disk:\s*(\d+(?:HDD|SSD|NVMe|BRD\w*|pmem\w*)\b)", re.M | I)
LKP_MEM_BLOCK = re.compile(r"^\s*Memory\s*:?\s*\n\s*Total\s*:\s*(\d+(?:\.\d+)?\s?[KMGT]i?B)\b", re.M | I)
MEM_LINE = re.compile(r"^\s*(?:Mem(?:ory)?|RAM|MemTotal|System memory|Total memory)\s*:\s*(?:Total:?\s*)?"
                      r"(\d+(?:\.\d+)?\s?(?:[KMGT]i?B|[KMGT]|kB))\b", re.M | I)
_CPU_BAD_AFTER = re.compile(r"\b(?:does not|doesn't|fails?|not boot|broken|crash|hangs?|problem)\b", I)
_ARCH_TITLE_PREFIX = re.compile(r"/[\w-]+:")
_ARCH_NEG = re.compile(r"\b(?:not|doesn't|does not|unaffected|only on|fine on|works on)\b", I)
_ARCH_NEG2 = re.compile(r"\breproduc|affect|fine|work", I)
_MEM_MACHINE_LINE = re.compile(r"^(?:Hardware|System|Machine|Platform|Server|Test machine|Setup)\b[^\n]*?,\s*(\d+\s?[GT]i?B)\b",
                               re.M | I)
_FS_CTX = re.compile(r"mkfs\.|mount\s+-t|file\s?systems?|\bfs\b|\bon\s+\w*$|\(ro,|testcase|fs:", I)
_TESTCASE = re.compile(r"(?:testcase|Benchmark|test tools? (?:is|are)|benchmarks? (?:is|are)|tools?)\s*[:\-]?\s*"
                       r"([\w+.-]+)", I)
_AND_OR = re.compile(r"\s+(?:and|or|,)")
_WEAK_AFTER1 = re.compile(r"\s+(?:if=|of=|bs=|-\w)")
_WEAK_BEFORE1 = re.compile(r"[\"'(]$")
_WEAK_AFTER2 = re.compile(r"[\"']")
_WEAK_BEFORE2 = re.compile(r"\b(?:the|a|simple|run|running|parallel|with|using)\s+$", I)
_WEAK_AFTER3 = re.compile(r"\s+(?:performance|test|process|throughput|benchmark|run)", I)
_LOOP_DONE = re.compile(r"\s*;\s*done\b.*$")
_CMD_OPT = re.compile(r"\s-{1,2}\w|\b\w+=\S")
_MAKE_J = re.compile(r"\s-j")
_CFG_CODE = re.compile(r"\s*[+\-@]|\s*#\s*(?:if|ifdef|ifndef|endif|define)|.*\bIS_ENABLED\(")
_CFG_SUGGEST = re.compile(r"\b(?:suggest\w*|try|could you|can you|maybe|perhaps|should|instead|alternatively|"
                          r"would|if you)\b", I)
MEM_SETTING = re.compile(r"(?<![\w-])((?:QEMU_|VM_|GUEST_)?MEM(?:ORY)?(?:_(?:MB|GB|SIZE))?=\d+[KMGT]?)\b")
# a commit title in quotes: "subsys: what it does"
_QUOTED_TITLE = re.compile(r"[\"\u201c]((?:[\w.-]+(?:/[\w.-]+)*): [^\"\u201d\n]{4,200})[\"\u201d]")


def _in_quoted_title(text: str, pos: int) -> bool:
    """Is ``pos`` inside a quoted commit title on its line?"""
    ls = text.rfind("\n", 0, pos) + 1
    le = text.find("\n", pos)
    line = text[ls:le if le >= 0 else len(text)]
    return any(q.start(1) <= pos - ls < q.end(1) for q in _QUOTED_TITLE.finditer(line))


# ------------------------------------------------------------------------------ culprits

FILL = r"(?:\s|[:\-\[(\"',=#*]|\b(?:the|this|that|a|an|below|following|above|upstream|first|bad|commit|patch|" \
       r"change|sha1?|id|it|is|was|as|to|git|tree|of|one|mainline|problem|issue|regression|kernel)\b)*$"
CUL_BEFORE: list[tuple[re.Pattern, float, str]] = [
    (re.compile(r"first bad commit(?:\s+is)?" + FILL, I), 6, "culprit"),
    (re.compile(r"regzbot\s+introduced\s*:?" + FILL, I), 6, "culprit"),
    (re.compile(r"\bbisect\w*\b[^.\n]{0,60}?\b(?:to|at|down|blames?|points?|identified|found|located|gives?|says|"
                r"shows?|reveals?|ends? (?:up )?(?:at|with)|came up with|result\w*(?: in)?)" + FILL, I), 5, "culprit"),
    (re.compile(r"\b(?:caused|introduced|triggered|broken|regressed|exposed)\s+(?:by|with|in)" + FILL, I), 5,
     "culprit"),
    (re.compile(r"\bculprit(?:\s+is)?" + FILL, I), 5, "culprit"),
    (re.compile(r"\broot[-\s]?cause\b[^.]{0,90}?(?:change|commit|patch)?\s*(?:from\s+[^.]{0,40})?[\"'(:\s]*$", I), 4, "culprit"),
    (re.compile(r"\bBUILD (?:REGRESSION|SUCCESS)\s*$|\b(?:tested|testing) (?:head|tree|branch)\b[^.\n]{0,20}$"), -4, "head"),
    (re.compile(r"\bblames?" + FILL, I), 5, "culprit"),
    (re.compile(r"\b(?:originat\w+|comes?|came|stems?)\s+from" + FILL, I), 4, "culprit"),
    (re.compile(r"\bcame up with" + FILL, I), 4, "culprit"),
    (re.compile(r"\bcommit in question" + FILL, I), 3, "culprit"),
    (re.compile(r"\bdue to" + FILL, I), 3, "culprit"),
    (re.compile(r"\b(?:after|since|with)\s+(?:applying\s+|merging\s+)?(?:the\s+|this\s+)?(?:commit|patch)\s*[:\-]?\s*$",
                I), 2, "culprit"),
    (re.compile(r"\bstarting (?:at|with|from)" + FILL, I), 2, "culprit"),
    (re.compile(r"\b(?:explained|caused) by" + FILL, I), 3, "culprit"),
    (re.compile(r"\brevert(?:ing|ed|s)?(?:\s+of)?" + FILL, I), 1, "culprit"),
    (re.compile(r"\bFixes:\s*$"), 2, "culprit"),
    (re.compile(r"\b(?:fix(?:ed|es)?|resolved|addressed|cured)\s+(?:by|in|with|via)" + FILL, I), -6, "fix"),
    (re.compile(r"\b(?:upstream|mainline)(?:\s+kernel)?(?:\s+is)?\s+commit\s*$|cherry[- ]picked from commit\s*$|"
                r"\bin the upstream kernel is commit\s*$", I), -5, "upstream"),
    (re.compile(r"\b(?:merge[- ]base|merge commit|Merge (?:tag|branch|commit)|merged (?:at|in))" + FILL, I), -5,
     "merge-base"),
    (re.compile(r"\bparent(?: commit)?(?: is)?" + FILL + r"|\bthe commit (?:below|before) it\s*,?\s*$", I), -5,
     "parent"),
    (re.compile(r"(?:\bHEAD(?: commit)?:?|\btested (?:on|with)|\bsha1?|\bon top of|\b(?:current|latest) -?git)"
                + FILL, I), -4, "head"),
    (re.compile(r"\bstill (?:a |the )?(?:regress\w*|there|present|reproduc\w*|see\w*|bad|broken)\s+(?:on|in|at|with)"
                + FILL, I), -5, "head"),
    (re.compile(r"(?:#\s*)?good:\s*\[?\s*$|git bisect good\s*$", I), -6, "good"),
    (re.compile(r"(?:#\s*)?(?:bad|skip):\s*\[?\s*$|git bisect (?:bad|start|skip)\s*'?$", I), -3, "bad"),
    (re.compile(r"\b(?:hand[- ])?appl(?:ied|ying)" + FILL, I), -2, "other"),
    (re.compile(r"\bcommit message (?:for|of)\s*$|\bread (?:the )?commit" + FILL, I), -2, "other"),
]
CUL_AFTER: list[tuple[re.Pattern, float]] = [
    (re.compile(r"^\W*(?:\(HEAD\)\s*)?is the first bad commit", I), 6),
    # a later verdict that moves the blame: "... so X is likely the real bad commit" (beats the bisect result)
    (re.compile(r"^[\s\"')]*(?:[^.\n\"]{0,60}[\"')]\s*)?(?:is|was)\s+(?:(?:most\s+)?likely|probably|actually|really|"
                r"indeed|clearly|definitely)?\s*the\s+(?:(?:real|actual|true)\s+(?:bad\s+commit|culprit|cause)|"
                r"(?:bad|guilty|offending|breaking)\s+(?:commit|patch|change))\b", I), 7),
    (re.compile(r"^[^.]{0,140}?\b(?:dropped|reduced|degraded|slowed down|halved|lowered|decreased)\s+(?:the\s+)?(?:\w+\s+){0,2}"
                r"(?:speed|performance|throughput|bandwidth|iops|score|rate)\b", I), 4),
    (re.compile(r"^(?:\s*\([^)]*\))?[^.\n]{0,60}?\b(?:caus(?:es|ed)|introduc(?:es|ed)|broke|breaks|triggers|triggered|"
                r"regressed|is the culprit|is to blame)\b[^.]{0,50}?\b(?:regression|problem|issue|breakage|failure|"
                r"slowdown|bug|crash|hang|drop|loss|this|it|boot)", I), 4),
]
IMPROVE_NEAR = re.compile(r"\b(?:improve\w*|speed\w* up|faster|better|greater|gain\w*|optimi[sz]\w*)\b", I)
FIX_AFTER = re.compile(r"\b(?:fix(?:es|ed)?|solves?|solved|resolves?|resolved|restores?|restored|cures?|recovers?|"
                       r"results? in (?:success|a pass)|succeeds|passes|brings? back|"
                       r"go(?:es)? away|works|boots|is fine|helps|returns?|back to normal)\b", I)
BACKREF = re.compile(r"\b(?:this|that|the above|said)\s+(?:patch|commit|change)\b[^.]{0,60}?\b(?:introduc\w+|caus\w+|"
                     r"is the culprit|breaks|broke|regress\w+)", I)
MARKER = re.compile(r"<-+\s*\**\s*(?:this patch|this commit|bad|culprit|first bad|regression)", I)
CUE_DANGLING = re.compile(r"(?:caused by|introduced by|first bad commit|bisect\w*[^.\n]{0,60}|blames?)"
                          r"[^.\n]{0,30}(?:this|following|below|the)\s+(?:patch|commit|change)\s*:?\s*$", I)


# ------------------------------------------------------------------------------ good/bad

GOOD_CUE = re.compile(r"\b(?:ok(?:ay)?|fine|good|works?|worked|boots?(?=\s*(?:[.,;)]|$|and\b|but\b))|last pass|unaffected|not affected|no problems?|(?:the )?problem "
                      r"(?:went|goes|is gone|disappear\w*)(?: away)?|went away|goes away|(?:does|did)(?:n't| not) "
                      r"(?:happen|occur|reproduce|show)|boots? (?:fine|ok|normally|properly)|correct(?:ly)?|"
                      r"last good|baseline|base|stable|as expected|normal(?:ly)?|no issues?)\b", I)
GOOD_LEFT = re.compile(r"\b(?:(?:boots?\s+|runs?\s+)?(?:fine|ok|okay|good|works?|worked|working|normally)\s+(?:with|on|under|in)|"
                       r"working|last good|last pass:?|good|fine|compar\w+ (?:with|to|against)|than(?: on| with| in)?|"
                       r"relative to|baseline|versus|vs\.?|as under|as on|as with|as in)\s+"
                       r"(?:the\s+|a\s+|kernel\s+|linux\s+)*$", I)
BAD_CUE = re.compile(r"\b(?:regress\w*|broken|breaks?|broke|fail\w*|crash\w*|hangs?|hung|hanging|problems?|issues?|"
                     r"bad|slow\w*|oops\w*|panic\w*|errors?|splat\w*|unbootable|(?:does|did)(?:n't| not) boot|not boot|"
                     r"worse|drops?|dropped|decreas\w*|loss|lost|degrad\w*|first present|introduced|symptoms?|"
                     r"bugs?|WARN\w*|no longer|stopped|trouble|takes? \w+ as long|twice as long|"
                     r"(?:took|takes?|taking)\s+(?:\w+\s+){0,2}(?:times\s+)?longer|slower|new failure|"
                     r"unable to boot|(?:lower|higher) (?:iops|throughput|bandwidth|latency)|badly|poorly|"
                     r"(?:compared (?:with|to)|than|relative to) (?:the |all |any )?(?:earlier|older|previous|prior) "
                     r"(?:kernels?|versions?|releases?))\b", I)
BAD_LEFT = re.compile(r"(?:\b(?:regress\w*|broken|fails?|failed|crash\w*|hang\w*|freez\w*|reboots?|problem\w*|issue\w*|slow\w*|error\w*|"
                      r"bug\w*)[^.\n]{0,40}?\b(?:in|on|with|for|since|from|of|by|up to)|\b(?:since|starting (?:with|from)|"
                      r"first present in|present in|introduced in|upgrad\w+ to|moving to|move to|switch\w* to|"
                      r"breaks? (?:in|on|with)|up to))\s+(?:the\s+|a\s+|kernel\s+|linux\s+|version\s+|current\s+)*$", I)
RANGE = re.compile(r"(?:\b(?P<kw>between|from)\s+)?(?P<a>\S+?)\s*(?P<sep>\.\.\.?|->|-->|→|=>|\s+to\s+|\s+and\s+|"
                   r"\s+until\s+|\s+till\s+)\s*(?P<b>\S+)")
HYPOTHETICAL = re.compile(r"\b(?:never|hope|would|will|if i|in case|should i|could)\b", I)
COMPARED = re.compile(r"(?P<bad>\S+)\s+(?:kernel\s+)?(?:compared (?:to|with|against)|against|relative to|versus|than(?: on| with| in)?)"
                      r"\s+(?:the\s+)?(?:kernel\s+)?(?P<good>\S+)", I)


@dataclass
class VersionClaim:
    text: str
    role: str       # good | bad
    tier: int       # 1 bisect/measured range, 2 explicit range, 3 cue, 4 subject
    pos: int
    depth: int
    span: tuple[int, int] | None = None
    weight: float = 1.0


# ------------------------------------------------------------------------------ numbers

THOUSANDS = re.compile(r"(?<![\d.])(\d{1,3}(?:[ ,\u202f]\d{3})+|\d+(?:\.\d+)?)(?![\d])")
STAT_KV = re.compile(r"\b(avg|average|mean|median|stdev|stddev|sd|cv|n|testcnt|valcnt|runs|samples|min|max)=\s*"
                     r"([-+]?\d+(?:\.\d+)?)%?", I)


def parse_num(s: str) -> float:
    return float(re.sub(r"[ ,\u202f]", "", s))


def pct_change(good: float, bad: float) -> float | None:
    if good == 0:
        return None
    return round((bad - good) / abs(good) * 100.0, 1)


# ============================================================================== extractor


class Extractor:
    def __init__(self, subject: str | None, mt: MailText):
        subj = subject or ""
        subj = re.split(r"\((?:was|Was|WAS):|\[(?:was|Was):", subj)[0]
        self.subject = " ".join(subj.split())
        self.mt = mt
        self.clean = mt.clean
        self.claim = Claim()
        self.facts: list[Fact] = []

    # -- facts ---------------------------------------------------------------------------
    def add_fact(self, name: str, value, cspan: tuple[int, int] | None, in_subject: bool = False,
                 sentence: str | None = None) -> None:
        if value is None or value == []:
            return
        if cspan is None or in_subject:
            self.facts.append(Fact(name, value, sentence or ("Subject: " + self.subject), -1, -1, 0))
            return
        cs, ce = cspan
        bs, be = self.mt.to_body(cs), self.mt.to_body(max(cs, ce - 1)) + 1
        sent = sentence if sentence is not None else self.mt.sentence_of(cs)
        self.facts.append(Fact(name, value, sent, bs, be, self.mt.depth_at(cs)))

    # -- entities ------------------------------------------------------------------------
    def collect(self) -> None:
        mt = self.mt
        self.commits = clean_commits(mt) if self.clean is mt.clean else find_commits(self.clean)
        self.subject_commits = find_commits(self.subject, in_subject=True)
        self.versions = clean_versions(mt) if self.clean is mt.clean else find_versions(self.clean)
        self.subject_versions = find_versions(self.subject, in_subject=True,
                                              allow_weak=any(getattr(v, "strong", False) for v in self.versions))
        for m in self.commits + self.versions:
            u = mt.unit_at(m.cstart)
            m.unit = u.index if u else -1
            m.depth = mt.depth_at(m.cstart)
        self.robot_subject = P.ROBOT_SUBJECT.search(self.subject)
        self.is_robot = bool(self.robot_subject) or bool(P.ROBOT_MARK.search(self.clean[:3000])) \
            or bool(mt.search(P.ROBOT_BODY))

    # -- culprit -------------------------------------------------------------------------
    def _unit_text_before(self, m: Mention) -> str:
        u = self.mt.units[m.unit] if m.unit >= 0 else None
        if u is None:
            return self.clean[max(0, m.cstart - 90):m.cstart]
        before = self.clean[u.cstart:m.cstart]
        if len(before.strip(" \t\n-[(#:*")) <= 8 and m.unit > 0:
            prev = self.mt.units[m.unit - 1]
            if m.cstart - prev.cend < 400:
                before = prev.text + "\n" + before
        return before[-110:]

    def _unit_text_after(self, m: Mention) -> str:
        u = self.mt.units[m.unit] if m.unit >= 0 else None
        end = u.cend if u else m.cend + 150
        if u is not None and u.index + 1 < len(self.mt.units):
            end = self.mt.units[u.index + 1].cend
        return self.clean[m.cend:min(end, m.cend + 200)]

    def score_commits(self) -> list[CommitGroup]:
        groups: list[CommitGroup] = []

        def group_for(h: str) -> CommitGroup:
            for g in groups:
                if g.hex.startswith(h) or h.startswith(g.hex):
                    if len(h) > len(g.hex):
                        g.hex = h
                    return g
            g = CommitGroup(h)
            groups.append(g)
            return g

        mentions = sorted(self.subject_commits, key=lambda x: 0) + sorted(self.commits, key=lambda x: x.cstart)
        for m in sorted(mentions, key=lambda x: -len(x.value)):
            group_for(m.value)
        subj_regress = bool(P.REGRESSION_WORD.search(self.subject) or P.FAIL_WORDS.search(self.subject)
                            or re.search(r"\bbisect", self.subject, I))
        for m in mentions:
            g = group_for(m.value)
            g.mentions.append(m)
            pos = m.cstart if not m.in_subject else -1
            g.first = min(g.first, pos if pos >= 0 else -1)
            if m.in_subject:
                before = self.subject[:m.cstart][-100:]
                after = self.subject[m.cend:m.cend + 150]
            else:
                before = self._unit_text_before(m)
                after = self._unit_text_after(m)
            title = title_after(self.subject if m.in_subject else self.clean, m.cend)
            if title and not g.subject:
                g.subject = title
            after_wo_title = after.replace(title, " ") if title else after
            best = 0.0
            role = None
            before_low = fold(before)
            after_low = fold(after_wo_title)
            for i, (rx, w, r) in enumerate(CUL_BEFORE):
                if may_match(rx, before, before_low) and rx.search(before):
                    g.cues.add(f"before{i}")
                    if w > 0 and w > best:
                        best = w
                    elif w < 0:
                        role = r
                        best = min(best, 0) + w if best <= 0 else best + w
            for i, (rx, w) in enumerate(CUL_AFTER):
                if may_match(rx, after_wo_title, after_low) and rx.search(after_wo_title):
                    g.cues.add(f"after{i}")
                    best = max(best, w)
            unit = self.mt.units[m.unit] if m.unit >= 0 else None
            utext = unit.text if unit else (self.subject if m.in_subject else "")
            if _REVERT.search(before + after_wo_title):
                rv = _REVERT_W.search(before + " " + after_wo_title)
                tail = (before + " " + after_wo_title)[rv.end():] if rv else ""
                if FIX_AFTER.search(tail):
                    g.cues.add("revert-fixes")
                    best = max(best, 3) if best >= 0 else best + 3
            if MARKER.search(utext):
                g.cues.add("marker")
                best = max(best, 4)
            ctx = (before[-80:] + " " + after_wo_title[:80])
            if IMPROVE_NEAR.search(ctx) and best < 5:
                g.cues.add("improvement-near")
                best -= 3
                role = role or "improvement"
            if m.in_subject and subj_regress and best >= 0:
                best = max(best, 2) + 1
            if best > 0 and self.robot_subject and m.value.startswith(self.robot_subject.group(1).lower()):
                best = max(best, 5)
            if best > g.score or (g.score <= 0 and best < g.score):
                g.score = best
                if best > 0:
                    g.best_evidence = (m.cstart, m.cend) if not m.in_subject else None
            if role and g.role in ("other",):
                g.role = role
        # robot subject: the commit under test
        if self.robot_subject:
            h = self.robot_subject.group(1).lower()
            g = group_for(h)
            if self.robot_subject.group(4).lower() == "regression":
                g.score = max(g.score, 6)
            else:
                g.role = "improvement"
                g.score = -6
        # back references ("this patch introduces ... regression") and markers
        for u in self.mt.units:
            if BACKREF.search(u.text) and not any(m.unit == u.index for m in self.commits):
                prev = [m for m in self.commits if m.cend <= u.cstart and u.index - m.unit <= 8]
                if prev:
                    g = group_for(prev[-1].value)
                    if g.score >= 0:
                        g.score = max(g.score, 3)
        return groups

    def choose_culprit(self, groups: list[CommitGroup]) -> CommitGroup | None:
        cands = [g for g in groups if g.score >= 3]
        if not cands:
            return None

        def rank(g: CommitGroup):
            tier = 3 if g.score >= 7 else 2 if g.score >= 6 else 1
            return (tier, -g.first)

        return max(cands, key=rank)

    def culprit_written(self, g: CommitGroup) -> str:
        if self.robot_subject and g.hex.startswith(self.robot_subject.group(1).lower()):
            return self.robot_subject.group(1)
        body = [m.text for m in g.mentions if not m.in_subject]
        if body:
            return max(body, key=len)
        return max((m.text for m in g.mentions), key=len)

    # -- good / bad ----------------------------------------------------------------------
    def version_claims(self) -> list[VersionClaim]:
        out: list[VersionClaim] = []
        clean = self.clean
        # regzbot range "introduced A..B" (A good, B first bad; either may be a commit id)
        for m in self.mt.finditer(_REGZBOT_RANGE):
            d = self.mt.depth_at(m.start())
            out.append(VersionClaim(m.group(1), "good", 1, m.start(1), d, (m.start(1), m.end(2))))
            out.append(VersionClaim(m.group(2).rstrip(".,;"), "bad", 1, m.start(2), d, (m.start(1), m.end(2))))
        by_unit: dict[int, list[Mention]] = {}
        for v in self.versions:
            by_unit.setdefault(v.unit, []).append(v)
        for ui, vs in by_unit.items():
            if ui < 0:
                continue
            u = self.mt.units[ui]
            used: set[int] = set()
            is_log = u.structured and _LOG_LINE.match(u.text)
            # ranges
            for a, b in zip(vs, vs[1:]):
                between = clean[a.cend:b.cstart]
                pre = clean[max(u.cstart, a.cstart - 30):a.cstart]
                sep = _RANGE_SEP.fullmatch(between)
                if not sep:
                    continue
                kw = _BETWEEN_FROM.search(pre)
                arrow = _ARROW.search(between)
                if not (kw or arrow):
                    continue
                if kw and kw.group(1).lower() == "between" and "and" not in between:
                    continue
                if "and" in between and not kw:
                    continue
                after_txt = clean[b.cend:b.cend + 45]
                bisect_ctx = _BISECT.search(u.text) and not HYPOTHETICAL.search(u.text)
                if _WENT_AWAY.match(after_txt):
                    out.append(VersionClaim(a.text, "good", 3, a.cstart, a.depth))
                    out.append(VersionClaim(b.text, "good", 3, b.cstart, b.depth))
                elif HYPOTHETICAL.search(u.text) and not kw:
                    pass
                else:
                    tier = 1 if bisect_ctx else 2
                    if kw and kw.group(1).lower() == "between" and vcmp(version_key(a.text), version_key(b.text)) == 1:
                        a, b = b, a  # "between 5.8 and 5.7": the older one is the good end
                    out.append(VersionClaim(a.text, "good", tier, a.cstart, a.depth, (a.cstart, b.cend)))
                    out.append(VersionClaim(b.text, "bad", tier, b.cstart, b.depth, (a.cstart, b.cend)))
                used.add(id(a))
                used.add(id(b))
            if is_log:
                continue
            for v in vs:
                if id(v) in used:
                    continue
                left = clean[max(u.cstart, v.cstart - 70):v.cstart]
                right = clean[v.cend:min(u.cend, v.cend + 70)]
                role = None
                weight = 1.0
                if GOOD_LEFT.search(left):
                    role, weight = "good", 2.0
                elif BAD_LEFT.search(left):
                    role, weight = "bad", 2.0
                else:
                    gd = self._nearest(GOOD_CUE, left, right)
                    bd = self._nearest(BAD_CUE, left, right)
                    if gd is not None and (bd is None or gd <= bd):
                        role = "good"
                    elif bd is not None:
                        role = "bad"
                    elif not u.structured and len(u.text) < 400:
                        has_b, has_g = BAD_CUE.search(u.text), GOOD_CUE.search(u.text)
                        if has_b and not has_g:
                            role, weight = "bad", 0.5
                if role:
                    out.append(VersionClaim(v.text, role, 3, v.cstart, v.depth, None, weight))
        # a window: "after <A>, but before <B>" (A last good, B first bad)
        for m in self.mt.finditer(_AFTER_BEFORE):
            av, bv = find_versions(m.group(1), allow_weak=True), find_versions(m.group(2), allow_weak=True)
            if av and bv and vcmp(version_key(av[0].text), version_key(bv[0].text)) == -1:
                d = self.mt.depth_at(m.start())
                out.append(VersionClaim(av[0].text, "good", 2, m.start(1), d, (m.start(1), m.end(2))))
                out.append(VersionClaim(bv[0].text, "bad", 2, m.start(2), d, (m.start(1), m.end(2))))
        # commit ids marked "(good)" / "(merge, bad)"
        for m in self.mt.finditer(_MARKED_GOOD_BAD):
            out.append(VersionClaim(m.group(1), m.group(2), 2, m.start(1), self.mt.depth_at(m.start())))
        # compared-to forms "on 6.6 compared to 6.5"
        mt_low = self.mt.low
        for u in self.mt.units:
            if not may_match(COMPARED, u.text, mt_low[u.cstart:u.cend]):  # the slice is fold(u.text)
                continue
            for m in COMPARED.finditer(u.text):
                bv = find_versions(m.group("bad"))
                gv = find_versions(m.group("good"))
                if bv and gv and vcmp(version_key(gv[0].text), version_key(bv[0].text)) == -1:
                    out.append(VersionClaim(gv[0].text, "good", 2, u.cstart + m.start("good"), u.depth))
                    out.append(VersionClaim(bv[0].text, "bad", 2, u.cstart + m.start("bad"), u.depth))
        return out

    @staticmethod
    def _nearest(rx: re.Pattern, left: str, right: str) -> int | None:
        best = None
        for m in rx.finditer(left):
            d = len(left) - m.end()
            if d <= 60:
                best = d if best is None else min(best, d)
        m = rx.search(right)
        if m and m.start() <= 60:
            d = m.start()
            best = d if best is None else min(best, d)
        return best

    def subject_version_claims(self) -> list[VersionClaim]:
        out: list[VersionClaim] = []
        vs = self.subject_versions
        s = self.subject
        used = set()
        for a, b in zip(vs, vs[1:]):
            between = s[a.cend:b.cstart]
            if re.fullmatch(r"\s*(?:\.\.\.?|->|-->|→|=>)\s*", between) or (
                    re.fullmatch(r"\s+to\s+", between) and re.search(r"\bfrom\s+$", s[:a.cstart])):
                out.append(VersionClaim(a.text, "good", 1, -1, 0))
                out.append(VersionClaim(b.text, "bad", 1, -1, 0))
                used |= {id(a), id(b)}
            elif re.fullmatch(r"\s+and\s+", between) and re.search(r"\bbetween\s+$", s[:a.cstart]):
                if vcmp(version_key(a.text), version_key(b.text)) == 1:
                    a, b = b, a  # "between 6.8 and 6.7": the older one is the good end
                out.append(VersionClaim(a.text, "good", 1, -1, 0))
                out.append(VersionClaim(b.text, "bad", 1, -1, 0))
                used |= {id(a), id(b)}
        for v in vs:
            if id(v) in used:
                continue
            left = s[max(0, v.cstart - 40):v.cstart]
            role = "good" if GOOD_LEFT.search(left) or re.search(r"\bas\s+(?:under|on|with|in)?\s*$", left) else "bad"
            out.append(VersionClaim(v.text, role, 4, -1, 0))
        return out

    def choose_good_bad(self, measured: tuple | None, robot_pair: tuple | None, culprit: CommitGroup | None):
        claims = self.version_claims()
        self.vclaims = claims  # kept for the trained decisions (extractors.learned)
        subj = self.subject_version_claims()
        # base for bare "-rcN"
        bases = [version_key(c.text) for c in claims + subj if not c.text.startswith("-")]
        base = None
        for k in bases:
            if k and k[0] == "rel" and k[2] != 999:
                base = k[1]
                break

        def key(t):
            return version_key(t, base)

        good = bad = None
        tier1 = [c for c in claims if c.tier == 1]
        if tier1:
            g = [c for c in tier1 if c.role == "good"]
            b = [c for c in tier1 if c.role == "bad"]
            if g and b:
                good, bad = g[0], b[0]
        if good is None and measured and measured[0] and measured[1]:
            good = VersionClaim(measured[0], "good", 1, measured[2], 0)
            bad = VersionClaim(measured[1], "bad", 1, measured[3], 0)
        if good is None and robot_pair:
            if robot_pair[0]:
                good = VersionClaim(robot_pair[0], "good", 1, robot_pair[2], 0)
            bad = VersionClaim(robot_pair[1], "bad", 1, robot_pair[3], 0)
        if good is None and bad is None:
            srange = [c for c in subj if c.tier == 1]
            if srange:
                good, bad = srange[0], srange[1]
        if good is None and bad is None:
            subj_bad = [c for c in subj if c.role == "bad"]
            min_subj_bad = None
            for c in subj_bad:
                k = key(c.text)
                if min_subj_bad is None or (vcmp(k, min_subj_bad) or 0) < 0:
                    min_subj_bad = k
            cands = [c for c in claims if c.tier in (2, 3)]
            # one role per version: majority of its mentions (ties go to "bad")
            votes: dict = {}
            for c in cands:
                k = key(c.text)
                votes.setdefault(k, [0.0, 0.0])[0 if c.role == "good" else 1] += c.weight
            cands = [c for c in cands if c.tier == 2 or
                     (c.role == "good") == (votes[key(c.text)][0] > votes[key(c.text)][1])]
            goods = [c for c in cands if c.role == "good"]
            if min_subj_bad is not None:
                goods = [c for c in goods if vcmp(key(c.text), min_subj_bad) == -1]
            bads = [c for c in cands if c.role == "bad"]
            # explicit ranges first
            t2 = [c for c in cands if c.tier == 2]
            if t2:
                good = next((c for c in t2 if c.role == "good"), None)
                bad = next((c for c in t2 if c.role == "bad"), None)
                # several explicit ranges ending at the same bad version: the narrowest one wins
                # ("from 5.10 to 5.15 ... narrowed it down to 5.14 -> 5.15")
                if good is not None and bad is not None:
                    for g2 in t2:
                        if g2.role != "good" or g2.span is None:
                            continue
                        b2 = next((c for c in t2 if c.role == "bad" and c.span == g2.span), None)
                        if b2 is not None and key(b2.text) == key(bad.text) and \
                                vcmp(key(g2.text), key(good.text)) == 1:
                            good = g2
            if good is None and goods:
                good = max(goods, key=lambda c: (key(c.text) or ("", ()), -c.pos) if key(c.text) else ("", (), 0, 0))
                good = self._max_version(goods, key)
            if bad is None:
                bb = [c for c in bads if good is None or vcmp(key(c.text), key(good.text)) in (1, None)]
                bb = [c for c in bb if good is None or vcmp(key(c.text), key(good.text)) == 1
                      or key(c.text) is None or key(good.text) is None or key(c.text)[0] != key(good.text)[0]]
                if bb:
                    bad = self._min_version(bb, key)
            if bad is None and subj_bad:
                sb = [c for c in subj_bad if good is None or vcmp(key(c.text), key(good.text)) != -1]
                if sb:
                    bad = self._min_version(sb, key)
            if good is None:
                sg = [c for c in subj if c.role == "good"]
                if sg:
                    good = sg[0]
        # expand a bare "-rcN" to a full form written elsewhere ("-rc5" -> "v4.7-rc5")
        def expand(c):
            if c is None or not c.text.startswith("-rc") or c.pos < 0:
                return c
            rc = c.text.rstrip("+")
            for v in self.versions + self.subject_versions:
                if v.text.endswith(rc) and not v.text.startswith("-"):
                    return VersionClaim(v.text, c.role, c.tier, v.cstart, v.depth)
            return None if base is None else c
        good, bad = expand(good), expand(bad)
        # tested head "current -git (sha X)"
        if bad is None or bad.tier >= 3:
            for m in self.commits:
                before = self.clean[max(0, m.cstart - 40):m.cstart]
                if re.search(r"(?:-git|HEAD|tip|head)\s*\(?\s*(?:sha1?|commit)?\s*:?\s*$", before, I):
                    bad = VersionClaim(m.text, "bad", 3, m.cstart, m.depth)
                    break
        # describe string for the first bad commit
        if culprit is not None:
            for m in culprit.mentions:
                d = getattr(m, "describe", None)
                if d and (bad is None or bad.tier >= 3):
                    bad = VersionClaim(d, "bad", 1, m.cstart, m.depth)
        # tested head "current -git (sha X)"
        if bad is None:
            for m in self.commits:
                before = self.clean[max(0, m.cstart - 40):m.cstart]
                if re.search(r"(?:-git|HEAD|tip|head)\s*\(?\s*(?:sha1?|commit)?\s*:?\s*$", before, I):
                    bad = VersionClaim(m.text, "bad", 3, m.cstart, m.depth)
                    break
        if good is not None and bad is not None and good.text == bad.text:
            good = None
        return good, bad

    @staticmethod
    def _max_version(cs: list[VersionClaim], key):
        best = cs[0]
        for c in cs[1:]:
            if vcmp(key(c.text), key(best.text)) == 1:
                best = c
        return best

    @staticmethod
    def _min_version(cs: list[VersionClaim], key):
        best = cs[0]
        for c in cs[1:]:
            if vcmp(key(c.text), key(best.text)) == -1:
                best = c
        return best

    # -- measurements --------------------------------------------------------------------
    def robot_facts(self):
        """(metric, percent, kind-word) from a robot subject or body, and the robot commit pair."""
        metric = pct = None
        span = None
        m = self.robot_subject
        if m:
            metric, pct = m.group(2), float(m.group(3))
            if not re.match(r"[+-]", m.group(3)) and pct > 0:
                # newer robot subjects drop the sign: a "regression" is a drop of a throughput-like metric
                # and a rise of a time-like one; an "improvement" the reverse
                down = (m.group(4).lower() == "regression") != bool(P.TIME_METRIC.search(metric))
                pct = -pct if down else pct
        mb = self.mt.search(P.ROBOT_BODY)
        if mb:
            if metric is None:
                metric, pct = mb.group(3), float(mb.group(1))
                if not re.match(r"[+-]", mb.group(1)) and pct > 0:
                    down = (mb.group(2).lower() == "regression") != bool(P.TIME_METRIC.search(metric))
                    pct = -pct if down else pct
            span = (mb.start(), mb.end())
        pair = None
        # comparison block: "commit:\n  <parent> (...)\n  <culprit> (...)"
        for cm in self.mt.finditer(_COMMIT_BLOCK):
            ids = _BLOCK_IDS.findall(cm.group(1))
            if len(ids) >= 2:
                pair = (ids[0], ids[1], cm.start(1), cm.start(1) + cm.group(1).find(ids[1]))
                break
        if pair is None and m and self.mt.search(P.ROBOT_COMMIT_LINE):
            cl = self.mt.search(P.ROBOT_COMMIT_LINE)
            pair = (None, m.group(1), -1, cl.start(1))
        return metric, pct, span, pair

    def measured(self):
        """Find a measured comparison: returns dict(good_label, bad_label, good, bad, unit, metric, pct, span)."""
        clean = self.clean
        units = self.mt.units
        results = []
        # (a) rows labelled with versions: "6.6.78 2 487 746 100%" / "v3.19-rc1: ... average=135.677"
        rows = []
        for u in units:
            t = u.text.strip()
            vm = P.VERSION.match(t)
            if not vm or "\n" in t:
                continue
            rest = t[vm.end():]
            rest = re.sub(r"^[^\s:]*", "", rest)  # version suffix like -v8-16k+
            rest = rest.lstrip(" :")
            kv = dict((k.lower(), v) for k, v in STAT_KV.findall(rest))
            val = None
            stdev = n = None
            pct_stated = None
            if kv:
                for k in ("avg", "average", "mean", "median"):
                    if k in kv:
                        val = float(kv[k])
                        break
                stdev = float(kv.get("stdev") or kv.get("stddev") or kv.get("sd") or "nan")
                stdev = None if math.isnan(stdev) else stdev
                nn = kv.get("testcnt") or kv.get("valcnt") or kv.get("n") or kv.get("runs") or kv.get("samples")
                n = int(float(nn)) if nn else None
            else:
                nm = THOUSANDS.match(rest)
                if nm and not re.match(r"\s*[a-zA-Z]", rest):
                    val = parse_num(nm.group(1))
                    pm = re.search(r"([+-]?\d+(?:\.\d+)?)\s?%", rest[nm.end():])
                    if pm:
                        pct_stated = float(pm.group(1))
            if val is not None:
                rows.append((vm.group(0), val, u, pct_stated, stdev, n))
        self.numbers = []
        for lab, val, u, _, sd, n in rows:
            rel = None if sd is None or val == 0 else round(abs(sd / val), 4)
            self.numbers.append({"label": lab, "value": val, "unit": None, "stdev": rel, "n": n, "_u": u})
        if len(rows) >= 2:
            # group consecutive rows; baseline = first row, bad = next row
            g, b = rows[0], rows[1]
            kg, kb = version_key(g[0]), version_key(b[0])
            if vcmp(kg, kb) == 1:
                g, b = b, g
            pct = b[3] if b[3] is not None and abs(b[3]) < 100 and b[3] != 0 else pct_change(g[1], b[1])
            header = units[g[2].index - 1].text if g[2].index > 0 else ""
            metric = self._header_metric(header)
            results.append({"good": g[0], "bad": b[0], "pct": pct, "metric": metric, "unit": None,
                            "span": (g[2].cstart, b[2].cend), "gpos": g[2].cstart, "bpos": b[2].cstart})
        # (a2) tables: version/commit blocks and columns, unit rows, LKP comparison rows
        r_metric = self.robot_subject.group(2) if self.robot_subject else None
        if r_metric is None:
            mb = self.mt.search(P.ROBOT_BODY)
            r_metric = mb.group(3) if mb else None
        tables = (NUM_T.lkp_rows(units, clean, r_metric) + NUM_T.block_rows(units, clean)
                  + NUM_T.version_columns(units, clean) + NUM_T.unit_rows(units, clean))
        seen_cells = {(n["label"], n["value"]) for n in self.numbers}
        for t in tables:
            for c in t.cells:
                if (c.label, c.value) not in seen_cells:
                    seen_cells.add((c.label, c.value))
                    self.numbers.append({"label": c.label, "value": c.value, "unit": c.unit, "stdev": c.stdev,
                                         "n": c.n})
            if t.pair is None or rows:
                continue
            g, b = t.cells[t.pair[0]], t.cells[t.pair[1]]
            is_lkp = r_metric is not None and t.metric == r_metric
            if not is_lkp and vcmp(version_key(g.label), version_key(b.label)) == 1:
                g, b = b, g
            pct = pct_change(g.value, b.value)
            if pct is None:
                continue
            results.append({"good": None if is_lkp else g.label, "bad": None if is_lkp else b.label, "pct": pct,
                            "metric": t.metric, "unit": g.unit, "span": t.span, "gpos": t.span[0],
                            "bpos": t.span[0], "lkp": is_lkp})
        # (b) header with two labels and a %-diff column
        for u in units:
            hm = _PCT_HEADER.match(u.text)
            if not hm or u.index + 1 >= len(units):
                continue
            nxt = [x for x in units[u.index + 1:u.index + 3] if not _RULE_LINE.fullmatch(x.text)]
            if not nxt:
                continue
            rm = _PCT_ROW.match(nxt[0].text)
            if not rm:
                continue
            ga, ba = hm.group(2), hm.group(3)
            if not (find_versions(ga) or find_versions(ba)):
                continue
            pct = float(rm.group(3))
            results.append({"good": ga, "bad": ba, "pct": pct, "metric": None, "unit": None,
                            "span": (u.cstart, nxt[0].cend), "gpos": u.cstart, "bpos": u.cstart})
            break
        # (c) column table with a good/bad result row
        for u in units:
            toks = u.text.split()
            roles = [t.strip("[]*").lower() for t in toks[1:]]
            if len(roles) >= 3 and all(r in ("good", "bad", "base", "ok", "fail", "pass") for r in roles):
                for back in range(1, 4):
                    if u.index - back < 0:
                        break
                    row = units[u.index - back]
                    nums = _ROW_NUMS.findall(row.text)
                    if len(nums) == len(roles) and not re.search(r"%", row.text):
                        gi = max((i for i, r in enumerate(roles) if r in ("good", "ok", "pass")), default=None)
                        bi = next((i for i, r in enumerate(roles) if r in ("bad", "fail")), None)
                        if gi is not None and bi is not None:
                            pct = pct_change(float(nums[gi]), float(nums[bi]))
                            unit = None
                            um = re.search(r"(" + P.UNIT_WORDS + r")", row.text)
                            if um:
                                unit = um.group(1)
                            results.append({"good": None, "bad": None, "pct": pct, "metric": unit, "unit": unit,
                                            "span": (row.cstart, u.cend), "gpos": row.cstart, "bpos": row.cstart})
                        break
        # (d) "A vs B unit" and (e) "from A to B unit"
        for rx in (P.PAIR_FROM_TO, P.PAIR_VS):
            for m in self.mt.finditer(rx):
                a, b = float(m.group(1)), float(m.group(3))
                unit = m.group(4) or m.group(2)
                if not unit:
                    continue
                ctx = clean[max(0, m.start() - 80):m.end() + 20]
                if rx is P.PAIR_VS and re.search(r"\b(?:CPUs?|cores?|threads?)\b", ctx, I):
                    continue
                results.append({"good": None, "bad": None, "pct": pct_change(a, b), "metric": unit, "unit": unit,
                                "span": (m.start(), m.end()), "gpos": m.start(), "bpos": m.start(),
                                "vals": (a, b)})
                self.numbers.append({"label": None, "value": a, "unit": unit, "stdev": None, "n": None})
                self.numbers.append({"label": None, "value": b, "unit": unit, "stdev": None, "n": None})
                break
        runs = NUM_T.runs_stated(clean, self.mt)
        if runs:
            for n in self.numbers:
                if n.get("n") is None:
                    n["n"] = runs
        return results

    @staticmethod
    def _header_metric(header: str) -> str | None:
        h = " ".join(header.split())
        m = re.match(r"^\s*(?:kernel|version|revision|tree|commit)\w*\s+(.+?(?:" + P.UNIT_WORDS + r"))(?:\s|$)", h, I)
        if m:
            return m.group(1)
        return None

    def stated_percent(self):
        """A regression percentage stated in prose: returns (value, cspan, hedged, in_subject)."""
        for text, subj in ((self.clean, False), (self.subject, True)):
            for r in (_STATED_PCT, _STATED_PCT_OF):
                if subj:
                    m = r.search(text) if "%" in text else None
                elif r is _STATED_PCT:
                    m = _search_stated_pct(text, self.mt.low)
                else:
                    m = self.mt.search(r)
                if m:
                    hedge = (m.group("hedge") or "").lower()
                    hedged = hedge in ("more than", "over", "at least", "up to", ">")
                    pre = text[max(0, m.start("num") - 6):m.start("num")]
                    if re.search(r"\d\s?%?\s?(?:[-–—~]|to)\s?$", pre) or \
                            (m.group("num")[0] == "-" and re.search(r"\d\s?%?$", pre)):
                        hedged = True  # a range "1-3.5%": no single figure
                    return float(m.group("num")), (m.start(), m.end()), hedged, subj
        return None

    def times_phrase(self):
        rx = _TIMES
        for text, subj in ((self.clean, False), (self.subject, True)):
            m = rx.search(text) if subj else self.mt.search(rx)
            if m:
                n = m.group("n").lower()
                factor = {"twice": 2.0, "two times": 2.0, "2x": 2.0, "three times": 3.0, "3x": 3.0}.get(n)
                if factor is None:
                    factor = float(re.sub(r"[^\d.]", "", n))
                hedged = bool(m.group("hedge")) and m.group("hedge").strip().lower() in ("more than", "over")
                return (factor - 1) * 100.0, (m.start(), m.end()), hedged, subj
        return None

    # -- hardware & config ---------------------------------------------------------------
    def hardware(self) -> dict:
        clean = self.clean
        hw: dict = {"cpu": None, "arch": None, "memory": None, "storage": None}
        spans: dict = {}
        # cpu: prefer one near a bad cue if several
        cpus = []
        mt = self.mt
        for rx in P.CPU_PATTERNS:
            for m in mt.finditer(rx):
                val = " ".join(m.group(1).split()).strip(" ,.")
                if len(val) < 3:
                    continue
                cpus.append((m.start(1), m.end(1), val))
            if cpus:
                break
        if cpus:
            chosen = cpus[0]
            if len({c[2] for c in cpus}) > 1:
                for c in cpus:
                    after = clean[c[1]:c[1] + 120]
                    if _CPU_BAD_AFTER.search(after):
                        chosen = c
                        break
            hw["cpu"] = chosen[2]
            spans["cpu"] = (chosen[0], chosen[1])
        # arch
        arch_scores: dict[str, float] = {}
        arch_span: dict[str, tuple] = {}
        for rx, name in P.ARCH_WORDS:
            for m in rx.finditer(self.subject):
                arch_scores[name] = arch_scores.get(name, 0) + 3
            for m in mt.finditer(rx):
                if _ARCH_TITLE_PREFIX.match(clean, m.end(), m.end() + 20):
                    continue  # a commit-title prefix ("x86/efi: ...") names a subsystem, not the test machine
                ctx = clean[max(0, m.start() - 60):m.end() + 10]
                if _ARCH_NEG.search(ctx) and _ARCH_NEG2.search(ctx):
                    continue
                w = 1.0
                if name == "arm" and not re.search(r"\bARM\b", m.group(0)) and m.group(0) != "arm":
                    w = 1.0
                arch_scores[name] = arch_scores.get(name, 0) + w
                arch_span.setdefault(name, (m.start(), m.end()))
        fam_tot: dict[str, float] = {}
        for a, v in arch_scores.items():
            f = "x86" if a in ("x86_64", "i386", "x86") else "sparc" if a in ("sparc", "sparc64") else a
            fam_tot[f] = fam_tot.get(f, 0) + v
        if arch_scores:
            # specific beats generic x86 when both present
            if "x86" in arch_scores and ({"x86_64", "i386"} & set(arch_scores)):
                arch_scores.pop("x86")
            if "sparc" in arch_scores and "sparc64" in arch_scores:
                arch_scores["sparc64"] += arch_scores.pop("sparc")
            best = max(arch_scores, key=lambda k: arch_scores[k])
            ranked = sorted(fam_tot.values(), reverse=True)
            if len(ranked) > 1 and ranked[1] >= 0.6 * ranked[0] and not any(rx.search(self.subject) for rx, n in P.ARCH_WORDS if n == best):
                # two architectures named about equally often (a comparison of the two):
                # which one is meant is not clear
                best = None
                if hw["cpu"]:
                    hw["cpu"] = None
                    spans.pop("cpu", None)
            if best:
                hw["arch"] = best
                spans["arch"] = arch_span.get(best)
        elif hw["cpu"] and re.search(r"\b(?:Intel|AMD|Xeon|EPYC|Core|i[3579]-)", hw["cpu"]):
            hw["arch"] = "x86_64" if re.search(r"Xeon|EPYC|Opteron", hw["cpu"]) else "x86"
            spans["arch"] = spans.get("cpu")
        elif hw["cpu"] and re.search(r"BCM27[1-9]\d|Cortex-A(?:5[3-9]|7\d)|Neoverse|Graviton|Altra", hw["cpu"]):
            hw["arch"] = "arm64"
            spans["arch"] = spans.get("cpu")
        # memory
        for rx in P.MEMORY_PATTERNS:
            m = mt.search(rx)
            if m:
                hw["memory"] = " ".join(m.group(1).split())
                spans["memory"] = (m.start(1), m.end(1))
                break
        if hw["memory"] is None:
            m = mt.search(_MEM_MACHINE_LINE)
            if m:
                hw["memory"] = m.group(1)
                spans["memory"] = (m.start(1), m.end(1))
        if hw["memory"] is None:
            # "Memory:\n  Total: 187 GB" / "MemTotal: 196608 kB" / "Memory: 16 GB" / "QEMU_MEM_MB=14336"
            for rx in (LKP_MEM_BLOCK, MEM_LINE, MEM_SETTING):
                m = mt.search(rx)
                if m:
                    hw["memory"] = " ".join(m.group(1).split())
                    spans["memory"] = (m.start(1), m.end(1))
                    break
        # storage
        best = None
        for m in mt.finditer(P.STORAGE_HEAD):
            line_start = clean.rfind("\n", 0, m.start()) + 1
            prefix = clean[line_start:m.start()].split()
            mods = []
            for t in reversed(prefix[-5:]):
                tt = t.strip(",()")
                if P.STORAGE_MOD.match(tt) or P.STORAGE_ACRO.match(tt):
                    mods.insert(0, t)
                else:
                    break
            if not mods:
                continue
            text = " ".join(mods + [m.group(1)]) + (m.group(2) or "")
            score = len(mods) + (2 if re.search(r"\d", text) else 0)
            start = m.start() - len(" ".join(mods)) - 1
            if best is None or score > best[0]:
                best = (score, " ".join(text.split()), max(start, 0), m.end())
        m = mt.search(LKP_DISK)
        if m and (best is None or best[0] < 3):
            # an LKP job parameter ("disk: 1HDD", "disk: 4SSD") names the test storage exactly
            best = (9, m.group(1), m.start(1), m.end(1))
        if best:
            hw["storage"] = best[1]
            spans["storage"] = (best[2], best[3])
        return hw, spans

    def config(self, kind: str | None) -> tuple[dict, dict]:
        clean = self.clean
        cfg: dict = {"filesystem": None, "benchmark": None, "command": None, "kernel_config": []}
        spans: dict = {}
        # filesystem
        fs_scores: dict[str, float] = {}
        fs_span: dict[str, tuple] = {}
        for m in P.FS_RE.finditer(self.subject):
            fs_scores[m.group(1).lower()] = fs_scores.get(m.group(1).lower(), 0) + 4
        mt = self.mt
        for m in mt.finditer(P.FS_RE):
            name = m.group(1).lower()
            ctx = clean[max(0, m.start() - 20):m.end() + 20]
            w = 0.5
            if _FS_CTX.search(ctx):
                w = 2.0
            fs_scores[name] = fs_scores.get(name, 0) + w
            fs_span.setdefault(name, (m.start(), m.end()))
        if fs_scores:
            name = max(fs_scores, key=lambda k: fs_scores[k])
            if fs_scores[name] >= 2 or (kind == "performance" and fs_scores[name] >= 0.5):
                cfg["filesystem"] = name
                spans["filesystem"] = fs_span.get(name)
        # benchmark
        b_scores: dict[str, float] = {}
        b_first: dict[str, int] = {}
        b_span: dict[str, tuple] = {}
        tc = mt.search(_TESTCASE)
        if tc and P.BENCH_RE.fullmatch(tc.group(1)):
            n = tc.group(1).lower()
            b_scores[n] = 3 if _AND_OR.match(clean, tc.end(1)) else 10
            b_first[n] = tc.start(1)
            b_span[n] = (tc.start(1), tc.end(1))
        for text, w0, subj in ((self.subject, 3.0, True), (clean, 1.0, False)):
            for m in (P.BENCH_RE.finditer(text) if subj else mt.finditer(P.BENCH_RE)):
                name = m.group(1).lower()
                if name in P.BENCH_WEAK:
                    after = text[m.end():m.end() + 25]
                    before = text[max(0, m.start() - 12):m.start()]
                    if not (_WEAK_AFTER1.match(after) or _WEAK_BEFORE1.search(before)
                            or _WEAK_AFTER2.match(after) or _WEAK_BEFORE2.search(before)
                            or _WEAK_AFTER3.match(after)):
                        continue
                if name in P.BENCH_TESTS and kind != "performance":
                    continue
                b_scores[name] = b_scores.get(name, 0) + w0
                if not subj:
                    b_first.setdefault(name, m.start())
                    b_span.setdefault(name, (m.start(), m.end()))
                else:
                    b_first.setdefault(name, -1)
        if b_scores:
            name = max(b_scores, key=lambda k: (b_scores[k], -b_first.get(k, 0)))
            cfg["benchmark"] = {"fs_mark": "fsmark"}.get(name, name)
            spans["benchmark"] = b_span.get(name)
        # command: the benchmark command line as written (continuation lines joined)
        best = None
        bench = cfg.get("benchmark")
        for m in (mt.finditer(P.COMMAND_LINE) if mt.search(P.TOOL_ANY) else ()):
            line = m.group(1)
            end = m.end(1)
            while line.rstrip().endswith("\\"):
                nl = clean.find("\n", end + 1)
                nxt = clean[end + 1:nl if nl >= 0 else len(clean)]
                if not nxt.strip():
                    break
                line = line.rstrip()[:-1] + " " + nxt.strip()
                end = nl if nl >= 0 else len(clean)
            cmd = " ".join(line.split()).rstrip("\\ ")
            cmd = _LOOP_DONE.sub("", cmd)  # the body of a shell loop
            toks = cmd.split()
            tool = next((t for t in toks if t in P.COMMAND_TOOLS or t.startswith("./")), toks[0])
            score = 0.0
            if bench and (tool == bench or tool.replace("_", "") == bench):
                score += 3
            if _CMD_OPT.search(cmd):
                score += 1
            if tool == "make" and not _MAKE_J.search(cmd):
                score -= 2
            if self.mt.depth_at(m.start(1)) > 0:
                score -= 0.5
            if best is None or score > best[0]:
                best = (score, cmd, m.start(1), end)
        if best is None:
            m = mt.search(P.INLINE_COMMAND)
            if m:
                best = (0, " ".join(m.group(1).split()), m.start(1), m.end(1))
        if best is not None:
            cfg["command"] = best[1][:300]
            spans["command"] = (best[2], best[3])
        # boot parameters, mkfs and mount options: kept as facts (not contract fields)
        self.setup_facts = []
        low = clean.lower()
        for name, rx, hint in (("boot_params", P.BOOT_PARAMS, ("cmdline", "command line", "boot param", "boot opt")),
                               ("mkfs", P.MKFS_LINE, ("mkfs",)), ("mount_options", P.MOUNT_OPTS, ("mount",))):
            if not any(h in low for h in hint):
                continue
            m = mt.search(rx)
            if m:
                self.setup_facts.append((name, " ".join(m.group(1).split())[:300], (m.start(1), m.end(1))))
        # kernel config options named as part of the setup
        seen: dict[str, str] = {}
        for m in mt.finditer(P.CONFIG_OPT):
            u = self.mt.unit_at(m.start())
            utext = u.text if u else ""
            if u and u.structured and _CFG_CODE.match(utext):
                continue
            if _CFG_SUGGEST.search(utext):
                continue
            if _in_quoted_title(mt.clean, m.start()):
                continue  # part of a commit title ("kconfig: only write '# CONFIG_FOO is not set'")
            name = m.group(1)
            written = m.group(0)
            if name not in seen or ("=" in written and "=" not in seen[name]):
                seen[name] = written
                spans.setdefault("kernel_config", (m.start(), m.end()))
        cfg["kernel_config"] = list(seen.values())
        return cfg, spans

    # -- classification ------------------------------------------------------------------
    def kind_of(self, has_measure: bool) -> str | None:
        if len(self.clean) <= 20000:
            n_perf, n_fail = len(self.mt.finditer(P.PERF_WORDS)), len(self.mt.finditer(P.FAIL_WORDS))
        else:
            text = self.clean[:20000]
            n_perf, n_fail = len(P.PERF_WORDS.findall(text)), len(P.FAIL_WORDS.findall(text))
        perf = n_perf + 2 * len(P.PERF_WORDS.findall(self.subject))
        func = n_fail * 0.5 + 2 * len(P.FAIL_WORDS.findall(self.subject))
        if has_measure:
            perf += 4
        if self.robot_subject:
            perf += 10
        if perf == 0 and func == 0:
            return "functional"
        return "performance" if perf * 1.5 >= func else "functional"

    def regression_score(self, culprit: CommitGroup | None, good, bad, measure_pct) -> tuple[float, list[str]]:
        s = 0.0
        why: list[str] = []
        subj = self.subject
        clean = self.clean
        mt = self.mt
        own = own_text(mt)
        own_low = fold(own)

        def own_search(rx):
            return rx.search(own) if P.may_match(rx, own, own_low) else None

        def add(w, reason):
            nonlocal s
            s += w
            why.append(f"{w:+.1f} {reason}")

        if self.robot_subject:
            if self.robot_subject.group(4).lower() == "regression":
                add(5, "robot regression subject")
            else:
                add(-8, "robot improvement subject")
        mb = mt.search(P.ROBOT_BODY)
        if mb and not self.robot_subject:
            add(4 if mb.group(2).lower() == "regression" else -8, "robot body " + mb.group(2).lower())
        is_patch = bool(P.PATCH_SUBJECT.search(subj))
        is_reply = bool(P.REPLY_SUBJECT.search(subj))
        if is_patch:
            add(-2.0 if is_reply else -5.0, "patch subject")
        if P.PULL_SUBJECT.search(subj):
            add(-4, "pull request")
        subj_other = P.REGRESSION_OTHER_SENSE.search(subj)
        if P.REGRESSION_WORD.search(subj) and not subj_other and not self.robot_subject:
            add(2.5, "regression in subject")
        elif subj_other and not P.REGRESSION_WORD.search(P.REGRESSION_OTHER_SENSE.sub(" ", subj)):
            # the subject is about regressions as a topic (testing, tracking, tooling): a discussion
            add(-1.5, "subject uses regression in another sense")
        if _BISECT.search(subj):
            add(1.0, "bisect in subject")
        if P.FAIL_WORDS.search(subj) or _SUBJ_PERF.search(subj):
            add(1.5, "failure/perf words in subject")
        # body evidence
        if culprit is not None:
            add(3.0 if culprit.score >= 5 else 2.0, "culprit cue")
        if good is not None and bad is not None:
            add(1.5, "good/bad pair")
        elif bad is not None:
            add(0.5, "bad version")
        claims = len(mt.finditer(_CLAIMS))
        other = len(mt.finditer(P.REGRESSION_OTHER_SENSE))
        if own_search(_RETRACT):
            add(-4.0, "the message retracts the report (noise / false alarm)")
        if claims:
            add(min(3.0, 1.5 * claims), f"regression claims x{claims}")
        if own_search(_PATCH_BLAMED):
            add(1.5, "the patch under review is blamed")
        if measure_pct is not None and measure_pct < 0 and not self.robot_subject:
            add(0.5, "measured drop")
        if other:
            add(-1.0 * min(2, other), "regression in another sense")
        # patch / fix / improvement shape (author's own text)
        if own_search(_OWN_DIFF):
            add(-2.5, "own text carries a diff")
        if own_search(_OWN_SOB) and (is_patch or own_search(_OWN_DASHES)):
            add(-1.5, "signed-off patch")
        if own_search(_OWN_FIXES):
            add(-2.5, "Fixes: tag in own text")
        if own_search(P.FIX_PATCH_WORDS):
            add(-1.5, "fix wording")
        if own_search(P.STABLE_REVIEW):
            add(-4, "stable review")
        imp = P.IMPROVE_WORDS.findall(own) if P.may_match(P.IMPROVE_WORDS, own, own_low) else []
        if imp and not claims:
            add(-min(2.0, 0.75 * len(imp)), "improvement wording")
        if own_search(_NO_REGRESSIONS) and not claims:
            add(-2.0, "no regressions report")
        return s, why


_CLAIMS = re.compile(r"\b(?:(?:found|see|seeing|saw|noticed|observed|report\w*|suffering from|hit|have|has|is)"
                     r"\s+(?:a |an |the |this |some |what looks to be a |significant |measurable |"
                     r"performance |big |huge |serious |\w+ )?regression|regression (?:in|from|since|on|with|"
                     r"introduced|caused|is|was|starting)|(?:performance|perf|throughput|write|read|boot)\s+"
                     r"(?:drop|loss|decrease|degradation|regression)|\d+(?:\.\d+)?\s?%\s+(?:\w+\s+){0,2}"
                     r"(?:regression|drop|decrease|slower|degradation)|(?:\w+ )?\d\.\d+[\w.-]* regression|"
                     r"(?:this|that|it) (?:is|was) a regression|"
                     r"(?:no longer|doesn't|does not|fails to|failed to) (?:boot|work|build|compile|resume)|"
                     r"slower (?:than|with|on|since|after)|twice as long|(?:boot|build|compile) (?:failure|"
                     r"problem|error|regression)s?|caused (?:this|the|a) regression|"
                     r"(?:extremely|very|much|really) slow|slow(?:er)? compared|"
                     r"(?:this|your|the) (?:patch|commit|change|series) (?:causes|caused|introduces|introduced)"
                     r"\b[^.]{0,40}\b(?:regression|slowdown|drop|crash|failure|hang|breakage)|"
                     r"(?:speed|performance|throughput|bandwidth|latency|I/O|io)\s+regressions?|"
                     r"(?:bad|poor|terrible|degraded)\s+(?:I/O\s+|io\s+|disk\s+|network\s+|write\s+|read\s+)?performance|"
                     r"drop(?:ped|s)?\s+(?:\w+\s+){0,3}from\s+(?:~|about\s+)?\d|"
                     r"(?:took|takes|taking)\s+(?:\w+\s+){0,2}(?:times\s+)?longer|"
                     r"(?:unable|fails?|failed) to boot|(?:silently )?fails? (?:on|at|during) boot|"
                     r"(?:git[- ])?bisect\w*\s+(?:led|leads|pointed|points)\s+(?:me\s+|us\s+)?to|"
                     r"regress(?:es|ed)?\s+(?:consistently|badly|by\s+~?\d)|"
                     # a commit / patch / change "that introduces" or "caused" a named failure
                     r"(?:commit|patch|change)\s+(?:that|which)\s+(?:first\s+)?(?:introduc\w+|caus\w+|"
                     r"trigger\w+|brought)\s+(?:the\s+|these\s+|this\s+|a\s+)?(?:\w+\s+)?(?:lock-?ups?|"
                     r"hangs?|crash\w*|regression|slowdown|breakage|boot failures?|panics?|oops\w*))\b",
                     I)
_BISECT = re.compile(r"\bbisect", I)
_SUBJ_PERF = re.compile(r"\b(?:slow\w*|performance (?:loss|drop|problem|issue|decrease)s?|"
                        r"scalability (?:issue|problem)s?|takes \w+ as long|twice as (?:long|slow))\b", I)
_RETRACT = re.compile(r"\b(?:this|the|that) (?:report|result|bisect\w*|regression) (?:is|was) (?:a |just |simply )?"
                      r"(?:a )?(?:noise|bogus|false|wrong|invalid)\b|\bfalse (?:alarm|positive)s?\b|"
                      r"\bnot a (?:real |kernel )?regression\b", I)
_PATCH_BLAMED = re.compile(r"\b(?:this|your|the) (?:patch|commit|change|series) (?:causes|caused|introduces|introduced)"
                           r"\b[^.]{0,40}\b(?:regression|slowdown|drop|crash|failure|hang|breakage)", I)
_OWN_DIFF = re.compile(r"^(?:diff --git|--- a/|\+\+\+ b/|Index: )", re.M)
_OWN_SOB = re.compile(r"^Signed-off-by:", re.M)
_OWN_DASHES = re.compile(r"^---\s*$", re.M)
_OWN_FIXES = re.compile(r"^Fixes:\s*[0-9a-f]{7,}", re.M)
_NO_REGRESSIONS = re.compile(r"\bno (?:new )?regressions?\b|\bwithout (?:any )?regressions?\b", I)


def own_text(mt: MailText) -> str:
    """The author's own text (depth-0 units joined by newlines), built once per message."""
    r = mt.memo.get("own")
    if r is None:
        r = mt.memo["own"] = "\n".join(u.text for u in mt.units if u.depth == 0)
    return r


_REGZBOT_RANGE = re.compile(r"#?regzbot\s+\^?introduced:?\s+(\S+?)\.\.\.?(\S+)", I)
_LOG_LINE = re.compile(r"\s*(?:\[\s*\d+\.\d+\]|#|git |CPU:|Hardware name)")
_RANGE_SEP = re.compile(r"\s*(?:\.\.\.?|->|-->|→|=>|to|and|until|till|-)\s*")
_BETWEEN_FROM = re.compile(r"\b(between|from)\s+(?:the\s+)?(?:kernels?\s+)?$", I)
_ARROW = re.compile(r"\.\.|->|→|=>")
_WENT_AWAY = re.compile(r"[^.]{0,20}\b(?:where|when)\b[^.]{0,20}(?:went away|disappear|was fine|worked|ok)", I)
_AFTER_BEFORE = re.compile(r"\bafter\s+(?:v(?=\d))?(\S+?),?\s+(?:but\s+|and\s+)?before\s+(?:v(?=\d))?(\S+?)"
                           r"[.,;:)]?(?:\s|$)", I)
_MARKED_GOOD_BAD = re.compile(r"(?<![\w/])([0-9a-f]{7,40})\s*\((?:[^()\n]{0,20},\s*)?(good|bad)\)")
_PCT_HEADER = re.compile(r"^\s*(\S+)\s+(\S+)\s+(\S+)\s+(%[-\w]*|[-\w]*%|%?\s?change|%?diff\w*)\s*$")
_RULE_LINE = re.compile(r"[-=\s]+")
_PCT_ROW = re.compile(r"^\s*\S+\s+(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)\s+([-+]?\d+(?:\.\d+)?)%?\s*$")
_ROW_NUMS = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?![\w.%])")
_COMMIT_BLOCK = re.compile(r"^commit:\s*\n((?:[ \t]*[0-9a-f]{7,40}\b[^\n]*\n?){2,})", re.M)
_BLOCK_IDS = re.compile(r"^[ \t]*([0-9a-f]{7,40})\b", re.M)
_STATED_PCT = re.compile(r"(?P<hedge>more than|over|at least|up to|>|almost|nearly|about|around|roughly|approx\w*|~)?"
                         r"\s*(?P<num>[-+]?\d+(?:\.\d+)?)\s?%\s+(?:\w+\s+){0,3}?(?P<w>regression|drop|decrease|"
                         r"degradation|slowdown|loss|lower|slower|worse|reduction|less|performance (?:drop|loss|"
                         r"decrease|regression))", I)
_STATED_PCT_OF = re.compile(r"(?:regression|drop|decrease|degradation|slowdown|loss|reduction)\s+of\s+"
                            r"(?P<hedge>more than|over|at least|up to|about|around|roughly|~)?\s*"
                            r"(?P<num>[-+]?\d+(?:\.\d+)?)\s?%", I)
_PCT_HEDGES = ("more than", "over", "at least", "up to", ">", "almost", "nearly", "about", "around", "roughly",
               "approx", "~")
_NUM_OR_SPACE = re.compile(r"[\s\d.+\-]")


def _search_stated_pct(text: str, low: str):
    """``_STATED_PCT.search(text)`` (``low`` = ``fold(text)``), trying only where a match can start.

    A match holds exactly one "%" and, before it, ``hedge? \\s* number \\s?``.  So for the i-th "%"
    a match ending there starts after the previous "%", either where a hedge word is written or
    inside the run of spaces, digits, dots and signs right before the "%".  Those places are
    tried in text order, "%" by "%", as ``search`` tries every place from the left."""
    rx = _STATED_PCT
    q = text.find("%")
    if q < 0:
        return None
    hedges = sorted({i for h in _PCT_HEDGES for i in _all_find(low, h)})
    hi = 0
    prev = -1
    num_or_space = _NUM_OR_SPACE.match
    while q >= 0:
        cands = set()
        while hi < len(hedges) and hedges[hi] < q:
            if hedges[hi] > prev:
                cands.add(hedges[hi])
            hi += 1
        s0 = q
        while s0 > prev + 1 and num_or_space(text, s0 - 1):
            s0 -= 1
        cands.update(range(s0, q))
        for p in sorted(cands):
            m = rx.match(text, p)
            if m is not None:
                return m
        prev = q
        q = text.find("%", q + 1)
    return None


def _all_find(t: str, s: str) -> list[int]:
    out = []
    i = t.find(s)
    while i >= 0:
        out.append(i)
        i = t.find(s, i + 1)
    return out


_TIMES = re.compile(r"(?P<hedge>more than |over |almost |nearly |about |~)?\b(?P<n>twice|two times|2x|three times|"
                    r"3x|\d+(?:\.\d+)? ?times|\d+(?:\.\d+)?x)\s+(?:as\s+)?(?P<w>long|slow(?:er)?|longer)", I)


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


# cue patterns with a \b(?=\w) check in front (patterns.word_led: same matches, faster scans)
KERNEL_CTX = P.word_led(KERNEL_CTX)
FIX_AFTER = P.word_led(FIX_AFTER)
GOOD_CUE = P.word_led(GOOD_CUE)
GOOD_LEFT = P.word_led(GOOD_LEFT)
BAD_CUE = P.word_led(BAD_CUE)
BAD_LEFT = P.word_led(BAD_LEFT)
STAT_KV = P.word_led(STAT_KV)
_CLAIMS = P.word_led(_CLAIMS)
_CFG_SUGGEST = P.word_led(_CFG_SUGGEST)
