"""Polling lore.kernel.org / public-inbox over HTTP: inbox feeds and searches.

One poll of a subscription:

1. GET the Atom feed (``INBOX/new.atom``, or ``INBOX/?q=QUERY&x=A`` for a search) with
   ``If-None-Match`` / ``If-Modified-Since`` from the last poll.  A 304, or a body identical to
   the last one (public-inbox's own httpd sends no validators), means nothing new.  An empty
   search answers 404: that is an empty result, not an error.
2. Each entry's Message-ID comes from its link (``.../INBOX/<msgid>/``).  An entry whose message
   is not stored yet, or that is newer than the newest ``updated`` seen and was never seen in
   this feed, names a new or changed thread: fetch the whole thread as ``t.mbox.gz`` (liblore
   ``get_mbox_by_msgid``; the single ``/raw`` message when the thread fetch fails), split the
   mboxrd, and ingest every message.  Threads are fetched by a small pool (``[lore]
   concurrency``, default 2); an entry already covered by a fetched thread is not fetched again.
3. The subscription state remembers where the poll stopped; it is written only after the
   messages are stored, and is not advanced past a thread that could not be fetched.

``--since DATE`` on the first poll backfills through the search endpoint, ``rt:DATE..`` added
to the query, page by page (``&o=``).  Later polls that find a feed full of unknown entries
(the feed window overflowed between polls) fill the gap the same way from the newest
``updated`` seen.

State (``subscriptions.state``)::

    {"polled": true, "etag": str|None, "last_modified": str|None, "feed_sha256": str|None,
     "updated": "2024-01-01T14:00:00Z"|None, "seen": [msgid, ...]}   # seen: newest last, bounded

Every failure is turned into ``SourceError`` with a one-line reason; callers record it.
"""

from __future__ import annotations

import email.parser
import gzip
import hashlib
import logging
import time
import urllib.parse
import zlib
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any

import requests

from bot import __version__
from bot.sources.ingest import Ingester
from bot.sources.limits import DEFAULT_LIMITS, IngestLimits
from bot.msgid import MessageId, stored_key

log = logging.getLogger(__name__)
# liblore logs every failed origin as "trying next host" at WARNING; our own errors carry the
# reason.  Without this, Python's last-resort handler would print them on the CLI's stderr.
logging.getLogger("liblore").addHandler(logging.NullHandler())

SEARCH_PAGE = 200  # public-inbox's Atom search page size
SEEN_WINDOW = 5000


# a thread may hold this many messages of the [ingest] max_message_bytes size at most
THREAD_MESSAGES = 8
RATIO_FLOOR = 16 * 1024 * 1024  # as for files: the compression ratio applies beyond this


class SourceError(Exception):
    """A source could not be read; ``str()`` is a one-line reason."""

    def __init__(self, reason: str, *, unreachable: bool = False, status: int | None = None) -> None:
        super().__init__(reason)
        self.unreachable = unreachable
        self.status = status


@dataclass
class LoreSettings:
    timeout: float = 30.0
    connect_timeout: float = 10.0
    retries: int = 3  # attempts per request, including the first
    backoff: float = 1.0  # seconds before the first retry; doubles each time
    concurrency: int = 2
    max_pages: int = 50
    contact: str | None = None
    seen_window: int = SEEN_WINDOW
    limits: IngestLimits = DEFAULT_LIMITS  # from [ingest]: bounds on what one message may cost

    @classmethod
    def from_config(cls, config: Any) -> "LoreSettings":
        sec = config.section("lore") if config is not None else {}
        s = cls()

        def num(key, cast, lo, hi):
            if key in sec:
                try:
                    value = cast(sec[key])
                except (TypeError, ValueError):
                    raise ValueError(f"[lore] {key} must be a number, not {sec[key]!r}") from None
                setattr(s, key, min(max(value, lo), hi))

        num("timeout", float, 0.1, 600)
        num("connect_timeout", float, 0.1, 600)
        num("retries", int, 1, 10)
        num("backoff", float, 0, 60)
        num("concurrency", int, 1, 8)
        num("max_pages", int, 1, 10000)
        s.contact = sec.get("contact") or None
        if config is not None:
            s.limits = IngestLimits.from_config(config)
        return s

    @property
    def user_agent(self) -> str:
        return f"regtriage/{__version__}" + (f" (+{self.contact})" if self.contact else "")


