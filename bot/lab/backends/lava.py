"""The ``lava`` lab backend: run a recipe on two kernel builds as LAVA jobs (REST API v0.2).

How a run works
---------------
* ``submit`` validates the :class:`RunSpec`, checks that a token is configured, creates
  ``<work_dir>/runs/<run id>/`` (``spec.json``, ``state.json``) and starts a detached *preparer*
  (``python -m bot.lab.backends.lava prepare <run dir>``, its own session) that resolves both
  builds (:mod:`bot.lab.builds`; a tree build can take long, so submit never blocks on it),
  stages the kernel images and busybox initramfs archives under ``artifact_dir/<run id>/``
  (served to the dispatcher as ``artifact_url/<run id>/...``; ``file://`` works when the
  dispatcher runs on this host), renders the job definition(s), POSTs them to
  ``/api/v0.2/jobs/`` and records the LAVA job ids in ``state.json``, then exits.  The handle is
  ``lava:<run id>``.
* **Job format: one LAVA job holds a whole run** (``batches_per_job = 0``, the default): the
  RunSpec's batches in its order (``abab`` by default), each batch one ``deploy`` (tmpfs: kernel +
  initramfs with the LAVA overlay appended) + ``boot`` (qemu) + ``test`` block.  So the two builds
  alternate boot by boot **on the same device** (a comparison across two boards would measure
  the boards), and the ~20-40 s of scheduling per LAVA job is paid once.  With
  ``batches_per_job = k`` the schedule is cut into consecutive jobs of k batches, all submitted at
  once in order (LAVA runs same-priority jobs of one device type first come first served; with
  several devices they may run in parallel on different boards: pin them with ``device_tags``).
* In each boot the test definition runs ``sh /regtriage/report.sh`` (a fixed step).  That script
  is in our initramfs: it runs ``/regtriage/bench.sh`` (the recipe's busybox workload from
  :meth:`RecipeSpec.render_guest_script`, as in the qemu backend: warm-ups then samples) and
  reports every value with ``lava-test-case <metric>-<n> --result pass --measurement <v> --units <u>``;
  warm-ups as ``warmup-<metric>-<n>`` (kept in ``Samples.warmups``, never among the samples), the
  guest's kernel release as ``uname-<release>`` and the outcome as ``regtriage-result`` pass/fail.
  The suite of batch *i* of build *b* is ``<index>_regtriage-b<iii>-<b>``.
* ``poll`` maps LAVA ``state``/``health`` to ours: Submitted, Scheduling, Scheduled -> queued;
  Running, Canceling -> running; Finished+Complete -> done (once results are read and checked);
  Finished+Incomplete -> failed (LAVA's ``failure_comment``); Finished+Canceled -> failed,
  cancelled.  Any failed job fails the run and the run's other unfinished jobs are cancelled.
  A server that does not answer is *not* a failure: the last status is returned with a note.
  When finished, the outcome, samples (``result.json``) and the job logs are stored on disk and
  the server is not asked again; staged artifacts are deleted.
* ``fetch_samples`` reads ``/api/v0.2/jobs/<id>/tests/`` (all pages) and checks every batch:
  ``regtriage-result`` pass, exactly the expected sample/warm-up names, positive measurements,
  the expected kernel release per build (when known from the build).
* ``cancel`` stops the preparer (if still running) and calls ``/api/v0.2/jobs/<id>/cancel/`` for
  every unfinished job, then waits (``cancel_wait_s``) for LAVA to finish them.

Restart safety: everything is in the run directory (spec, LAVA job ids, status); a new backend
built from the same configuration resumes polling with the handle alone.  The token is never
written there (the preparer inherits the environment / reads the token file itself).

Job definitions are emitted with :func:`json.dumps` (JSON is YAML, LAVA parses it with its YAML
loader): no string templating, and the only strings in a job are constants, validated config
values, the run id and the RunSpec label (both ``[A-Za-z0-9._-]``) and generated URLs.  Nothing
from mail reaches a job except through the validated recipe numbers inside the initramfs.

Configuration ``[lab.lava]``:

=====================  ===============================================================================
url                    LAVA server base URL (``https://lava.example.org/``); required
token_env              environment variable holding the API token (default ``REGTRIAGE_LAVA_TOKEN``)
token_file             or a file holding it (used when the variable is unset); never a literal token
device_type            LAVA device type (default ``qemu``; the jobs use the qemu boot method)
device_tags            list of device tags the jobs require (default none)
visibility             ``public`` (default) or ``personal``
priority               ``high``/``medium``/``low`` or 0..100 (default ``medium``)
no_kvm                 add ``no_kvm: true`` to the job context (TCG; default false)
context                extra job context entries (string keys, int/bool/short safe string values)
memory_mib             guest memory in the job context (default: recipe scratch + 256, >= 512; a
                       device dictionary that sets ``memory`` wins)
batches_per_job        0 (default): whole run in one job; k: k batches per job
job_timeout_s          cap on a job's timeout (default: the RunSpec's ``timeouts.total_s``)
deploy_timeout_s       per deploy action (default 300)
connection_timeout_s   LAVA connection timeout (default 120)
artifact_dir           where kernels/initramfs are staged (default ``<work_dir>/artifacts``)
artifact_url           URL prefix the dispatcher downloads them from (default ``file://<artifact_dir>``)
keep_artifacts         keep staged files after the run (default false)
work_dir               run state (default ``$REGTRIAGE_HOME/lab/lava``)
build_cache, deb_dir   as for qemu (default ``<work_dir>/builds``)
busybox                static busybox for the initramfs (default ``/bin/busybox``)
http_timeout_s         per request (default 30); GETs are retried 3x with backoff on errors/5xx
cancel_wait_s          how long ``cancel`` waits for LAVA to finish the jobs (default 60)
=====================  ===============================================================================

Recipes: those the qemu backend runs in its busybox guest without extra guest tools
(``RecipeSpec.supports("lava")``: dd and syscall-getpid).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from urllib.parse import quote, urlsplit

from bot.lab import initramfs as initramfs_mod
from bot.lab.backends.base import (DONE, FAILED, QUEUED, RUNNING, Backend, LabError, RunSpec, Samples, Status)
from bot.lab.backends.rundir import Children, atomic_write_json, default_work_dir, printable, read_json
from bot.lab.builds import BuildError
from bot.lab.kernels import resolve
from bot.lab.procs import proc_alive_and_ours
from bot.lab.recipes import MiB, RecipeError, RecipeSpec

RUN_ID_RE = re.compile(r"^[0-9]{8}T[0-9]{6}-[0-9a-f]{8}$")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
METRIC_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
SUITE_RE = re.compile(r"^(\d+)_regtriage-b(\d{3,4})-(good|bad)$")
APPEND = "console=ttyS0 panic=-1"  # LAVA waits for the "Linux version" banner: no quiet/loglevel
PROMPT = "/ # "
ARCH_CONTEXT = {"x86_64": "amd64", "aarch64": "arm64", "i386": "i386"}
PRIORITIES = ("high", "medium", "low")
LAVA_WAITING = ("Submitted", "Scheduling", "Scheduled")
LAVA_ACTIVE = ("Running", "Canceling")
REPORT_STEP = "sh /regtriage/report.sh"

# the guest's /init: LAVA needs a shell at a prompt on the console; the overlay is in the archive
INIT = """#!/bin/busybox sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts 2>/dev/null
mkdir -p {scratch} && mount -t tmpfs -o size={scratch_mib}m scratch {scratch}
echo 1 > /proc/sys/kernel/printk
echo "REGTRIAGE-BOOTED $(uname -r)"
exec setsid cttyhack sh
"""

BENCH_HEAD = """#!/bin/sh
# regtriage workload (generated from a validated recipe; numbers only)
fail() {
  echo "RESULT fail $*"
  exit 1
}
if [ -r /proc/timer_list ]; then REGTRIAGE_CLOCK=timer_list; else REGTRIAGE_CLOCK=uptime; fi
now_ns() {
  if [ "$REGTRIAGE_CLOCK" = timer_list ]; then
    { read -r _l1; read -r _l2; read -r _l3; } < /proc/timer_list
    _l3=${_l3#now at }
    NOW=${_l3% nsecs}
  else
    read -r _up _idle < /proc/uptime
    _cs=${_up#*.}
    _cs=${_cs#0}
    NOW=$(( ${_up%.*} * 1000000000 + _cs * 10000000 ))
  fi
}
mountpoint -q {scratch} 2>/dev/null || grep -q " {scratch} tmpfs" /proc/mounts || fail "no tmpfs scratch area"
echo "REGTRIAGE-START recipe={recipe} kernel=$(uname -r) samples={samples} warmup={warmup} clock=$REGTRIAGE_CLOCK"
"""

BENCH_TAIL = """
echo "REGTRIAGE-END"
echo "RESULT ok"
"""

REPORT = """#!/bin/sh
# regtriage: run the workload, report each value to LAVA (lava-test-case is on PATH in the test shell)
out=/tmp/regtriage-bench.out
sh /regtriage/bench.sh > $out 2>&1
rc=$?
cat $out
rel=$(uname -r | tr -c 'A-Za-z0-9._\\n-' '_')
lava-test-case "uname-$rel" --result pass
n=0
w=0
while read -r kind kv; do
  v=${kv#*=}
  case "$kind" in
    BENCH)
      n=$((n + 1))
      lava-test-case "{metric}-$n" --result pass --measurement "$v" --units "{units}" ;;
    WARMUP)
      w=$((w + 1))
      lava-test-case "warmup-{metric}-$w" --result pass --measurement "$v" --units "{units}" ;;
  esac
done < $out
if [ $rc -eq 0 ] && grep -q "^RESULT ok" $out; then
  lava-test-case regtriage-result --result pass
else
  lava-test-case regtriage-result --result fail
fi
rm -f $out
"""


def units_for(metric: str) -> str:
    """LAVA ``--units`` for a catalogue metric."""
    if metric.endswith("_MBps"):
        return "MB/s"
    if metric.endswith("_iops"):
        return "IOPS"
    if metric.endswith("per_sec"):
        return "1/s"
    return "value"


# ================================================================================== config
@dataclass
class LavaConfig:
    url: str
    token_env: str = "REGTRIAGE_LAVA_TOKEN"
    token_file: str | None = None
    device_type: str = "qemu"
    device_tags: list = field(default_factory=list)
    visibility: str = "public"
    priority: str | int = "medium"
    no_kvm: bool = False
    context: dict = field(default_factory=dict)
    memory_mib: int | None = None
    batches_per_job: int = 0
    job_timeout_s: int | None = None
    deploy_timeout_s: int = 300
    connection_timeout_s: int = 120
    artifact_dir: str | None = None
    artifact_url: str | None = None
    keep_artifacts: bool = False
    work_dir: str = ""
    build_cache: str | None = None
    deb_dir: str | None = None
    busybox: str = initramfs_mod.DEFAULT_BUSYBOX
    http_timeout_s: float = 30.0
    cancel_wait_s: float = 60.0

    def __post_init__(self):
        bad = lambda msg: LabError(f"[lab.lava] {msg}")  # noqa: E731
        if not isinstance(self.url, str):
            raise bad("url is required")
        u = urlsplit(self.url)
        if u.scheme not in ("http", "https") or not u.hostname or u.query or u.fragment or u.username:
            raise bad(f"url must be http(s)://host[:port][/path] without credentials, got {self.url!r}")
        self.url = self.url.rstrip("/") + "/"
        if not isinstance(self.token_env, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", self.token_env):
            raise bad("token_env must be an environment variable name")
        for k in ("device_type",):
            if not isinstance(getattr(self, k), str) or not NAME_RE.match(getattr(self, k)):
                raise bad(f"{k} must match {NAME_RE.pattern}")
        if not isinstance(self.device_tags, list) or not all(isinstance(t, str) and NAME_RE.match(t)
                                                              for t in self.device_tags):
            raise bad(f"device_tags must be a list of names matching {NAME_RE.pattern}")
        if self.visibility not in ("public", "personal"):
            raise bad("visibility must be public or personal")
        if not (self.priority in PRIORITIES or (type(self.priority) is int and 0 <= self.priority <= 100)):
            raise bad("priority must be high, medium, low or an int 0..100")
        if not isinstance(self.no_kvm, bool) or not isinstance(self.keep_artifacts, bool):
            raise bad("no_kvm and keep_artifacts must be true or false")
        if not isinstance(self.context, dict):
            raise bad("context must be a table")
        for k, v in self.context.items():
            if not (isinstance(k, str) and re.fullmatch(r"[a-z][a-z0-9_]{0,63}", k)):
                raise bad(f"context key {k!r} is not a plain name")
            if not (isinstance(v, (bool, int)) or (isinstance(v, str) and re.fullmatch(r"[A-Za-z0-9_.,:=/+-]{0,128}", v))):
                raise bad(f"context value for {k!r} must be a bool, an int or a short plain string")
        for k, lo, hi in (("batches_per_job", 0, 1000), ("deploy_timeout_s", 10, 86400),
                          ("connection_timeout_s", 5, 3600)):
            v = getattr(self, k)
            if type(v) is not int or not lo <= v <= hi:
                raise bad(f"{k} must be an int in [{lo}, {hi}]")
        for k, lo, hi in (("memory_mib", 128, 1 << 20), ("job_timeout_s", 60, 7 * 86400)):
            v = getattr(self, k)
            if v is not None and (type(v) is not int or not lo <= v <= hi):
                raise bad(f"{k} must be an int in [{lo}, {hi}]")
        for k, lo, hi in (("http_timeout_s", 1, 600), ("cancel_wait_s", 0, 3600)):
            v = getattr(self, k)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not lo <= v <= hi:
                raise bad(f"{k} must be a number in [{lo}, {hi}]")
        self.work_dir = str(Path(self.work_dir or default_work_dir("lava")).expanduser().resolve())
        self.artifact_dir = str(Path(self.artifact_dir or os.path.join(self.work_dir, "artifacts")).expanduser().resolve())
        if self.artifact_url is None:
            self.artifact_url = "file://" + quote(self.artifact_dir)
        au = urlsplit(self.artifact_url)
        if au.scheme not in ("file", "http", "https") or au.query or au.fragment or au.username \
                or not re.fullmatch(r"[A-Za-z0-9._~%/:+-]*", self.artifact_url.split("://", 1)[-1]):
            raise bad(f"artifact_url must be a plain file://, http:// or https:// prefix, got {self.artifact_url!r}")
        self.artifact_url = self.artifact_url.rstrip("/")
        if self.token_file is not None:
            self.token_file = str(Path(self.token_file).expanduser())

    @property
    def builds_dir(self) -> str:
        return self.build_cache or os.path.join(self.work_dir, "builds")

    def token(self) -> str | None:
        """The API token: ``$<token_env>``, else the first line of ``token_file``."""
        tok = os.environ.get(self.token_env, "").strip()
        if not tok and self.token_file:
            try:
                tok = Path(self.token_file).read_text().strip().splitlines()[0].strip()
            except (OSError, IndexError):
                tok = ""
        if tok and not re.fullmatch(r"[A-Za-z0-9_.:-]{8,256}", tok):
            raise LabError("[lab.lava] the token has unexpected characters")
        return tok or None


# ================================================================================== REST client
class LavaClient:
    """Minimal LAVA REST API v0.2 client (token auth; GETs retried on errors/5xx)."""

    def __init__(self, url: str, token: str | None, timeout: float = 30.0, retries: int = 3):
        import requests
        from requests.adapters import HTTPAdapter
        from urllib3.util.retry import Retry

        self.base = url.rstrip("/") + "/api/v0.2/"
        self.timeout = timeout
        self.session = requests.Session()
        self.session.headers["User-Agent"] = "regtriage-lab-lava"
        self.session.headers["Accept"] = "application/json"
        if token:
            self.session.headers["Authorization"] = f"Token {token}"
        retry = Retry(total=retries, connect=retries, read=retries, status=retries, backoff_factor=0.5,
                      status_forcelist=(500, 502, 503, 504), allowed_methods=frozenset({"GET"}),
                      raise_on_status=False)
        adapter = HTTPAdapter(max_retries=retry)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)

    def _url(self, path: str) -> str:
        return path if path.startswith(("http://", "https://")) else self.base + path.lstrip("/")

    def get(self, path: str, **params):
        import requests

        try:
            r = self.session.get(self._url(path), params=params or None, timeout=self.timeout)
        except requests.RequestException as exc:
            raise LabError(f"LAVA unreachable: {exc}") from None
        if r.status_code != 200:
            raise LabError(f"LAVA GET {path}: HTTP {r.status_code} {printable(r.text, 200)}")
        try:
            return r.json()
        except ValueError:
            raise LabError(f"LAVA GET {path}: not JSON") from None

    def get_text(self, path: str, **params) -> str:
        import requests

        try:
            r = self.session.get(self._url(path), params=params or None, timeout=self.timeout)
        except requests.RequestException as exc:
            raise LabError(f"LAVA unreachable: {exc}") from None
        if r.status_code != 200:
            raise LabError(f"LAVA GET {path}: HTTP {r.status_code}")
        return r.text

    def get_all(self, path: str, limit: int = 200) -> list:
        """All results of a paginated list endpoint (follows ``next``)."""
        out: list = []
        page = self.get(path, limit=limit)
        for _ in range(10000):
            if isinstance(page, list):  # unpaginated server
                return out + page
            out += page.get("results", [])
            nxt = page.get("next")
            if not nxt:
                return out
            if urlsplit(nxt).netloc != urlsplit(self.base).netloc:  # never follow a link elsewhere
                nxt = self.base + nxt.split("/api/v0.2/", 1)[-1]
            page = self.get(nxt)
        raise LabError(f"LAVA GET {path}: too many pages")

    def submit(self, definition: str) -> list[int]:
        import requests

        try:
            r = self.session.post(self.base + "jobs/", json={"definition": definition}, timeout=self.timeout)
        except requests.RequestException as exc:
            raise LabError(f"LAVA unreachable: {exc}") from None
        if r.status_code != 201:
            raise LabError(f"LAVA rejected the job: HTTP {r.status_code} {printable(r.text, 500)}")
        ids = r.json().get("job_ids")
        if not isinstance(ids, list) or not ids or not all(type(i) is int for i in ids):
            raise LabError(f"LAVA submit: unexpected answer {printable(r.text, 200)}")
        return ids

    def validate(self, definition: str) -> dict:
        import requests

        try:
            r = self.session.post(self.base + "jobs/validate/", json={"definition": definition}, timeout=self.timeout)
        except requests.RequestException as exc:
            raise LabError(f"LAVA unreachable: {exc}") from None
        return {"status_code": r.status_code, "body": r.json() if r.headers.get("content-type", "").startswith(
            "application/json") else r.text}

    def job(self, job_id: int) -> dict:
        return self.get(f"jobs/{int(job_id)}/")

    def cancel(self, job_id: int) -> None:
        self.get(f"jobs/{int(job_id)}/cancel/")

    def tests(self, job_id: int) -> list[dict]:
        return self.get_all(f"jobs/{int(job_id)}/tests/")

    def suites(self, job_id: int) -> list[dict]:
        return self.get_all(f"jobs/{int(job_id)}/suites/")


# ================================================================================== pure parts
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


def chunk_schedule(schedule: list, batches_per_job: int) -> list[list[int]]:
    """Batch indexes per LAVA job, in order."""
    idx = list(range(len(schedule)))
    if batches_per_job <= 0:
        return [idx]
    return [idx[i:i + batches_per_job] for i in range(0, len(idx), batches_per_job)]


def suite_name(index: int, label: str) -> str:
    return f"regtriage-b{index:03d}-{label}"


def guest_memory_mib(recipe: RecipeSpec, configured: int | None) -> tuple[int, int]:
    data = recipe.bytes or 0
    scratch = max(64, math.ceil(data / MiB) + 32)
    return max(configured or 512, scratch + 256), scratch


def render_job(*, cfg: LavaConfig, run_id: str, job: RunSpec, schedule: list, batch_indexes: list[int],
               urls: dict, memory_mib: int, part: int = 0, parts: int = 1) -> str:
    """The LAVA job definition (JSON, which is YAML) for some batches of a run.

    ``urls``: ``{"kernel": {"good": url, "bad": url}, "ramdisk": {n_samples: url}}``."""
    if not RUN_ID_RE.match(run_id):
        raise LabError("bad run id")
    t = job.timeouts
    name = f"regtriage {run_id}" + (f" {job.label}" if job.label else "") + (f" part {part + 1}/{parts}" if parts > 1 else "")
    actions = []
    per_batch = 0
    for i in batch_indexes:
        label, n = schedule[i]
        if label not in ("good", "bad") or type(n) is not int:
            raise LabError("bad schedule")
        for u in (urls["kernel"][label], urls["ramdisk"][n]):
            if not re.fullmatch(r"(file|https?)://[A-Za-z0-9._~%/:+-]+", u):
                raise LabError(f"unsafe artifact URL {u!r}")
        actions.append({"deploy": {
            "to": "tmpfs",
            "timeout": {"seconds": cfg.deploy_timeout_s},
            "images": {
                "kernel": {"image_arg": f'-kernel {{kernel}} -append "{APPEND}"', "url": urls["kernel"][label]},
                "ramdisk": {"image_arg": "-initrd {ramdisk}", "url": urls["ramdisk"][n], "compression": "gz",
                            "format": "cpio.newc", "overlays": {"lava": True}},
            }}})
        actions.append({"boot": {"method": "qemu", "media": "tmpfs", "prompts": [PROMPT],
                                 "timeout": {"seconds": int(t.boot_s)}}})
        actions.append({"test": {
            "timeout": {"seconds": int(t.batch_s)},
            "definitions": [{
                "from": "inline", "name": suite_name(i, label), "path": "inline/regtriage.yaml",
                "repository": {
                    "metadata": {"format": "Lava-Test Test Definition 1.0", "name": suite_name(i, label),
                                 "description": f"regtriage {job.recipe.name} batch {i} ({label})"},
                    "run": {"steps": [REPORT_STEP]}}}]}})
        per_batch += cfg.deploy_timeout_s + int(t.boot_s) + int(t.batch_s)
    job_timeout = min(per_batch + 120, int(cfg.job_timeout_s or t.total_s))
    context = {"arch": ARCH_CONTEXT.get(job.good.arch, "amd64"), "memory": memory_mib}
    if cfg.no_kvm:
        context["no_kvm"] = True
    context.update(cfg.context)
    definition = {
        "job_name": name,
        "device_type": cfg.device_type,
        "visibility": cfg.visibility,
        "priority": cfg.priority,
        "timeouts": {"job": {"seconds": max(job_timeout, 60)},
                     "action": {"seconds": max(int(t.batch_s), cfg.deploy_timeout_s, int(t.boot_s))},
                     "connection": {"seconds": cfg.connection_timeout_s}},
        "context": context,
        "metadata": {"regtriage.run": run_id, "regtriage.recipe": job.recipe.name,
                     "regtriage.batches": ",".join(f"{i}:{schedule[i][0]}" for i in batch_indexes)},
        "actions": actions,
    }
    if cfg.device_tags:
        definition["tags"] = list(cfg.device_tags)
    return json.dumps(definition, indent=2)


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


def render_guest_files(recipe: RecipeSpec, *, samples: int, warmup: int, scratch_mib: int) -> dict[str, str]:
    """``/init``, ``/regtriage/bench.sh`` and ``/regtriage/report.sh`` for one batch size."""
    for name, v, lo, hi in (("samples", samples, 1, 1000), ("warmup", warmup, 0, 100),
                            ("scratch_mib", scratch_mib, 16, 1 << 20)):
        if type(v) is not int or not lo <= v <= hi:
            raise LabError(f"{name} must be an int in [{lo}, {hi}], got {v!r}")
    metric = recipe.metric
    if not METRIC_RE.match(metric):
        raise LabError(f"unexpected metric name {metric!r}")
    scratch = initramfs_mod.SCRATCH
    workload = recipe.render_guest_script(scratch=scratch, samples=samples, warmup=warmup)
    head = (BENCH_HEAD.replace("{scratch}", scratch).replace("{recipe}", recipe.name)
            .replace("{samples}", str(samples)).replace("{warmup}", str(warmup)))
    return {
        "init": INIT.replace("{scratch_mib}", str(scratch_mib)).replace("{scratch}", scratch),
        "regtriage/bench.sh": head + workload + BENCH_TAIL,
        "regtriage/report.sh": REPORT.replace("{metric}", metric).replace("{units}", units_for(metric)),
    }


def build_initramfs(files: dict[str, str], busybox: str) -> bytes:
    """gzip'd newc archive: static busybox with every applet linked, plus ``files``."""
    problem = initramfs_mod.busybox_problem(busybox)
    if problem:
        raise LabError(problem)
    proc = subprocess.run([busybox, "--list-full"], capture_output=True, text=True, timeout=30)
    applets = sorted({ln.strip() for ln in proc.stdout.splitlines()
                      if re.fullmatch(r"[a-z0-9_./\[-]+", ln.strip() or "-") and ln.strip() != "bin/busybox"})
    dirs = ["bin", "sbin", "usr", "usr/bin", "usr/sbin", "dev", "proc", "sys", "tmp", "root", "etc", "regtriage",
            initramfs_mod.SCRATCH.lstrip("/")]
    entries: list[tuple] = [(d, "dir", None) for d in dirs]
    entries += [("dev/console", "chardev", (5, 1)), ("dev/null", "chardev", (1, 3)),
                ("bin/busybox", "exe", Path(busybox).read_bytes())]
    for a in applets:
        if a.split("/")[0] in ("bin", "sbin", "usr") and ".." not in a:
            entries.append((a, "symlink", "/bin/busybox"))
    for path, text in files.items():
        entries.append((path, "exe", text.encode()))
    return gzip.compress(initramfs_mod.newc_archive(entries), compresslevel=6, mtime=0)


# ================================================================================== backend
class LavaBackend(Backend):
    name = "lava"

    def __init__(self, cfg: LavaConfig, lab_config: dict | None = None):
        self.cfg = cfg
        self.lab_config = {k: v for k, v in (lab_config or {}).items() if k != "lava"}
        self.work_dir = Path(cfg.work_dir)
        self._children = Children()
        self._client: LavaClient | None = None

    @classmethod
    def from_config(cls, config: dict | None = None, **overrides) -> "LavaBackend":
        cfg = dict(config or {})
        if isinstance(cfg.get("lab"), dict):
            cfg = cfg["lab"]
        q = dict(cfg.get("lava", {}) if isinstance(cfg.get("lava", {}), dict) else {})
        q.update(overrides)
        if "token" in q:
            raise LabError("[lab.lava] put the token in the environment (token_env) or a file (token_file)")
        unknown = set(q) - set(LavaConfig.__dataclass_fields__)
        if unknown:
            raise LabError(f"[lab.lava] unknown keys: {sorted(unknown)}")
        if "url" not in q:
            raise LabError("[lab.lava] url is required")
        return cls(LavaConfig(**q), cfg)

    @property
    def client(self) -> LavaClient:
        if self._client is None:
            self._client = LavaClient(self.cfg.url, self.cfg.token(), self.cfg.http_timeout_s)
        return self._client

    # -------------------------------------------------------------------- helpers
    def _run_dir(self, handle: str) -> Path:
        if not isinstance(handle, str) or not handle.startswith("lava:"):
            raise LabError(f"not a lava handle: {handle!r}")
        run_id = handle[len("lava:"):]
        if not RUN_ID_RE.match(run_id):
            raise LabError(f"malformed lava handle: {handle!r}")
        d = self.work_dir / "runs" / run_id
        if not (d / "spec.json").is_file():
            raise LabError(f"no such run {handle} under {self.work_dir}")
        return d

    def supports(self, recipe: RecipeSpec) -> tuple[bool, str]:
        ok, why = recipe.supports("lava")  # the qemu busybox guest workload, without guest tools
        if not ok:
            return False, why.replace("qemu", "lava (busybox guest)")
        mem, _ = guest_memory_mib(recipe, self.cfg.memory_mib)
        if mem > 8192:
            return False, f"needs {mem} MiB of guest memory"
        return True, "ok"

    def _note(self, run_dir: Path, text: str) -> None:
        with open(run_dir / "run.log", "a") as fh:
            fh.write(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {text}\n")

    # -------------------------------------------------------------------- API
    def submit(self, job: RunSpec) -> str:
        job.validate()
        try:
            from bot.lab.recipes import make_recipe

            make_recipe(job.recipe.name, job.recipe.params, self.lab_config)
        except RecipeError as exc:
            raise LabError(f"recipe rejected: {exc}") from None
        ok, why = self.supports(job.recipe)
        if not ok:
            raise LabError(f"lava backend cannot run {job.recipe.name}: {why}")
        if job.good.arch != job.bad.arch or job.good.arch not in ARCH_CONTEXT:
            raise LabError(f"good and bad builds must have the same supported arch ({', '.join(ARCH_CONTEXT)})")
        if not self.cfg.token():
            raise LabError(f"no LAVA token: set ${self.cfg.token_env}" +
                           (f" or write it to {self.cfg.token_file}" if self.cfg.token_file else ""))
        problem = initramfs_mod.busybox_problem(self.cfg.busybox)
        if problem:
            raise LabError(problem)
        runs = self.work_dir / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        while True:
            run_id = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{secrets.token_hex(4)}"
            run_dir = runs / run_id
            try:
                run_dir.mkdir()
                break
            except FileExistsError:
                continue
        handle = f"lava:{run_id}"
        schedule = job.schedule()
        atomic_write_json(run_dir / "spec.json", {"handle": handle, "job": job.to_dict(), "backend": asdict(self.cfg),
                                                   "schedule": schedule, "submitted_at": time.time()})
        atomic_write_json(run_dir / "state.json", {
            "status": Status(QUEUED, "preparing builds and job", 0, len(schedule), updated_at=time.time()).to_dict(),
            "jobs": [], "builds": {}})
        self._note(run_dir, f"submitted {handle}: {job.recipe.name} {job.recipe.params}, {len(schedule)} batches")
        log = open(run_dir / "prepare.log", "ab")
        try:
            proc = subprocess.Popen([sys.executable, "-m", "bot.lab.backends.lava", "prepare", str(run_dir)],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, close_fds=True, cwd=str(run_dir))
        finally:
            log.close()
        self._children.add(handle, proc)
        atomic_write_json(run_dir / "preparer.json", {"pid": proc.pid, "started_at": time.time()})
        return handle

    def _reap(self, handle: str) -> None:
        self._children.reap(handle)

    def _set(self, run_dir: Path, state: dict, st: Status) -> Status:
        state["status"] = st.to_dict()
        atomic_write_json(run_dir / "state.json", state)
        return st

    def poll(self, handle: str) -> Status:
        run_dir = self._run_dir(handle)
        self._reap(handle)
        state = read_json(run_dir / "state.json", {}) or {}
        st = Status.from_dict(state.get("status") or {"state": FAILED, "message": "state.json unreadable"})
        if st.finished:
            return st
        jobs = state.get("jobs") or []
        if not state.get("submitted"):
            pid = (read_json(run_dir / "preparer.json", {}) or {}).get("pid")
            if pid is None:
                time.sleep(0.2)
                pid = (read_json(run_dir / "preparer.json", {}) or {}).get("pid")
            if proc_alive_and_ours(pid, str(run_dir)):
                return st
            self._reap(handle)
            state = read_json(run_dir / "state.json", {}) or {}
            st = Status.from_dict(state.get("status") or {"state": FAILED})
            if st.finished or state.get("submitted"):
                return st if st.finished else self.poll(handle)
            jobs = state.get("jobs") or []
            if not jobs:
                return self._set(run_dir, state, Status(
                    FAILED, f"preparer {pid} died before submitting (last: {st.message})", 0, st.batches_total,
                    updated_at=time.time()))
            # it died part-way: poll what it did submit, cancel the rest below via failure
            state["submit_incomplete"] = True
        return self._poll_jobs(run_dir, state, st)

    def _poll_jobs(self, run_dir: Path, state: dict, st: Status) -> Status:
        spec = read_json(run_dir / "spec.json", {})
        schedule = spec["schedule"]
        jobs = state["jobs"]
        cancel_requested = bool(state.get("cancel_requested"))
        try:
            infos = [self.client.job(j["id"]) for j in jobs]
        except LabError as exc:
            msg = f"{st.message.split(' [LAVA unreachable')[0]} [LAVA unreachable: {printable(exc, 150)}]"
            return Status(st.state, msg, st.batches_done, st.batches_total, st.cancelled, time.time())
        mapped = []
        for j, info in zip(jobs, infos):
            ours, cancelled = map_lava_state(str(info.get("state")), str(info.get("health")))
            j["lava_state"], j["lava_health"] = info.get("state"), info.get("health")
            j["device"] = info.get("actual_device")
            for k in ("submit_time", "start_time", "end_time"):
                j[k] = info.get(k)
            j["failure_comment"] = info.get("failure_comment")
            mapped.append((ours, cancelled))
        done_batches = sum(len(j["batches"]) for j, (o, _) in zip(jobs, mapped) if o == DONE)
        failed = [(j, c) for j, (o, c) in zip(jobs, mapped) if o == FAILED]
        if failed or state.get("submit_incomplete"):
            others = [j for j, (o, _) in zip(jobs, mapped) if o in (QUEUED, RUNNING)]
            for j in others:
                try:
                    self.client.cancel(j["id"])
                except LabError:
                    pass
            if others:  # finish them first, then report
                state["cancel_requested"] = cancel_requested
                return self._set(run_dir, state, Status(RUNNING, "a job failed: cancelling the others",
                                                        done_batches, len(schedule), updated_at=time.time()))
            cancelled = cancel_requested or any(c for _, c in failed)
            if failed:
                j, _ = failed[0]
                reason = j.get("failure_comment")
                if not reason and not cancel_requested and j.get("lava_health") == "Incomplete":
                    try:
                        reason = failure_reason(self.client.get_all(f"jobs/{int(j['id'])}/tests/"))
                    except LabError:
                        reason = None
                why = ("cancelled by request" if cancel_requested else
                       f"LAVA job {j['id']} {j['lava_health']}" + (f": {printable(reason)}" if reason else ""))
                for fj, _ in failed:
                    self._save_log(run_dir, fj["id"])
            else:
                why = "the preparer died before submitting every job"
            self._finish(run_dir, state)
            return self._set(run_dir, state, Status(FAILED, why, done_batches, len(schedule), cancelled,
                                                    time.time()))
        if all(o == DONE for o, _ in mapped):
            return self._complete(run_dir, state, spec)
        running = any(o == RUNNING for o, _ in mapped) or done_batches
        msg = ", ".join(f"job {j['id']} {j['lava_state']}" + (f" on {j['device']}" if j.get("device") else "")
                        for j in jobs)
        if cancel_requested:
            msg = "cancelling: " + msg
        return self._set(run_dir, state, Status(RUNNING if running else QUEUED, msg, done_batches, len(schedule),
                                                updated_at=time.time()))

    def _complete(self, run_dir: Path, state: dict, spec: dict) -> Status:
        schedule = spec["schedule"]
        job = RunSpec.from_dict(spec["job"], self.lab_config or None)
        releases = {k: v.get("release") for k, v in (state.get("builds") or {}).items()}
        batches, problems = [], []
        try:
            for j in state["jobs"]:
                suites = {s.get("id"): s.get("name") for s in self.client.suites(j["id"])}
                tests = self.client.tests(j["id"])
                atomic_write_json(run_dir / f"job-{j['id']}-tests.json", tests)
                b, p = parse_results(tests, suites, schedule=schedule, batch_indexes=j["batches"],
                                     metric=job.recipe.metric, warmup=job.warmup, kernel_releases=releases)
                batches += b
                problems += p
                self._save_log(run_dir, j["id"])
        except LabError as exc:
            st = Status.from_dict(state["status"])
            return Status(st.state, f"reading results: {printable(exc, 200)}", st.batches_done, st.batches_total,
                          updated_at=time.time())
        state["batches"] = batches
        if problems:
            self._note(run_dir, "result problems: " + "; ".join(problems))
            self._finish(run_dir, state)
            return self._set(run_dir, state, Status(FAILED, "; ".join(problems)[:500], len(batches), len(schedule),
                                                    updated_at=time.time()))
        samples = {"good": [], "bad": []}
        warmups = {"good": [], "bad": []}
        for b in sorted(batches, key=lambda b: b["index"]):
            samples[b["build"]] += b["samples"]
            warmups[b["build"]] += b["warmups"]
        atomic_write_json(run_dir / "result.json", {
            "samples": samples, "warmups": warmups, "metric": job.recipe.metric,
            "higher_is_better": job.recipe.higher_is_better,
            "order": [b["build"] for b in sorted(batches, key=lambda b: b["index"])],
            "kernels": {b["build"]: b["kernel_release"] for b in batches},
            "jobs": [{k: j.get(k) for k in ("id", "device", "start_time", "end_time")} for j in state["jobs"]]})
        self._note(run_dir, "done")
        self._finish(run_dir, state)
        return self._set(run_dir, state, Status(DONE, f"{len(samples['good'])} good + {len(samples['bad'])} bad samples "
                                                      f"({job.recipe.metric}, LAVA jobs "
                                                      f"{', '.join(str(j['id']) for j in state['jobs'])})",
                                                len(batches), len(schedule), updated_at=time.time()))

    def _save_log(self, run_dir: Path, job_id: int) -> None:
        """Append the job's console (LAVA log lines of level ``target``) and notes to run.log."""
        try:
            text = self.client.get_text(f"jobs/{int(job_id)}/logs/")
        except LabError as exc:
            self._note(run_dir, f"job {job_id}: log not available: {exc}")
            return
        (run_dir / f"job-{job_id}.log.yaml").write_text(text)
        lines = []
        for raw in text.splitlines():
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
        with open(run_dir / "run.log", "a") as fh:
            fh.write(f"===== LAVA job {job_id} console =====\n" + "\n".join(lines) + "\n")

    def _finish(self, run_dir: Path, state: dict) -> None:
        if not self.cfg.keep_artifacts:
            d = Path(self.cfg.artifact_dir) / run_dir.name
            if d.is_dir():
                shutil.rmtree(d, ignore_errors=True)

    def fetch_samples(self, handle: str) -> Samples:
        run_dir = self._run_dir(handle)
        st = self.poll(handle)
        if st.state != DONE:
            raise LabError(f"run {handle} is {st.state}: {st.message}")
        res = read_json(run_dir / "result.json")
        if not res:
            raise LabError(f"run {handle} is done but result.json is missing")
        return Samples(res["samples"], log_path=str(run_dir / "run.log"), metric=res["metric"],
                       higher_is_better=res["higher_is_better"], order=res.get("order"), warmups=res.get("warmups"))

    def cancel(self, handle: str, wait_s: float | None = None) -> Status:
        run_dir = self._run_dir(handle)
        (run_dir / "cancel").write_text(str(time.time()))
        state = read_json(run_dir / "state.json", {}) or {}
        st = Status.from_dict(state.get("status") or {"state": FAILED})
        if st.finished:
            return st
        pid = (read_json(run_dir / "preparer.json", {}) or {}).get("pid")
        if proc_alive_and_ours(pid, str(run_dir)):
            try:
                os.killpg(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            end = time.monotonic() + 10
            while time.monotonic() < end and proc_alive_and_ours(pid, str(run_dir)):
                self._reap(handle)
                time.sleep(0.1)
            if proc_alive_and_ours(pid, str(run_dir)):
                os.killpg(pid, signal.SIGKILL)
        self._reap(handle)
        state = read_json(run_dir / "state.json", {}) or {}
        state["cancel_requested"] = True
        atomic_write_json(run_dir / "state.json", state)
        errors = []
        for j in state.get("jobs") or []:
            if j.get("lava_state") == "Finished":
                continue
            try:
                self.client.cancel(j["id"])
                self._note(run_dir, f"cancel requested for LAVA job {j['id']}")
            except LabError as exc:
                errors.append(f"job {j['id']}: {exc}")
        if not state.get("jobs"):
            self._finish(run_dir, state)
            return self._set(run_dir, state, Status(FAILED, "cancelled by request (before submission)", 0,
                                                    st.batches_total, True, time.time()))
        end = time.monotonic() + (self.cfg.cancel_wait_s if wait_s is None else wait_s)
        while True:
            st = self.poll(handle)
            if st.finished or time.monotonic() >= end:
                break
            time.sleep(1)
        if not st.finished:
            st = Status(st.state, f"cancel requested{'; ' + '; '.join(errors) if errors else ''}; {st.message}",
                        st.batches_done, st.batches_total, True, time.time())
        return st

    def describe(self, handle: str) -> dict:
        run_dir = self._run_dir(handle)
        st = self.poll(handle)
        spec = read_json(run_dir / "spec.json", {})
        state = read_json(run_dir / "state.json", {}) or {}
        return {"backend": self.name, "handle": handle, "run_dir": str(run_dir), "status": st.to_dict(),
                "job": spec.get("job"), "schedule": spec.get("schedule"), "server": self.cfg.url,
                "jobs": [{**j, "url": f"{self.cfg.url}scheduler/job/{j['id']}"} for j in state.get("jobs", [])],
                "batches": state.get("batches", []), "builds": state.get("builds", {}),
                "log_path": str(run_dir / "run.log")}

    def list_runs(self) -> list[str]:
        d = self.work_dir / "runs"
        if not d.is_dir():
            return []
        return sorted(f"lava:{p.name}" for p in d.iterdir() if RUN_ID_RE.match(p.name) and (p / "spec.json").is_file())


# ================================================================================== preparer
class _Cancelled(Exception):
    pass


def _on_term(signum, frame):
    raise _Cancelled()


def prepare(run_dir: Path) -> int:
    """Resolve builds, stage artifacts, submit the job(s); record LAVA ids as they come."""
    signal.signal(signal.SIGTERM, _on_term)
    spec = json.loads((run_dir / "spec.json").read_text())
    cfg = LavaConfig(**spec["backend"])
    backend = LavaBackend(cfg)
    state = read_json(run_dir / "state.json", {}) or {}

    def status(s: str, msg: str) -> None:
        state["status"] = Status(s, msg, 0, len(spec["schedule"]), updated_at=time.time()).to_dict()
        atomic_write_json(run_dir / "state.json", state)
        backend._note(run_dir, msg)

    def check_cancel() -> None:
        if (run_dir / "cancel").exists():
            raise _Cancelled()

    try:
        job = RunSpec.from_dict(spec["job"])
        schedule = [tuple(x) for x in spec["schedule"]]
        stage = Path(cfg.artifact_dir) / run_dir.name
        stage.mkdir(parents=True, exist_ok=True)
        os.chmod(stage, 0o755)
        base_url = f"{cfg.artifact_url}/{run_dir.name}"
        urls: dict = {"kernel": {}, "ramdisk": {}}
        for label in ("good", "bad"):
            check_cancel()
            status(QUEUED, f"resolving {label}: {job.build(label).describe()}")
            bspec = job.build(label)
            kw = {"deb_dir": cfg.deb_dir} if bspec.kind == "debian" and cfg.deb_dir else {}
            rb = resolve(bspec, cfg.builds_dir, **kw)
            m = re.search(r"vmlinu[xz]-(.+)$", rb.kernel)
            state["builds"][label] = {**rb.to_dict(), "release": m.group(1) if m else None}
            dst = stage / f"vmlinuz-{label}"
            shutil.copyfile(rb.kernel, dst)
            os.chmod(dst, 0o644)
            urls["kernel"][label] = f"{base_url}/vmlinuz-{label}"
        mem, scratch = guest_memory_mib(job.recipe, cfg.memory_mib)
        for _, n in schedule:
            if n in urls["ramdisk"]:
                continue
            files = render_guest_files(job.recipe, samples=n, warmup=job.warmup, scratch_mib=scratch)
            blob = build_initramfs(files, cfg.busybox)
            dst = stage / f"initramfs-{n}.cpio.gz"
            dst.write_bytes(blob)
            os.chmod(dst, 0o644)
            urls["ramdisk"][n] = f"{base_url}/initramfs-{n}.cpio.gz"
        chunks = chunk_schedule(schedule, cfg.batches_per_job)
        state["jobs"] = state.get("jobs") or []
        client = backend.client
        for part, idxs in enumerate(chunks):
            check_cancel()
            definition = render_job(cfg=cfg, run_id=run_dir.name, job=job, schedule=schedule, batch_indexes=idxs,
                                    urls=urls, memory_mib=mem, part=part, parts=len(chunks))
            (run_dir / f"definition-{part}.yaml").write_text(definition)
            ids = client.submit(definition)
            state["jobs"].append({"id": ids[0], "batches": idxs, "part": part})
            atomic_write_json(run_dir / "state.json", state)
            backend._note(run_dir, f"submitted LAVA job {ids[0]} ({len(idxs)} batches): {cfg.url}scheduler/job/{ids[0]}")
        state["submitted"] = True
        status(QUEUED, f"submitted LAVA job(s) {', '.join(str(j['id']) for j in state['jobs'])}")
        if (run_dir / "cancel").exists():  # cancel() may have read the state before we wrote the ids
            for j in state["jobs"]:
                try:
                    client.cancel(j["id"])
                except LabError:
                    pass
        return 0
    except _Cancelled:
        if state.get("jobs"):
            for j in state["jobs"]:
                try:
                    backend.client.cancel(j["id"])
                except LabError:
                    pass
            state["submitted"] = True
            atomic_write_json(run_dir / "state.json", state)
        else:
            state["status"] = Status(FAILED, "cancelled by request (before submission)", 0, len(spec["schedule"]),
                                     True, time.time()).to_dict()
            atomic_write_json(run_dir / "state.json", state)
        return 2
    except (BuildError, RecipeError, LabError, OSError, ValueError) as exc:
        if state.get("jobs"):
            state["submitted"] = True  # poll() cancels the submitted ones and reports the failure
            state["submit_incomplete"] = True
            atomic_write_json(run_dir / "state.json", state)
            backend._note(run_dir, f"failed after submitting some jobs: {exc}")
        else:
            status(FAILED, f"preparing the run failed: {printable(exc, 400)}")
        return 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] != "prepare":
        print("usage: python -m bot.lab.backends.lava prepare RUN_DIR", file=sys.stderr)
        return 64
    return prepare(Path(argv[1]))


if __name__ == "__main__":
    sys.exit(main())
