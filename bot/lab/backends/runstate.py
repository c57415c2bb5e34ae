"""The run state every lab backend shares, as a pure state machine (sans-I/O, in the style of
matrix-nio's client): no files, processes, sockets or clocks here.

A transport (the qemu worker booting guests, the ssh worker driving a host over paramiko, the
lava backend talking to LAVA's REST API) feeds :class:`RunMachine` *events* that say what
happened, each with an explicit ``now`` (seconds on a monotonic clock, for the timeouts), and
carries out the *actions* it gets back::

    m = RunMachine(job.schedule(), job.timeouts)
    apply(m.send(Begin(now, "resolving builds")))    # -> [Save]
    actions = m.send(Ready(now))                     # -> [Save, RunBatch(Batch(0, "good", 1))]
    ...                                              # the transport runs the batch, feeding
    m.send(BatchStarted(now, index=0, boot_s=120))   #   its phases and Tick(now) while it waits:
    m.send(GuestStarted(now))                        #   a Tick past a limit answers Expired(...)
    m.send(Tick(now))
    actions = m.send(BatchFinished(now, record))     # -> [Save, RunBatch(next)] or [Save] (failed)
                                                     #    or [Complete(samples, warmups, order)]
    apply(m.send(Finished(now, "(dd.write_MBps)")))  # -> [Save]: done

What the machine decides: the batch schedule (batches handed out in the spec's order, one at a
time, never twice), every state transition (queued, running, done, failed; cancelled), the
timeouts (the run's total, a batch's, the boot phase of a batch, a guest that printed its result
but does not power off), the samples of a finished run, and the diagnosis of a worker that
died (:class:`WorkerGone`: a process that polls the run, with the state it read back from disk).
Once finished, the machine ignores every further event (a late event cannot undo an outcome).

Actions: :class:`Save` (persist :attr:`RunMachine.status` and the batch records),
:class:`RunBatch` (run the next batch), :class:`Expired` (a limit passed: stop what runs),
:class:`StopWork` (kill what the run started: the worker's guest or remote step),
:class:`Complete` (every batch is in: store the samples, then send :class:`Finished`).

The machine's state round-trips through :meth:`RunMachine.state` / :meth:`RunMachine.restore`
(the ``status`` and ``batches`` of a run's ``state.json``), so a process that only polls a run
builds the same machine from disk.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.lab.backends.base import BUILD_LABELS, DONE, FAILED, QUEUED, RUNNING, LabError, Status, Timeouts

POWEROFF_GRACE_S = 10.0  # a guest that printed its result gets this long to power off by itself
PHASES = ("boot", "batch", "total", "poweroff")


@dataclass(frozen=True)
class Batch:
    """One unit of execution of one build: ``samples`` measured iterations (after the warm-ups)."""

    index: int
    label: str
    samples: int


def batch_list(schedule) -> list[Batch]:
    """``[(label, n_samples), ...]`` (:meth:`RunSpec.schedule`, or read back from JSON) as batches."""
    out = []
    for i, item in enumerate(schedule):
        label, n = item
        if label not in BUILD_LABELS or type(n) is not int or n < 1:
            raise LabError(f"bad schedule entry {i}: {item!r}")
        out.append(Batch(i, label, n))
    return out


# ============================================================================ events (inputs)
@dataclass(frozen=True)
class Begin:
    """The worker started working on the run; the run's total time starts now (``message``:
    running, with this message; None: the status stays as it is until the next event)."""
    now: float
    message: str | None = None


@dataclass(frozen=True)
class Waiting:
    """The run waits for something outside it (the lab lock, LAVA's scheduler): queued."""
    now: float
    message: str


@dataclass(frozen=True)
class Progress:
    """Something worth showing happened (``batches_done``: when the transport counts them itself,
    as LAVA does per job); ``state`` queued or running."""
    now: float
    message: str
    state: str = RUNNING
    batches_done: int | None = None


@dataclass(frozen=True)
class Ready:
    """Setup is done (builds resolved, lock held, host reached): hand out the first batch."""
    now: float


@dataclass(frozen=True)
class BatchStarted:
    """The batch ``index`` (or a retry of it) starts now.  ``boot_s``: the boot phase's limit
    (None: no boot phase; the batch is measuring at once)."""
    now: float
    index: int
    boot_s: float | None = None


@dataclass(frozen=True)
class GuestStarted:
    """The boot phase is over (qemu: the guest's start marker; ssh: the host runs the kernel)."""
    now: float


@dataclass(frozen=True)
class Rebooting:
    """The host is rebooting into another kernel: a new boot phase of ``timeouts.boot_s``."""
    now: float


@dataclass(frozen=True)
class ResultSeen:
    """The guest printed its result; it should power off by itself within POWEROFF_GRACE_S."""
    now: float


@dataclass(frozen=True)
class SampleParsed:
    """One value of the running batch (a warm-up or a measured sample)."""
    now: float
    value: float
    warmup: bool = False


@dataclass(frozen=True)
class BatchFinished:
    """The running batch's record: ``{"index", "build", "samples", "warmups", "ok", "error", ...}``
    (transport-specific keys are kept as they are)."""
    now: float
    record: dict


@dataclass(frozen=True)
class Finished:
    """The samples of :class:`Complete` are stored; ``detail`` ends the done message."""
    now: float
    detail: str = ""


@dataclass(frozen=True)
class CancelRequested:
    now: float


@dataclass(frozen=True)
class Failed:
    """The run cannot go on (a build that does not resolve, a host that refuses us, a LAVA job
    that failed: ``cancelled`` when LAVA says so, ``batches_done`` when the transport counts)."""
    now: float
    reason: str
    cancelled: bool = False
    batches_done: int | None = None


@dataclass(frozen=True)
class Tick:
    """Time passes: checks every limit against ``now``."""
    now: float


@dataclass(frozen=True)
class WorkerGone:
    """The process that drives the run is gone (pid gone, or reused by another program), seen
    by a process polling the run; ``log_tail``: the last line it wrote, if any, with where
    (``worker.log: Traceback ...``)."""
    now: float
    pid: int | None
    log_tail: str = ""
    name: str = "worker process"
    doing: str = "finishing"


EVENTS = (Begin, Waiting, Progress, Ready, BatchStarted, GuestStarted, Rebooting, ResultSeen, SampleParsed,
          BatchFinished, Finished, CancelRequested, Failed, Tick, WorkerGone)


# ============================================================================ actions (outputs)
@dataclass(frozen=True)
class Save:
    """Persist the machine's state (status and batches)."""
    status: Status


@dataclass(frozen=True)
class RunBatch:
    batch: Batch


@dataclass(frozen=True)
class Expired:
    """A limit passed: ``phase`` boot | batch | total | poweroff, ``limit_s`` its length."""
    phase: str
    limit_s: float

    @property
    def reason(self) -> str:
        if self.phase == "total":
            return f"total timeout of {self.limit_s:.0f}s exceeded"
        if self.phase == "batch":
            return f"batch timeout: {self.limit_s:.0f}s exceeded"
        if self.phase == "boot":
            return f"boot timeout after {self.limit_s:.0f}s"
        return f"no power-off {self.limit_s:.0f}s after the result"


@dataclass(frozen=True)
class StopWork:
    """Kill whatever the run still has running (guest, remote step) and clean up after it."""
    reason: str


@dataclass(frozen=True)
class Complete:
    """Every batch succeeded: samples and warm-ups per build, and the build of each batch."""
    samples: dict
    warmups: dict
    order: list


# ============================================================================ the machine
@dataclass
class _Clock:
    """Where the running batch is in time (all in the events' ``now``)."""
    batch_t0: float | None = None
    boot_t0: float | None = None
    boot_s: float | None = None
    result_at: float | None = None
    fired: set = field(default_factory=set)


class RunMachine:
    """One run's state: feed events with :meth:`send`, carry out the actions it returns."""

    def __init__(self, schedule, timeouts: Timeouts | None = None, *, status: Status | None = None,
                 batches: list | None = None):
        self.schedule = batch_list(schedule)
        self.timeouts = timeouts or Timeouts()
        self.batches: list[dict] = [dict(b) for b in (batches or [])]
        self.status = status or Status(QUEUED, "waiting for the worker", 0, len(self.schedule))
        self.deadline: float | None = None
        self.current: Batch | None = None
        self.values: dict[str, list[float]] = {"samples": [], "warmups": []}
        self._clock = _Clock()
        self._complete_sent = False

    # -- persistence ---------------------------------------------------------------------------
    def state(self) -> dict:
        """``{"status": ..., "batches": [...]}`` for the run's ``state.json``."""
        return {"status": self.status.to_dict(), "batches": [dict(b) for b in self.batches]}

    @classmethod
    def restore(cls, schedule, timeouts: Timeouts | None, state: dict | None) -> "RunMachine":
        """The machine of a run from its ``state.json`` (an unreadable one is a failed run)."""
        state = state if isinstance(state, dict) else {}
        raw = state.get("status")
        if isinstance(raw, dict):
            st = Status.from_dict(raw)
        else:
            st = Status(FAILED, "state.json unreadable", 0, len(schedule))
        return cls(schedule, timeouts, status=st, batches=state.get("batches") or [])

    # -- queries ---------------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return self.status.finished

    @property
    def batches_done(self) -> int:
        return sum(1 for b in self.batches if b.get("ok"))

    def next_batch(self) -> Batch | None:
        """The batch to run next, in the schedule's order (None: all are in, or the run ended)."""
        if self.finished or self.batches_done < len(self.batches):
            return None
        n = len(self.batches)
        return self.schedule[n] if n < len(self.schedule) else None

    def batch_time_left(self, now: float) -> float:
        """Seconds the running batch may still take (``timeouts.batch_s`` from its start)."""
        t0 = self._clock.batch_t0
        return self.timeouts.batch_s if t0 is None else self.timeouts.batch_s - (now - t0)

    def boot_time_left(self, now: float) -> float:
        c = self._clock
        if c.boot_t0 is None or c.boot_s is None:
            return 0.0
        return c.boot_s - (now - c.boot_t0)

    def result(self) -> Complete:
        """The samples of every batch, per build, in execution order."""
        samples: dict[str, list[float]] = {label: [] for label in BUILD_LABELS}
        warmups: dict[str, list[float]] = {label: [] for label in BUILD_LABELS}
        ordered = sorted(self.batches, key=lambda b: b.get("index", 0))
        for b in ordered:
            samples[b["build"]] += list(b.get("samples") or [])
            warmups[b["build"]] += list(b.get("warmups") or [])
        return Complete(samples, warmups, [b["build"] for b in ordered])

    # -- transitions ------------------------------------------------------------------------------
    def _set(self, state: str, message: str, *, cancelled: bool = False, done: int | None = None) -> Save:
        self.status = Status(state, message, self.batches_done if done is None else done, len(self.schedule),
                             cancelled=cancelled)
        return Save(self.status)

    def _fail(self, reason: str, *, cancelled: bool = False, stop: bool = False, done: int | None = None) -> list:
        out: list = [StopWork(reason)] if stop else []
        self.current = None
        self._clock = _Clock()
        return out + [self._set(FAILED, reason, cancelled=cancelled, done=done)]

    def _hand_out(self) -> list:
        nxt = self.next_batch()
        if nxt is None:
            if self._complete_sent:
                return []
            self._complete_sent = True
            return [self.result()]
        self.current = nxt
        return [RunBatch(nxt)]

    def send(self, event) -> list:
        """Feed one event; returns the actions to carry out, in order."""
        if not isinstance(event, EVENTS):
            raise TypeError(f"not a run event: {event!r}")
        if self.finished:
            return []
        handler = getattr(self, f"_on_{type(event).__name__}")
        return handler(event)

    def _on_Begin(self, e: Begin) -> list:
        self.deadline = e.now + self.timeouts.total_s
        return [] if e.message is None else [self._set(RUNNING, e.message)]

    def _on_Waiting(self, e: Waiting) -> list:
        return [self._set(QUEUED, e.message)]

    def _on_Progress(self, e: Progress) -> list:
        if e.state not in (QUEUED, RUNNING):
            raise LabError(f"progress is queued or running, not {e.state!r}")
        return [self._set(e.state, e.message, done=e.batches_done)]

    def _on_Ready(self, e: Ready) -> list:
        if self.deadline is None:
            self.deadline = e.now + self.timeouts.total_s
        if self.current is not None:
            return []
        return self._hand_out()

    def _on_BatchStarted(self, e: BatchStarted) -> list:
        if self.current is None or e.index != self.current.index:
            want = "none" if self.current is None else self.current.index
            raise LabError(f"batch {e.index} started, but the batch handed out is {want}")
        self._clock = _Clock(batch_t0=e.now, boot_t0=e.now if e.boot_s is not None else None, boot_s=e.boot_s)
        self.values = {"samples": [], "warmups": []}
        return []

    def _on_GuestStarted(self, e: GuestStarted) -> list:
        self._clock.boot_t0 = None
        return []

    def _on_Rebooting(self, e: Rebooting) -> list:
        self._clock.boot_t0, self._clock.boot_s = e.now, self.timeouts.boot_s
        self._clock.fired.discard("boot")
        return []

    def _on_ResultSeen(self, e: ResultSeen) -> list:
        if self._clock.result_at is None:
            self._clock.result_at = e.now
        return []

    def _on_SampleParsed(self, e: SampleParsed) -> list:
        self.values["warmups" if e.warmup else "samples"].append(e.value)
        return []

    def _on_BatchFinished(self, e: BatchFinished) -> list:
        rec = dict(e.record)
        b = self.current
        if b is None:
            raise LabError("a batch finished but none was handed out")
        rec.setdefault("index", b.index)
        rec.setdefault("build", b.label)
        if rec["index"] != b.index or rec["build"] != b.label:
            raise LabError(f"batch record {rec['index']} ({rec['build']}) is not the batch handed out: "
                           f"{b.index} ({b.label})")
        rec.setdefault("samples", list(self.values["samples"]))
        rec.setdefault("warmups", list(self.values["warmups"]))
        rec["ok"] = bool(rec.get("ok", rec.get("error") is None))
        self.batches.append(rec)
        self.current = None
        self._clock = _Clock()
        if not rec["ok"]:
            return self._fail(f"batch {b.index + 1} ({b.label}) failed: {rec.get('error')}")
        save = self._set(RUNNING, f"batch {b.index + 1}/{len(self.schedule)} done")
        return [save] + self._hand_out()

    def _on_Finished(self, e: Finished) -> list:
        if not self._complete_sent and self.next_batch() is not None:
            raise LabError("the run finished before every batch was in")
        c = self.result()
        detail = f" {e.detail}" if e.detail else ""
        return [self._set(DONE, f"{len(c.samples['good'])} good + {len(c.samples['bad'])} bad samples{detail}")]

    def _on_CancelRequested(self, e: CancelRequested) -> list:
        return self._fail("cancelled by request", cancelled=True, stop=True)

    def _on_Failed(self, e: Failed) -> list:
        return self._fail(e.reason, cancelled=e.cancelled, stop=True, done=e.batches_done)

    def _on_Tick(self, e: Tick) -> list:
        if self.deadline is not None and e.now > self.deadline:
            return [Expired("total", self.timeouts.total_s)] + self._fail(
                Expired("total", self.timeouts.total_s).reason, stop=True)
        c = self._clock
        if self.current is None:
            return []
        out = []
        if c.result_at is not None:
            if e.now - c.result_at > POWEROFF_GRACE_S and "poweroff" not in c.fired:
                c.fired.add("poweroff")
                out.append(Expired("poweroff", POWEROFF_GRACE_S))
            return out  # the result is in: only the power-off grace applies
        if c.boot_t0 is not None and c.boot_s is not None and e.now - c.boot_t0 > c.boot_s \
                and "boot" not in c.fired:
            c.fired.add("boot")
            out.append(Expired("boot", c.boot_s))
        elif c.batch_t0 is not None and e.now - c.batch_t0 > self.timeouts.batch_s and "batch" not in c.fired:
            c.fired.add("batch")
            out.append(Expired("batch", self.timeouts.batch_s))
        return out

    def _on_WorkerGone(self, e: WorkerGone) -> list:
        st = self.status
        tail = f"; {e.log_tail}" if e.log_tail else ""
        reason = (f"{e.name} {e.pid} died before {e.doing} (last state: {st.state}: {st.message}){tail}")
        return self._fail(reason, stop=True)
