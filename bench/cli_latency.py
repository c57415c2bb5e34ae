"""Wall time of one CLI command end to end, process start-up included (target: < 0.25 s median).

    .venv/bin/python bench/cli_latency.py                      # `regtriage query "open regressions in mm/"`
    .venv/bin/python bench/cli_latency.py --runs 20
    .venv/bin/python bench/cli_latency.py -- regressions       # any other command line
    .venv/bin/python bench/cli_latency.py --importtime         # plus the slowest imports (python -X importtime)
    .venv/bin/python bench/cli_latency.py --compare HEAD~3     # the same, interleaved with that revision's code
    .venv/bin/python bench/cli_latency.py --records 100000     # a database of synthetic records (bench/query.py)

The database is a fresh SQLite file in a temporary $REGTRIAGE_HOME (empty unless --records: a
first, untimed run creates the schema), so what is measured is start-up, configuration, the schema check and the
query itself.  Reports the median (and min, max) of --runs runs: wall time and the CPU time
(user + sys) of the process, which a busy machine disturbs less; plus `python -c pass` and a
process that only imports what the command cannot do without (click, sqlite3, rich: on a
current SQLite database `query` reads without SQLAlchemy, storage.search): the floor for this
design on this machine.
--compare REV checks REV's code out into a temporary directory (git archive) and alternates
runs of it and of the working tree, the same interpreter and packages for both, so that both
figures see the same load.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ["query", "open regressions in mm/"]
LAUNCH = "import sys; from bot.cli.main import main; sys.argv[0] = 'regtriage'; main()"


def run(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall, cpu) seconds of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=env["REGTRIAGE_HOME"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def report(label: str, samples: list[tuple[float, float]]) -> None:
    wall = [w for w, _ in samples]
    cpu = [c for _, c in samples]
    print(f"  {label:<28} wall median {statistics.median(wall):.3f} s (min {min(wall):.3f}, max {max(wall):.3f})"
          f"   cpu median {statistics.median(cpu):.3f} s")


def importtime(cmd: list[str], env: dict, top: int = 12) -> None:
    env = dict(env, PYTHONPROFILEIMPORTTIME="1")
    proc = subprocess.run(cmd, env=env, cwd=env["REGTRIAGE_HOME"], capture_output=True, text=True)
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _self_us, cum_us, name = line[len("import time:"):].split("|", 2)
        rows.append((int(cum_us), name[1:]))  # nested imports keep their indentation
    top_level = [r for r in rows if not r[1].startswith(" ")]
    print("  slowest top-level imports (cumulative, one run):")
    for cum, name in sorted(top_level, reverse=True)[:top]:
        print(f"    {cum / 1e6:6.3f} s  {name}")
    for heavy in ("alembic", "spacy", "sqlalchemy.orm", "jinja2", "aiohttp", "httpx"):
        if any(name.strip() == heavy for _, name in rows):
            print(f"  (imports {heavy})")


def fill_db(path: Path, n: int, env: dict) -> None:
    """n synthetic records (bench/query.py's generator) into the SQLite database at ``path``,
    by the code on ``env``'s PYTHONPATH (each tree fills its own database with its own schema)."""
    # the tree's modules first: bench/query.py puts this tree on sys.path when it is imported
    script = ("import sys; from storage.store import Store; import storage.tracker_schema, bot.tracker.fields; "
              "sys.path.insert(1, sys.argv[1]); from query import fill; "
              "s = Store('sqlite:///' + sys.argv[2]); fill(s, int(sys.argv[3])); s.close()")
    subprocess.run([sys.executable, "-c", script, str(ROOT / "bench"), str(path), str(n)], env=env, cwd=path.parent,
                   check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--importtime", action="store_true")
    ap.add_argument("--compare", metavar="REV", help="also time this git revision's code, interleaved")
    ap.add_argument("--records", type=int, default=0, help="fill the database with this many synthetic records")
    ap.add_argument("args", nargs="*", help="the regtriage command line (default: query ...)")
    a = ap.parse_args()
    args = a.args or DEFAULT
    with tempfile.TemporaryDirectory(prefix="regtriage-bench-") as home:
        # PYTHONPATH: this tree's code, whatever the installed package is (an editable install
        # of another checkout would otherwise be timed)
        env = dict(os.environ, REGTRIAGE_HOME=home, COLUMNS="80", PYTHONPATH=str(ROOT))
        for k in ("REGTRIAGE_DB", "REGTRIAGE_CONFIG"):
            env.pop(k, None)
        exe = Path(sys.executable).with_name("regtriage")
        cmds = {"regtriage (this tree)": ([str(exe)] if exe.exists() else [sys.executable, "-c", LAUNCH]) + args}
        envs = {"regtriage (this tree)": env}
        if a.compare:
            old = Path(home) / "old-src"
            old.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", a.compare], check=True,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
            cmds = {"this tree": [sys.executable, "-c", LAUNCH] + args,
                    a.compare: [sys.executable, "-c", LAUNCH] + args}
            envs = {"this tree": dict(env, PYTHONPATH=str(ROOT)), a.compare: dict(env, PYTHONPATH=str(old))}
            # the two trees may want different schema bookkeeping: one database each
            for label in cmds:
                h = Path(home) / f"home-{len(label)}-{abs(hash(label))}"
                h.mkdir()
                envs[label] = dict(envs[label], REGTRIAGE_HOME=str(h))
        for label, cmd in cmds.items():
            subprocess.run(cmd, env=envs[label], cwd=envs[label]["REGTRIAGE_HOME"], check=True,
                           stdout=subprocess.DEVNULL)  # creates the schema, warms the caches
            if a.records:
                fill_db(Path(envs[label]["REGTRIAGE_HOME"]) / "regtriage.sqlite3", a.records, envs[label])
        samples: dict[str, list] = {label: [] for label in cmds}
        base, floor = [], []
        imports = "import click, sqlite3, rich.console, rich.table"
        for _ in range(a.runs):
            base.append(run([sys.executable, "-c", "pass"], env))
            floor.append(run([sys.executable, "-c", imports], env))
            for label, cmd in cmds.items():
                samples[label].append(run(cmd, envs[label]))
        what = f"{a.records} records" if a.records else "empty SQLite database"
        print(f"regtriage {' '.join(args)}  ({what}, {a.runs} runs, load average "
              f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores)")
        for label in cmds:
            report(label, samples[label])
        report("python -c pass", base)
        report("imports only (floor)", floor)
        if a.importtime:
            label = next(iter(cmds))
            importtime(cmds[label], envs[label])


if __name__ == "__main__":
    main()
