"""CLI commands of the regression tracker: ``query``, ``track``, ``regressions``, and
:func:`show_record` for ``regtriage show <record id>``.

Wire into the main group with ``register(main)`` (bot/cli/main.py).  Heavy imports stay inside
the commands.
"""

from __future__ import annotations


import click


from bot.cli.tools import console as _cli_console  # noqa: E402
from bot.cli.tools import dump as _dump  # noqa: E402
from bot.cli.tools import table as _table  # noqa: E402


def _console():
    return _cli_console()


def _print_records(rows, total: int, understood: str | None = None) -> None:
    table = _table("id", "status", "kind", "subsystem", "culprit", "reported", "title",
                   keep=("id", "status", "culprit"), optional=("kind", "reported"), wide=("title",))
    for r in rows:
        table.add_row(str(r["id"]), r["status"], r.get("kind") or "", r.get("subsystem") or "",
                      (r.get("culprit_commit") or "")[:12],
                      r["created_at"].date().isoformat() if r.get("created_at") else "", r["title"])
    con = _console()
    if understood is not None:
        from rich.text import Text

        con.print(Text(f"query: {understood}", style="dim"))
    con.print(table)
    more = f" (showing {len(rows)})" if total > len(rows) else ""
    con.print(f"{total} regression{'s' if total != 1 else ''}{more}")


def show_record(obj, ident: str, as_json: bool = False, fmt: str = "txt") -> None:
    """Print one record (``ident``: its id, ``#id``, or a related Message-ID) with evidence and
    history: the text rendering (``fmt`` txt or md) or the tracker entry as JSON."""
    from bot.tracker.records import find_record
    from bot.tracker.entry import entry, render

    rid = find_record(obj.store, ident)
    e = entry(obj.store, rid) if rid is not None else None
    if e is None:
        raise click.ClickException(f"no regression record {ident}")
    if as_json:
        _dump(e)
        return
    click.echo(render(e, fmt), nl=False)
    if fmt == "txt" and e.get("evidence"):
        click.echo("\nEvidence:")
        from bot.tracker.entry import clean_text, wrap_text

        for k, v in e["evidence"].items():
            click.echo(wrap_text(f"  - {clean_text(k)}: {clean_text(v)}"))


@click.command("query")
@click.argument("text", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print a list of tracker entries.")
@click.option("--limit", default=50, show_default=True, help="At most this many records.")
@click.option("--explain", is_flag=True, help="Print how the query was understood, and stop.")
@click.pass_obj
def query_cmd(obj, text, as_json, limit, explain):
    """Search regression records: natural language or filters.

    \b
    regtriage query open regressions in mm/
    regtriage query "open performance regressions in fs/xfs since v6.8"
    regtriage query confirmed regressions last 30 days
    regtriage query status:open subsystem:mm/ kind:performance culprit:54a6eb5c \\
                    since:2024-01-01 text:zonelist

    Filters: status: (open, closed, all, or a status), subsystem: (path prefix),
    kind:, culprit: (id prefix), since: (date, 30d, or v6.8), until:, updated:, text:, id:.
    """
    from bot.tracker.query import QueryError, parse_query, quick_query, run_query

    try:
        f = parse_query(list(text))
    except QueryError as exc:
        raise click.UsageError(str(exc)) from None
    if explain:
        if as_json:
            _dump({"understood": f.describe(), "filter": f.to_dict()})
        else:
            click.echo(f.describe())
        return
    try:
        # a current SQLite database is read without SQLAlchemy (start-up time); else a Store
        found = None if as_json else quick_query(obj.config.db_url, f, limit=limit)
        rows, total = found if found is not None else run_query(obj.store, f, limit=limit)
    except QueryError as exc:
        raise click.UsageError(str(exc)) from None
    if as_json:
        from bot.tracker.entry import entries

        _dump(entries(obj.store, [r["id"] for r in rows]))
        return
    _print_records(rows, total, f.describe())


@click.command("track")
@click.option("--json", "as_json", is_flag=True)
@click.option("--no-fixes", is_flag=True, help="Do not look for fixes in the kernel trees.")
@click.pass_obj
def track_cmd(obj, as_json, no_fixes):
    """Update regression records from new claims, #regzbot commands and kernel trees."""
    from bot.tracker.records import update_tracker

    stats = update_tracker(obj.store, obj.config, fixes=not no_fixes)
    if as_json:
        _dump(stats)
        return
    click.echo(f"{stats['created']} records created, {stats['records_changed']} changed; "
               f"{stats['commands_applied']} regzbot commands applied, {stats['commands_pending']} waiting, "
               f"{stats['commands_ignored']} ignored; {stats['messages_linked']} messages linked; "
               f"{stats['duplicates']} marked duplicate")
    if "fixes" in stats:
        fx = stats["fixes"]
        click.echo(f"kernel trees: {fx['fixed']} fixed, {fx['fix_pending']} fix pending")


@click.command("regressions")
@click.option("--all", "show_all", is_flag=True, help="Closed ones too.")
@click.option("--json", "as_json", is_flag=True, help="Print a list of tracker entries.")
@click.option("--limit", default=100, show_default=True)
@click.pass_obj
def regressions_cmd(obj, show_all, as_json, limit):
    """List tracked regressions (open ones unless --all), most recently updated first."""
    from bot.tracker.query import Filter, OPEN, quick_query, run_query

    f = Filter(statuses=None if show_all else OPEN)
    found = None if as_json else quick_query(obj.config.db_url, f, limit=limit)
    rows, total = found if found is not None else run_query(obj.store, f, limit=limit)
    if as_json:
        from bot.tracker.entry import entries

        _dump(entries(obj.store, [r["id"] for r in rows]))
        return
    _print_records(rows, total)


@click.command("record")
@click.argument("ident")
@click.option("--json", "as_json", is_flag=True, help="The tracker entry as JSON.")
@click.option("--markdown", "markdown", is_flag=True, help="Markdown (chat) instead of plain text.")
@click.pass_obj
def record_cmd(obj, ident, as_json, markdown):
    """Show one regression record (id or a related Message-ID) with evidence and history."""
    show_record(obj, ident, as_json, "md" if markdown else "txt")


@click.command("set-status")
@click.argument("ident")
@click.argument("status")
@click.option("--note", default=None, help="Why (kept in the history).")
@click.option("--actor", default=None, help="Who (default: $USER).")
@click.pass_obj
def set_status_cmd(obj, ident, status, note, actor):
    """Set the status of a regression record by hand (recorded as a user change)."""
    import os

    from bot.tracker.fields import STATUSES

    from bot.tracker.records import find_record, set_status

    if status not in STATUSES:
        raise click.UsageError(f"unknown status {status!r}: one of {', '.join(STATUSES)}")
    rid = find_record(obj.store, ident)
    if rid is None:
        raise click.ClickException(f"no regression record {ident}")
    try:
        changed = set_status(obj.store, rid, status, actor or os.environ.get("USER") or "user", note)
    except KeyError:
        raise click.ClickException(f"no regression record {ident}") from None
    click.echo(f"#{rid}: {status}" + ("" if changed else " (unchanged)"))


def register(main: click.Group) -> None:
    """Add the tracker commands (``query``, ``track``, ``regressions``, ``record``, ``set-status``) to
    the ``regtriage`` click group."""
    for command in (query_cmd, track_cmd, regressions_cmd, record_cmd, set_status_cmd):
        main.add_command(command)
