"""What the bot says in chat (pure): the short IRC line of an event, the Matrix plain-text and
HTML bodies of an event (the tracker entry rendered from ``templates/entry.md.j2``, Markdown
to HTML by markdown-it with raw HTML disabled), and the short chat answers.

Every mail-derived string is untrusted: on IRC it loses control characters (colours, bold,
CTCP's \\x01, line breaks) and is cut to fit one line; in Matrix HTML it is escaped by the
entry template (bot.tracker.entry.md_escape) and again by markdown-it, and links are only
http(s) URLs we build.
"""

from __future__ import annotations

import html as _html
import re
from typing import Any, Iterable
from urllib.parse import quote

from bot.notify.routing import LABELS, TEST_EVENT
from bot.lab.verdict_report import VERDICT_EVENTS, latest
from bot.tracker.entry import clean_text, render, safe_url, template_env

IRC_MAX_BYTES = 400  # of the text of one PRIVMSG; the whole line (prefix, target) must fit in 512
MATRIX_MAX_CHARS = 24000  # well under the 64 KiB event limit, for body and formatted_body each
ELLIPSIS = "…"
_URL = re.compile(r"https?://[^\s<>\"]+")


# -- small helpers ---------------------------------------------------------------------------
def record_link(base_url: str | None, entry: dict[str, Any] | None = None, rid: int | None = None) -> str | None:
    """The record's web page (``[web] base_url``), else its report on lore."""
    rid = rid if rid is not None else (entry or {}).get("id")
    if base_url and rid is not None:
        return f"{base_url.rstrip('/')}/regressions/{int(rid)}"
    url = ((entry or {}).get("report") or {}).get("url")
    return safe_url(url) or None


def query_link(base_url: str | None, text: str) -> str | None:
    if not base_url:
        return None
    return f"{base_url.rstrip('/')}/?q={quote(text, safe='')}"


def one_line(value: Any) -> str:
    """A mail-derived value for chat: one line, no control characters (IRC colours, CTCP)."""
    return clean_text(value)


def cut(text: str, max_bytes: int) -> str:
    """``text`` cut to ``max_bytes`` of UTF-8 at a character boundary, with an ellipsis."""
    if len(text.encode("utf-8")) <= max_bytes:
        return text
    budget = max_bytes - len(ELLIPSIS.encode("utf-8"))
    out = text.encode("utf-8")[:max(budget, 0)].decode("utf-8", "ignore")
    return out.rstrip() + ELLIPSIS


def fit(parts: list[str], tail: str, max_bytes: int) -> str:
    """Join ``parts`` and ``tail`` (the link, kept whole) into at most ``max_bytes``: the
    details after the first part are dropped (last first), then the first part (the title) is cut."""
    tail = f" {tail}" if tail else ""
    room = max_bytes - len(tail.encode("utf-8"))
    parts = [p for p in parts if p]
    while parts:
        text = " ".join(parts)
        if len(text.encode("utf-8")) <= room:
            return text + tail
        if len(parts) > 1:
            parts.pop()  # drop details before cutting the title
            continue
        return cut(text, room) + tail
    return tail.strip()


def change_text(entry: dict[str, Any]) -> str:
    c = entry.get("change_percent")
    metric = one_line(entry.get("metric"))
    pc = ""
    if c is not None:
        try:
            pc = f"{float(c):+.1f}%"
        except (TypeError, ValueError):
            pc = one_line(c)
    return " ".join(x for x in (metric, pc) if x)


def summary_parts(entry: dict[str, Any]) -> list[str]:
    """The details shown after the title: subsystem, kind, change, culprit."""
    out = []
    if entry.get("subsystem"):
        out.append(f"[{one_line(entry['subsystem'])}]")
    bits = [one_line(entry.get("kind") or "")]
    ch = change_text(entry)
    if ch:
        bits.append(ch)
    if any(bits):
        out.append("(" + ", ".join(b for b in bits if b) + ")")
    culprit = entry.get("culprit") or {}
    if culprit.get("commit"):
        out.append(f"culprit {one_line(culprit['commit'])[:12]}")
    return out


