"""CLI commands of the lab: ``lab list``, ``lab match``, ``lab plan``, ``lab work``, ``rerun``,
``jobs`` (``jobs cancel``, ``jobs show``).

Wire into the main group with ``register(main)`` (bot/cli/main.py).  Heavy imports stay inside the
commands.
"""

from __future__ import annotations

import sys

import click

from bot.cli.tools import console as _console
from bot.cli.tools import dump as _dump
from bot.cli.tools import table as _table


def _lab_errors():
    from bot.lab.backends import LabError
    from bot.lab.inventory import InventoryError
    from bot.lab.plan import PlanError
    from bot.lab.settings import SchedulerError

    return (InventoryError, PlanError, SchedulerError, LabError)


def _record_id(obj, ident: str) -> int:
    from bot.tracker.records import find_record

    rid = find_record(obj.store, ident)
    if rid is None:
        raise click.ClickException(f"no regression record {ident}")
    return rid


def _when(dt) -> str:
    return dt.isoformat(timespec="seconds")[:19].replace("T", " ") if dt else ""


def _print_match(m: dict) -> None:
    con = _console()
    req = m["requirements"]
    cpu = req["cpu"]
    facts = [f"arch {req['arch'] or '?'}", f"builds {req['build_arch'] or '?'}",
             f"cpu {cpu.get('text') or '?'}", f"cores {req['cores'] or '?'}",
             f"storage {req['storage'] or '?'}", f"filesystem {req['filesystem'] or '?'}"]
    from rich.text import Text

    con.print(Text("report: " + ", ".join(facts), style="dim"))
    if not m["candidates"]:
        con.print("no lab machines are configured ([[lab.machines]])")
        return
    for c in m["candidates"]:
        head = f"{c['machine']}: score {c['score']}, " + ("eligible" if c["eligible"] else "EXCLUDED")
        if c.get("busy_with"):
            head += f" (busy with job {c['busy_with']})"
        con.print(Text(head, style="bold" if c["eligible"] else "red"))
        for r in c["reasons"]:
            pts = "  x " if r["excludes"] else f"{r['points']:+4d}" if r["points"] else "   0"
            con.print(Text(f"  {pts}  {r['text']}"))
    best = m.get("best")
    if best and m.get("stand_in"):
        con.print(f"no machine matches: the report names no hardware; best stand-in: {best} "
                  f"(`regtriage rerun` runs it there, saying so)")
    else:
        con.print(f"best: {best}" if best else "no machine fits")


def _fits(m: dict | None) -> bool:
    """A machine matches (not only stands in for) the report."""
    return bool(m and m.get("best") and not m.get("stand_in"))


def _why_not(m: dict | None) -> str:
    """Why no machine fits, one line per candidate (for a dry run)."""
    if not m:
        return "no match was made (the plan was declined)"
    if not m.get("candidates"):
        return "no lab machines are configured ([[lab.machines]])"
    return "; ".join(f"{c['machine']}: " + ", ".join(r["text"] for r in c["reasons"] if r["excludes"])
                     for c in m["candidates"] if not c["eligible"])


def _print_plan(rid: int, out: dict) -> None:
    """A dry run's plan and machine (``schedule_rerun(..., dry_run=True)``), for people."""
    p = out["plan"]
    r = p["recipe"]
    click.echo(f"record #{rid}")
    click.echo(f"workload: {p['recipe_reason']}")
    if r:
        click.echo(f"  recipe {r['name']} {r['params']} -> {r['metric']}")
    click.echo(f"builds:   {p['builds_reason'] or '-'}")
    click.echo(f"  good {p['builds_text']['good']}\n  bad  {p['builds_text']['bad']}")
    from bot.lab.stats import Design

    looks = list(Design.from_settings(p).looks)
    click.echo(f"runs:     {p['runs']} per build, {p['order']}, {p['warmup']} warm-up per batch, "
               f"{p['samples_per_batch']} sample(s) per batch; looks at {looks} runs per build "
               f"({p['spending']} spending, alpha {p['alpha']} over all looks)")
    for n in p["notes"]:
        click.echo(f"note:     {n}")
    for d in p["declined"]:
        click.echo(f"DECLINED: {d}")
    if out["match"]:
        best = out["match"]["best"]
        stand_in = " (a stand-in: the report names no hardware)" if out["match"].get("stand_in") else ""
        click.echo(f"machine:  {best + stand_in if best else 'none fits: ' + _why_not(out['match'])}")


