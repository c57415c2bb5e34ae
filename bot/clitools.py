"""Output helpers shared by the CLI modules: JSON dumps and rich tables/consoles that show
mail-derived strings as written (never interpreted as console markup)."""

from __future__ import annotations

import json

import click


def dump(obj) -> None:
    click.echo(json.dumps(obj, indent=2, default=str, ensure_ascii=False))


def table(*columns: str):
    from rich.table import Table
    from rich.text import Text

    class PlainTable(Table):
        def add_row(self, *cells, **kw):  # noqa: D401 - same API as Table.add_row
            super().add_row(*(Text("" if c is None else str(c)) for c in cells), **kw)

    return PlainTable(*columns)


def console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)