# -- HTTP ------------------------------------------------------------------------------------
def _reason(exc: BaseException, url: str) -> tuple[str, bool]:
    """One-line reason for a failed request, and whether the server was unreachable."""
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    for e in seen:
        if isinstance(e, requests.Timeout):
            return f"timed out fetching {url}", True
    for e in seen:
        if isinstance(e, requests.ConnectionError):
            text = str(e)
            if "Connection refused" in text:
                return f"connection refused by {urllib.parse.urlsplit(url).netloc} ({url})", True
            if "Name or service not known" in text or "getaddrinfo" in text or "NameResolution" in text:
                return f"cannot resolve host {urllib.parse.urlsplit(url).netloc}", True
            if "RemoteDisconnected" in text or "reset" in text.lower() or "aborted" in text.lower():
                return f"connection dropped by {urllib.parse.urlsplit(url).netloc} ({url})", True
            return f"cannot connect to {urllib.parse.urlsplit(url).netloc} ({url})", True
    status = getattr(exc, "status_code", None)
    if status:
        return f"HTTP {status} from {url}", False
    first = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
    return f"{first} ({url})", False


def _retryable(exc: BaseException) -> bool:
    status = getattr(exc, "status_code", None)
    if status is not None:
        return status >= 500 or status == 429
    return True  # no answer at all: connection error / timeout