# -- IRC -------------------------------------------------------------------------------------
def irc_line(event: str, entry: dict[str, Any], base_url: str | None, max_bytes: int = IRC_MAX_BYTES) -> str:
    """``regtriage: confirmed #12 page_fault1 throughput regression [mm] (performance, -15.0%)
    culprit 54a6eb5c4765 https://.../regressions/12`` -- one line, at most ``max_bytes``."""
    label = LABELS.get(event, event)
    head = f"{label} #{int(entry['id'])}:"
    title = one_line(entry.get("title")) or "(no title)"
    link = record_link(base_url, entry) or ""
    figures = irc_figures(event, entry)  # a lab verdict: its figures come first, the title after
    if figures:
        return fit([f"{head} {one_line(figures)};", title], link, max_bytes)
    return fit([f"{head} {title}", *summary_parts(entry)], link, max_bytes)


def irc_test_line(target: str, when: str) -> str:
    return cut(f"regtriage test message for {one_line(target)} at {when}: notifications reach this channel.",
               IRC_MAX_BYTES)


# -- Matrix ------------------------------------------------------------------------------------
def markdown_to_html(md: str) -> str:
    """CommonMark to HTML; raw HTML in the input is shown as text, unsafe link schemes dropped."""
    from markdown_it import MarkdownIt

    mdi = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    return mdi.render(md).strip()


def _cap(text: str, limit: int = MATRIX_MAX_CHARS) -> str:
    return text if len(text) <= limit else text[:limit - 1].rstrip() + ELLIPSIS


def matrix_bodies(event: str, entry: dict[str, Any], base_url: str | None) -> tuple[str, str]:
    """(plain body, HTML formatted_body): a heading line with the link, then the tracker entry
    (plain: the text rendering; HTML: the Markdown rendering)."""
    from bot.tracker.entry import md_escape

    label = LABELS.get(event, event)
    link = record_link(base_url, entry)
    title = one_line(entry.get("title")) or "(no title)"
    plain_head = f"[regtriage] {label}: regression #{int(entry['id'])}: {title}"
    if link:
        plain_head += f"\n{link}"
    plain = plain_head + "\n\n" + render(entry, "txt", base_url)
    md_head = f"**\\[regtriage\\] {md_escape(label)}**"
    if link:
        md_head += f" · [web page]({safe_url(link)})"
    md = md_head + "\n\n" + render(entry, "md", base_url)
    body_html = markdown_to_html(md)
    if len(body_html) > MATRIX_MAX_CHARS:  # too long: heading and entry without the history
        short = dict(entry, history=[], related=entry.get("related", [])[:10])
        body_html = markdown_to_html(md_head + "\n\n" + render(short, "md", base_url))
    return _cap(plain.rstrip() + "\n"), _cap(body_html)


def matrix_test_bodies(target: str, when: str) -> tuple[str, str]:
    text = f"regtriage test message for {one_line(target)} at {when}: notifications reach this room."
    return text, "<p>" + _html.escape(text) + "</p>"


def lines_to_matrix(lines: Iterable[str]) -> tuple[str, str]:
    """Chat answer lines -> (plain body, HTML with the http(s) URLs as links)."""
    lines = list(lines)
    parts = []
    for line in lines:
        out, pos = [], 0
        for m in _URL.finditer(line):
            out.append(_html.escape(line[pos:m.start()]))
            url = m.group(0).rstrip(".,;:)")
            rest = m.group(0)[len(url):]
            u = safe_url(url)
            out.append(f'<a href="{_html.escape(u, quote=True)}">{_html.escape(url)}</a>' if u else _html.escape(url))
            out.append(_html.escape(rest))
            pos = m.end()
        out.append(_html.escape(line[pos:]))
        parts.append("".join(out))
    return "\n".join(lines), "<br>\n".join(parts)


