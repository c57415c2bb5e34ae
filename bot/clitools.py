"""Output helpers shared by the CLI modules: JSON dumps and rich tables/consoles that show
mail-derived strings as written (never interpreted as console markup), with control, escape
and bidi characters made visible (bot.textsafe.visible; the CLI also wraps stdout/stderr)."""

from __future__ import annotations

import json

import click


def dump(obj) -> None:
    from bot.textsafe import json_text

    click.echo(json_text(json.dumps(obj, indent=2, default=str, ensure_ascii=False)))


def table(*columns: str):
    from rich.table import Table
    from rich.text import Text

    from bot.textsafe import visible

    class PlainTable(Table):
        def add_row(self, *cells, **kw):  # noqa: D401 - same API as Table.add_row
            super().add_row(*(Text(visible(c)) for c in cells), **kw)

    return PlainTable(*columns)


def console(stderr: bool = False):
    from bot.textsafe import console as safe_console

    return safe_console(stderr)
