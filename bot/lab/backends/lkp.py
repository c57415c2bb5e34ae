"""The ``lkp`` lab backend: run a recipe as an Intel LKP-tests job on a lab host, over the ssh
backend (same hosts, kernel switching, ``uname -r`` check, ABAB batches, restart-safety; see
:mod:`bot.lab.backends.ssh`).

Per run, :func:`job_yaml` writes one **atomic** LKP job per build (``suite``/``testcase``/
``category``, the recipe's parameters under the program key, ``testbox``, ``commit`` = the
build's kernel release (or its 40-hex commit for tree builds), ``repeat_to`` = the measured runs
per build); the worker uploads it to the remote run directory and each iteration (warm-ups
included, then discarded) is one ``lkp run -o <rundir>/result-BBB-II <job>``.  ``lkp run`` tests the
running kernel (it builds and boots nothing), so the ssh backend's kernel switching and
``uname -r`` check apply unchanged.  After each run the worker resolves the ``-o`` link to the
result root (``/lkp/result/<testcase>/<params>/<tbox_group>/<rootfs>/<kconfig>/<compiler>/<commit>/<run>``),
reads its ``stats.json`` and, if present, the ``_rt`` ``matrix.json`` (one column per run,
``stats_source`` naming each run's stats.json) to cross-check, and takes the recipe's metric.

Recipe -> LKP program (each recipe's ``lkp_job``, :mod:`bot.lab.recipes`; recipes without one
are not offered to this backend)

===============  ==========================  =========================================  ======================
recipe           suite / program key         stats.json key                             note
===============  ==========================  =========================================  ======================
dd-seqwrite/     ``dd`` / ``dd``             ``dd.write_MBps`` / ``dd.read_MBps``        **not in LKP-tests**: the
dd-seqread                                                                              testbox needs a local
                                                                                        ``programs/dd``; enable
                                                                                        with extra_programs
syscall-getpid   ``perf-bench-syscall``      ``perf-bench-syscall.getppid.ops_per_sec``  upstream program
                 (op: basic, loop)                                                      (``perf bench syscall``)
sysbench-fileio  ``sysbench-fileio``         ``sysbench-fileio.read_operations/s``,      upstream suite; key names
                                             ``...write_operations/s`` (ops: sum)       inferred from
                                                                                        index-perf's ``*_operations/s``
fio              ``fio-basic`` /             ``fio.<dir>_bw_MBps`` x 1.048576,           upstream; LKP's bw_MBps is
                 ``fio-setup-basic`` + ``fio``  ``fio.<dir>_iops``                      KiB/s / 1024 (MiB/s):
                                                                                        converted to MB/s (10^6)
stress-ng        ``stress-ng`` (test,        ``stress-ng.<stressor>.ops_per_sec``       upstream (``run``/``parse``
                 nr_threads, testtime)                                                  read in intel/lkp-tests)
===============  ==========================  =========================================  ======================

Configuration: the hosts are ``[lab.ssh]``'s (see the ssh backend); ``[lab.lkp]`` adds
``work_dir`` (default ``$REGTRIAGE_HOME/lab/lkp``), ``machine``, ``lkp_command`` (path of ``lkp``
on the host, default ``lkp``), ``testbox`` (default: the machine name), ``extra_programs``
(programs the testboxes have beyond upstream LKP-tests, e.g. ``["dd"]``), ``disk`` and ``fs``
(LKP's ``disk: 1HDD``/``fs: ext4`` keys, for the fio/sysbench setup scripts), ``exclusive``.
ssh and lkp runs on the same machine share ``<[lab.ssh] work_dir>/locks``.

Tested against a **stand-in** ``lkp`` executable (LKP-tests is not installable from any package
registry): the stand-in follows the documented result-root layout and stats.json/matrix.json
formats with values from a real dd run; a real LKP-tests installation is not exercised.
"""

from __future__ import annotations

import re
import shlex
import sys
import time
from pathlib import Path