# -- chat answers --------------------------------------------------------------------------------
def record_line(entry_or_row: dict[str, Any], base_url: str | None, max_len: int) -> str:
    """``#12 [confirmed] title [mm] (performance, -15.0%) <link>`` within ``max_len`` bytes."""
    e = entry_or_row
    rid = int(e["id"])
    link = record_link(base_url, e if "report" in e else None, rid) or ""
    if not link and e.get("report_message_id"):
        from bot.msgid import lore_url

        link = lore_url(e["report_message_id"])
    if "culprit" not in e and e.get("culprit_commit"):
        e = dict(e, culprit={"commit": e["culprit_commit"]})
    title = one_line(e.get("title")) or "(no title)"
    return fit([f"#{rid} [{one_line(e.get('status'))}] {title}", *summary_parts(e)], link, max_len)


def query_answer(rows: list[dict[str, Any]], total: int, understood: str, query_text: str, *,
                 base_url: str | None, max_lines: int, max_len: int) -> list[str]:
    if total == 0:
        return [cut(f"no regressions match ({understood})", max_len)]
    if total > max_lines == 1:
        link = query_link(base_url, query_text)
        return [f"{total} regressions match: {link}" if link else
                cut(f"{total} regressions match (regtriage query {one_line(query_text)})", max_len)]
    shown = rows[:max_lines] if total <= max_lines else rows[:max_lines - 1]
    lines = [record_line(r, base_url, max_len) for r in shown]
    more = total - len(shown)
    if more > 0:
        link = query_link(base_url, query_text)
        tail = f"and {more} more: {link}" if link else f"and {more} more (regtriage query {one_line(query_text)})"
        lines.append(cut(tail, max_len) if not link else tail)
    return lines


def show_answer(entry: dict[str, Any], base_url: str | None, max_len: int) -> list[str]:
    lines = [record_line(entry, base_url, max_len)]
    facts = []
    r = entry.get("range") or {}
    if r.get("good") or r.get("bad"):
        facts.append(f"range {one_line(r.get('good') or '?')}..{one_line(r.get('bad') or '?')}")
    culprit = entry.get("culprit") or {}
    if culprit.get("subject"):
        facts.append(f"culprit \"{one_line(culprit['subject'])}\"")
    fix = entry.get("fix") or {}
    if fix.get("commit") or fix.get("subject"):
        facts.append(f"fix {one_line(fix.get('commit') or '')[:12]} {one_line(fix.get('subject') or '')}".strip())
    facts.append(f"updated {(entry.get('updated') or '')[:10]}")
    lines.append(cut("; ".join(facts), max_len))
    return lines


def help_answer(prefix: str, nick: str | None, base_url: str | None, max_len: int) -> list[str]:
    lines = [
        f"{prefix} <query> (e.g. {prefix} open mm/, {prefix} confirmed performance regressions since v6.8) | "
        f"{prefix} show ID | {prefix} help",
        f"allow-listed users only: {prefix} rerun ID | {prefix} resolve ID [note]",
    ]
    if base_url:
        lines.append(f"web: {base_url.rstrip('/')}/")
    return [cut(x, max_len) for x in lines]


def test_when(now) -> str:
    return now.strftime("%Y-%m-%d %H:%M:%S UTC")


__all__ = ["IRC_MAX_BYTES", "TEST_EVENT", "cut", "help_answer", "irc_line", "irc_test_line", "lines_to_matrix",
           "markdown_to_html", "matrix_bodies", "matrix_test_bodies", "one_line", "query_answer", "query_link",
           "record_line", "record_link", "show_answer"]


def irc_figures(event: str, e: dict[str, Any]) -> str | None:
    """The verdict's figures for one IRC line (``templates/verdict_irc.txt.j2``), or None when
    the event is not a lab verdict (no finished rerun behind it)."""
    if event not in VERDICT_EVENTS:
        return None
    v = latest(e)
    if v is None or v["verdict"] != event:
        return None
    return template_env("txt").get_template("verdict_irc.txt.j2").render(v=v).strip()
