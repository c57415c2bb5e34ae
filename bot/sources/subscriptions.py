"""Subscriptions: what ``regtriage subscribe`` accepts, and one ``poll`` over all of them.

Kinds: ``inbox`` (a public-inbox / lore inbox URL, polled through ``new.atom``), ``search``
(an inbox URL with a query: ``?q=...`` in the URL or ``--query``), ``git`` (``--git``: an inbox
or epoch URL to mirror, or a local inbox dir / epoch repository read in place).
"""

from __future__ import annotations

import os
import re
import urllib.parse
from pathlib import Path
from typing import Any

SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
EPOCH_SEG = re.compile(r"^(\d+)(?:\.git)?$")


def normalize_subscription(url: str, query: str | None = None, git: bool = False) -> tuple[str, str, str]:
    """``(kind, url, query)`` in canonical form, or ValueError with a one-line reason."""
    url = (url or "").strip()
    query = (query or "").strip()
    if not url:
        raise ValueError("empty URL: give an inbox URL such as https://lore.kernel.org/linux-mm/")
    m = SCHEME_RE.match(url)
    if not m or (len(m.group(1)) == 1 and os.name == "nt"):
        return _local(url, query)
    scheme = m.group(1).lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"unsupported URL scheme {scheme!r} in {url!r}: "
                         "only http(s) URLs or existing local paths")
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname:
        raise ValueError(f"URL without a host: {url!r}")
    try:
        parts.port  # noqa: B018 - validates the port
    except ValueError:
        raise ValueError(f"bad port in URL {url!r}") from None
    qs = urllib.parse.parse_qs(parts.query)
    url_q = (qs.get("q") or [""])[0].strip()
    if url_q and query and url_q != query:
        raise ValueError(f"two different queries: ?q={url_q!r} in the URL and --query {query!r}")
    query = query or url_q
    segs = [s for s in parts.path.split("/") if s]
    if segs and segs[-1] in ("new.atom", "new.html"):
        segs.pop()
    if any("@" in s for s in segs[1:]):
        raise ValueError(f"{url!r} looks like a message URL; subscribe to its inbox instead "
                         "(e.g. https://lore.kernel.org/linux-mm/)")
    epoch = None
    if segs and EPOCH_SEG.match(segs[-1]) and len(segs) >= 2:
        epoch = int(EPOCH_SEG.match(segs[-1]).group(1))
        segs.pop()
        if segs and segs[-1] == "git":
            segs.pop()
    if not segs:
        raise ValueError(f"{url!r} names no inbox: give an inbox URL such as "
                         "https://lore.kernel.org/linux-mm/")
    netloc = parts.netloc.lower() if "@" not in parts.netloc else parts.netloc
    base = f"{scheme}://{netloc}/" + "".join(f"{s}/" for s in segs)
    if git:
        if query:
            raise ValueError("a search cannot be followed through git: drop --git or the query")
        return "git", (f"{base}{epoch}" if epoch is not None else base), ""
    if epoch is not None:
        raise ValueError(f"{url!r} is a git epoch URL: use --git to mirror it")
    return ("search" if query else "inbox"), base, query


def _local(path: str, query: str) -> tuple[str, str, str]:
    p = Path(path).expanduser()
    if not p.exists():
        raise ValueError(f"not an http(s) URL, and no such local path: {path}")
    if query:
        raise ValueError("a local inbox is read through git: a query cannot be used with it")
    from bot.sources.pigit import epoch_dirs

    p = p.resolve()
    epoch_dirs(p)  # ValueError when it is neither an inbox nor an epoch repository
    return "git", str(p), ""


def subscription_label(sub: dict[str, Any]) -> str:
    return f"#{sub['id']} {sub['kind']} {sub['url']}" + (f" q={sub['query']}" if sub.get("query") else "")


def poll_one(store, sub: dict[str, Any], settings, home: Path, since: str | None = None) -> dict[str, Any]:
    """Poll one subscription and record the outcome on it; never raises.  Returns its detail:
    ``{"id", "kind", "url", "new_messages", "error", ...counts}``."""
    from bot.sources import lore, pigit

    try:
        if sub["kind"] == "git":
            out = pigit.poll_git(store, sub, settings, home)
        elif sub["kind"] in ("inbox", "search"):
            out = lore.poll_feed(store, sub, settings, since=since)
        else:
            out = lore.PollOutcome(error=f"unknown subscription kind {sub['kind']!r}")
    except Exception as exc:  # noqa: BLE001 - one subscription never stops the others
        text = str(exc).splitlines()[0] if str(exc) else ""
        out = lore.PollOutcome(error=f"{exc.__class__.__name__}: {text}".rstrip(": "))
    detail = {"id": sub["id"], "kind": sub["kind"], "url": sub["url"],
              "new_messages": out.new_messages, "error": out.error}
    detail.update({k: v for k, v in (out.stats or {}).items() if k in (
        "stored", "duplicates", "quarantined", "requests", "not_modified", "unchanged",
        "gap_filled", "commits", "deleted", "seconds")})
    try:
        store.update_subscription(sub["id"], state=out.state, error=out.error)
        if out.error:
            store.record_source_error(f"{sub['kind']}:{sub['url']}", out.error, sub["id"])
    except Exception as exc:  # noqa: BLE001
        detail["error"] = (out.error + "; " if out.error else "") + f"cannot record poll: {exc.__class__.__name__}"
    return detail


def poll_settings(config) -> tuple[Any, Path]:
    from bot.sources import lore

    home = Path(getattr(config, "home", None) or os.environ.get("REGTRIAGE_HOME") or ".")
    return lore.LoreSettings.from_config(config), home


def poll_all(store, config, since: str | None = None, progress: bool = False) -> dict[str, Any]:
    """Poll every subscription once.  One failing subscription records its error and the
    others go on.  ``new_messages``: messages stored by this poll that were not known before."""
    from bot.sources import lore

    since = lore.validate_since(since)
    settings, home = poll_settings(config)
    subs = store.subscriptions()
    result: dict[str, Any] = {"subscriptions": len(subs), "new_messages": 0, "errors": [],
                              "details": []}
    console = None
    if progress:
        from rich.console import Console

        console = Console(stderr=True, highlight=False)
    for sub in subs:
        label = subscription_label(sub)
        if console:
            console.print(f"polling {label}", markup=False)
        detail = poll_one(store, sub, settings, home, since)
        result["new_messages"] += detail["new_messages"]
        result["details"].append(detail)
        if detail["error"]:
            result["errors"].append(f"{label}: {detail['error']}")
        if console:
            console.print(f"  {detail['new_messages']} new" + (f", error: {detail['error']}" if detail["error"] else ""),
                          markup=False)
    return result