from bot.lab import parsers
from bot.lab.backends.base import LabError, RunSpec, lab_table
from bot.lab.backends.ssh.backend import SshBackend
from bot.lab.backends.ssh.config import RELEASE_RE, SSH_KEYS, HostConfig, SshConfig, machines_from_config
from bot.lab.backends.ssh.worker import BatchFailed, SshWorker
from bot.lab.backends.rundir import default_work_dir, printable, worker_main
from bot.lab.recipes import RecipeError, RecipeSpec

TESTBOX_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
COMMIT_RE = re.compile(r"^[0-9a-f]{7,40}$")
LKP_COMMAND_RE = re.compile(r"^/?[A-Za-z0-9._+-]+(?:/[A-Za-z0-9._+-]+)*$")
DISK_RE = re.compile(r"^[0-9]{1,2}(?:HDD|SSD|BRD_[0-9]{1,4}[GM]|PMEM|NVME)$")
FS_RE = re.compile(r"^(?:ext2|ext3|ext4|xfs|btrfs|f2fs)$")
RESULT_ROOT_RE = re.compile(r"^/[A-Za-z0-9._/+%:=,@~-]{1,500}$")
LKP_KEYS = {"work_dir", "machine", "lkp_command", "testbox", "extra_programs", "disk", "fs", "exclusive"}


def stats_keys(recipe: RecipeSpec) -> tuple[list[str], float]:
    """(stats.json keys whose sum is the recipe's metric, scale to the recipe's unit)."""
    try:
        job = recipe.lkp_job()
    except RecipeError as exc:
        raise LabError(str(exc)) from None
    return job.stats_keys, job.scale


def _yaml_scalar(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str) and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/+-]*", v) \
            and v.lower() not in ("true", "false", "yes", "no", "on", "off", "null", "y", "n") \
            and not re.fullmatch(r"[0-9._+-]+(?:e[0-9+-]+)?", v):
        return v
    import json

    return json.dumps(v)  # a JSON string is a valid YAML double-quoted scalar


def job_yaml(recipe: RecipeSpec, testbox: str, commit: str, repeat: int, *, disk: str | None = None,
             fs: str | None = None) -> str:
    """An atomic LKP-tests job for ``recipe`` (see the module table).  Every value is a validated
    int, bool or whitelisted string; ``testbox``/``commit``/``disk``/``fs`` are checked here."""
    if not isinstance(recipe, RecipeSpec) or "lkp" not in recipe.backends:
        raise LabError("job_yaml needs a registry RecipeSpec with an LKP job template")
    if not isinstance(testbox, str) or not TESTBOX_RE.match(testbox):
        raise LabError(f"testbox {testbox!r} must match {TESTBOX_RE.pattern}")
    if not isinstance(commit, str) or not (COMMIT_RE.match(commit) or RELEASE_RE.match(commit)):
        raise LabError(f"commit {commit!r} must be a hex commit id or a kernel release")
    if type(repeat) is not int or not 1 <= repeat <= 200:
        raise LabError("repeat must be an int in [1, 200]")
    if disk is not None and not (isinstance(disk, str) and DISK_RE.match(disk)):
        raise LabError(f"disk {disk!r} must match {DISK_RE.pattern}")
    if fs is not None and not (isinstance(fs, str) and FS_RE.match(fs)):
        raise LabError(f"fs {fs!r} must be one of ext2/3/4, xfs, btrfs, f2fs")
    job = recipe.lkp_job()
    suite = job.suite
    lines = [f"# regtriage recipe {recipe.name} ({recipe.metric})",
             f"suite: {suite}", f"testcase: {suite}", "category: benchmark",
             f"testbox: {_yaml_scalar(testbox)}", f"commit: {_yaml_scalar(commit)}", f"repeat_to: {repeat}"]
    if disk:
        lines.append(f"disk: {disk}")
    if fs:
        lines.append(f"fs: {fs}")
    for key, params in job.blocks:
        lines.append("")
        if params is None:
            lines.append(f"{key}:")
            continue
        lines.append(f"{key}:")
        lines += [f"  {k}: {_yaml_scalar(v)}" for k, v in params.items()]
    return "\n".join(lines) + "\n"


