"""Command line: ``regtriage``.

Start-up stays fast: heavy modules (spaCy, SQLAlchemy, HTTP clients, rich) are imported inside
the commands that need them, never at module level.
"""

from __future__ import annotations

import json
import sys

import click

from bot import __version__


class Context:
    def __init__(self, config_path: str | None, db_url: str | None, debug: bool) -> None:
        self.config_path = config_path
        self.db_url = db_url
        self.debug = debug
        self._config = None
        self._store = None

    @property
    def config(self):
        if self._config is None:
            from bot import config

            self._config = config.load(self.config_path, self.db_url)
        return self._config

    @property
    def store(self):
        if self._store is None:
            from storage.store import Store

            self._store = Store(self.config.db_url)
        return self._store


from bot.cli.tools import console as _console  # noqa: E402
from bot.cli.tools import dump as _dump  # noqa: E402
from bot.cli.tools import table as _table  # noqa: E402


class Group(click.Group):
    """Turns any unexpected failure into a one-line error instead of a traceback; loads the
    commands of other modules when they are asked for (LAZY_COMMANDS)."""

    def get_command(self, ctx, cmd_name):
        if cmd_name not in self.commands:
            _register_subcommands(LAZY_COMMANDS.get(cmd_name))
            if cmd_name not in self.commands:
                _register_subcommands()
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx):
        _register_subcommands()
        return super().list_commands(ctx)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("regtriage: interrupted", err=True)
            sys.exit(130)
        except Exception as exc:  # noqa: BLE001 - last line of defence for the CLI
            obj = ctx.obj
            if obj is not None and getattr(obj, "debug", False):
                raise
            from bot.config import ConfigError

            reason = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
            kind = "" if isinstance(exc, ConfigError) else f"{exc.__class__.__name__}: "
            click.echo(f"regtriage: error: {kind}{reason}", err=True)
            sys.exit(2)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_path", metavar="PATH", help="TOML config (default ./regtriage.toml "
              "or $REGTRIAGE_HOME/regtriage.toml).")
@click.option("--db", "db_url", metavar="URL", help="Database URL, e.g. postgresql+psycopg://host/db "
              "(default: SQLite under $REGTRIAGE_HOME).")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.version_option(__version__, prog_name="regtriage")
@click.pass_context
def main(ctx, config_path, db_url, debug):
    """Regression triage bot for the Linux kernel mailing lists."""
    from bot.textsafe import install

    install()  # mail-derived text reaches the terminal with its control characters made visible
    ctx.obj = Context(config_path, db_url, debug)


# -- ingest ----------------------------------------------------------------------------------
@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print counts as JSON.")
@click.option("--batch-size", default=500, show_default=True, help="Messages per transaction.")
@click.option("--no-triage", is_flag=True, help="Store only; do not run the claim extractor afterwards.")
@click.pass_obj
def ingest(obj: Context, paths, as_json, batch_size, no_triage):
    """Ingest .eml files, mbox files (mboxrd/mboxo, .gz too), maildirs and directories."""
    from bot.sources.ingest import Ingester
    from bot.sources.limits import IngestLimits
    from bot.sources.files import InputError, InputWarning, iter_paths

    limits = IngestLimits.from_config(obj.config)
    store = obj.store
    ing = Ingester(store, batch_size=batch_size, parallel=True, limits=limits)
    errors: list[str] = []
    warnings: list[str] = []
    progress = None
    if not as_json and sys.stderr.isatty():
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                            TextColumn("{task.completed} messages"), TimeElapsedColumn(),
                            console=_console(stderr=True), transient=True)
    task = None
    if progress:
        progress.start()
        task = progress.add_task("ingesting", total=None)
    try:
        for item in iter_paths(list(paths), limits):
            if isinstance(item, InputError):
                (warnings if isinstance(item, InputWarning) else errors).append(str(item))
                store.record_source_error("ingest", str(item))
                continue
            ing.add(item.raw, item.origin, item.reject, problems=item.problems, sha256=item.sha256,
                    size=item.size)
            if progress:
                progress.update(task, completed=ing.stats["messages"] + ing.pending)
        ing.flush()
    finally:
        ing.close()
        if progress:
            progress.stop()
    triaged = None if no_triage else _triage(obj, show=not as_json)
    if as_json:
        _dump(ing.stats)
    else:
        s = ing.stats
        click.echo(f"{s['messages']} messages: {s['stored']} stored, {s['duplicates']} already known, "
                   f"{s['quarantined']} quarantined")
        if s["quarantined"]:
            click.echo("  see `regtriage quarantine` for the reasons")
        if triaged:
            click.echo(f"triage: {triaged['extracted']} messages read, {triaged['regression_messages']} "
                       f"with a regression claim, {triaged['regression_threads']} regression threads "
                       "(`regtriage claims`)")
    for w in warnings:
        click.echo(f"regtriage: warning: {w}", err=True)
    for e in errors:
        click.echo(f"regtriage: cannot read input: {e}", err=True)
    if errors:
        sys.exit(1)


