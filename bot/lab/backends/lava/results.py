"""What LAVA answers, read (pure): job state/health mapped to ours, a job's test cases turned
into per-batch samples and checked, the reason of an Incomplete job, the console of a job log."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from bot.lab.backends.base import DONE, FAILED, QUEUED, RUNNING
from bot.lab.backends.rundir import printable

SUITE_RE = re.compile(r"^(\d+)_regtriage-b(\d{3,4})-(good|bad)$")
LAVA_WAITING = ("Submitted", "Scheduling", "Scheduled")
LAVA_ACTIVE = ("Running", "Canceling")


def map_lava_state(state: str, health: str) -> tuple[str, bool]:
    """LAVA (state, health) -> (our state, cancelled).  Unknown combinations count as running
    (a newer LAVA may add states) unless Finished."""
    if state in LAVA_WAITING:
        return QUEUED, False
    if state in LAVA_ACTIVE:
        return RUNNING, False
    if state == "Finished":
        if health == "Complete":
            return DONE, False
        if health == "Canceled":
            return FAILED, True
        return FAILED, False  # Incomplete (or Unknown: LAVA never leaves a finished job Unknown)
    return RUNNING, False


def _decimal(v) -> float | None:
    if v is None or v == "":
        return None
    try:
        d = Decimal(str(v))
    except InvalidOperation:
        return None
    if not d.is_finite():
        return None
    return float(d)


def parse_results(tests: list[dict], suites: dict, *, schedule: list, batch_indexes: list[int], metric: str,
                  warmup: int, kernel_releases: dict | None = None) -> tuple[list[dict], list[str]]:
    """Turn a job's ``/tests/`` list into per-batch results.

    ``suites`` maps suite id -> suite name (the tests endpoint gives the suite's id; a name is
    accepted too).  Returns ``(batches, problems)``; each batch ``{"index", "build", "samples",
    "warmups", "kernel_release", "result"}`` in ``batch_indexes`` order."""
    by_batch: dict[int, dict] = {}
    problems: list[str] = []
    for t in tests:
        s = t.get("suite")
        sname = suites.get(s, suites.get(str(s), s if isinstance(s, str) else None))
        m = SUITE_RE.match(sname or "")
        if not m:
            continue  # the "lava" infrastructure suite and anything else
        idx, label = int(m.group(2)), m.group(3)
        b = by_batch.setdefault(idx, {"index": idx, "build": label, "samples": {}, "warmups": {},
                                      "kernel_release": None, "result": None, "suite": sname})
        name = str(t.get("name", ""))
        res = str(t.get("result", ""))
        if name == "regtriage-result":
            b["result"] = res
        elif name.startswith("uname-"):
            b["kernel_release"] = name[len("uname-"):]
        elif name.startswith(f"warmup-{metric}-") or name.startswith(f"{metric}-"):
            warm = name.startswith("warmup-")
            num = name.rsplit("-", 1)[1]
            v = _decimal(t.get("measurement"))
            if not num.isdigit() or res != "pass" or v is None:
                problems.append(f"batch {idx}: bad test case {name} result={res} measurement={t.get('measurement')!r}")
                continue
            (b["warmups"] if warm else b["samples"])[int(num)] = v
    out = []
    for i in batch_indexes:
        label, n = schedule[i]
        b = by_batch.get(i)
        if b is None:
            problems.append(f"batch {i} ({label}): no results")
            continue
        if b["build"] != label:
            problems.append(f"batch {i}: suite says {b['build']}, schedule says {label}")
        if b["result"] != "pass":
            problems.append(f"batch {i} ({label}): regtriage-result is {b['result']}")
        if sorted(b["samples"]) != list(range(1, n + 1)) or sorted(b["warmups"]) != list(range(1, warmup + 1)):
            problems.append(f"batch {i} ({label}): expected {n} samples + {warmup} warm-ups, got "
                            f"{len(b['samples'])} + {len(b['warmups'])}")
        if any(not v > 0 for v in list(b["samples"].values()) + list(b["warmups"].values())):
            problems.append(f"batch {i} ({label}): non-positive value")
        want = (kernel_releases or {}).get(label)
        if want and b["kernel_release"] != want:
            problems.append(f"batch {i} ({label}): booted kernel {b['kernel_release']}, expected {want}")
        out.append({"index": i, "build": label, "kernel_release": b["kernel_release"], "result": b["result"],
                    "samples": [b["samples"][k] for k in sorted(b["samples"])],
                    "warmups": [b["warmups"][k] for k in sorted(b["warmups"])]})
    return out, problems


def failure_reason(tests: list[dict]) -> str | None:
    """LAVA's reason for an Incomplete job: ``error_type``/``error_msg`` in the metadata of the
    ``job`` test case of the ``lava`` suite (``failure_comment`` is often empty)."""
    for t in tests:
        if t.get("name") != "job" or t.get("result") == "pass":
            continue
        meta = str(t.get("metadata") or "")
        m = re.search(r"^error_msg: (.*?)(?=^[a-z_]+: |\Z)", meta, re.M | re.S)
        etype = re.search(r"^error_type: (\S+)", meta, re.M)
        msg = " ".join(m.group(1).split()) if m else ""
        if len(msg) > 1 and msg[0] == msg[-1] and msg[0] in "'\"":
            msg = msg[1:-1].replace("''", "'").strip()
        if msg or etype:
            return printable(f"{etype.group(1) + ' error: ' if etype else ''}{msg}", 300)
    return None


@dataclass
class JobsView:
    """A run's LAVA jobs as the run state sees them (see :func:`read_jobs`)."""

    done_batches: int  # batches of the jobs that finished Complete
    failed: list  # [(job, cancelled)] of the jobs that finished otherwise
    active: list  # jobs still queued or running
    all_done: bool
    running: bool  # any job running (or some batches done already)

    def message(self, jobs: list[dict], cancel_requested: bool) -> str:
        msg = ", ".join(f"job {j['id']} {j['lava_state']}" + (f" on {j['device']}" if j.get("device") else "")
                        for j in jobs)
        return "cancelling: " + msg if cancel_requested else msg


