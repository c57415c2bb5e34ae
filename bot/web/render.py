"""The dashboard's HTML (bot/web/pages.py renders with it): the Jinja2 environment over
``templates/web`` (autoescaped, strict) and the filters its templates use to show values
(dates, changes, p-values, commits, links: http(s) only).
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from bot.msgid import lore_url
from bot.textsafe import neutralise_bidi
from bot.tracker.entry import TEMPLATES, safe_url
from bot.web.svg import finite, samples_svg
from bot.web.svg import num as svg_num

WEB_TEMPLATES = TEMPLATES / "web"
STATIC = WEB_TEMPLATES / "static"


def href(url: Any) -> str:
    return safe_url(url) if isinstance(url, str) else ""


def when(value: Any) -> str:
    if not value:
        return ""
    if isinstance(value, datetime):
        value = value.isoformat()
    s = str(value)
    return s[:16].replace("T", " ") if len(s) >= 16 else s


def day(value: Any) -> str:
    if isinstance(value, datetime):
        return value.date().isoformat()
    return str(value or "")[:10]


def change(value: Any) -> str:
    v = finite(value)
    return "" if v is None else f"{v:+.1f}%"


def num(value: Any) -> str:
    v = finite(value)
    return "" if v is None else svg_num(v)


def pvalue(value: Any) -> str:
    v = finite(value)
    if v is None:
        return ""
    return "< 0.0001" if v < 1e-4 else f"{v:.4f}"


def ci(value: Any) -> str:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        lo, hi = finite(value[0]), finite(value[1])
        if lo is not None and hi is not None:
            return f"{lo:+.1f}% to {hi:+.1f}%" if abs(hi) < 1000 else f"{lo:+.1f}% to >+1000%"
    return ""


def short(commit: Any) -> str:
    return str(commit or "")[:12]


def plain(value: Any) -> str:
    """A value of the facts table: dicts and lists as ``k: v`` text, never markup."""
    if value is None:
        return ""
    if isinstance(value, dict):
        return ", ".join(f"{k}: {plain(v)}" for k, v in value.items() if v not in (None, "", [], {}))
    if isinstance(value, (list, tuple)):
        return ", ".join(plain(v) for v in value if v not in (None, ""))
    return str(value)


@lru_cache(maxsize=1)
def environment() -> Environment:
    """The pages' Jinja2 environment: autoescaped, strict, with the filters above."""
    env = Environment(loader=FileSystemLoader(str(WEB_TEMPLATES)),
                      autoescape=select_autoescape(enabled_extensions=("html", "xml"), default_for_string=True,
                                                   default=True),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(href=href, when=when, day=day, change=change, num=num, pvalue=pvalue, ci=ci,
                       short=short, plain=plain, lore=lore_url)
    env.globals["samples_svg"] = lambda rerun: Markup(samples_svg(rerun))
    return env


def render(name: str, **ctx) -> str:
    """A page; bidi embeddings/overrides/isolates/marks (only mail can bring them: the templates
    have none) are written out as ``\\u202e`` text so they cannot reorder what the page shows."""
    return neutralise_bidi(environment().get_template(name).render(**ctx))