class LoreClient:
    """A polite client for one public-inbox inbox, on top of liblore's LoreNode."""

    def __init__(self, inbox_url: str, settings: LoreSettings) -> None:
        from liblore import LoreNode

        self.base = inbox_url.rstrip("/") + "/"
        self.settings = settings
        self.node = LoreNode(self.base.rstrip("/"),
                             request_timeout=(settings.connect_timeout, settings.timeout),
                             follow_upstream=False)
        session = requests.Session()
        adapter = requests.adapters.HTTPAdapter(pool_maxsize=max(2, settings.concurrency))
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        session.headers["User-Agent"] = settings.user_agent
        self.session = session
        self.node.set_requests_session(session)
        self.requests = 0

    def close(self) -> None:
        self.node.close()
        self.session.close()

    def _retry(self, what: str, func):
        """Run ``func`` with bounded retries and exponential backoff on timeouts, connection
        errors and 5xx.  Raises SourceError."""
        from liblore import LibloreError

        attempts = max(1, self.settings.retries)
        for attempt in range(attempts):
            try:
                self.requests += 1
                return func()
            except (LibloreError, requests.RequestException, OSError, EOFError, zlib.error) as exc:
                reason, unreachable = _reason(exc, what)
                if isinstance(exc, (EOFError, zlib.error, gzip.BadGzipFile)):
                    raise SourceError(f"corrupt gzip from {what}: {exc}") from None
                if attempt + 1 < attempts and _retryable(exc):
                    delay = self.settings.backoff * (2 ** attempt)
                    log.info("%s; retrying in %.1fs", reason, delay)
                    time.sleep(delay)
                    continue
                if attempts > 1 and _retryable(exc):
                    reason += f" (after {attempts} attempts)"
                raise SourceError(reason, unreachable=unreachable,
                                  status=getattr(exc, "status_code", None)) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def get(self, url: str, headers: dict[str, str] | None = None) -> requests.Response:
        """GET with retries; 2xx/3xx/4xx are returned, 5xx after the last attempt raises."""
        from liblore import RemoteError

        def once():
            resp = self.node.request("GET", url, headers=headers or {})
            if resp.status_code >= 500 or resp.status_code == 429:
                resp.close()
                raise RemoteError(f"HTTP {resp.status_code}", status_code=resp.status_code)
            return resp

        return self._retry(url, once)

    def _bounded_get(self, url: str, *, gz: bool) -> bytes:
        """GET ``url`` through liblore's session, streaming, within the ``[ingest]`` limits.

        ``gz``: the body is a ``t.mbox.gz`` thread, decompressed as it streams in; the thread
        may expand to at most THREAD_MESSAGES x ``max_message_bytes`` (and
        ``max_decompressed_bytes``), and beyond 16 MiB to at most ``max_compression_ratio``
        times what was downloaded.  Otherwise (``/raw``) at most ``max_message_bytes`` are read.
        Over a limit, or on a 4xx, raises SourceError (a thread then falls back to ``/raw``)."""
        lim = self.settings.limits
        cap_total = (min(lim.max_decompressed_bytes, THREAD_MESSAGES * lim.max_message_bytes) if gz
                     else lim.max_message_bytes)
        resp = self.node.request("GET", url, stream=True)
        try:
            if resp.status_code >= 500 or resp.status_code == 429:
                resp.raise_for_status()  # retried by _retry
            if resp.status_code != 200:
                raise SourceError(f"HTTP {resp.status_code} for {url}", status=resp.status_code)
            out = bytearray()
            read = 0
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            in_member = False
            for chunk in resp.iter_content(1 << 16):
                read += len(chunk)
                if not gz:
                    out += chunk
                    if len(out) > cap_total:
                        raise SourceError(f"{url}: larger than [ingest] max_message_bytes ({cap_total})")
                    continue
                if read > lim.max_file_bytes:
                    raise SourceError(f"{url}: larger than [ingest] max_file_bytes ({lim.max_file_bytes})")
                while chunk:
                    if not in_member:
                        chunk = chunk.lstrip(b"\0")  # padding between or after gzip members
                        if not chunk:
                            break
                    in_member = True
                    cap = min(cap_total, max(RATIO_FLOOR, lim.max_compression_ratio * read))
                    out += d.decompress(chunk, max(1, cap - len(out) + 1))
                    if len(out) > cap:
                        raise SourceError(f"{url}: expands beyond the [ingest] limits (max_message_bytes per "
                                          "thread message, max_decompressed_bytes, max_compression_ratio)")
                    chunk = d.unconsumed_tail
                    if d.eof:  # another gzip member may follow
                        chunk = d.unused_data + chunk
                        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                        in_member = False
            if in_member:
                raise SourceError(f"corrupt gzip from {url}: the stream ends inside a member")
            return bytes(out)
        finally:
            resp.close()

    def thread_mbox(self, msgid: str) -> list[bytes]:
        """The whole thread of ``msgid`` (t.mbox.gz), or the single /raw message when the
        thread cannot be had.  Raises SourceError."""
        quoted = urllib.parse.quote_plus(msgid)
        try:
            url = f"{self.base}{quoted}/t.mbox.gz"
            data = self._retry(url, lambda: self._bounded_get(url, gz=True))
            msgs = split_mboxrd(data)
            if msgs:
                return msgs
            first = SourceError(f"empty thread mbox for <{msgid}>")
        except SourceError as exc:
            if exc.unreachable:
                raise
            first = exc
        try:
            raw_url = f"{self.base}{quoted}/raw"
            data = self._retry(raw_url, lambda: self._bounded_get(raw_url, gz=False))
        except SourceError as exc:
            raise SourceError(f"thread <{msgid}>: {first}; single message: {exc}",
                              unreachable=exc.unreachable, status=exc.status) from None
        msgs = split_mboxrd(data) if data.startswith(b"From ") else [data]
        if not msgs:
            raise SourceError(f"empty answer for <{msgid}>/raw")
        return msgs


