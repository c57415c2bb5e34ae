"""``regtriage notify``: test the chat targets, run the outbox, list it.

Wire into the main group with ``register(main)`` (bot/cli/main.py).
"""

from __future__ import annotations

import sys

import click

from bot.cli.tools import dump as _dump
from bot.cli.tools import table as _table


def _console():
    from bot.cli.tools import console

    return console()


def register(main: click.Group) -> None:
    @main.command("notify")
    @click.option("--test", "test", is_flag=True, help="Send one test message to every configured target; "
                  "exit 1 naming each target that failed.")
    @click.option("--send-pending", "send_pending", is_flag=True,
                  help="One pass over the outbox: queue tracker status changes, send what is due.")
    @click.option("--list", "list_", is_flag=True, help="List the outbox (newest first).")
    @click.option("--enqueue", "enqueue", metavar="EVENT", help="Queue EVENT (confirmed, fix-landed, ...) "
                  "for --record to its routed targets.")
    @click.option("--record", "record", metavar="ID", help="The regression record for --enqueue.")
    @click.option("--ref", default="", help="With --enqueue: tells apart repeated events of one kind.")
    @click.option("--all", "ignore_schedule", is_flag=True, help="With --send-pending: also rows whose "
                  "retry time has not come yet.")
    @click.option("--state", type=click.Choice(["queued", "sent", "failed", "skipped"]), help="With --list: only these.")
    @click.option("--limit", default=50, show_default=True, help="With --list: at most this many rows.")
    @click.option("--json", "as_json", is_flag=True)
    @click.option("--config", "config_path", metavar="PATH", help="TOML config (same as regtriage --config).")
    @click.pass_obj
    def notify_cmd(obj, test, send_pending, list_, enqueue, record, ref, ignore_schedule, state, limit, as_json,
                   config_path):
        """Chat notifications (IRC, Matrix): test targets, deliver the outbox, list it.

        \b
        regtriage notify --test --config regtriage.toml
        regtriage notify --enqueue confirmed --record 12
        regtriage notify --send-pending
        regtriage notify --list --json
        """
        from bot.notify.settings import load_settings

        if config_path:
            obj.config_path = config_path
            obj._config = None
        chosen = sum(bool(x) for x in (test, send_pending, list_, enqueue))
        if chosen != 1:
            raise click.UsageError("choose one of --test, --send-pending, --list, --enqueue EVENT")
        settings = load_settings(obj.config)
        if test:
            _test(settings, as_json)
        elif enqueue:
            _enqueue(obj.store, settings, enqueue, record, ref, as_json)
        elif send_pending:
            _send_pending(obj.store, settings, ignore_schedule, as_json)
        else:
            _list(obj.store, state, limit, as_json)


def _test(settings, as_json: bool) -> None:
    """``--test``: one message to every target; exit 1 naming the ones that failed."""
    import asyncio

    from bot.notify.deliver import send_test

    if not settings.targets():
        raise click.ClickException("no notification targets configured ([[notify.irc]], [[notify.matrix]], ...)")
    results = asyncio.run(send_test(settings))
    failed = [r for r in results if not r["ok"]]
    if as_json:
        _dump({"results": results, "ok": not failed})
    else:
        for r in results:
            if r["ok"]:
                click.echo(f"ok      {r['target']}")
    for r in failed:
        click.echo(f"FAILED  {r['target']}: {r['error']}", err=True)
    if failed:
        click.echo(f"regtriage: {len(failed)} of {len(results)} targets failed: "
                   + ", ".join(r["target"] for r in failed), err=True)
        sys.exit(1)


def _enqueue(store, settings, event: str, record: str | None, ref: str, as_json: bool) -> None:
    """``--enqueue EVENT --record ID``: queue the event to its routed targets."""
    from bot.notify.outbox import enqueue_event
    from bot.tracker.records import find_record

    if not record:
        raise click.UsageError("--enqueue needs --record ID")
    rid = find_record(store, record)
    if rid is None:
        raise click.ClickException(f"no regression record {record}")
    try:
        made = enqueue_event(store, event, rid, settings=settings, ref=ref)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    except KeyError:
        raise click.ClickException(f"no regression record {record}") from None
    if as_json:
        _dump(made)
    elif not made:
        click.echo(f"#{rid}: no route sends {event} for this record")
    else:
        for m in made:
            click.echo(f"#{rid} -> {m['target']}: {'queued' if m['created'] else 'already queued'}")


def _send_pending(store, settings, ignore_schedule: bool, as_json: bool) -> None:
    """``--send-pending``: queue the tracker's new transitions, deliver what is due."""
    from bot.notify.deliver import deliver_pending
    from bot.notify.outbox import scan_tracker

    out = {}
    if settings.watch_tracker:
        out["tracker"] = scan_tracker(store, settings=settings)
    out.update(deliver_pending(store, settings=settings, ignore_schedule=ignore_schedule))
    if as_json:
        _dump(out)
        return
    if "tracker" in out:
        t = out["tracker"]
        click.echo(f"{t['events']} new tracker events: {t['queued']} queued, {t['skipped']} skipped "
                   "(old mail, old changes or closed records: notify --list --state skipped)")
    click.echo(f"{out['due']} due: {out['sent']} sent, {out['retry']} to retry, {out['failed']} failed, "
               f"{out['waiting']} waiting for an earlier one, {out['expired']} expired")
    for target, err in out["errors"].items():
        click.echo(f"  {target}: {err}")


def _list(store, state: str | None, limit: int, as_json: bool) -> None:
    """``--list``: the outbox, newest first."""
    from bot.notify.outbox import list_notifications

    rows = list_notifications(store, state=state, limit=limit)
    if as_json:
        _dump(rows)
        return
    t = _table("id", "event", "record", "target", "state", "tries", "next / sent", "error")
    for r in rows:
        when = r["sent_at"] if r["state"] == "sent" else (r["next_attempt_at"] if r["state"] == "queued" else "")
        t.add_row(r["id"], r["event"], r["regression_id"] if r["regression_id"] is not None else "", r["target"],
                  r["state"], r["attempts"], (when or "")[:19], (r["last_error"] or "")[:80])
    _console().print(t)
