"""The bisection driver: git, builds and lab runs around the pure logic of bot.lab.bisection.

``regtriage bisect ID`` (:func:`start`, then :func:`run` until it is done) and the service's
lab loop (:func:`tick`, every pass of the scheduler; :func:`auto_start` when ``[lab]
auto_bisect = true`` and a range rerun confirmed the regression) drive a bisection of the
record's good..bad range:

1. *start*: the range is resolved in the kernel trees of ``[lab.builds]`` (both ends in one tree;
   refs validated, ``git rev-parse`` / ``git rev-list --topo-order --parents`` as argument
   lists), the vetted recipe and run settings come from the record's rerun plan, the machine
   from the matcher (or ``--machine``).  Stored in ``lab_bisections`` (storage/bisections.py).
2. *step 0, the ends*: both ends are built (TuxMake, bot.lab.kbuild) and measured against each
   other on the machine; unless the lab's statistics confirm the regression there, the
   bisection fails ("the ends do not differ").  Their samples are what every step is judged
   against.
3. *steps 1..*: the next commit (bot.lab.bisection.next_action) is built -- a build failure is a
   ``skip`` -- and run alternating with the good end's image (the good end is measured again in
   every step, so drift of the host hits both alike); bot.lab.bisection.judge_step compares the
   step with the good end and the ends' change: good / bad / more runs / skip.  A kernel that
   does not boot (after ``boot_retries``) is a ``skip`` too.
4. *the end*: the first bad commit (or the candidates left when only skipped commits remain or a
   bound was reached) and the bisect log are stored; the record gets the culprit with source
   ``lab-bisect`` (not a person's), the log as evidence and a history row ``bisection`` (which
   the chat notifications announce).

Every change is written to the database before the next action, and a step remembers the
backend handle of its run, so a restarted worker continues polling the run in flight, and a
finished step is never redone.  Bounds: ``[lab.bisect] max_steps`` (default 20) and
``max_lab_minutes`` (default 600; builds and runs).  Workers hold a lease on a bisection
(``[lab] lease_s``) so two never advance the same one.
"""

from __future__ import annotations

import subprocess
import time
from typing import Any, Callable

import storage.bisections as db
from bot.lab import bisection as logic
from bot.lab.backends import DONE, FAILED, RunSpec
from bot.lab.bisection import report_text, summary  # noqa: F401  (the CLI's view of a bisection)
from bot.lab.builds import BuildError, BuildSpec
from bot.lab.inventory import get_machine, InventoryError, lab_section, make_backend
from bot.lab.kbuild import BuildFailed, tree_kernel
from bot.lab.matching import match_record
from bot.lab.plan import BuildMap, make_plan, PlanError, REF_RE
from bot.lab.settings import default_owner, pinned_backend_config, sched_settings
from bot.lab.stats import CONFIRMED, DESIGN_DEFAULTS, Design, decide
from bot.tracker.records import _Run, add_note, get_record
from storage.lab_jobs import busy_machines, machine_load
from storage.records import transaction

ACTOR = "regtriage-lab-bisect"
SOURCE = "lab-bisect"
BISECT_DEFAULTS = {"max_steps": 20, "max_lab_minutes": 600, "max_range": 100000, "boot_retries": 1}


class BisectionError(Exception):
    """A bisection cannot be started or driven; the message says why."""


def settings(config: Any) -> dict[str, Any]:
    b = lab_section(config).get("bisect", {})
    if not isinstance(b, dict):
        raise BisectionError("[lab.bisect] must be a table")
    out = dict(BISECT_DEFAULTS)
    for k, (lo, hi) in {"max_steps": (1, 1000), "max_lab_minutes": (1, 60 * 24 * 30), "max_range": (2, 10 ** 7),
                        "boot_retries": (0, 10)}.items():
        v = b.get(k, out[k])
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
            raise BisectionError(f"[lab.bisect] {k} must be a number in [{lo}, {hi}]")
        out[k] = v
    return out