# -- formats ---------------------------------------------------------------------------------
def split_mboxrd(data: bytes) -> list[bytes]:
    """Split public-inbox mboxrd output into the stored messages, byte-exact.

    public-inbox writes each message as ``From mboxrd@z ...`` + message + one blank line, and
    escapes body ``From `` lines with ``>``.  liblore undoes the escaping; the separator's extra
    newline is dropped here so a message fetched over HTTP has the same bytes as the blob in the
    inbox's git epoch (and as ``/raw``)."""
    from liblore.utils import split_mbox_as_bytes

    if not data:
        return []
    if data.endswith(b"\n"):
        data = data[:-1]
    out = []
    for raw in split_mbox_as_bytes(data):
        if raw.endswith(b"\n\n") or raw.endswith(b"\r\n\n"):
            raw = raw[:-1]
        if raw.strip():
            out.append(raw)
    return out


_HEADER_PARSER = email.parser.BytesHeaderParser()


def raw_msgid(raw: bytes) -> str | None:
    try:
        head = raw.split(b"\n\n", 1)[0]
        return stored_key(_HEADER_PARSER.parsebytes(head + b"\n\n").get("Message-ID"))
    except Exception:  # noqa: BLE001 - hostile input
        return None


@dataclass
class Entry:
    msgid: str
    updated: str | None  # ISO 8601, UTC, "Z"


def parse_feed(body: bytes, url: str) -> list[Entry]:
    """Entries of an Atom feed; SourceError for anything that is not a usable feed."""
    import feedparser

    if not body.strip():
        raise SourceError(f"empty feed from {url}")
    d = feedparser.parse(body)
    exc = d.get("bozo_exception") if d.get("bozo") else None
    harmless = (feedparser.CharacterEncodingOverride, getattr(feedparser, "NonXMLContentType", ()))
    if exc is not None and not isinstance(exc, harmless):
        first = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        raise SourceError(f"garbage feed from {url}: not well-formed XML ({first})")
    if not d.get("version"):
        raise SourceError(f"garbage feed from {url}: not an Atom/RSS feed")
    out: list[Entry] = []
    for e in d.entries:
        link = e.get("link")
        if not link:
            for lk in e.get("links", []):
                if lk.get("rel", "alternate") == "alternate" and lk.get("href"):
                    link = lk["href"]
                    break
        mid = MessageId.from_inbox_url(link)
        if not mid:
            continue
        up = e.get("updated_parsed") or e.get("published_parsed")
        updated = time.strftime("%Y-%m-%dT%H:%M:%SZ", up) if up else None
        out.append(Entry(mid, updated))
    return out


# -- polling ---------------------------------------------------------------------------------
@dataclass
class PollOutcome:
    new_messages: int = 0
    error: str | None = None
    state: dict[str, Any] | None = None
    stats: dict[str, Any] = field(default_factory=dict)


def _search_url(base: str, query: str, offset: int = 0) -> str:
    params = [("q", query), ("x", "A")]
    if offset:
        params.append(("o", str(offset)))
    return base + "?" + urllib.parse.urlencode(params, quote_via=urllib.parse.quote)


def _combine(query: str, extra: str) -> str:
    return f"({query}) {extra}" if query else extra


def _search_pages(client: LoreClient, query: str, settings: LoreSettings,
                  stop=None) -> list[Entry]:
    """All pages of a search (newest first).  ``stop(page)`` ends paging early."""
    out: list[Entry] = []
    offset = 0
    for _ in range(settings.max_pages):
        url = _search_url(client.base, query, offset)
        resp = client.get(url)
        if resp.status_code == 404:
            break
        if resp.status_code != 200:
            raise SourceError(f"HTTP {resp.status_code} from {url}", status=resp.status_code)
        page = parse_feed(resp.content, url)
        out.extend(page)
        if len(page) < SEARCH_PAGE or (stop and stop(page)):
            break
        offset += len(page)
    return out