def _triage(obj: Context, show: bool):
    from bot.triage.runner import open_trees, triage_pending

    from bot.tracker.records import update_tracker

    trees = open_trees(obj.config)
    workers = obj.config.section("triage").get("workers") if obj.config is not None else None
    try:
        if not show or not sys.stderr.isatty():
            result = triage_pending(obj.store, trees=trees, workers=workers)
        else:
            from rich.progress import Progress

            with Progress(console=_console(stderr=True), transient=True) as progress:
                task = progress.add_task("extracting claims", total=None)
                result = triage_pending(obj.store, trees=trees, workers=workers,
                                        on_progress=lambda n: progress.update(task, completed=n))
        tracked = update_tracker(obj.store, obj.config, trees=trees)
        result["tracker"] = tracked
        return result
    finally:
        if trees is not None:
            trees.close()


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def triage(obj: Context, as_json):
    """Run the claim extractor over stored messages not yet read, and merge thread claims."""
    result = _triage(obj, show=not as_json)
    if as_json:
        _dump(result)
    else:
        click.echo(f"{result['extracted']} messages read, {result['regression_messages']} with a regression "
                   f"claim, {result['regression_threads']} regression threads updated")


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.option("--all", "show_all", is_flag=True, help="Include threads judged not to be regressions.")
@click.pass_obj
def claims(obj: Context, as_json, show_all):
    """Regression claims found in stored threads (merged per thread)."""
    rows = obj.store.thread_claims(regressions_only=not show_all)
    if as_json:
        _dump(rows)
        return
    table = _table("conf", "kind", "culprit", "change", "subsystem", "subject")
    for r in rows:
        c = r["claim"]
        change = c.get("change_percent")
        table.add_row(f"{r['confidence']:.2f}", c.get("kind") or "", (c.get("culprit") or {}).get("commit") or "",
                      "" if change is None else f"{change:+.1f}%", c.get("subsystem") or "",
                      r["subject"] or f"<{r['root_id']}>")
    _console().print(table)


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.option("--limit", default=50, show_default=True)
@click.option("--raw", "raw_id", type=int, metavar="ID", help="Print the raw bytes of one entry.")
@click.pass_obj
def quarantine(obj: Context, as_json, limit, raw_id):
    """List quarantined input with the recorded reasons."""
    store = obj.store
    if raw_id is not None:
        raw = store.quarantined_raw(raw_id)
        if raw is None:
            raise click.ClickException(f"no quarantine entry {raw_id}")
        sys.stdout.buffer.write(raw)
        return
    rows = store.quarantined(limit)
    if as_json:
        _dump(rows)
        return
    table = _table("id", "reason", "origin", "size")
    for r in rows:
        table.add_row(str(r["id"]), r["reason"], r["origin"], str(r["size"]))
    _console().print(table)


# -- browsing --------------------------------------------------------------------------------
@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.option("--limit", default=0, help="At most this many threads (0: all).")
@click.pass_obj
def threads(obj: Context, as_json, limit):
    """List threads, most recent activity first."""
    rows = obj.store.threads(limit or None)
    if as_json:
        _dump(rows)
        return
    table = _table("last activity", "msgs", "subject", "root")
    for r in rows:
        table.add_row((r["last_activity"] or "")[:16], str(r["messages"]), r["subject"] or "",
                      r["root"])
    _console().print(table)


