"""Glue between mail and the pure extractors: read files, parse, extract, shape the JSON
contract of ``regtriage extract``, and print the human summary."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bot.sources.mail import parse_message
from bot.sources.files import InputError, iter_paths

FIELDS_SHOWN = ("culprit", "good", "bad", "metric", "change_percent", "kind", "subsystem")


def extract_parsed(parsed) -> dict[str, Any]:
    import extractors

    claim = extractors.extract(parsed.subject, parsed.body)
    return claim.to_dict()


def extract_items(paths: list[str]) -> Iterator[dict[str, Any]]:
    """One result per message in input order: the contract object, or {"error": reason}."""
    for item in iter_paths(paths):
        if isinstance(item, InputError):
            yield {"error": str(item)}
            continue
        source = item.origin[len("file:"):] if item.origin.startswith("file:") else item.origin
        parsed = parse_message(item.raw)
        head = {"source": source, "message_id": parsed.message_id, "subject": parsed.subject}
        if parsed.reject or item.reject:
            yield {**head, **_empty(), "error_reason": parsed.reject or item.reject}
            continue
        yield {**head, **extract_parsed(parsed)}


def _empty() -> dict[str, Any]:
    return {"is_regression": False, "confidence": 0.0, "kind": None, "culprit": None, "good": None,
            "bad": None, "metric": None, "change_percent": None,
            "hardware": {"cpu": None, "arch": None, "memory": None, "storage": None},
            "config": {"filesystem": None, "benchmark": None, "command": None, "kernel_config": []},
            "subsystem": None, "numbers": [], "evidence": {}}


def render_summary(console, r: dict[str, Any]) -> None:
    from rich.markup import escape

    verdict = "[bold red]regression[/bold red]" if r["is_regression"] else "[dim]no regression claim[/dim]"
    console.print(f"[bold]{escape(r['subject'] or '(no subject)')}[/bold]  <{escape(r['message_id'])}>")
    console.print(f"  {verdict} (confidence {r['confidence']:.2f})  {escape(r['source'])}")
    if not r["is_regression"]:
        console.print()
        return
    evidence = r.get("evidence", {})

    def line(name: str, value: Any, key: str) -> None:
        if value in (None, [], {}):
            return
        console.print(f"  [cyan]{name:>15}[/cyan]: {escape(str(value))}")
        ev = evidence.get(key)
        if ev:
            console.print(f"  {'':>15}  [dim]\u201c{escape(ev.strip()[:160])}\u201d[/dim]")

    c = r.get("culprit") or {}
    line("culprit", (c.get("commit") or "") + (f" (\"{c['subject']}\")" if c.get("subject") else ""), "culprit")
    line("kind", r["kind"], "kind")
    line("good", r["good"], "good")
    line("bad", r["bad"], "bad")
    line("metric", r["metric"], "metric")
    line("change", None if r["change_percent"] is None else f"{r['change_percent']:+.1f}%", "change_percent")
    for k, v in r["hardware"].items():
        line(k, v, k)
    for k, v in r["config"].items():
        line(k, v, k)
    line("subsystem", r["subsystem"], "subsystem")
    for n in r.get("numbers", [])[:8]:
        console.print(f"  {'number':>15}: {escape(str(n.get('label') or ''))} {n['value']} {escape(str(n.get('unit') or ''))}")
    console.print()