def _git(tree: str, *args: str, timeout: float = 600) -> str:
    p = subprocess.run(["git", "-C", tree, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=timeout)
    if p.returncode != 0:
        raise BisectionError(f"git {args[0]} in {tree} failed: {p.stderr.strip()[-300:]}")
    return p.stdout


# ---------------------------------------------------------------------------------- starting
def start(store, config: Any, rid: int, *, good: str | None = None, bad: str | None = None,
          machine: str | None = None, requested_by: str = "cli") -> db.Bisection:
    """Plan and store a bisection of record ``rid`` (its good..bad range, or the refs given)."""
    rec = get_record(store, rid)
    if rec is None:
        raise BisectionError(f"no regression record {rid}")
    active = db.active_for_record(store, rid)
    if active is not None:
        raise BisectionError(f"record #{rid} already has bisection {active.id} ({active.state}); "
                             f"cancel it first (regtriage bisect {rid} --cancel)")
    good, bad = good or rec.get("good"), bad or rec.get("bad")
    if not (good and bad):
        raise BisectionError("a bisection needs a good and a bad version (the record has "
                             f"good={rec.get('good')!r}, bad={rec.get('bad')!r})")
    for r in (good, bad):
        if not isinstance(r, str) or not REF_RE.match(r):
            raise BisectionError(f"ref {str(r)[:60]!r} is not a version or commit id")
    s = settings(config)
    try:
        plan = make_plan(rec, config)
        bm = BuildMap.from_config(config)
    except PlanError as exc:
        raise BisectionError(str(exc)) from None
    if plan.recipe is None:
        raise BisectionError(f"workload: {plan.recipe_reason}")
    tree, gs, bs, state, size = _range(bm, good, bad, s)
    try:
        m = match_record(rec, config, recipe=plan.recipe, build_arch=bm.arch, machine=machine,
                         busy=busy_machines(store), load=machine_load(store))
    except InventoryError as exc:
        raise BisectionError(str(exc)) from None
    if m.best is None:
        raise BisectionError(f"no lab machine fits: {m.why_none()}")
    mach = get_machine(config, m.best.machine)
    info = _plan_info(plan, bm, tree, gs, mach, config, s)
    info.update({"requested_by": requested_by, "good": gs, "bad": bs, "range_size": size})
    b = db.create(store, regression_id=rid, tree=tree, good_ref=good, bad_ref=bad, machine=mach.name, plan=info,
                  bisect=state, message=f"queued: {size} commits in {good}..{bad} on {mach.name}")
    _note(store, rid, "queued", f"bisection {b.id} of {good}..{bad} ({size} commits) on {mach.name}, "
                                f"recipe {plan.recipe.name}")
    return b


def _range(bm: BuildMap, good: str, bad: str, s: dict) -> tuple[str, str, str, dict, int]:
    """The tree holding both ends, their full ids, the bisection's initial state (commits,
    parents, subjects) and the range's size."""
    tree = gs = bs = None
    for t in bm.trees:  # both ends in one tree
        sub = BuildMap(trees=[t])
        g, b = sub.find_in_trees(good), sub.find_in_trees(bad)
        if g and b:
            tree, gs, bs = t, g[1], b[1]
            break
    if tree is None:
        raise BisectionError(f"{good!r} and {bad!r} are not both in one of the kernel trees "
                             f"({', '.join(bm.trees) or 'none configured: [lab.builds] trees or [kernel] repos'})")
    commits, parents = logic.parse_rev_list(_git(tree, "rev-list", "--topo-order", "--parents",
                                                 f"{gs}..{bs}", "--"))
    if not commits:
        raise BisectionError(f"{good}..{bad} is empty in {tree} (is {good} a descendant of {bad}?)")
    if len(commits) > s["max_range"]:
        raise BisectionError(f"{good}..{bad} has {len(commits)} commits, more than [lab.bisect] max_range")
    subjects = {}
    for line in _git(tree, "log", "--format=%H %s", f"{gs}..{bs}", "--").splitlines()[:5000]:
        sha, _, subj = line.partition(" ")
        subjects[sha] = subj[:200]
    for sha in (gs, bs):
        subjects.setdefault(sha, _git(tree, "log", "-1", "--format=%s", sha, "--").strip()[:200])
    try:
        state = logic.new_state(gs, bs, commits, parents, subjects)
    except logic.BisectError as exc:
        raise BisectionError(str(exc)) from None
    return tree, gs, bs, state, len(commits)


def _plan_info(plan, bm: BuildMap, tree: str, gs: str, mach, config: Any, s: dict) -> dict:
    """What every step runs: the recipe, the runs and their design, the build and the backend."""
    spec = bm.tree_spec(tree, gs, mach.name)
    return {"recipe": plan.recipe.to_dict(), "runs": plan.runs, "warmup": plan.warmup,
            "samples_per_batch": plan.samples_per_batch, "order": plan.order,
            "timeouts": {"boot_s": plan.timeouts.boot_s, "batch_s": plan.timeouts.batch_s,
                         "total_s": plan.timeouts.total_s},
            "design": {k: getattr(plan, k) for k in ("runs", "extend_step", "max_runs", "samples_per_batch",
                                                     *DESIGN_DEFAULTS)},
            "build": {k: v for k, v in spec.to_dict().items() if k not in ("tree", "ref")},
            "build_options": bm.options, "backend": mach.backend,
            "backend_config": pinned_backend_config(mach, config),
            "max_steps": int(s["max_steps"]), "max_lab_s": float(s["max_lab_minutes"]) * 60,
            "boot_retries": int(s["boot_retries"])}


def auto_start(store, config: Any, job: dict) -> db.Bisection | None:
    """The service's hook after a rerun job is done: with ``[lab] auto_bisect = true``, a
    *confirmed* rerun of a good..bad range (not of culprit^ vs culprit) starts a bisection."""
    if lab_section(config).get("auto_bisect") is not True or job.get("verdict") != "confirmed":
        return None
    refs = (job.get("plan") or {}).get("refs") or {}
    if not job.get("regression_id") or not refs.get("good") or str(refs.get("good")).endswith("^"):
        return None
    try:
        return start(store, config, job["regression_id"], good=refs["good"], bad=refs["bad"],
                     machine=job.get("machine"), requested_by="auto")
    except BisectionError as exc:
        _note(store, job["regression_id"], "not-started", f"bisection not started: {exc}")
        return None


def cancel(store, config: Any, rid: int) -> db.Bisection:
    b = db.active_for_record(store, rid)
    if b is None:
        raise BisectionError(f"record #{rid} has no active bisection")
    b = db.request_cancel(store, b.id)
    if b.state == "cancelled":
        _note(store, rid, "cancelled", f"bisection {b.id} cancelled")
    return b


def _note(store, rid: int | None, new: str, note: str) -> None:
    if rid is None:
        return

    add_note(store, rid, "bisection", new, actor=ACTOR, note=note[:2000], source=SOURCE)


# ---------------------------------------------------------------------------------- driving
class Driver:
    """Advances bisections one action at a time (a build, a submit, a poll)."""

    def __init__(self, store, config: Any, *, owner: str | None = None, lease_s: float | None = None,
                 log: Callable[[str], None] | None = None, progress: Callable[[str], None] | None = None):

        self.store, self.config = store, config
        self.owner = owner or default_owner()
        self.lease_s = lease_s if lease_s is not None else sched_settings(config)["lease_s"]
        self.log = log or (lambda m: None)
        self.progress = progress
        self._backends: dict[str, Any] = {}

    def backend(self, b: db.Bisection):
        key = b.plan["backend"]
        if key not in self._backends:
            self._backends[key] = make_backend(b.plan["backend"], b.plan.get("backend_config"))
        return self._backends[key]

    # -- one action ---------------------------------------------------------------------------
    def advance(self, bid: int) -> str:
        """Do the next thing for bisection ``bid``; returns what happened ("waiting" while a run
        is in flight, "busy" when another worker holds it, "final" when it is over)."""
        if not db.take(self.store, bid, self.owner, self.lease_s):
            b = db.get(self.store, bid, steps=False)
            return "final" if b is None or not b.active else "busy"
        b = db.get(self.store, bid)
        if b.cancel_requested:
            step = db.open_step(self.store, bid)
            if step is not None and step.handle:
                try:
                    self.backend(b).cancel(step.handle)
                except Exception:  # noqa: BLE001 - the run is abandoned either way
                    pass
            db.save(self.store, bid, self.owner, state="cancelled", message="cancelled on request")
            _note(self.store, b.regression_id, "cancelled", f"bisection {bid} cancelled")
            return "final"
        if b.state == "queued":
            db.save(self.store, bid, self.owner, state="running", message="running")
        step = db.open_step(self.store, bid)
        if step is None:
            if b.ends is None:
                step = db.add_step(self.store, bid, 0, b.plan["bad"])
            else:
                st = b.bisect
                action = logic.next_action(st, max_steps=b.plan["max_steps"], max_lab_s=b.plan["max_lab_s"])
                if action.kind != "test":
                    self.finish(b, action)
                    return "final"
                step = db.add_step(self.store, bid, len(st["steps"]) + 1, action.commit)
                db.save(self.store, bid, self.owner,
                        message=f"step {step.n}: {action.commit[:12]} ({action.reason})")
                self.log(f"bisection {bid}: step {step.n}: testing {action.commit[:12]} ({action.reason})")
        if step.state == "building":
            return self.build_and_submit(b, step)
        return self.poll(b, step)

    def _build(self, b: db.Bisection, sha: str) -> tuple[dict, float]:
        spec = BuildSpec(tree=b.tree, ref=sha, **b.plan["build"])
        t0 = time.monotonic()
        try:
            rb = tree_kernel(spec, opts=b.plan.get("build_options"), progress=self.progress)
            return {"status": "ok", "image": rb.kernel, "entry": rb.info.get("entry"),
                    "duration_s": rb.info.get("duration_s")}, time.monotonic() - t0
        except BuildFailed as exc:
            return {"status": "failed", "reason": str(exc), "tail": exc.tail[-3000:], "entry": exc.entry}, \
                time.monotonic() - t0
        except BuildError as exc:
            return {"status": "error", "reason": str(exc)}, time.monotonic() - t0

    def build_and_submit(self, b: db.Bisection, step: db.Step) -> str:
        builds: dict[str, dict] = {}
        spent = 0.0
        for label, sha in (("good", b.plan["good"]), ("step", step.commit)):
            self.log(f"bisection {b.id}: building {label} {sha[:12]}")
            builds[label], took = self._build(b, sha)
            spent += took
            db.take(self.store, b.id, self.owner, self.lease_s)  # builds take long: renew
            if builds[label]["status"] != "ok":
                why = builds[label]["reason"]
                if step.n == 0 or label == "good":
                    db.save_step(self.store, step.id, state="done", build=builds, verdict=logic.SKIP, lab_s=spent)
                    self.fail(b, f"the {'good' if label == 'good' else 'bad'} end does not build: {why}")
                    return "final"
                return self.conclude(b, step, logic.SKIP, f"build failed: {why}", builds=builds, lab_s=spent)
        handle = self.submit(b, builds["good"]["image"], builds["step"]["image"], b.plan["runs"])
        db.save_step(self.store, step.id, state="running", build=builds, handle=handle, lab_s=spent,
                     samples={"good": [], "step": [], "attempts": 1, "run_started": time.time()})
        self.log(f"bisection {b.id}: step {step.n} running as {handle}")
        return "submitted"

    def submit(self, b: db.Bisection, good_image: str, step_image: str, runs: int) -> str:
        p = b.plan
        arch = p["build"].get("arch", "x86_64")
        spec = RunSpec.from_dict({"recipe": p["recipe"], "builds": {"good": {"image": good_image, "arch": arch},
                                                                   "bad": {"image": step_image, "arch": arch}},
                                  "runs": runs, "samples_per_batch": min(p["samples_per_batch"], runs),
                                  "warmup": p["warmup"], "order": p["order"], "timeouts": p["timeouts"],
                                  "label": f"bisect-{b.id}"}, p.get("backend_config"))
        return self.backend(b).submit(spec)

    def poll(self, b: db.Bisection, step: db.Step) -> str:
        backend = self.backend(b)
        st = backend.poll(step.handle)
        samples = dict(step.samples or {})
        if st.state == FAILED:
            ran = time.time() - float(samples.get("run_started") or time.time())
            if samples.get("attempts", 1) <= b.plan.get("boot_retries", 1):
                handle = self.submit(b, step.build["good"]["image"], step.build["step"]["image"], b.plan["runs"])
                samples.update(attempts=samples.get("attempts", 1) + 1, run_started=time.time())
                db.save_step(self.store, step.id, handle=handle, samples=samples, lab_s=(step.lab_s or 0) + ran)
                self.log(f"bisection {b.id}: step {step.n} run failed ({st.message}); retrying")
                return "submitted"
            if step.n == 0:
                db.save_step(self.store, step.id, state="done", verdict=logic.SKIP, lab_s=(step.lab_s or 0) + ran)
                self.fail(b, f"the ends cannot be measured: {st.message}")
                return "final"
            return self.conclude(b, step, logic.SKIP, f"run failed: {st.message}", lab_s=(step.lab_s or 0) + ran)
        if st.state != DONE:
            return "waiting"
        got = backend.fetch_samples(step.handle)
        ran = time.time() - float(samples.get("run_started") or time.time())
        samples["good"] = list(samples.get("good") or []) + [float(x) for x in got.get("good", [])]
        samples["step"] = list(samples.get("step") or []) + [float(x) for x in got.get("bad", [])]
        samples["metric"], samples["higher_is_better"] = got.metric, bool(got.higher_is_better)
        lab_s = (step.lab_s or 0) + ran

        design = Design.from_settings(b.plan["design"])
        if step.n == 0:
            j = decide(samples["good"], samples["step"], design, higher_is_better=samples["higher_is_better"])
            if j.next_runs > 0:
                return self.more(b, step, samples, j.next_runs, lab_s)
            if j.verdict != CONFIRMED:
                db.save_step(self.store, step.id, state="done", samples=samples, verdict=logic.SKIP,
                             judgement=j.to_dict(), change_percent=j.change_percent, lab_s=lab_s)
                self.fail(b, f"the ends do not differ on {b.machine}: {j.verdict} "
                             f"({j.change_percent:+.2f}%): {j.reasons[0] if j.reasons else ''}")
                return "final"
            ends = {"good": samples["good"], "bad": samples["step"], "metric": samples["metric"],
                    "higher_is_better": samples["higher_is_better"], "change_percent": j.change_percent,
                    "judgement": j.to_dict()}
            db.save_step(self.store, step.id, state="done", samples=samples, verdict=logic.BAD,
                         judgement=j.to_dict(), change_percent=j.change_percent, lab_s=lab_s)
            st_ = dict(b.bisect)
            st_["lab_s"] = float(st_.get("lab_s", 0.0)) + lab_s
            db.save(self.store, b.id, self.owner, ends=ends, bisect=st_,
                    message=f"ends measured: {j.change_percent:+.2f}% ({samples['metric']})")
            self.log(f"bisection {b.id}: ends differ by {j.change_percent:+.2f}%")
            return "ends"
        ends = b.ends
        judged = logic.judge_step(samples["good"], samples["step"], design, ends_change_percent=ends["change_percent"],
                                  higher_is_better=ends["higher_is_better"])
        if judged.verdict == logic.MORE:
            return self.more(b, step, samples, judged.next_runs, lab_s)
        return self.conclude(b, step, judged.verdict, judged.reasons[0], samples=samples, lab_s=lab_s,
                             change=judged.change_percent, judgement=judged.to_dict())

    def more(self, b, step, samples, n: int, lab_s: float) -> str:
        handle = self.submit(b, step.build["good"]["image"], step.build["step"]["image"], n)
        samples["run_started"] = time.time()
        db.save_step(self.store, step.id, handle=handle, samples=samples, lab_s=lab_s)
        self.log(f"bisection {b.id}: step {step.n}: {n} more runs ({handle})")
        return "submitted"

    def conclude(self, b: db.Bisection, step: db.Step, verdict: str, reason: str, *, builds=None, samples=None,
                 lab_s: float = 0.0, change: float | None = None, judgement: dict | None = None) -> str:
        """A step's verdict: into the step row, then into the bisection's state (in this order:
        a crash in between is repaired by :meth:`repair`)."""
        values: dict[str, Any] = {"state": "done", "verdict": verdict, "lab_s": lab_s, "change_percent": change,
                                  "judgement": {**(judgement or {}), "reason": reason}}
        if builds is not None:
            values["build"] = builds
        if samples is not None:
            values["samples"] = samples
        db.save_step(self.store, step.id, **values)
        st = logic.record_step(b.bisect, step.commit, verdict, lab_s=lab_s,
                               info={"change_percent": change, "reason": reason, "n": step.n})
        db.save(self.store, b.id, self.owner, bisect=st,
                message=f"step {step.n}: {step.commit[:12]} {verdict} ({reason})"[:4000])
        self.log(f"bisection {b.id}: step {step.n}: {step.commit[:12]} is {verdict}: {reason}")
        return verdict

    def repair(self, bid: int) -> None:
        """Steps whose verdict is stored but missing from the state (a crash between the two
        writes of :meth:`conclude`)."""
        b = db.get(self.store, bid)
        if b is None or not b.active:
            return
        st = b.bisect
        known = {s.get("n") for s in st["steps"]}
        changed = False
        for s in b.steps:
            if s.n > 0 and s.verdict and s.n not in known:
                reason = (s.judgement or {}).get("reason", "")
                st = logic.record_step(st, s.commit, s.verdict, lab_s=s.lab_s or 0.0,
                                       info={"change_percent": s.change_percent, "reason": reason, "n": s.n})
                changed = True
        if changed:
            db.save(self.store, bid, None, bisect=st)

    # -- the end ------------------------------------------------------------------------------
    def fail(self, b: db.Bisection, why: str) -> None:
        log = logic.bisect_log(db.get(self.store, b.id).bisect or b.bisect)
        db.save(self.store, b.id, self.owner, state="failed", message=why[:4000],
                result={"kind": "failed", "reason": why, "log": log})
        _note(self.store, b.regression_id, "failed", f"bisection {b.id} failed: {why}")
        self.log(f"bisection {b.id} failed: {why}")

    def finish(self, b: db.Bisection, action: logic.Action) -> None:
        result = {"kind": action.kind, "culprit": action.commit if action.kind == "done" else None,
                  "candidates": action.candidates if action.kind != "done" else [action.commit],
                  "reason": action.reason, "steps": len(b.bisect["steps"]),
                  "lab_minutes": round(b.bisect.get("lab_s", 0.0) / 60, 1),
                  "subject": (b.bisect.get("subjects") or {}).get(action.commit or "")}
        result["log"] = logic.bisect_log(b.bisect, result)
        msg = (f"first bad commit {action.commit[:12]} {result['subject'] or ''}".strip()
               if action.kind == "done" else action.reason)
        db.save(self.store, b.id, self.owner, state="done", result=result, message=msg[:4000])
        self.log(f"bisection {b.id}: {msg}")
        apply_result(self.store, db.get(self.store, b.id), self.config)

    # -- loops --------------------------------------------------------------------------------
    def tick(self) -> dict[str, int]:
        """One action on every bisection this worker may advance (the service's lab loop)."""
        out: dict[str, int] = {}
        for bid in db.pending_record_updates(self.store):
            apply_result(self.store, db.get(self.store, bid), self.config)
        for bid in db.takeable(self.store, self.owner):
            self.repair(bid)
            try:
                what = self.advance(bid)
            except Exception as exc:  # noqa: BLE001 - one broken bisection must not stop the loop
                b = db.get(self.store, bid)
                if b is not None and b.active:
                    self.fail(b, f"{exc.__class__.__name__}: {exc}")
                what = "error"
            out[what] = out.get(what, 0) + 1
        return out

    def run(self, bid: int, *, interval: float = 2.0, timeout: float | None = None) -> db.Bisection:
        """Advance ``bid`` until it is over (or ``timeout`` seconds pass)."""
        t0 = time.monotonic()
        self.repair(bid)
        try:
            while True:
                what = self.advance(bid)
                if what == "final":
                    break
                if timeout is not None and time.monotonic() - t0 > timeout:
                    break
                if what in ("waiting", "busy"):
                    time.sleep(interval)
        finally:
            db.release(self.store, self.owner)
        return db.get(self.store, bid)


def apply_result(store, b: db.Bisection | None, config: Any = None) -> None:
    """A done bisection's result on its record (once): the culprit (source ``lab-bisect``), the
    bisect log as evidence, a ``bisection`` history row, and -- with ``[notify]`` routes -- a chat
    notification of the record (its entry shows the bisection and its log; so does the reply
    draft, ``regtriage reply ID``)."""
    if b is None or b.state != "done" or b.regression_id is None or not b.result:
        return
    if not db.mark_record_updated(store, b.id):
        return
    r = b.result
    with transaction(store) as tx:
        run = _Run(tx)
        rec = run.record(b.regression_id)
        if rec is None:
            return
        evidence = dict(rec.get("evidence") or {})
        evidence["bisection"] = {"id": b.id, "kind": r["kind"], "log": r["log"], "machine": b.machine,
                                 "range": f"{b.good_ref}..{b.bad_ref}", "tree": b.tree}
        values: dict[str, Any] = {"evidence": evidence}
        if r.get("culprit"):
            values["culprit_commit"] = r["culprit"]
            values["culprit_subject"] = r.get("subject")
        note = (f"bisection {b.id} on {b.machine}: first bad commit {r['culprit'][:12]} "
                f"({r.get('subject') or ''}) after {r['steps']} steps" if r.get("culprit")
                else f"bisection {b.id} on {b.machine}: {r['reason']}")
        run.set_fields(b.regression_id, values, actor=ACTOR, message_id=None, source=SOURCE, note=note[:2000],
                       override=bool(r.get("culprit")))
        run.history(b.regression_id, "bisection", None, "found" if r.get("culprit") else r["kind"], actor=ACTOR,
                    message_id=None, source=SOURCE, note=(note + "\n\n" + r["log"])[:4000])
    if config is not None and r.get("culprit"):
        try:  # announced as the record's (confirmed) state, once per bisection
            from bot.notify.outbox import enqueue_event

            enqueue_event(store, "confirmed", b.regression_id, config, ref=f"bisection:{b.id}")
        except Exception as exc:  # noqa: BLE001 - no [notify] configured, or a broken route
            import logging

            logging.getLogger("regtriage.lab").info("bisection %s: no chat notification: %s", b.id, exc)