@main.command()
@click.argument("ident")
@click.option("--json", "as_json", is_flag=True)
@click.option("--raw", is_flag=True, help="Print the message exactly as received.")
@click.pass_obj
def show(obj: Context, ident, as_json, raw):
    """Show a regression record (by id: 12 or #12) or a stored message (by Message-ID)."""
    if ident.lstrip("#").isdigit():
        from bot.cli.tracker import show_record

        show_record(obj, ident, as_json)
        return
    from bot.msgid import lore_url, stored_key

    mid = stored_key(ident) or ident.strip("<>")
    msg = obj.store.get_message(mid)
    if msg is None:
        raise click.ClickException(f"no message with Message-ID {mid}")
    if raw:
        sys.stdout.buffer.write(msg["raw"])
        return
    thread = obj.store.thread_of(mid)
    out = {k: v for k, v in msg.items() if k not in ("raw", "id")}
    out["headers"] = [list(h) for h in msg["headers"]]
    out["lore_url"] = lore_url(mid)
    out["thread"] = thread
    out["claim"] = obj.store.message_claim(mid)
    if as_json:
        _dump(out)
        return
    from rich.markup import escape

    con = _console()
    con.print(f"[bold]{escape(msg['subject'] or '(no subject)')}[/bold]")
    con.print(f"From: {escape(msg['from_addr'])}\nDate: {msg['date']}\nMessage-ID: {escape(mid)}")
    if msg["problems"]:
        con.print("[yellow]problems:[/yellow] " + escape("; ".join(msg["problems"])))
    con.print()
    con.print(escape(msg["body"][:4000]))
    con.print("\n[bold]thread[/bold]")
    for n in thread:
        mark = "" if n["present"] else " [dim](not received)[/dim]"
        here = " [green]<- this[/green]" if n["message_id"] == mid else ""
        con.print("  " * n["depth"] + escape(n["subject"] or f"<{n['message_id']}>") + mark + here)


# -- extraction ------------------------------------------------------------------------------
@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="One JSON object per message.")
def extract(paths, as_json):
    """Extract regression claims from .eml / mbox files (no database needed)."""
    from bot.triage.extraction import extract_items

    failed = False
    for result in extract_items(list(paths)):
        if "error" in result:
            failed = True
            click.echo(f"regtriage: cannot read input: {result['error']}", err=True)
            continue
        if as_json:
            click.echo(json.dumps(result, ensure_ascii=False))
        else:
            from bot.triage.extraction import render_summary

            render_summary(_console(), result)
    if failed:
        sys.exit(1)