def read_jobs(jobs: list[dict], infos: list[dict]) -> JobsView:
    """Record what LAVA says of each job (``/jobs/<id>/``) in the run's job entries and sum it up."""
    mapped = []
    for j, info in zip(jobs, infos):
        ours, cancelled = map_lava_state(str(info.get("state")), str(info.get("health")))
        j["lava_state"], j["lava_health"] = info.get("state"), info.get("health")
        j["device"] = info.get("actual_device")
        for k in ("submit_time", "start_time", "end_time"):
            j[k] = info.get(k)
        j["failure_comment"] = info.get("failure_comment")
        mapped.append((ours, cancelled))
    done = sum(len(j["batches"]) for j, (o, _) in zip(jobs, mapped) if o == DONE)
    return JobsView(done_batches=done,
                    failed=[(j, c) for j, (o, c) in zip(jobs, mapped) if o == FAILED],
                    active=[j for j, (o, _) in zip(jobs, mapped) if o in (QUEUED, RUNNING)],
                    all_done=all(o == DONE for o, _ in mapped),
                    running=any(o == RUNNING for o, _ in mapped) or bool(done))


def console_lines(log_yaml: str) -> list[str]:
    """The guest console (LAVA log lines of level ``target``/``feedback``) and the results of a
    job log (``/jobs/<id>/logs/``: one flow mapping per line)."""
    lines = []
    for raw in log_yaml.splitlines():
        raw = raw.strip()
        if not raw.startswith("- {"):
            continue
        try:
            d = json.loads(raw[2:].replace(': ! "', ': "'))
        except ValueError:
            continue
        msg = d.get("msg")
        if d.get("lvl") in ("target", "feedback") and isinstance(msg, str):
            lines.append(msg)
        elif d.get("lvl") in ("results",) and isinstance(msg, dict):
            lines.append(f"[lava result] {json.dumps(msg, sort_keys=True)}")
    return lines
