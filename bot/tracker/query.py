"""Queries over regression records: natural language and a filter language, one parser.

Filter language (tokens separated by blanks; values may be quoted, ``key:"two words"``)::

    status:open | closed | all | <status>[,<status>...]   reported triaged rerun-scheduled confirmed
                                                          not-reproduced inconclusive fix-pending fixed
                                                          duplicate resolved backburner improved
    subsystem:mm/          path prefix: mm, mm/slab (never mmc); several = any of them
    kind:performance       or functional (perf, functional aliases)
    culprit:54a6eb5c       commit id prefix (>= 4 hex digits), either side may be abbreviated
    since:2024-01-01       report date on/after (YYYY-MM-DD, YYYY-MM, ISO time, today, yesterday,
                           30d / 2w / 3m / 1y ago)
    since:v6.8             regressions whose bad version (culprit's first release when a kernel
                           tree knew it, else the reported bad tag) is in the v6.8 cycle or later
                           (v6.8-rc1 counts; since:v6.8-rc3 is exact); records without a known
                           version do not match
    until:2024-06-30       report date before the end of that day
    updated:7d             changed or active in the tracker since
    text:zonelist          substring of title, culprit subject or metric (case-insensitive,
                           wildcards in the value are literal); several = all of them
    id:42                  one record

Natural language understood around it (case-insensitive): status words (open, unfixed,
closed, fixed, confirmed, "fix pending", "not reproduced", duplicates, ...), kind words
(performance, perf, slowdowns, throughput, latency, functional), "in <path>" / "under <path>"
(a path, a top-level kernel directory, or a component name such as ext4 which matches
fs/ext4), "since <date|version|yesterday|last week>", "(in the) last|past N days|weeks|
months|years", "last week|month|year", "today", "before|until <date>", "caused by|culprit|commit
<id>", a bare 7-40 digit hex id, "about|mentioning|containing <word>", and "quoted text".
Filler words (show, me, regressions, the, ...) are skipped; any other word becomes a text term.

Parsing is pure (:func:`parse_query`); :mod:`storage.search` turns a :class:`Filter` into SQL
where every user value is a bound parameter (:func:`build_select` shows it).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta, timezone
from typing import Any

STATUSES = ("reported", "triaged", "rerun-scheduled", "confirmed", "not-reproduced", "inconclusive",
            "fix-pending", "fixed", "duplicate", "resolved", "backburner", "improved")
CLOSED = ("fixed", "resolved", "duplicate")  # an inconclusive rerun keeps the record open
OPEN = tuple(s for s in STATUSES if s not in CLOSED)
KINDS = ("performance", "functional")
KEYS = ("status", "subsystem", "kind", "culprit", "since", "until", "updated", "text", "id")
KEY_ALIASES = {"state": "status", "sub": "subsystem", "subsys": "subsystem", "path": "subsystem",
               "type": "kind", "commit": "culprit", "after": "since", "from": "since", "before": "until",
               "to": "until", "q": "text", "title": "text", "contains": "text"}

STATUS_WORDS = {
    "open": "open", "opened": "open", "unfixed": "open", "unresolved": "open", "active": "open",
    "outstanding": "open", "closed": "closed", "done": "closed", "all": "all", "any": "all",
    "reported": "reported", "new": "reported", "untriaged": "reported",
    "triaged": "triaged", "confirmed": "confirmed", "reproduced": "confirmed",
    "inconclusive": "inconclusive", "improved": "improved", "fixed": "fixed", "duplicate": "duplicate", "duplicates": "duplicate",
    "dup": "duplicate", "dups": "duplicate", "resolved": "resolved", "backburner": "backburner",
    "backburnered": "backburner", "back-burner": "backburner", "backburned": "backburner",
    "fix-pending": "fix-pending", "pending": "fix-pending", "rerun-scheduled": "rerun-scheduled",
    "scheduled": "rerun-scheduled", "not-reproduced": "not-reproduced", "unreproduced": "not-reproduced",
    "unreproducible": "not-reproduced", "non-reproducible": "not-reproduced",
}
KIND_WORDS = {"performance": "performance", "perf": "performance", "slowdown": "performance",
              "slowdowns": "performance", "throughput": "performance", "latency": "performance",
              "speed": "performance", "functional": "functional", "functionality": "functional",
              "correctness": "functional"}
STOPWORDS = set("""
regression regressions regressed show me list find get give display tell the a an of with which that are
is were was please what whats what's there any all reports report issues issue bugs bug tracked entries
records record kernel linux and or to on at by for from items ones those these recent recently
""".split()) - {"all", "any"}
TOP_DIRS = {"arch", "block", "certs", "crypto", "drivers", "fs", "include", "init", "io_uring", "ipc",
            "kernel", "lib", "mm", "net", "rust", "samples", "scripts", "security", "sound", "tools",
            "usr", "virt"}
SUBSYSTEM_ALIASES = {"networking": "net", "network": "net", "scheduler": "kernel/sched", "sched": "kernel/sched",
                     "filesystems": "fs", "filesystem": "fs", "memory": "mm", "memory-management": "mm",
                     "graphics": "drivers/gpu", "gpu": "drivers/gpu", "drm": "drivers/gpu/drm",
                     "usb": "drivers/usb", "sound": "sound", "audio": "sound", "bpf": "kernel/bpf"}
UNITS = {"d": 1, "day": 1, "days": 1, "w": 7, "wk": 7, "week": 7, "weeks": 7, "m": 30, "mo": 30,
         "month": 30, "months": 30, "y": 365, "yr": 365, "year": 365, "years": 365}

_HEX = re.compile(r"[0-9a-f]{7,40}")
_VERSION = re.compile(r"v?\d+\.\d+(?:\.\d+)*(?:-rc\d+)?", re.I)
_PATHLIKE = re.compile(r"[a-z0-9_.+-]+(?:/[a-z0-9_.+-]+)*/?", re.I)


class QueryError(ValueError):
    """The query cannot be understood; the message says why."""


@dataclass
class Filter:
    statuses: tuple[str, ...] | None = None  # None: any status
    subsystems: list[str] = field(default_factory=list)  # path prefixes, any of
    components: list[str] = field(default_factory=list)  # path components (e.g. "ext4"), any of
    kinds: list[str] = field(default_factory=list)
    culprits: list[str] = field(default_factory=list)
    since: datetime | None = None
    since_version: str | None = None  # tag as given, e.g. "v6.8"
    until: datetime | None = None
    updated_since: datetime | None = None
    text: list[str] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"statuses": list(self.statuses) if self.statuses is not None else None,
                "subsystems": self.subsystems, "components": self.components, "kinds": self.kinds,
                "culprits": self.culprits, "since": self.since.isoformat() if self.since else None,
                "since_version": self.since_version, "until": self.until.isoformat() if self.until else None,
                "updated_since": self.updated_since.isoformat() if self.updated_since else None,
                "text": self.text, "ids": self.ids}

    def describe(self) -> str:
        """The filter in the filter language (what the query was understood as)."""
        parts = []
        if self.statuses is not None:
            if set(self.statuses) == set(OPEN):
                parts.append("status:open")
            elif set(self.statuses) == set(CLOSED):
                parts.append("status:closed")
            else:
                parts.append("status:" + ",".join(self.statuses))
        parts += [f"subsystem:{s}/" for s in self.subsystems]
        parts += [f"subsystem:*/{c}" for c in self.components]
        parts += [f"kind:{k}" for k in self.kinds]
        parts += [f"culprit:{c}" for c in self.culprits]
        if self.since_version:
            parts.append(f"since:{self.since_version}")
        if self.since:
            parts.append(f"since:{self.since.date().isoformat()}")
        if self.until:
            parts.append(f"until:{(self.until - timedelta(days=1)).date().isoformat()}")
        if self.updated_since:
            parts.append(f"updated:{self.updated_since.date().isoformat()}")
        parts += [f"text:{_quote(t)}" for t in self.text]
        parts += [f"id:{i}" for i in self.ids]
        return " ".join(parts) or "(everything)"


def _quote(s: str) -> str:
    return f'"{s}"' if re.search(r"\s", s) else s


# -- parsing ------------------------------------------------------------------------------------
def _tokens(text: str) -> list[tuple[str, bool]]:
    """(token, was_quoted).  Unbalanced quotes never fail: fall back to a plain split."""
    out: list[tuple[str, bool]] = []
    try:
        lex = shlex.shlex(text, posix=True, punctuation_chars=False)
        lex.whitespace_split = True
        lex.commenters = ""
        raw = list(lex)
    except ValueError:
        return [(t, False) for t in text.split()]
    # which tokens were quoted: find them in the original text
    for tok in raw:
        quoted = bool(re.search(r"\s", tok)) or (f'"{tok}"' in text or f"'{tok}'" in text)
        out.append((tok, quoted))
    return out


def parse_date(value: str, now: datetime | None = None) -> datetime:
    """A point in time (UTC) for since:/until: values (see module docs)."""
    now = now or datetime.now(timezone.utc)
    v = value.strip().lower()
    if v == "today":
        return datetime.combine(now.date(), time(), timezone.utc)
    if v == "yesterday":
        return datetime.combine(now.date() - timedelta(days=1), time(), timezone.utc)
    m = re.fullmatch(r"(\d+)\s*([a-z]+)(?:\s*ago)?", v)
    if m and m.group(2) in UNITS:
        return now - timedelta(days=int(m.group(1)) * UNITS[m.group(2)])
    m = re.fullmatch(r"(\d{4})-(\d{1,2})", v)
    if m:
        try:
            return datetime(int(m.group(1)), int(m.group(2)), 1, tzinfo=timezone.utc)
        except ValueError as exc:
            raise QueryError(f"not a date: {value!r}") from exc
    try:
        if re.fullmatch(r"\d{4}-\d{1,2}-\d{1,2}", v):
            y, mo, d = (int(x) for x in v.split("-"))
            return datetime(y, mo, d, tzinfo=timezone.utc)
        dt = datetime.fromisoformat(value.strip())
    except ValueError as exc:
        raise QueryError(f"not a date: {value!r} (use YYYY-MM-DD, 30d, v6.8, ...)") from exc
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def _norm_subsystem(value: str) -> str:
    v = value.strip().strip("/").lower()
    v = re.sub(r"/+", "/", v)
    if not v or not _PATHLIKE.fullmatch(v):
        raise QueryError(f"not a subsystem path: {value!r}")
    return v


def _set_status(f: Filter, word: str) -> None:
    values: list[str] = []
    for part in word.lower().split(","):
        part = part.strip()
        if not part:
            continue
        s = STATUS_WORDS.get(part, part)
        if s == "open":
            values += OPEN
        elif s == "closed":
            values += CLOSED
        elif s == "all":
            f.statuses = None
            return
        elif s in STATUSES:
            values.append(s)
        else:
            raise QueryError(f"unknown status {part!r} (open, closed, all, {', '.join(STATUSES)})")
    merged = list(f.statuses or ()) + [v for v in values if v not in (f.statuses or ())]
    f.statuses = tuple(dict.fromkeys(merged))


def _set_since(f: Filter, value: str, now: datetime) -> None:
    if _VERSION.fullmatch(value.strip()):
        v = value.strip()
        f.since_version = v if v.lower().startswith("v") else "v" + v
    else:
        f.since = parse_date(value, now)


def _apply_key(f: Filter, key: str, value: str, now: datetime) -> None:
    if not value:
        raise QueryError(f"{key}: needs a value")
    if key == "status":
        _set_status(f, value)
    elif key == "subsystem":
        for v in value.split(","):
            v = v.strip()
            if v.startswith("*/"):
                f.components.append(_norm_subsystem(v[2:]))
            elif v:
                f.subsystems.append(_norm_subsystem(v))
    elif key == "kind":
        k = KIND_WORDS.get(value.lower(), value.lower())
        if k not in KINDS:
            raise QueryError(f"unknown kind {value!r} (performance, functional)")
        f.kinds.append(k)
    elif key == "culprit":
        c = value.lower().strip()
        if not re.fullmatch(r"[0-9a-f]{4,40}", c):
            raise QueryError(f"culprit: needs a commit id (hex), not {value!r}")
        f.culprits.append(c)
    elif key == "since":
        _set_since(f, value, now)
    elif key == "until":
        f.until = parse_date(value, now) + timedelta(days=1) if re.fullmatch(r"\d{4}-\d{1,2}-\d{1,2}", value) \
            else parse_date(value, now)
    elif key == "updated":
        f.updated_since = parse_date(value, now)
    elif key == "text":
        f.text.append(value)
    elif key == "id":
        if not value.lstrip("#").isdigit():
            raise QueryError(f"id: needs a number, not {value!r}")
        f.ids.append(int(value.lstrip("#")))


def _subsystem_word(f: Filter, word: str) -> bool:
    w = word.strip().rstrip(",.;").lower()
    if w in SUBSYSTEM_ALIASES:
        f.subsystems.append(SUBSYSTEM_ALIASES[w])
        return True
    if "/" in w and _PATHLIKE.fullmatch(w):
        f.subsystems.append(_norm_subsystem(w))
        return True
    if w in TOP_DIRS:
        f.subsystems.append(w)
        return True
    if re.fullmatch(r"[a-z][a-z0-9_-]{1,30}", w) and w not in STOPWORDS and w not in STATUS_WORDS \
            and w not in KIND_WORDS and w not in ("the", "last", "past", "this"):
        f.components.append(w)
        return True
    return False


def parse_query(text: str | list[str] | tuple[str, ...], *, now: datetime | None = None) -> Filter:
    """Parse a natural-language query and/or filter-language tokens into a :class:`Filter`."""
    now = now or datetime.now(timezone.utc)
    if isinstance(text, (list, tuple)):
        text = " ".join(text)
    if len(text) > 2000:
        raise QueryError("query too long")
    r = _Reader(Filter(), now, _tokens(text))
    i = 0
    while i < r.n:
        for phrase in r.PHRASES:  # the first that reads the words at i; single_word always does
            nxt = phrase(r, i)
            if nxt is not None:
                i = nxt
                break
    f = r.f
    f.kinds = list(dict.fromkeys(f.kinds))
    f.subsystems = list(dict.fromkeys(_canonical(x) or x for x in f.subsystems))
    f.components = list(dict.fromkeys(f.components))
    return f


class _Reader:
    """The tokens of one query and the :class:`Filter` they fill.  Each phrase method reads the
    phrase starting at token ``i`` into the filter and returns the index after it, or None when
    the words at ``i`` are not that phrase (:data:`PHRASES`, tried in order)."""

    def __init__(self, f: Filter, now: datetime, toks: list[tuple[str, bool]]) -> None:
        self.f, self.now, self.toks = f, now, toks
        self.words = [t for t, _ in toks]
        self.lower = [t.lower() for t in self.words]
        self.n = len(toks)

    def at(self, j: int) -> str:
        return self.lower[j] if 0 <= j < self.n else ""

    def word(self, i: int) -> str:
        return self.lower[i].strip(",;")

    def key_token(self, i: int) -> int | None:
        """``key:value`` of the filter language (``text: foo``: the value is the next token)."""
        tok = self.toks[i][0]
        m = re.fullmatch(r"([a-z_-]+):(.*)", tok, re.S | re.I)
        if not (m and (m.group(1).lower() in KEYS or m.group(1).lower() in KEY_ALIASES)):
            return None
        key = KEY_ALIASES.get(m.group(1).lower(), m.group(1).lower())
        value = m.group(2).strip()
        if not value and i + 1 < self.n:  # "text: foo"
            i += 1
            value = self.words[i]
        _apply_key(self.f, key, value, self.now)
        return i + 1

    def quoted(self, i: int) -> int | None:
        tok, quoted = self.toks[i]
        if not quoted:
            return None
        self.f.text.append(tok)
        return i + 1

    def status_phrase(self, i: int) -> int | None:
        """Multi-word statuses: fix pending, not reproduced, rerun scheduled, on the back burner."""
        w, at = self.word(i), self.at
        if w == "fix" and at(i + 1).startswith("pending"):
            _set_status(self.f, "fix-pending")
            return i + 2
        if w in ("pending", "awaiting") and at(i + 1).startswith("fix"):
            _set_status(self.f, "fix-pending")
            return i + 2
        if w == "not" and at(i + 1) in ("reproduced", "reproducible", "reproducing"):
            _set_status(self.f, "not-reproduced")
            return i + 2
        if w == "rerun" and at(i + 1) == "scheduled":
            _set_status(self.f, "rerun-scheduled")
            return i + 2
        if w in ("back", "on") and at(i + 1) in ("burner", "backburner") or (w == "on" and at(i + 1) == "back"
                                                                             and at(i + 2) == "burner"):
            _set_status(self.f, "backburner")
            return i + (3 if at(i + 1) == "back" else 2)
        return None

    def time_phrase(self, i: int) -> int | None:
        """"(in the) last|past N units", "last week", "this month", "today", "yesterday"."""
        w, at, now = self.word(i), self.at, self.now
        j = i
        if w == "in" and at(i + 1) == "the" and at(i + 2) in ("last", "past"):
            j = i + 2
        elif w in ("during", "over", "within") and at(i + 1) == "the" and at(i + 2) in ("last", "past"):
            j = i + 2
        elif w in ("within", "over") and at(i + 1) in ("last", "past"):
            j = i + 1
        if at(j) in ("last", "past", "this"):
            num, unit_at = 1, j + 1
            if at(j + 1).isdigit():
                num, unit_at = int(at(j + 1)), j + 2
            unit = at(unit_at).rstrip(",.;")
            if unit in UNITS and at(j) != "this":
                self.f.since = now - timedelta(days=num * UNITS[unit])
                return unit_at + 1
            if at(j) == "this" and unit in ("week", "month", "year"):
                today = now.date()
                start = {"week": today - timedelta(days=today.weekday()), "month": today.replace(day=1),
                         "year": today.replace(month=1, day=1)}[unit]
                self.f.since = datetime.combine(start, time(), timezone.utc)
                return unit_at + 1
        if w in ("today", "yesterday"):
            self.f.since = parse_date(w, now)
            return i + 1
        return None

    def since_until(self, i: int) -> int | None:
        """"since|after <date|version|last week|2 weeks ago>", "before|until <date>"."""
        w, at, now = self.word(i), self.at, self.now
        if w in ("since", "after") and i + 1 < self.n:
            value = at(i + 1).rstrip(",.;")
            if value in ("last", "past") and at(i + 2).rstrip(",.;") in UNITS:
                self.f.since = now - timedelta(days=UNITS[at(i + 2).rstrip(",.;")])
                return i + 3
            if value.isdigit() and at(i + 2).rstrip(",.;") in UNITS:  # "since 2 weeks (ago)"
                self.f.since = now - timedelta(days=int(value) * UNITS[at(i + 2).rstrip(",.;")])
                return i + (4 if at(i + 3) == "ago" else 3)
            _set_since(self.f, self.words[i + 1].rstrip(",.;"), now)
            return i + 2
        if w in ("before", "until", "till") and i + 1 < self.n:
            _apply_key(self.f, "until", self.words[i + 1].rstrip(",.;"), now)
            return i + 2
        return None

    def culprit_phrase(self, i: int) -> int | None:
        """"caused|introduced by (commit) <id>", "culprit|commit <id>", a bare 7-40 digit hex id."""
        w, at = self.word(i), self.at
        if w in ("caused", "introduced") and at(i + 1) == "by" and i + 2 < self.n:
            k = i + 3 if at(i + 2) == "commit" and i + 3 < self.n else i + 2
            _apply_key(self.f, "culprit", self.lower[k].rstrip(",.;"), self.now)
            return k + 1
        if w in ("culprit", "commit") and i + 1 < self.n and re.fullmatch(r"[0-9a-f]{4,40}", at(i + 1).rstrip(",.;")):
            _apply_key(self.f, "culprit", at(i + 1).rstrip(",.;"), self.now)
            return i + 2
        if _HEX.fullmatch(w):
            self.f.culprits.append(w)
            return i + 1
        return None

    def about_phrase(self, i: int) -> int | None:
        """"about|mentioning|containing ... <word>": a text term."""
        if self.word(i) in ("about", "mentioning", "containing", "matching", "titled", "regarding") and i + 1 < self.n:
            self.f.text.append(self.words[i + 1].strip(",;"))
            return i + 2
        return None

    def subsystem_phrase(self, i: int) -> int | None:
        """"in|under|touching (the) <path or component> (subsystem)"."""
        w, at = self.word(i), self.at
        if w in ("in", "under", "within", "touching", "subsystem", "affecting") and i + 1 < self.n:
            k = i + 1
            if at(k) == "the":
                k += 1
            if k < self.n and _subsystem_word(self.f, self.words[k]):
                i = k + 1
                if at(i) in ("subsystem", "subsystems", "code", "tree", "area"):
                    i += 1
                return i
        return None

    def single_word(self, i: int) -> int:
        """A status or kind word, a path, a filler word (skipped), or else a text term."""
        w, f = self.word(i), self.f
        if w in STATUS_WORDS:
            _set_status(f, w)
        elif w in KIND_WORDS:
            f.kinds.append(KIND_WORDS[w])
        elif "/" in w and _PATHLIKE.fullmatch(w) and not w.startswith(("http", "/")):
            f.subsystems.append(_norm_subsystem(w))
        elif w in STOPWORDS or w in ("in", "under", "since", "the", "last", "past", "ago", "days") or not w:
            pass
        else:
            f.text.append(self.toks[i][0].strip(",;"))
        return i + 1

    PHRASES = (key_token, quoted, status_phrase, time_phrase, since_until, culprit_phrase, about_phrase,
               subsystem_phrase, single_word)


def _canonical(subsystem: str) -> str | None:
    """extractors.subsystems.canonical (records store core-kernel areas by short name), imported
    only when it can change more than the slashes: loading the extractors package costs start-up."""
    s = subsystem.strip().strip("/")
    if "kernel" not in s:
        return s or None
    from extractors.subsystems import canonical

    return canonical(subsystem)


# -- running -------------------------------------------------------------------------------------
def _since_key(f: Filter) -> str | None:
    """The version key ``since:vX`` compares with (QueryError when it is no kernel release)."""
    if not f.since_version:
        return None
    from bot.tracker.fields import version_key

    key = version_key(f.since_version, cycle=True)
    if key is None:
        raise QueryError(f"not a kernel release: {f.since_version!r}")
    return key


def build_select(f: Filter, *, dialect: str = "sqlite") -> tuple[str, list]:
    """(SQL, parameters) of the count of the records the filter selects: see
    :mod:`storage.search` (bound parameters only)."""
    from storage.search import count_sql

    return count_sql([(f, _since_key(f))], dialect)


def run_query(store, f: Filter, *more: Filter, limit: int = 50, offset: int = 0) -> tuple[list, int]:
    """(records, total matching): the records that ``f`` (and every filter in ``more``) selects,
    most recently updated first, as :class:`storage.records.Record`."""
    from storage.records import search

    return search(store, _with_keys(f, *more), limit=limit, offset=offset)


def quick_query(url: str, f: Filter, *, limit: int = 50) -> tuple[list, int] | None:
    """:func:`run_query` on the database at ``url`` without SQLAlchemy (a current SQLite
    database: :func:`storage.search.quick_search`); None when that cannot be, and then
    :func:`run_query` on a Store does it."""
    from storage.search import quick_search

    return quick_search(url, _with_keys(f), limit=limit)


def _with_keys(*filters: Filter) -> list[tuple[Filter, str | None]]:
    return [(g, _since_key(g)) for g in filters]


def query(store, text: str | list[str], *, limit: int = 50, now: datetime | None = None
          ) -> tuple[Filter, list, int]:
    f = parse_query(text, now=now)
    rows, total = run_query(store, f, limit=limit)
    return f, rows, total