# -- lore / public-inbox ----------------------------------------------------------------------
@main.command()
@click.argument("url")
@click.option("--query", "-q", default="", help="A public-inbox search (as in ?q=...).")
@click.option("--git", "git", is_flag=True, help="Mirror the inbox's git epochs (URL or local path).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def subscribe(obj: Context, url, query, git, as_json):
    """Subscribe to a public-inbox (lore) inbox, a search, or its git epochs."""
    from bot.sources.subscriptions import normalize_subscription

    kind, url, query = normalize_subscription(url, query, git)
    sid, created = obj.store.add_subscription(kind, url, query)
    if as_json:
        _dump({"id": sid, "kind": kind, "url": url, "query": query, "created": created})
    else:
        click.echo(f"{'subscribed' if created else 'already subscribed'}: #{sid} {kind} {url}"
                   + (f" q={query}" if query else ""))


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.option("--since", metavar="DATE", help="Backfill from this date (YYYY-MM-DD) on the first poll.")
@click.option("--details", is_flag=True, help="With --json: add per-subscription details.")
@click.option("--no-triage", is_flag=True, help="Store only; do not run the claim extractor afterwards.")
@click.pass_obj
def poll(obj: Context, as_json, since, details, no_triage):
    """Poll every subscription once: fetch new and changed threads and ingest them."""
    from bot.sources.subscriptions import poll_all

    result = poll_all(obj.store, obj.config, since=since, progress=not as_json and sys.stderr.isatty())
    if not no_triage and result["new_messages"]:
        _triage(obj, show=not as_json)
    if as_json:
        keys = ("subscriptions", "new_messages", "errors") + (("details",) if details else ())
        _dump({k: result[k] for k in keys})
    else:
        click.echo(f"{result['subscriptions']} subscriptions polled: {result['new_messages']} new messages")
        for e in result["errors"]:
            click.echo(f"  error: {e}")


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def subscriptions(obj: Context, as_json):
    """List subscriptions and where each one stopped."""
    rows = obj.store.subscriptions()
    if as_json:
        _dump(rows)
        return
    table = _table("id", "kind", "url", "query", "last poll", "last error")
    for r in rows:
        table.add_row(str(r["id"]), r["kind"], r["url"], r["query"] or "",
                      str(r["last_poll_at"] or "")[:19], r["last_error"] or "")
    _console().print(table)


@main.command()
@click.option("--host", default=None, help="Dashboard address (default [service] host or 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Dashboard port (default [service] port or 8080; 0: any).")
@click.option("--no-web", is_flag=True, help="Do not serve the dashboard, /metrics and /healthz.")
@click.option("--log-json", is_flag=True, help="Structured logs: one JSON object per line.")
@click.option("--log-level", default="INFO", show_default=True)
@click.option("--worker-id", default=None, help="Name of this worker in leases (default host:pid:random).")
@click.pass_obj
def run(obj: Context, host, port, no_web, log_json, log_level, worker_id):
    """Run the bot: poll subscriptions, triage, track, rerun, notify, and serve the dashboard."""
    import asyncio

    from bot.service.run import Service, setup_logging
    from bot.service.hooks import install_hooks

    settings = obj.config.section("service")
    setup_logging(log_json or bool(settings.get("log_json")), log_level)
    service = Service(obj.store, obj.config, host=host or settings.get("host", "127.0.0.1"),
                      port=int(port if port is not None else settings.get("port", 8080)),
                      web=not no_web, worker_id=worker_id)
    install_hooks(service)
    sys.exit(asyncio.run(service.run()))


def _read_samples(path: str) -> list[float]:
    values = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            try:
                values.append(float(text))
            except ValueError:
                raise click.ClickException(f"{path}:{lineno}: not a number: {text[:40]!r}") from None
    return values


@main.command()
@click.option("--good", "good_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="Samples of the last good build, one number per line.")
@click.option("--bad", "bad_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="Samples of the first bad build, one number per line.")
@click.option("--higher-is-better/--lower-is-better", default=True,
              help="Metric direction (throughput: higher; time, latency: lower).")
@click.option("--claimed", type=float, help="The % change the report claimed (e.g. -13.6).")
@click.option("--alpha", default=0.01, show_default=True, help="False-positive rate (both directions together).")
@click.option("--noise", default=1.0, show_default=True, help="Noise band in percent (when no claim is given).")
@click.option("--max-cv", default=5.0, show_default=True, help="Noise gate: largest CV (%) for not-reproduced.")
@click.option("--emulated", is_flag=True, help="The samples come from an emulated machine (noise gate).")
@click.option("--paired", is_flag=True,
              help="Line i of both files ran side by side (alternating runs): judge the pair differences.")
@click.option("--json", "as_json", is_flag=True)
def stats(good_path, bad_path, higher_is_better, claimed, alpha, noise, max_cv, emulated, paired, as_json):
    """Judge good-vs-bad samples in one look: confirmed, improved, not-reproduced or inconclusive."""
    from bot.lab.stats import judge

    try:
        j = judge(_read_samples(good_path), _read_samples(bad_path), higher_is_better=higher_is_better,
                  claimed_change_percent=claimed, alpha=alpha, noise_percent=noise, max_cv_percent=max_cv,
                  emulated=emulated, analysis="paired" if paired else "welch")
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        _dump({"verdict": j.verdict, "change_percent": j.change_percent, "ci": list(j.ci),
               "p_value": j.p_value, "n_good": j.n_good, "n_bad": j.n_bad, "cv_percent": j.cv_percent,
               "reasons": j.reasons, "analysis": j.analysis})
        return
    click.echo(f"{j.verdict}: {j.change_percent:+.2f}% (interval {j.ci[0]:+.2f}% .. {j.ci[1]:+.2f}%), "
               f"p={j.p_value:.3g}, n={j.n_good}/{j.n_bad}, CV {j.cv_percent:.1f}%")
    for r in j.reasons:
        click.echo(f"  {r}")


# Commands defined in other modules, imported when one of them is asked for (start-up: a
# command loads its own module only).  A name missing here still works: an unknown name
# registers every module before click looks again.
LAZY_COMMANDS = {
    "query": "bot.cli.tracker", "track": "bot.cli.tracker", "regressions": "bot.cli.tracker",
    "record": "bot.cli.tracker", "set-status": "bot.cli.tracker",
    "reply": "bot.cli.reply", "replies": "bot.cli.reply",
    "serve": "bot.cli.web",
    "lab": "bot.cli.lab", "rerun": "bot.cli.lab", "jobs": "bot.cli.lab",
    "notify": "bot.cli.notify",
}
_registered: set[str] = set()


def _register_subcommands(module: str | None = None) -> None:
    """Add the commands of ``module`` (one of LAZY_COMMANDS' values; None: all) to ``main``."""
    import importlib

    for name in sorted(set(LAZY_COMMANDS.values())) if module is None else [module]:
        if name not in _registered:
            _registered.add(name)
            importlib.import_module(name).register(main)


if __name__ == "__main__":  # pragma: no cover
    main()
