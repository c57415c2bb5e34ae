"""CLI commands of the mail replies: ``reply`` and ``replies``.

Wire into the main group with ``register(main)`` (bot/cli/main.py).  Heavy imports stay inside
the commands.
"""

from __future__ import annotations

import sys

import click

from bot.cli.tools import dump as _dump
from bot.cli.tools import table as _table


def _echo_notes(notes) -> None:
    for n in notes:
        click.echo(f"regtriage: note: {n}", err=True)


def register(main: click.Group) -> None:
    """Add ``reply`` and ``replies`` to the ``regtriage`` click group."""

    @main.command("reply")
    @click.argument("ident")
    @click.option("--send", "send", is_flag=True, help="Send it over SMTP ([mail] smtp_host ...).")
    @click.option("--stdout", "to_stdout", is_flag=True, help="Print the message; write and record nothing.")
    @click.option("--force", is_flag=True, help="Draft again an event already drafted or sent (never re-sends).")
    @click.option("--event", metavar="KIND", help="Event kind (default: the record's status), e.g. triaged, confirmed.")
    @click.option("--answer", default="report", show_default=True, metavar="report|latest|MSGID",
                  help="The message to answer: the report, the newest message of its thread, or a Message-ID.")
    @click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
    @click.pass_obj
    def reply_cmd(obj, ident, send, to_stdout, force, event, answer, as_json):
        """Compose the bot's reply to a regression's report thread.

        \b
        Dry run by default: the message goes to the outbox maildir
        ($REGTRIAGE_HOME/outbox or [mail] outbox) and its path is printed.
        --stdout prints it instead; --send sends it (allow-listed lists only,
        rate-limited, once per event).  The SMTP password is read from
        $REGTRIAGE_SMTP_PASSWORD or [mail] password_file only.
        """
        _reply(obj, ident, send, to_stdout, force, event, answer, as_json)

    @main.command("replies")
    @click.argument("ident", required=False)
    @click.option("--limit", default=50, show_default=True)
    @click.option("--json", "as_json", is_flag=True)
    @click.pass_obj
    def replies_cmd(obj, ident, limit, as_json):
        """Replies drafted, sent, refused or failed (newest first), with the reasons."""
        _list_replies(obj, ident, limit, as_json)


def _reply(obj, ident, send, to_stdout, force, event, answer, as_json) -> None:
    """``reply``: run the reply and show its outcome; exit 1 when refused or failed."""
    from bot.reply.compose import EVENT_KINDS, ReplyError
    from bot.reply.run import run_reply
    from bot.tracker.records import find_record

    if send and to_stdout:
        raise click.UsageError("--send and --stdout do not go together")
    if event is not None and event not in EVENT_KINDS:
        raise click.UsageError(f"--event: one of {', '.join(EVENT_KINDS)}")
    rid = find_record(obj.store, ident)
    if rid is None:
        raise click.ClickException(f"no regression record {ident}")
    mode = "send" if send else ("stdout" if to_stdout else "dry-run")
    try:
        out = run_reply(obj.store, obj.config, rid, mode=mode, force=force, event=event, answer=answer)
    except ReplyError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        d = out.to_dict()
        if out.text is not None:
            d["text"] = out.text
        _dump(d)
    else:
        _echo_notes(out.notes)
        if out.status == "printed":
            click.echo(out.text, nl=False)
        elif out.status == "drafted":
            click.echo(out.path)
        elif out.status in ("refused", "failed"):
            click.echo(f"regtriage: {out.message}", err=True)
        else:
            click.echo(out.message)
    if not out.ok:
        sys.exit(1)


def _list_replies(obj, ident, limit, as_json) -> None:
    """``replies``: the rows of one record or of all, newest first."""
    from bot.tracker.records import find_record
    from storage.replies import list_replies

    rid = None
    if ident:
        rid = find_record(obj.store, ident)
        if rid is None:
            raise click.ClickException(f"no regression record {ident}")
    rows = list_replies(obj.store, rid, limit)
    if as_json:
        _dump([r.as_dict() for r in rows])
        return
    from bot.cli.tools import console

    table = _table("id", "record", "event", "status", "when", "message-id", "reason / draft")
    for r in rows:
        table.add_row(str(r.id), f"#{r.regression_id}", r.event_kind, r.status, f"{r.created_at:%Y-%m-%d %H:%M}",
                      r.message_id or "", r.reason or r.outbox_path or "")
    console().print(table)
