"""A wheel install (not editable) carries what the package needs at run time: the Jinja2
templates that live at the top of the repository are installed as data files and found there."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CHECK = r"""
import sys
from pathlib import Path
import bot, bot.reply.compose as reply, bot.tracker.entry as te, bot.web.app, bot.web.render as web
prefix = Path(sys.argv[1]).resolve()
assert Path(bot.__file__).resolve().is_relative_to(prefix), bot.__file__
assert te.TEMPLATES.resolve().is_relative_to(prefix), te.TEMPLATES
# each template compiles in the environment the code renders it with
reply._reply_env().get_template("reply.txt.j2")
te.template_env("txt").get_template("entry.txt.j2")
te.template_env("md").get_template("entry.md.j2")
for name in ("base.html", "list.html", "regression.html", "error.html"):
    web.environment().get_template(name)
assert (web.STATIC / "style.css").is_file()
print(te.TEMPLATES)
"""


@pytest.mark.slow
def test_wheel_install_finds_its_templates(tmp_path):
    wheels = tmp_path / "wheels"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
                           capture_output=True, text=True, timeout=600)
    if build.returncode != 0 and "No matching distribution" in build.stderr:
        pytest.skip(f"cannot fetch the build backend: {build.stderr[-300:]}")
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next(wheels.glob("regtriage-*.whl"))
    # install it into a prefix of its own the way an installer lays a wheel out (package files in
    # site-packages, ``*.data/data/`` under the prefix). Not ``pip install --prefix``: pip would
    # first uninstall the running environment's own (editable) regtriage.
    prefix = tmp_path / "prefix"
    site = Path(sysconfig.get_path("purelib", vars={"base": str(prefix), "platbase": str(prefix)}))
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            head, _, rest = name.partition("/")
            if head.endswith(".data") and rest.startswith("data/"):
                target = prefix / rest[len("data/"):]
            else:
                target = site / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(name))
    assert (site / "bot" / "tracker" / "entry.py").is_file()
    # run from elsewhere, the installed copy first on the path (the checkout is not importable)
    env = dict(os.environ, PYTHONPATH=str(site))
    out = subprocess.run([sys.executable, "-c", CHECK, str(prefix)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert Path(out.stdout.strip()) == prefix / "share" / "regtriage" / "templates"


def test_make_demo_keeps_its_own_state(tmp_path):
    """`make demo` writes into its own directory (DEMO_HOME, default .demo/), never into the
    default $REGTRIAGE_HOME or $REGTRIAGE_DB database the real bot uses."""
    import shutil

    if shutil.which("make") is None:
        pytest.skip("no make")
    real_home, demo_home = tmp_path / "real-home", tmp_path / "demo-home"
    real_home.mkdir()
    env = dict(os.environ, REGTRIAGE_HOME=str(real_home),
               REGTRIAGE_DB=f"sqlite:///{real_home / 'real.sqlite3'}")
    env.pop("REGTRIAGE_CONFIG", None)
    bindir = str(Path(sys.executable).parent)
    r = subprocess.run(["make", "-s", "-o", "install", "demo", f"DEMO_HOME={demo_home}", f"BIN={bindir}"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "#regzbot" in r.stdout  # the reply was printed
    assert (demo_home / "regtriage.sqlite3").is_file()
    assert list(real_home.iterdir()) == []
    dry = subprocess.run(["make", "-n", "-o", "install", "demo"], cwd=ROOT, capture_output=True, text=True)
    lines = [ln for ln in dry.stdout.splitlines() if "bin/regtriage" in ln]
    assert lines and all(f'REGTRIAGE_HOME="{ROOT}/.demo"' in ln and f'--db "sqlite:///{ROOT}/.demo/' in ln
                         for ln in lines), dry.stdout


def _requirement_names(section: str, key: str) -> set[str]:
    import configparser
    import re

    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    out = set()
    for line in cfg[section][key].splitlines():
        line = line.split("#")[0].strip()
        if line:
            assert not re.search(r"[=<>~!]", line), f"setup.cfg pins {line!r}: versions belong in constraints.txt"
            out.add(re.split(r"[\[;\s]", line)[0].lower().replace("_", "-"))
    return out


def test_declared_dependencies_match_the_imports_and_are_pinned_once():
    """Every third-party package the shipped code imports is declared in setup.cfg (names only)
    and pinned in constraints.txt; nothing declared goes unpinned."""
    import ast
    import sys
    from importlib.metadata import packages_distributions

    declared = _requirement_names("options", "install_requires")
    test_extra = _requirement_names("options.extras_require", "test")
    pinned = {line.split("==")[0].strip().lower().replace("_", "-")
              for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line}
    assert declared | test_extra <= pinned, f"not pinned in constraints.txt: {sorted((declared | test_extra) - pinned)}"
    dists = packages_distributions()
    own = {"bot", "extractors", "storage", "tests", "bench", "__future__"}
    for area, allowed in ((("bot", "extractors", "storage"), declared), (("tests",), declared | test_extra)):
        for d in area:
            for f in (ROOT / d).rglob("*.py"):
                for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
                    if isinstance(node, ast.Import):
                        names = [a.name for a in node.names]
                    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                        names = [node.module]
                    else:
                        continue
                    for name in names:
                        top = name.split(".")[0]
                        if top in sys.stdlib_module_names or top in own:
                            continue
                        if top not in dists and any(ROOT.glob(f"bench/**/{top}.py")):
                            continue  # a bench script a test loads by path
                        dist = {x.lower().replace("_", "-") for x in dists.get(top, [top])}
                        assert dist & allowed, f"{f.relative_to(ROOT)} imports {top} ({sorted(dist)}), not declared"