def build_commit(job: RunSpec, label: str, release: str) -> str:
    b = job.build(label)
    if b.kind == "tree" and b.ref and re.fullmatch(r"[0-9a-f]{40}", b.ref):
        return b.ref
    return release


# ==================================================================================== backend
class LkpBackend(SshBackend):
    name = "lkp"
    kind = "lkp"
    WORKER_MODULE = "bot.lab.backends.lkp"

    def __init__(self, cfg: SshConfig, lab_config: dict | None = None, lkp: dict | None = None,
                 locks_dir: str | None = None):
        super().__init__(cfg, lab_config)
        self.lkp = lkp or {}
        self.locks_dir = locks_dir

    @classmethod
    def from_config(cls, config: dict | None = None, **overrides) -> "LkpBackend":
        lab = lab_table(config)
        ssh = dict(lab.get("ssh") or {})
        lkp = dict(lab.get("lkp") or {})
        if not isinstance(ssh, dict) or not isinstance(lkp, dict):
            raise LabError("[lab.ssh] and [lab.lkp] must be tables")
        lkp.update(overrides)
        unknown = set(lkp) - LKP_KEYS
        if unknown:
            raise LabError(f"[lab.lkp] unknown keys: {sorted(unknown)}")
        unknown = set(ssh) - SSH_KEYS
        if unknown:
            raise LabError(f"[lab.ssh] unknown keys: {sorted(unknown)}")
        cmd = lkp.get("lkp_command", "lkp")
        if not isinstance(cmd, str) or not LKP_COMMAND_RE.match(cmd) or ".." in cmd.split("/"):
            raise LabError(f"[lab.lkp] lkp_command {cmd!r} must be a plain command name or path")
        extra = lkp.get("extra_programs", [])
        if not isinstance(extra, list) or not all(isinstance(x, str) and re.fullmatch(r"[a-z0-9-]{1,40}", x)
                                                  for x in extra):
            raise LabError("[lab.lkp] extra_programs must be a list of LKP program names")
        if lkp.get("testbox") is not None and not (isinstance(lkp["testbox"], str)
                                                   and TESTBOX_RE.match(lkp["testbox"])):
            raise LabError(f"[lab.lkp] testbox must match {TESTBOX_RE.pattern}")
        for k, rx in (("disk", DISK_RE), ("fs", FS_RE)):
            if lkp.get(k) is not None and not (isinstance(lkp[k], str) and rx.match(lkp[k])):
                raise LabError(f"[lab.lkp] {k} {lkp[k]!r} is not accepted")
        machines = machines_from_config(ssh)
        cfg = SshConfig(work_dir=lkp.get("work_dir") or str(default_work_dir("lkp")), machines=machines,
                        machine=lkp.get("machine", ssh.get("machine")), exclusive=lkp.get("exclusive", True))
        ssh_work = Path(ssh.get("work_dir") or str(default_work_dir("ssh"))).expanduser().resolve()
        return cls(cfg, lab, {"lkp_command": cmd, "extra_programs": extra, "testbox": lkp.get("testbox"),
                              "disk": lkp.get("disk"), "fs": lkp.get("fs")}, str(ssh_work / "locks"))

    def supports(self, recipe: RecipeSpec) -> tuple[bool, str]:
        ok, why = recipe.supports("lkp")
        if not ok:
            return ok, why
        prog = recipe.lkp_job()
        if not prog.upstream and prog.suite not in self.lkp.get("extra_programs", []):
            return False, (f"LKP-tests has no '{prog.suite}' program; list it in [lab.lkp] extra_programs "
                           "if the testboxes have a local one")
        return True, "ok"

    def extra_spec(self, job: RunSpec, host: HostConfig, releases: dict) -> dict:
        testbox = self.lkp.get("testbox") or host.name
        jobs = {label: job_yaml(job.recipe, testbox, build_commit(job, label, releases[label]), job.runs,
                                disk=self.lkp.get("disk"), fs=self.lkp.get("fs"))
                for label in ("good", "bad")}
        keys, scale = stats_keys(job.recipe)
        return {"lkp": {"command": self.lkp.get("lkp_command", "lkp"), "jobs": jobs, "stats_keys": keys,
                        "scale": scale, "testbox": testbox},
                "locks_dir": self.locks_dir}

    def _describe_more(self, spec: dict, state: dict) -> dict:
        return {**super()._describe_more(spec, state), "lkp": spec.get("lkp")}