def _print_jobs(rows) -> None:
    t = _table("job", "record", "state", "machine", "attempts", "rounds", "verdict", "updated", "message",
               keep=("job", "record", "state", "machine", "verdict"), optional=("rounds", "attempts", "updated"),
               wide=("message",))
    for j in rows:
        t.add_row(str(j["id"]), f"#{j['regression_id']}" if j.get("regression_id") else "", j["state"],
                  j.get("machine") or "", f"{j['attempts']}/{j['max_attempts']}", str(j["rounds"]),
                  j.get("verdict") or "", _when(j.get("updated_at")), (j.get("message") or "")[:100])
    _console().print(t)


def _job_json(j: dict) -> dict:
    out = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in j.items() if k != "backend_config"}
    if "events" in j:
        out["events"] = [{**e, "at": e["at"].isoformat() if e.get("at") else None} for e in j["events"]]
    return out


@click.group("lab")
def lab_group():
    """The lab: machines, matching, plans and the scheduler loop."""


@lab_group.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def lab_list(obj, as_json):
    """Machines declared in [[lab.machines]], and the job each one is busy with."""
    from bot.lab.inventory import load_machines
    from storage.lab_jobs import busy_machines

    try:
        machines = load_machines(obj.config)
    except _lab_errors() as exc:
        raise click.ClickException(str(exc)) from None
    try:
        busy = busy_machines(obj.store)
    except Exception:  # noqa: BLE001 - listing the config works without a database
        busy = {}
    rows = [{**m.to_dict(), "busy_with": busy.get(m.name)} for m in machines]
    if as_json:
        _dump(rows)
        return
    if not rows:
        click.echo("no lab machines are configured ([[lab.machines]], see deploy/lab-example.toml)")
        return
    t = _table("name", "arch", "cpu", "cores", "memory", "storage", "filesystems", "backend", "tags", "busy",
               keep=("name", "arch", "backend", "busy"),
               optional=("tags", "filesystems", "storage", "memory", "cores"))
    for m in rows:
        t.add_row(m["name"] + ("" if m["enabled"] else " (disabled)"), m["arch"], m["cpu"]["text"] or "",
                  str(m["cores"] or ""), m["memory"] or "", ",".join(d["type"] for d in m["storage"]),
                  ",".join(m["filesystems"]), m["backend"], ",".join(m["tags"]),
                  f"job {m['busy_with']}" if m["busy_with"] else "")
    _console().print(t)


def _dry_run(obj, rid: int, **kw) -> dict:
    """What ``rerun`` would do for the record (plan and match), nothing scheduled."""
    from bot.lab.scheduling import schedule_rerun

    try:
        return schedule_rerun(obj.store, obj.config, rid, dry_run=True, **kw)
    except _lab_errors() as exc:
        raise click.ClickException(str(exc)) from None