def poll_feed(store, sub: dict[str, Any], settings: LoreSettings, since: str | None = None,
              progress=None) -> PollOutcome:
    """Poll one ``inbox`` or ``search`` subscription once.  Never raises for source failures:
    they come back in ``PollOutcome.error`` with whatever progress was made."""
    state: dict[str, Any] = dict(sub.get("state") or {})
    kind, base, query = sub["kind"], sub["url"].rstrip("/") + "/", sub.get("query") or ""
    origin = f"lore:{base}" + (f"?q={query}" if query else "")
    client = LoreClient(base, settings)
    ing = Ingester(store, limits=settings.limits)
    out = PollOutcome(state=state)
    try:
        _poll(store, client, ing, kind, base, query, settings, state, since, origin, out, progress)
    except SourceError as exc:
        out.error = str(exc)
    finally:
        try:
            ing.flush()
        finally:
            client.close()
    out.new_messages = len(ing.stored_ids)
    out.stats.update(ing.stats, requests=client.requests)
    return out


def _poll(store, client: LoreClient, ing: Ingester, kind: str, base: str, query: str,
          settings: LoreSettings, state: dict[str, Any], since: str | None, origin: str,
          out: PollOutcome, progress) -> None:
    first = not state.get("polled")
    last_updated: str | None = state.get("updated")
    if first and since:
        entries, validators, feed_sha = _search_pages(client, _combine(query, f"rt:{since}.."), settings), {}, None
    else:
        got = _read_feed(client, kind, base, query, state, first, out)
        if got is None:
            return
        entries, validators, feed_sha = got
        if entries and last_updated and not first:
            entries = _fill_gap(store, client, query, settings, entries, last_updated, out)
    todo = _entries_to_fetch(store, entries, state, last_updated)
    failures = _fetch_threads(client, ing, todo, settings, origin, progress)
    _record_progress(state, entries, failures, settings, last_updated, validators, feed_sha)
    if failures:
        e, reason = failures[0]
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        raise SourceError(f"{len(failures)} of {len(todo)} threads not fetched: {reason}{more}")


def _read_feed(client: LoreClient, kind: str, base: str, query: str, state: dict[str, Any], first: bool,
               out: PollOutcome) -> tuple[list[Entry], dict[str, str | None], str | None] | None:
    """The inbox's new.atom or the search feed, conditionally (ETag, Last-Modified, the feed's
    hash): (entries, validators, feed hash), or None when nothing changed since the last poll."""
    url = base + "new.atom" if kind == "inbox" else _search_url(base, query)
    headers = {}
    if state.get("etag"):
        headers["If-None-Match"] = state["etag"]
    if state.get("last_modified"):
        headers["If-Modified-Since"] = state["last_modified"]
    resp = client.get(url, headers)
    if resp.status_code == 304:
        out.stats["not_modified"] = True
        state["polled"] = True
        return None
    if resp.status_code == 404 and kind == "search":
        return [], {}, None
    if resp.status_code != 200:
        hint = " (no such inbox?)" if resp.status_code == 404 else ""
        raise SourceError(f"HTTP {resp.status_code} from {url}{hint}", status=resp.status_code)
    body = resp.content
    feed_sha = hashlib.sha256(body).hexdigest()
    validators = {"etag": resp.headers.get("ETag"), "last_modified": resp.headers.get("Last-Modified")}
    if feed_sha == state.get("feed_sha256") and not first:
        out.stats["unchanged"] = True
        state.update(validators)
        return None
    return parse_feed(body, url), validators, feed_sha


def _fill_gap(store, client: LoreClient, query: str, settings: LoreSettings, entries: list[Entry],
              last_updated: str, out: PollOutcome) -> list[Entry]:
    """The feed window may have overflowed since the last poll: fill the gap by searching."""
    known = store.message_ids(e.msgid for e in entries)
    if known or not all((e.updated or "") > last_updated for e in entries):
        return entries
    since_day = (datetime.strptime(last_updated[:10], "%Y-%m-%d").date() - timedelta(days=1)).isoformat()
    seen_ids = {e.msgid for e in entries}
    more = _search_pages(client, _combine(query, f"rt:{since_day}.."), settings,
                         stop=lambda page: any((e.updated or "") <= last_updated for e in page))
    out.stats["gap_filled"] = True
    return entries + [e for e in more if e.msgid not in seen_ids]


