"""The Atom 1.0 feed of the dashboard (``GET /feed.atom``): new regressions and regressions
confirmed by reruns, newest first.  Built with ElementTree from cleaned text (no control
characters, no bidi overrides), so mail-derived strings cannot break the document.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bot.textsafe import neutralise_bidi
from bot.tracker.entry import clean_text
from bot.web.render import change, day, short
from storage.records import feed_rows

ATOM = "http://www.w3.org/2005/Atom"
FEED_SIZE = 50
_XML_BAD = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(value: Any) -> str:
    return neutralise_bidi(_XML_BAD.sub("", clean_text(value)))


def feed_events(store, size: int = FEED_SIZE) -> list[dict[str, Any]]:
    """New records and confirmations, newest first: ``{"kind": "new"|"confirmed", "at",
    "published", "record": row, "history_id"}``."""
    new, first, confirmed = feed_rows(store, size)
    events = []
    for x in new:
        events.append({"kind": "new", "at": first.get(x["id"]) or x["created_at"], "published": x["created_at"],
                       "record": x, "history_id": None})
    for x in confirmed:
        events.append({"kind": "confirmed", "at": x["at"], "published": x["at"], "record": x,
                       "history_id": x["history_id"]})
    events.sort(key=lambda ev: (ev["at"] or datetime.min.replace(tzinfo=timezone.utc), ev["kind"]), reverse=True)
    return events[:size]


def atom_feed(store, base_url: str) -> bytes:
    """The Atom 1.0 document (UTF-8 bytes); ``base_url`` ends with a slash."""
    ET.register_namespace("", ATOM)

    def el(parent, tag, text=None, **attrs):
        node = ET.SubElement(parent, f"{{{ATOM}}}{tag}", {k: v for k, v in attrs.items() if v is not None})
        if text is not None:
            node.text = _xml(text)
        return node

    def stamp(dt: datetime | None) -> str:
        dt = dt or datetime.now(timezone.utc)
        return dt.astimezone(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")

    events = feed_events(store)
    feed = ET.Element(f"{{{ATOM}}}feed")
    el(feed, "id", "tag:regtriage,2024:feed/regressions")
    el(feed, "title", "regtriage: new and confirmed regressions")
    el(feed, "updated", stamp(events[0]["at"] if events else None))
    author = el(feed, "author")
    el(author, "name", "regtriage")
    el(feed, "link", rel="self", href=base_url + "feed.atom", type="application/atom+xml")
    el(feed, "link", rel="alternate", href=base_url, type="text/html")
    el(feed, "generator", "regtriage")
    for ev in events:
        rec = ev["record"]
        rid = int(rec["id"])
        entry = el(feed, "entry")
        title = rec["title"] or "(no subject)"
        if ev["kind"] == "new":
            el(entry, "id", f"tag:regtriage,2024:regression/{rid}/new")
            el(entry, "title", f"New regression #{rid}: {title}")
        else:
            el(entry, "id", f"tag:regtriage,2024:regression/{rid}/confirmed/{int(ev['history_id'])}")
            el(entry, "title", f"Confirmed regression #{rid}: {title}")
        el(entry, "updated", stamp(ev["at"]))
        el(entry, "published", stamp(ev["published"] or ev["at"]))
        el(entry, "link", rel="alternate", type="text/html", href=f"{base_url}regressions/{rid}")
        el(entry, "category", term=_xml(rec["status"]))
        facts = [f"status: {rec['status']}"]
        for label, key in (("kind", "kind"), ("subsystem", "subsystem"), ("metric", "metric")):
            if rec.get(key):
                facts.append(f"{label}: {rec[key]}")
        if rec.get("culprit_commit"):
            c = f"culprit: {short(rec['culprit_commit'])}"
            if rec.get("culprit_subject"):
                c += f' ("{rec["culprit_subject"]}")'
            facts.append(c)
        if change(rec.get("change_percent")):
            facts.append(f"change: {change(rec['change_percent'])}")
        if rec.get("created_at"):
            facts.append(f"reported: {day(rec['created_at'])}")
        if rec.get("duplicate_of"):
            facts.append(f"duplicate of #{int(rec['duplicate_of'])}")
        el(entry, "summary", "; ".join(facts), type="text")
    return b'<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(feed, encoding="utf-8", xml_declaration=False)


def feed_routes(store) -> list[Route]:
    """``GET /feed.atom`` over ``store``."""
    def feed(request: Request):
        base = str(request.base_url)
        if not base.endswith("/"):
            base += "/"
        return Response(atom_feed(store, base), media_type="application/atom+xml; charset=utf-8")

    return [Route("/feed.atom", feed, methods=["GET", "HEAD"])]