@lab_group.command("match")
@click.argument("ident")
@click.option("--machine", default=None, help="Score only this machine.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def lab_match(obj, ident, machine, as_json):
    """Score every machine for a record (id or Message-ID), with the reasons."""
    rid = _record_id(obj, ident)
    out = _dry_run(obj, rid, machine=machine)
    plan = out["plan"]
    m = out["match"]
    if m is None:  # the plan was declined: score without a recipe, against the record alone
        from bot.lab.matching import match_record
        from bot.tracker.records import get_record

        m = match_record(get_record(obj.store, rid), obj.config, machine=machine).to_dict()
    if as_json:
        _dump({"record": rid, "match": m, "plan_declined": plan["declined"]})
    else:
        _print_match(m)
        for d in plan["declined"]:
            click.echo(f"plan declined: {d}")
    if not _fits(m):
        sys.exit(1)  # no machine fits (or the report names no hardware): the reasons are above


@lab_group.command("plan")
@click.argument("ident")
@click.option("--runs", type=int, default=None)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def lab_plan(obj, ident, runs, as_json):
    """The rerun plan of a record (workload, builds, runs), without scheduling it."""
    rid = _record_id(obj, ident)
    out = _dry_run(obj, rid, runs=runs)
    if as_json:
        _dump(out)
    else:
        _print_plan(rid, out)
    if out["plan"]["declined"] or not (out["match"] or {}).get("best"):
        sys.exit(1)  # declined, or no machine fits: the reasons are above


@lab_group.command("power")
@click.option("--cv", type=float, required=True, help="Coefficient of variation of one run, in %.")
@click.option("--change", type=float, default=None,
              help="The claimed (and simulated) change in % of a throughput metric, e.g. -3.5.")
@click.option("--machine", default=None, help="Simulate on this machine (emulated or not, for the noise gate).")
@click.option("--trials", type=click.IntRange(100, 1_000_000), default=2000, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--table", is_flag=True, help="-2/-3.5/-5/-10% with LKP's rule beside (no --change needed).")
@click.option("--lkp-runs", type=click.IntRange(2, 1000), default=10, show_default=True,
              help="With --table: runs per side of LKP's fixed-size rule.")
@click.option("--load-cv", type=click.FloatRange(0, 50), default=0.0, show_default=True,
              help="A shared host: each run is also slowed by a drifting load factor with this CV in %.")
@click.option("--load-rho", type=click.FloatRange(0, 0.999), default=0.9, show_default=True,
              help="With --load-cv: correlation of the load between consecutive runs.")
@click.option("--boot-cv", type=click.FloatRange(0, 50), default=0.0, show_default=True,
              help="Boot-to-boot variation in %: every batch (one boot) is scaled by its own factor.")
@click.option("--runs-per-boot", type=click.IntRange(1, 100), default=None,
              help="Samples per batch (default: [lab] samples_per_batch); each batch is one unit.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def lab_power(obj, cv, change, machine, trials, seed, table, lkp_runs, load_cv, load_rho, boot_cv, runs_per_boot,
              as_json):
    """Simulate the scheduler's sequential procedure (the [lab] design: same looks, same
    rules, same code): false-positive rate on A/A pairs, power and runs at a change."""
    from bot.lab.inventory import get_machine, is_emulated
    from bot.lab.plan import lab_settings
    from bot.lab.power import power, power_table
    from bot.lab.stats import Design

    if not 0 < cv <= 100:
        raise click.BadParameter("must be in (0, 100]", param_hint="--cv")
    if change is None and not table:
        raise click.UsageError("--change is required (or --table)")
    if change is not None and not -90 <= change <= 1000:
        raise click.BadParameter("must be in [-90, 1000]", param_hint="--change")
    try:
        settings = lab_settings(obj.config)
        if runs_per_boot is not None:
            settings["samples_per_batch"] = runs_per_boot
        design, order = Design.from_settings(settings), settings["order"]
        emulated = False
        if machine is not None:
            m = get_machine(obj.config, machine)
            if m is None:
                raise click.ClickException(f"no machine {machine!r} in [[lab.machines]]")
            emulated = is_emulated(m, obj.config)
    except _lab_errors() as exc:
        raise click.ClickException(str(exc)) from None
    if not table:
        out = power(design, cv_percent=cv, change_percent=change, trials=trials, seed=seed, emulated=emulated,
                    load_cv_percent=load_cv, load_rho=load_rho, order=order, boot_cv_percent=boot_cv)
        out["machine"] = machine
        if as_json:
            _dump(out)
        else:
            _print_power(out, design, cv, change, trials, emulated)
        return
    rows = power_table(design, cv_percent=cv, trials=trials, seed=seed, emulated=emulated, lkp_runs=lkp_runs,
                       load_cv_percent=load_cv, load_rho=load_rho, order=order, boot_cv_percent=boot_cv,
                       **({"changes": (change,)} if change is not None else {}))
    if as_json:
        _dump({"machine": machine, "emulated": emulated, "looks": list(design.looks), "rows": rows})
        return
    _print_power_table(rows, design, cv, trials, emulated, lkp_runs)


def _print_power(out: dict, design, cv: float, change: float, trials: int, emulated: bool) -> None:
    """``lab power --change``: error rates, power and runs of one simulated change."""
    load = f", shared host (load CV {out['load_cv_percent']}%, rho {out['load_rho']})" if out["load_cv_percent"] else ""
    if design.per_unit > 1:
        load += (f", {design.per_unit} runs per boot (units: boots, {list(design.unit_looks)} per look; boot CV "
                 f"{out['boot_cv_percent']}%)")
    elif out["boot_cv_percent"]:
        load += f", one run per boot, boot CV {out['boot_cv_percent']}%"
    click.echo(f"looks {out['looks']} runs per build, alpha {design.alpha} ({design.spending}), "
               f"{design.analysis} analysis, {out['order']} order, CV {cv}%, {trials} trials"
               f"{', emulated machine' if emulated else ''}{load}")
    lo, hi = out["false_positive_ci95"]
    click.echo(f"false_positive_rate {out['false_positive_rate']:.2%} (95% CI {lo:.2%}..{hi:.2%})  "
               f"power {out['power']:.2%} at "
               f"{change:+g}%  mean_runs {out['mean_runs']:.1f}  max_runs {out['max_runs']}")
    for label, key, runs in (("A/A", "verdicts_aa", out["mean_runs_aa"]), (f"{change:+g}%", "verdicts",
                                                                           out["mean_runs"])):
        click.echo(f"  {label}: " + ", ".join(f"{v} {r:.2%}" for v, r in out[key].items())
                   + f" (mean {runs:.1f} runs per build)")


def _print_power_table(rows: list, design, cv: float, trials: int, emulated: bool, lkp_runs: int) -> None:
    """``lab power --table``: the procedure beside LKP's fixed-size rule, per change."""
    click.echo(f"looks {list(design.looks)} runs per build, alpha {design.alpha} ({design.spending}), "
               f"{design.analysis} analysis, CV {cv}%, {trials} trials per cell{', emulated machine' if emulated else ''}; "
               f"LKP's rule at {lkp_runs} runs per build")
    t = _table("change", "FP (A/A)", "power", "mean runs", "max runs", "LKP FP", "LKP power", "ranges FP",
               "ranges power", "LKP runs")
    for r in rows:
        k = r["lkp"]
        t.add_row(f"{r['change_percent']:+g}%", f"{r['false_positive_rate']:.2%}", f"{r['power']:.2%}",
                  f"{r['mean_runs']:.1f}", str(r["max_runs"]), f"{k['false_positive_rate']:.2%}",
                  f"{k['power']:.2%}", f"{k['ranges_false_positive_rate']:.2%}", f"{k['ranges_power']:.2%}",
                  str(k["runs"]))
    _console().print(t)


@lab_group.command("work")
@click.option("--once", is_flag=True, help="One pass, then exit.")
@click.option("--interval", type=float, default=None, help="Seconds between passes ([lab] poll_interval_s).")
@click.option("--json", "as_json", is_flag=True, help="With --once: the pass's counts as JSON.")
@click.pass_obj
def lab_work(obj, once, interval, as_json):
    """Run the scheduler: submit queued jobs to free machines, poll running ones, store verdicts."""
    from bot.lab.scheduler import Scheduler

    try:
        sched = Scheduler(obj.store, obj.config,
                          log=(lambda msg: None) if as_json else (lambda msg: click.echo(msg, err=True)))
    except _lab_errors() as exc:
        raise click.ClickException(str(exc)) from None
    if once:
        try:
            stats = sched.tick()
        finally:
            sched.release()
        if as_json:
            _dump(stats)
        else:
            click.echo(", ".join(f"{k} {v}" for k, v in sorted(stats.items()) if v) or "nothing to do")
        return
    click.echo(f"lab worker {sched.owner}: polling every {sched.settings['poll_interval_s'] if interval is None else interval}s",
               err=True)
    sched.run(interval=interval)


@click.command("rerun")
@click.argument("ident")
@click.option("--machine", default=None, help="Run on this machine (it must still fit).")
@click.option("--runs", type=int, default=None, help="Measured runs per build ([lab] runs).")
@click.option("--wait", is_flag=True, help="Run the scheduler until this job finishes.")
@click.option("--timeout", type=float, default=None, help="With --wait: give up waiting after this many seconds.")
@click.option("--dry-run", is_flag=True, help="Show the plan and the match; schedule nothing.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def rerun_cmd(obj, ident, machine, runs, wait, timeout, dry_run, as_json):
    """Schedule a confirmation rerun of a regression record (id or Message-ID)."""
    from bot.lab.scheduler import Scheduler
    from bot.lab.scheduling import schedule_rerun
    from storage.lab_jobs import get as get_job

    rid = _record_id(obj, ident)
    try:
        job = schedule_rerun(obj.store, obj.config, rid, machine=machine, runs=runs, dry_run=dry_run)
    except _lab_errors() as exc:
        raise click.ClickException(str(exc)) from None
    if dry_run:  # nothing scheduled: the plan and the machine, as `lab plan` shows them
        if as_json:
            _dump(job)
        else:
            _print_plan(rid, job)
            click.echo("dry run: nothing scheduled (--json prints the plan and the match as JSON)")
        if job["plan"]["declined"] or not (job["match"] or {}).get("best"):
            raise SystemExit(1)  # it would be declined: the reasons are above
        return
    if not as_json:
        click.echo(f"job {job['id']}: {job['state']}: {job.get('message') or ''}")
    if wait and job["state"] in ("queued", "waiting"):
        sched = Scheduler(obj.store, obj.config,
                          log=(lambda msg: None) if as_json else (lambda msg: click.echo(msg, err=True)))
        job = sched.run(until_job=job["id"], timeout=timeout) or get_job(obj.store, job["id"])
        if not as_json:
            click.echo(f"job {job['id']}: {job['state']}: {job.get('message') or ''}")
    if as_json:
        _dump(_job_json(get_job(obj.store, job["id"], events=True)))
    if job["state"] in ("declined", "failed", "cancelled", "waiting"):
        raise SystemExit(1)  # nothing fits (declined, or waiting for a machine): the message says why


@click.group("jobs", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True)
@click.option("--all", "show_all", is_flag=True, help="Finished jobs too.")
@click.option("--record", "record", default=None, help="Only this record's jobs.")
@click.option("--limit", default=100, show_default=True)
@click.pass_context
def jobs_group(ctx, as_json, show_all, record, limit):
    """List rerun jobs (active ones unless --all); `jobs cancel JOB`, `jobs show JOB`."""
    if ctx.invoked_subcommand is not None:
        return
    from storage.lab_jobs import list_jobs
    from storage.lab_schema import ACTIVE_STATES

    obj = ctx.obj
    rid = _record_id(obj, record) if record else None
    rows = list_jobs(obj.store, states=None if show_all or rid else ACTIVE_STATES, regression_id=rid, limit=limit)
    if as_json:
        _dump([_job_json(j) for j in rows])
        return
    if not rows:
        click.echo("no active jobs" if not show_all else "no jobs")
        return
    _print_jobs(rows)


@jobs_group.command("cancel")
@click.argument("job_id", type=int)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def jobs_cancel(obj, job_id, as_json):
    """Cancel a job (a running one is stopped in its backend)."""
    from bot.lab.scheduling import cancel_job

    try:
        job = cancel_job(obj.store, obj.config, job_id)
    except _lab_errors() as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        _dump(_job_json(job))
        return
    extra = " (cancel requested; the worker stops it)" if job["state"] not in ("cancelled",) else ""
    click.echo(f"job {job_id}: {job['state']}{extra}")


@jobs_group.command("show")
@click.argument("job_id", type=int)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def jobs_show(obj, job_id, as_json):
    """One job with its plan, samples, verdict and events."""
    from storage.lab_jobs import get as get_job

    job = get_job(obj.store, job_id, events=True)
    if job is None:
        raise click.ClickException(f"no job {job_id}")
    if as_json:
        _dump(_job_json(job))
        return
    _print_jobs([job])
    p = job["plan"]
    click.echo(f"recipe: {(p.get('recipe') or {}).get('name')} {(p.get('recipe') or {}).get('params')}")
    click.echo(f"builds: good {(p.get('builds_text') or {}).get('good')}, bad {(p.get('builds_text') or {}).get('bad')}")
    if job.get("samples"):
        s = job["samples"]
        click.echo(f"samples ({s.get('metric')}): good {s.get('good')}\n                bad  {s.get('bad')}")
    if job.get("result"):
        for r in job["result"].get("reasons") or []:
            click.echo(f"verdict: {r}")
    for e in job["events"]:
        click.echo(f"  {_when(e['at'])} {e['state'] or '-':10s} {e['message'] or ''}")


# -- lab build, bisect (bot.lab.kbuild, bot.lab.bisect_driver) ------------------------------------

@lab_group.command("build")
@click.argument("ref")
@click.option("--machine", default=None, help="Use this machine's base config ([lab.builds] base_config).")
@click.option("--tree", default=None, help="Build in this configured tree (default: the first that has REF).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def lab_build(obj, ref, machine, tree, as_json):
    """Build REF (a tag, next-YYYYMMDD, a version, a commit id) from a configured kernel tree
    with TuxMake, or take it from the build cache; prints where the image is."""
    from bot.lab.kbuild import BuildFailed, tree_kernel
    from bot.lab.plan import REF_RE, BuildMap

    if not REF_RE.match(ref):
        raise click.BadParameter("not a version, tag or commit id", param_hint="REF")
    try:
        bm = BuildMap.from_config(obj.config)
        if tree is not None:
            if tree not in bm.trees:
                raise click.ClickException(f"{tree} is not a configured tree ({', '.join(bm.trees) or 'none'})")
            bm.trees = [tree]
        found = bm.find_in_trees(ref)
        if found is None:
            raise click.ClickException(f"{ref!r} is in none of the kernel trees "
                                       f"({', '.join(bm.trees) or 'none configured: [lab.builds] trees'})")
        spec = bm.tree_spec(found[0], found[1], machine)
    except _lab_errors() as exc:
        raise click.ClickException(str(exc)) from None
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    con = _console(stderr=True) if not as_json else None
    try:
        if con is not None and con.is_terminal:
            with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                          console=con, transient=True) as prog:
                task = prog.add_task(f"building {ref} ({found[1][:12]}, {spec.kconfig})", total=None)
                rb = tree_kernel(spec, opts=bm.options,
                                 progress=lambda line: prog.update(task, description=f"{ref}: {line[:100]}"))
        else:
            if not as_json:
                click.echo(f"{ref} ({found[1][:12]}) in {found[0]}: {spec.kconfig} + {len(spec.fragments)} "
                           "fragment(s) (from the cache, or built now)", err=True)
            rb = tree_kernel(spec, opts=bm.options)
    except BuildFailed as exc:
        if as_json:
            _dump({"ref": ref, "commit": found[1], "status": "failed", "reason": str(exc), "tail": exc.tail,
                   "entry": exc.entry})
        else:
            click.echo(exc.tail, err=True)
        raise click.ClickException(str(exc)) from None
    except _lab_errors() + (OSError,) as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        _dump({"ref": ref, "commit": found[1], "status": "ok", "image": rb.kernel, **rb.info})
        return
    entry = rb.info.get("entry")
    click.echo(f"{ref} = {found[1]} built in {rb.info.get('duration_s')}s (cached in {entry})")
    click.echo(rb.kernel)


@click.command("bisect")
@click.argument("ident")
@click.option("--good", default=None, help="Good end (default: the record's good version).")
@click.option("--bad", default=None, help="Bad end (default: the record's bad version).")
@click.option("--machine", default=None, help="Run every step on this machine.")
@click.option("--cancel", is_flag=True, help="Cancel the record's running bisection.")
@click.option("--no-wait", is_flag=True, help="Only queue it (the service's lab loop / `lab work` runs it).")
@click.option("--timeout", type=float, default=None, help="Stop waiting after this many seconds (it resumes).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def bisect_cmd(obj, ident, good, bad, machine, cancel, no_wait, timeout, as_json):
    """Bisect a record's good..bad range on a lab machine: build, boot, run the vetted
    recipe, judge each step; the first bad commit becomes the record's culprit.  Runs to the
    end (or resumes the record's bisection where it stopped)."""
    import storage.bisections as bdb
    from bot.lab import bisect_driver as drv

    rid = _record_id(obj, ident)
    try:
        if cancel:
            b = drv.cancel(obj.store, obj.config, rid)
            click.echo(f"bisection {b.id}: {b.state}"
                       + ("" if b.state == "cancelled" else " (cancel requested; its worker stops it)"))
            return
        b = bdb.active_for_record(obj.store, rid)
        if b is None:
            b = drv.start(obj.store, obj.config, rid, good=good, bad=bad, machine=machine)
            if not as_json:
                click.echo(f"bisection {b.id}: {b.message}")
        elif not as_json:
            click.echo(f"bisection {b.id}: resuming ({b.message})")
        if not no_wait:
            log = (lambda m: None) if as_json else (lambda m: click.echo(m, err=True))
            b = drv.Driver(obj.store, obj.config, log=log).run(b.id, timeout=timeout)
    except (drv.BisectionError,) + _lab_errors() as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        _dump(drv.summary(b))
        return
    click.echo(drv.report_text(b) if b.state in ("done", "failed") else f"bisection {b.id}: {b.state}: {b.message}")
    if b.state == "failed":
        raise SystemExit(1)


def register(main: click.Group) -> None:
    """Add ``lab`` (``list``, ``match``, ``plan``, ``power``, ``work``, ``build``), ``rerun``,
    ``jobs`` and ``bisect`` to the ``regtriage`` click group."""
    for command in (lab_group, rerun_cmd, jobs_group, bisect_cmd):
        main.add_command(command)