def _entries_to_fetch(store, entries: list[Entry], state: dict[str, Any], last_updated: str | None) -> list[Entry]:
    """Entries whose thread to fetch, oldest first: not stored yet, or updated since the last
    poll and not seen."""
    seen = set(state.get("seen") or [])
    stored = store.message_ids({e.msgid for e in entries})
    todo: list[Entry] = []
    queued: set[str] = set()
    for e in reversed(entries):  # oldest first
        if e.msgid in queued:
            continue
        newer = last_updated is not None and (e.updated or "") > last_updated
        if e.msgid not in stored or (newer and e.msgid not in seen):
            todo.append(e)
            queued.add(e.msgid)
    return todo


def _record_progress(state: dict[str, Any], entries: list[Entry], failures: list, settings: LoreSettings,
                     last_updated: str | None, validators: dict[str, str | None], feed_sha: str | None) -> None:
    """Progress is written only for what is stored: failed entries stay unknown and are fetched
    again next time; the validators are kept only when nothing failed."""
    seen_list: list[str] = list(state.get("seen") or [])
    seen = set(seen_list)
    failed = {e.msgid for e, _ in failures}
    for e in reversed(entries):
        if e.msgid not in failed and e.msgid not in seen:
            seen.add(e.msgid)
            seen_list.append(e.msgid)
    state["seen"] = seen_list[-settings.seen_window:]
    ok_updates = [e.updated for e in entries if e.updated and e.msgid not in failed]
    if failures:
        oldest_failed = min((e.updated or "" for e, _ in failures), default="")
        ok_updates = [u for u in ok_updates if u < oldest_failed] if oldest_failed else []
    if ok_updates:
        state["updated"] = max(ok_updates + ([last_updated] if last_updated else []))
    state["polled"] = True
    if not failures:
        state["feed_sha256"] = feed_sha
        state.update(validators)
    else:
        state["feed_sha256"] = None
        state["etag"] = state["last_modified"] = None


def _fetch_threads(client: LoreClient, ing: Ingester, todo: list[Entry], settings: LoreSettings,
                   origin: str, progress) -> list[tuple[Entry, str]]:
    """Fetch the threads of ``todo`` with a small pool and ingest them (in this thread)."""
    failures: list[tuple[Entry, str]] = []
    covered: set[str] = set()
    queue = list(todo)
    pending: dict[Any, Entry] = {}
    abort: str | None = None
    with ThreadPoolExecutor(max_workers=settings.concurrency, thread_name_prefix="lore") as pool:
        while queue or pending:
            while queue and abort is None and len(pending) < settings.concurrency:
                e = queue.pop(0)
                if e.msgid in covered:
                    continue
                pending[pool.submit(client.thread_mbox, e.msgid)] = e
            if not pending:
                break
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                e = pending.pop(fut)
                try:
                    msgs = fut.result()
                except SourceError as exc:
                    failures.append((e, str(exc)))
                    if exc.unreachable:
                        abort = str(exc)
                    continue
                for raw in msgs:
                    mid = raw_msgid(raw)
                    if mid:
                        covered.add(mid)
                    ing.add(raw, origin)
                covered.add(e.msgid)
                if progress:
                    progress(len(covered))
    if abort is not None:
        done_ids = covered | {e.msgid for e, _ in failures}
        failures += [(e, f"not tried: {abort}") for e in queue if e.msgid not in done_ids]
    return failures


def validate_since(since: str | None) -> str | None:
    if since is None:
        return None
    try:
        return date.fromisoformat(since.strip()).isoformat()
    except ValueError:
        raise ValueError(f"--since must be a date as YYYY-MM-DD, not {since!r}") from None


def now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