# ===================================================================================== worker
class LkpWorker(SshWorker):
    def __init__(self, run_dir: Path):
        super().__init__(run_dir)
        self.lkp = self.spec["lkp"]
        self.job_paths = {label: f"{self.remote_dir}/job-{label}.yaml" for label in ("good", "bad")}

    def lock_dir(self) -> Path:
        return Path(self.spec.get("locks_dir") or Path(self.spec["work_dir"]) / "locks")

    def begin(self) -> None:
        for label, path in self.job_paths.items():
            text = self.lkp["jobs"][label]
            res = self.remote(f"cat > {shlex.quote(path)}", timeout=60, stdin=text.encode())
            if res.rc != 0:
                raise BatchFailed(f"cannot upload the LKP job to {path}: {printable(res.stderr.strip(), 200)}")
            self.note(f"uploaded {path}")

    def read_remote(self, path: str, *, optional: bool = False) -> str | None:
        q = shlex.quote(path)
        cmd = f"if [ -f {q} ]; then cat -- {q}; else exit 3; fi"
        res = self.remote(cmd, timeout=60, log=False)
        if res.rc == 3 and optional:
            return None
        if res.rc != 0:
            raise BatchFailed(f"cannot read {path} on the host (exit {res.rc})")
        self.log.write(f"# {path}: {printable(res.stdout.strip(), 2000)}\n")
        return res.stdout

    def iteration(self, index: int, label: str, i: int) -> float:
        left = self.machine.batch_time_left(time.monotonic())
        if left <= 0:
            raise BatchFailed(f"batch timeout: {self.job.timeouts.batch_s:.0f}s exceeded")
        link = f"{self.remote_dir}/result-{index:03d}-{i:02d}"
        res = self.step([self.lkp["command"], "run", "-o", link, self.job_paths[label]], left)
        if res.rc != 0:
            raise BatchFailed(f"lkp run exited {res.rc}: {printable((res.stderr or res.stdout).strip()[-200:], 200)}")
        rr = self.remote(f"readlink -f -- {shlex.quote(link)}", timeout=60)
        root = rr.stdout.strip()
        if rr.rc != 0 or not RESULT_ROOT_RE.match(root) or ".." in root.split("/"):
            raise BatchFailed(f"lkp run left no usable result link {link}: {printable(root or rr.stderr, 200)}")
        stats_path = f"{root}/stats.json"
        try:
            stats = parsers.parse_lkp_stats(self.read_remote(stats_path))
            mtext = self.read_remote(f"{root.rsplit('/', 1)[0]}/matrix.json", optional=True)
            matrix = parsers.parse_lkp_matrix(mtext) if mtext else None
        except parsers.ParseError as exc:
            raise BatchFailed(f"{root}: {exc}") from None
        total = 0.0
        for key in self.lkp["stats_keys"]:
            v = stats.get(key)
            mv = parsers.lkp_matrix_value(matrix, key, stats_path) if matrix else None
            if v is None and mv is None:
                raise BatchFailed(f"{key} is not in {stats_path} (has: {', '.join(sorted(stats)[:10]) or 'nothing'})")
            if v is None:
                v = mv
            elif mv is not None and abs(mv - v) > 1e-9 * max(abs(v), 1.0):
                self.note(f"matrix.json disagrees with stats.json for {key}: {mv} vs {v} (stats.json used)")
            total += v
        self.state.setdefault("result_roots", []).append({"batch": index, "build": label, "iteration": i,
                                                          "result_root": root})
        return total * float(self.lkp["scale"])


def main(argv: list[str] | None = None) -> int:
    return worker_main(argv, "bot.lab.backends.lkp", "worker", lambda run_dir: LkpWorker(run_dir).run())


if __name__ == "__main__":
    sys.exit(main())
