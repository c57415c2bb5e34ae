"""Output helpers shared by the CLI modules: JSON dumps and rich tables/consoles that show
mail-derived strings as written (never interpreted as console markup), with control, escape
and bidi characters made visible (bot.textsafe.visible; the CLI also wraps stdout/stderr)."""

from __future__ import annotations

import json

import click


def dump(obj) -> None:
    from bot.textsafe import json_text

    click.echo(json_text(json.dumps(obj, indent=2, default=str, ensure_ascii=False)))


WIDE_MIN = 24  # columns of text a ``wide`` column keeps on a narrow terminal


def table(*columns: str, keep: tuple[str, ...] = (), optional: tuple[str, ...] = (), wide: tuple[str, ...] = ()):
    """A rich table of mail-derived strings that stays readable on a narrow terminal: nothing
    is cut to an ellipsis (long words fold onto the next line); the ``keep`` columns (ids,
    states, names) are never wrapped or shortened; the ``wide`` ones (titles, messages) keep
    at least WIDE_MIN columns to wrap their text in.  When the bordered table does not fit the
    console it is drawn without borders (two spaces between columns), and when that does not
    fit either the ``optional`` columns are left out, in that order, with a caption naming
    them (``--json`` has everything)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from bot.textsafe import visible

    class ListTable(Table):
        def add_row(self, *cells, **kw):  # noqa: D401 - same API as Table.add_row
            super().add_row(*(Text(visible(c)) for c in cells), **kw)

        def __rich_console__(self, con, options):
            yield from Table.__rich_console__(self._fitted(options.max_width), con, options)

        def __rich_measure__(self, con, options):
            return Table.__rich_measure__(self._fitted(options.max_width), con, options)

        def _fitted(self, width: int) -> Table:
            cells = [[c.plain if isinstance(c, Text) else str(c) for c in col._cells] for col in self.columns]
            need = []
            for col, values in zip(self.columns, cells):
                head = str(col.header)
                longest = max([len(line) for v in values + [head] for line in (v.splitlines() or [""])])
                # a kept column needs all of its longest value; others may wrap down to their header
                floor = WIDE_MIN if head in wide else max(len(head), 10)
                need.append(longest if head in keep else min(longest, floor))
            shown = list(range(len(self.columns)))
            if sum(need) + 3 * len(need) + 1 <= width:
                return self._copy(shown, bordered=True)
            for name in (None,) + tuple(optional):
                if name is not None:
                    shown = [i for i in shown if str(self.columns[i].header) != name]
                if sum(need[i] for i in shown) + 2 * (len(shown) - 1) <= width:
                    break
            return self._copy(shown, bordered=False)

        def _copy(self, shown: list[int], *, bordered: bool) -> Table:
            kw = {} if bordered else {"box": None, "padding": (0, 1), "pad_edge": False}
            left_out = [str(c.header) for i, c in enumerate(self.columns) if i not in shown]
            caption = (f"left out at this width: {', '.join(left_out)} (--json has every field)"
                       if left_out else None)
            t = Table(caption=caption, caption_justify="left", **kw)
            for i in shown:
                col = self.columns[i]
                head = str(col.header)
                kept = head in keep
                t.add_column(head, no_wrap=kept, overflow="fold",
                             min_width=max([len(head)] + [len(c.plain if isinstance(c, Text) else str(c))
                                                         for c in col._cells]) if kept else None)
            for r in range(self.row_count):
                t.add_row(*(self.columns[i]._cells[r] for i in shown))
            return t

    return ListTable(*columns)


def console(stderr: bool = False):
    from bot.textsafe import console as safe_console

    return safe_console(stderr)
