"""deploy/regtriage.toml and deploy/lab-example.toml: valid for the real loaders, complete, safe.

* valid: both files load through the loaders the bot uses (bot.config.load, LoreSettings,
  MailSettings, reply_policy, the notification settings, the lab plan/scheduler/inventory/
  backends, and ``regtriage run`` itself up to its event loop), every commented-out option
  too, and they yield the values written in them;
* complete: every option the code reads is in one of the two files, as ``key = value`` or
  commented out as ``# key = value``.  What the code reads is derived from the code: loaders are
  run on a config whose tables record every key looked up, plus the declarative key lists
  (dataclass fields, *_KEYS sets, DEFAULTS tables) and the ``lab.get("...")`` calls of the
  service policy;
* safe: no secret written inline, only example.org / loopback hosts, replies never "send".
"""

from __future__ import annotations

import copy
import dataclasses
import re
import tomllib
import types
from pathlib import Path

import pytest

import bot.config
from bot.config import Config
from bot.lab import plan as lab_plan
from bot.lab import settings as lab_settings
from bot.lab.backends import Timeouts
from bot.lab.backends.lava import LavaBackend, LavaConfig
from bot.lab.backends.lkp import LKP_KEYS, LkpBackend
from bot.lab.backends.qemu import QemuBackend, QemuConfig
from bot.lab.backends.ssh import SSH_KEYS, SshBackend
from bot.lab.inventory import lab_section, load_machines, make_backend
from bot.lab.matching import Requirements, match
from bot.lab.recipes import Limits
from bot.sources.limits import IngestLimits
from bot.notify import settings as notify_settings
from bot.reply.settings import MailSettings
from bot.service.run import Service
from bot.service.hooks import reply_policy
from bot.sources.lore import LoreSettings
from bot.triage.runner import open_trees
from bot.tracker.trust import TrustSettings

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "deploy" / "regtriage.toml"
LAB_EXAMPLE = REPO / "deploy" / "lab-example.toml"
FILES = (EXAMPLE, LAB_EXAMPLE)
# Keys the loaders look for only to refuse them: secrets must not be written in the file.
FORBIDDEN = set(notify_settings.SECRET_KEYS) | {"password", "token"}
HEADER = re.compile(r"^\[\[?\s*([A-Za-z0-9_.-]+)\s*\]\]?\s*(?:#.*)?$")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# ------------------------------------------------------------------------- the files, as text
def _flatten(table: str, value: dict, out: dict, where) -> None:
    """(table, key) for every key of ``value`` (nested tables and arrays of tables too)."""
    for k, v in value.items():
        out.setdefault((table, k), []).append(where)
        sub = f"{table}.{k}" if table else k
        if isinstance(v, dict):
            _flatten(sub, v, out, where)
        elif isinstance(v, list):
            for item in v:
                if isinstance(item, dict):
                    _flatten(sub, item, out, where)


def _lines(text: str):
    """(lineno, commented, table, parsed) for every line that is a header or a ``key = value``
    (active or commented out).  Commented lines belong to the last header, commented or not;
    active lines to the last active header.  Prose comments are skipped (they are not TOML)."""
    active_table = comment_table = ""
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        commented = line.startswith("#")
        body = line.lstrip("#").strip()
        if not body:
            continue
        m = HEADER.match(body)
        if m:
            comment_table = m.group(1)
            if not commented:
                active_table = comment_table
            yield n, commented, comment_table, None
            continue
        try:
            parsed = tomllib.loads(body)
        except tomllib.TOMLDecodeError:
            continue
        yield n, commented, comment_table if commented else active_table, parsed


def documented(text: str, name: str) -> dict[tuple[str, str], list[tuple[str, int, str]]]:
    """(table, key) -> where: ``(file, line, "key" | "header")``.  A table header documents its
    name as a key of its parent table (and so on up)."""
    out: dict = {}
    for n, _, table, parsed in _lines(text):
        if parsed is None:  # [a.b.c] documents a.b.c, b in a and a
            parts = table.split(".")
            for i in range(len(parts)):
                out.setdefault((".".join(parts[:i]), parts[i]), []).append((name, n, "header"))
        else:
            _flatten(table, parsed, out, (name, n, "key"))
    return out


def documented_all(texts: dict[str, str] | None = None) -> dict:
    texts = texts or {p.name: p.read_text() for p in FILES}
    out: dict = {}
    for name, text in texts.items():
        for k, v in documented(text, name).items():
            out.setdefault(k, []).extend(v)
    return out


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load_toml(path: Path) -> dict:
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def merged_data() -> dict:
    """regtriage.toml with lab-example.toml merged in (as lab-example.toml says to do)."""
    return _merge(load_toml(LAB_EXAMPLE), load_toml(EXAMPLE))


def commented_blocks(text: str) -> dict:
    """The tables that are commented out as a whole (``# [lab.lava]`` and its ``# key = value``
    lines, up to the next blank or active line), uncommented and parsed."""
    out, inside = [], False
    for raw in text.splitlines():
        line = raw.strip()
        if not line.startswith("#"):
            inside = False
            continue
        body = line.lstrip("#").strip()
        if HEADER.match(body):
            inside = True
            out.append(body)
        elif inside and body:
            try:
                tomllib.loads(body)
            except tomllib.TOMLDecodeError:
                continue
            out.append(body)
    return tomllib.loads("\n".join(out))


def commented_options(text: str):
    """``(table, {key: value})`` for each commented-out option inside an active table."""
    for _, commented, table, parsed in _lines(text):
        if commented and parsed is not None:
            yield table, parsed


# ------------------------------------------------------------------------- running the loaders
@pytest.fixture
def no_trees(monkeypatch):
    """open_trees() builds TreeSpecs from [kernel] repos without opening git repositories."""
    import bot.tracker.kernel_tree as kt

    class Spy(kt.KernelTrees):
        def __init__(self, specs, **kw):
            self.specs = [s if isinstance(s, kt.TreeSpec) else kt.TreeSpec(s) for s in specs]

        def close(self):
            pass

    monkeypatch.setattr(kt, "KernelTrees", Spy)
    return Spy


def run_loaders(cfg: Config) -> dict:
    """Every loader of the config, as the bot runs them; returns what they made."""
    out = {
        "contact": cfg.user_agent_contact,
        "lore": LoreSettings.from_config(cfg),
        "trees": open_trees(cfg),
        "replies": reply_policy(cfg),
        "service": Service(None, cfg, web=False),
        "notify": notify_settings.load_settings(cfg),
        "trust": TrustSettings.from_config(cfg),
        "ingest": IngestLimits.from_config(cfg),
    }
    if cfg.section("mail"):
        out["mail"] = MailSettings.from_config(cfg)
    if lab_section(cfg):
        out["sched"] = lab_settings.sched_settings(cfg)
        out["lab"] = lab_plan.lab_settings(cfg)
        out["builds"] = lab_plan.BuildMap.from_config(cfg)
        out["limits"] = Limits.from_config(cfg.data)
        out["machines"] = machines = load_machines(cfg)
        out["match"] = match(Requirements(arch="x86_64"), machines, config=cfg)
        out["backends"] = {m.name: make_backend(m.backend, m.backend_config(cfg)) for m in machines}
    return out


class Recording(dict):
    """A TOML table that notes every key looked up in it (``get``, ``[]``, ``in``)."""

    def __init__(self, data=(), path: str = "", log: set | None = None):
        data = dict(data)
        super().__init__({k: _wrap(v, f"{path}.{k}" if path else k, log) for k, v in data.items()})
        self.path, self.log = path, log

    def _note(self, key):
        if isinstance(key, str) and self.log is not None:
            self.log.add((self.path, key))

    def get(self, key, default=None):
        self._note(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self._note(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self._note(key)
        return super().__contains__(key)


def _wrap(value, path: str, log):
    if isinstance(value, dict):
        return Recording(value, path, log)
    if isinstance(value, list):
        return [_wrap(v, path, log) if isinstance(v, dict) else v for v in value]
    return value


def read_keys(monkeypatch, cli) -> set[tuple[str, str]]:
    """(table, key) of every option the bot looks up, derived from the code."""
    log: set[tuple[str, str]] = set()
    lab_example = load_toml(LAB_EXAMPLE)
    # 1. the loaders, on a config whose tables record the keys looked up in them
    monkeypatch.setattr(bot.config, "tomllib", types.SimpleNamespace(
        load=lambda fh: Recording(_merge(lab_example, tomllib.load(fh)), "", log),
        TOMLDecodeError=tomllib.TOMLDecodeError))
    run_loaders(bot.config.load(str(EXAMPLE)))
    started = _run_service(monkeypatch, cli)
    assert set(started.hooks["steps"]) == {"lab", "notify"}
    keys = {k for k in log if k[1] not in FORBIDDEN}
    # the recording saw what the settings dataclasses hold (else a loader was not exercised)
    seen = lambda table: {k for t, k in keys if t == table}  # noqa: E731
    assert {f.name for f in dataclasses.fields(MailSettings)} - {"from_name", "from_addr", "base_url",
                                                                "placeholder_from"} <= seen("mail")  # derived
    assert {f.name for f in dataclasses.fields(notify_settings.ChatSettings)} <= seen("chat")
    assert {f.name for f in dataclasses.fields(notify_settings.NotifySettings)} \
        - {"connections", "routes", "chat", "base_url", "_targets"} <= seen("notify")
    assert {"irc", "matrix", "route"} <= seen("notify")  # the connections' and routes' tables
    assert {f.name for f in dataclasses.fields(LoreSettings)} - {"seen_window", "limits"} <= seen("lore")  # not configurable
    assert {f.name for f in dataclasses.fields(TrustSettings)} <= seen("trust")
    assert {f.name for f in dataclasses.fields(IngestLimits)} <= seen("ingest")
    assert {"base_url"} <= seen("web") and {"db"} <= seen("storage") and {"repos"} <= seen("kernel")
    # 2. declarative lists of the lab
    from bot.tracker.kernel_tree import TreeSpec

    fields = lambda cls: {f.name for f in dataclasses.fields(cls)}  # noqa: E731
    from bot.lab.backends import BUILTIN

    backends = set(BUILTIN)
    assert {"qemu", "ssh", "lkp", "lava"} <= backends
    keys |= {("kernel.repos", k) for k in fields(TreeSpec)}
    keys |= {("lab", k) for k in (*lab_plan.DEFAULTS, *lab_settings.SCHED_DEFAULTS, *fields(Limits), *backends)}
    keys |= {("lab.timeouts", k) for k in fields(Timeouts)}
    keys |= {("lab.builds", k) for k in lab_plan.BUILD_SETTINGS}
    keys |= {("lab.qemu", k) for k in fields(QemuConfig)}
    keys |= {("lab.ssh", k) for k in SSH_KEYS}
    keys |= {("lab.lkp", k) for k in LKP_KEYS}
    keys |= {("lab.lava", k) for k in fields(LavaConfig)}
    # 3. [lab] options read by the service's policy (lab.get("auto_rerun") ...)
    for path in (REPO / "bot").rglob("*.py"):
        for key in re.findall(r'\blab(?:_section\([^()]*\))?\.get\(\s*"(\w+)"', path.read_text()):
            keys.add(("lab", key))
    assert {("lab", "auto_rerun"), ("lab", "auto_rerun_kinds"), ("lab", "auto_rerun_max_age_hours")} <= keys
    return keys


def _run_service(monkeypatch, cli) -> Service:
    """``regtriage --config deploy/regtriage.toml run --no-web`` up to the event loop: the real
    Service and install_hooks (lab scheduler, replies, notifications) on the example."""
    started: list[Service] = []
    logging_args: list = []

    async def no_loop(self):
        started.append(self)
        return 0

    monkeypatch.setattr(Service, "run", no_loop)
    monkeypatch.setattr("bot.service.run.setup_logging", lambda *a: logging_args.append(a))
    result = cli("--config", EXAMPLE, "run", "--no-web")
    assert result.exit_code == 0, result.output
    assert logging_args == [(False, "INFO")]
    return started[0]


# ------------------------------------------------------------------------- tests: valid
def test_files_parse_and_the_parser_sees_every_active_key():
    for path in FILES:
        data = load_toml(path)
        flat: dict = {}
        _flatten("", data, flat, None)
        found = {k for k, where in documented(path.read_text(), path.name).items()}
        assert set(flat) <= found, f"{path.name}: keys the line parser missed: {set(flat) - found}"


def test_example_loads_with_the_values_written(home, no_trees):
    cfg = bot.config.load(str(EXAMPLE))
    assert cfg.path == EXAMPLE and cfg.home == home and cfg.db_url.startswith("sqlite:///")
    out = run_loaders(cfg)
    assert out["contact"] == "regressions@example.org"
    assert out["lore"].user_agent.endswith("(+regressions@example.org)") and out["lore"].max_pages == 50
    assert out["trees"] is None  # [kernel] repos is commented out
    mail = out["mail"]
    assert (mail.from_addr, mail.smtp_host, mail.smtp_port, mail.hourly_limit) == \
        ("regtriage@example.org", "smtp.example.org", 587, 5)
    assert mail.allowed_lists == ("linux-mm@kvack.org",) and mail.outbox == home / "outbox"
    assert mail.base_url == "https://regtriage.example.org"
    assert out["replies"] == ("dry-run", ("confirmed", "not-reproduced"))
    assert (out["service"].poll_interval, out["service"].tick) == (600.0, 5.0)
    n = out["notify"]
    assert n.max_age_hours == 48.0 and n.base_url == "https://regtriage.example.org"
    irc, = n.irc
    assert (irc.name, irc.server, irc.port, irc.tls, irc.channels) == ("example", "irc.example.org", 6697, True,
                                                                         ["#regressions"])
    assert irc.sasl_password.env == "REGTRIAGE_IRC_SASL" and irc.username == "regtriage"
    mx, = n.matrix
    assert (mx.homeserver, mx.access_token.env, mx.threads) == ("https://matrix.example.org",
                                                                "REGTRIAGE_MATRIX_TOKEN", "auto")
    route, = n.routes
    assert route.events == ("confirmed", "not-reproduced", "fix-landed")
    assert (route.subsystems, route.kinds) == (("mm",), ("performance",))
    assert route.targets == ("irc:#regressions", "matrix:#regressions:example.org")
    assert n.chat.admins == ["nick!user@host.example.org", "@alice:example.org"] and n.chat.prefix == "!regtriage"
    assert out["sched"]["poll_interval_s"] == 10 and out["sched"]["on_no_match"] == "decline"
    assert out["sched"]["job_timeout_s"] is None
    assert out["machines"] == []  # the machines are in lab-example.toml


def test_lab_example_loads_with_the_values_written(home):
    cfg = Config(home=home, db_url="sqlite://", path=LAB_EXAMPLE, data=load_toml(LAB_EXAMPLE))
    out = run_loaders(cfg)
    assert [m.name for m in out["machines"]] == ["qemu-tcg-1", "xeon-6238m", "altra"]
    assert [m.enabled for m in out["machines"]] == [True, False, False]  # the two hosts are examples
    assert (out["lab"]["runs"], out["lab"]["alpha"], out["lab"]["timeouts"].total_s) == (5, 0.01, 7200)
    assert out["limits"] == Limits(1 << 30, 64, 600, True)
    assert out["builds"].builds_dir == "/srv/kernels" and out["builds"].arch == "x86_64"
    assert out["builds"].resolve("6.1.0-47")[0].describe() == "debian:linux-image-6.1.0-47-amd64-unsigned"
    assert out["backends"]["qemu-tcg-1"].cfg.accel == "tcg"
    assert out["backends"]["xeon-6238m"].cfg.machines["default"].host == "xeon-6238m.lab.example.org"


def test_merged_example_starts_the_service_with_every_part(home, monkeypatch, cli):
    lab_example = load_toml(LAB_EXAMPLE)
    monkeypatch.setattr(bot.config, "tomllib", types.SimpleNamespace(
        load=lambda fh: _merge(lab_example, tomllib.load(fh)), TOMLDecodeError=tomllib.TOMLDecodeError))
    svc = _run_service(monkeypatch, cli)
    assert (svc.host, svc.port, svc.web, svc.poll_interval, svc.tick) == ("127.0.0.1", 8080, False, 600.0, 5.0)
    assert svc.hooks["steps"]["lab"][1] == 10.0 and svc.hooks["steps"]["notify"][1] == 5.0
    assert "enqueue_event" in svc.hooks and "schedule_rerun" in svc.hooks


def test_commented_out_tables_are_valid(home):
    blocks = commented_blocks(EXAMPLE.read_text())
    assert set(blocks["lab"]) == {"qemu", "ssh", "lkp", "lava", "machines"}
    qemu = QemuBackend.from_config(blocks)
    assert (qemu.cfg.accel, qemu.cfg.max_memory_mib, qemu.cfg.cpu) == ("auto", 4096, "host")
    ssh = SshBackend.from_config(blocks)
    assert ssh.cfg.machine == "box1" and set(ssh.cfg.machines) == {"box1", "default"}
    box1 = ssh.cfg.machines["box1"]
    assert (box1.host, box1.scratch_dir, box1.user, box1.port) == ("box1.lab.example.org", "/srv/scratch", "bench", 22)
    lkp = LkpBackend.from_config(blocks)
    assert lkp.lkp == {"lkp_command": "lkp", "extra_programs": ["dd"], "testbox": "box1", "disk": "1HDD", "fs": "ext4"}
    lava = LavaBackend.from_config(blocks)
    assert lava.cfg.url == "https://lava.example.org/" and lava.cfg.token_env == "REGTRIAGE_LAVA_TOKEN"
    machine, = load_machines(blocks)
    assert (machine.name, machine.cpu.vendor, machine.cpu.family, machine.cores) == ("box1", "intel", "xeon", 88)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_commented_out_option_is_valid(path, home, no_trees):
    """Uncommenting any one ``# key = value`` of an active table still loads (with regtriage.toml
    and lab-example.toml merged, as the lab needs both)."""
    base = merged_data()
    tried = 0
    for table, option in commented_options(path.read_text()):
        if table.startswith(("lab.machines", "lab.ssh", "lab.lkp", "lab.lava")) or (
                table == "lab.qemu" and path == EXAMPLE):
            continue  # commented-out tables: test_commented_out_tables_are_valid
        data = copy.deepcopy(base)
        node = data
        for part in filter(None, table.split(".")):
            node = node.setdefault(part, {})
            if isinstance(node, list):
                node = node[-1]  # the array-of-tables entry the comment sits in
        node.update(option)
        try:
            out = run_loaders(Config(home=home, db_url="sqlite://", path=path, data=data))
        except Exception as exc:  # noqa: BLE001 - the message says which option
            pytest.fail(f"{path.name} [{table}] {option}: {exc.__class__.__name__}: {exc}")
        tried += 1
        if table == "kernel":
            assert [(s.name, s.mainline, s.ref) for s in out["trees"].specs] == \
                [("mainline", True, "master"), ("linux-next", False, "HEAD")]
    assert tried >= (30 if path == EXAMPLE else 5)


# ------------------------------------------------------------------------- tests: complete
def test_every_option_the_code_reads_is_documented(home, monkeypatch, cli, no_trees):
    required = read_keys(monkeypatch, cli)
    docs = documented_all()
    missing = sorted(k for k in required if k not in docs)
    assert not missing, "options read by the code but not in deploy/*.toml: " + \
        ", ".join(f"[{t}] {k}" if t else k for t, k in missing)
    assert len(required) > 200  # the recording and the lists did find the options


def test_removing_any_option_from_the_examples_is_caught(home, monkeypatch, cli, no_trees):
    required = read_keys(monkeypatch, cli)
    texts = {p.name: p.read_text() for p in FILES}
    docs = documented_all(texts)
    checked = 0
    for key in sorted(required):
        where = docs[key]
        if any(kind == "header" for _, _, kind in where):
            continue  # a table documented by its header
        cut = {name: text.splitlines() for name, text in texts.items()}
        for name, n, _ in where:
            cut[name][n - 1] = ""
        assert key not in documented_all({name: "\n".join(lines) for name, lines in cut.items()}), key
        checked += 1
    assert checked > 200


def test_removing_one_line_fails_the_completeness_check():
    text = EXAMPLE.read_text()
    assert ("notify", "max_age_hours") in documented(text, "x")
    cut = "\n".join(line for line in text.splitlines() if not line.startswith("max_age_hours"))
    assert ("notify", "max_age_hours") not in documented(cut, "x")
    cut = "\n".join(line for line in text.splitlines() if not line.startswith("# home ="))
    assert ("", "home") not in documented(cut, "x")


# ------------------------------------------------------------------------- tests: safe
def _strings(value, key=""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v, key)
    elif isinstance(value, str):
        yield key, value


def test_examples_hold_no_secrets_and_only_illustrative_hosts():
    for path in FILES:
        text = path.read_text()
        docs = documented(text, path.name)
        assert not [k for k in docs if k[1] in FORBIDDEN], f"{path.name}: a secret key is written inline"
        values = [load_toml(path)] + [p for _, p in commented_options(text)]
        if path == EXAMPLE:
            values.append(commented_blocks(text))
        for key, value in (kv for v in values for kv in _strings(v)):
            if key.endswith("_env"):
                assert ENV_NAME.fullmatch(value), (key, value)
            hosts = re.findall(r"https?://([^/:\s]+)", value)
            if key in ("server", "smtp_host", "host"):
                hosts.append(value)
            if key in ("user_id", "rooms"):
                hosts.append(value.rsplit(":", 1)[-1])
            for host in hosts:
                assert host in ("localhost", "127.0.0.1") or host == "example.org" \
                    or host.endswith(".example.org"), f"{path.name}: {key} = {value!r} is not illustrative"
    data = load_toml(EXAMPLE)
    assert data["service"]["replies"] in ("off", "draft")


def test_example_configs_name_no_machine_that_does_not_exist():
    """Every machine of deploy/*.toml is either local (qemu, on this host) or tagged "example"
    and disabled; an enabled "example" machine is refused by the loader."""
    import pytest

    from bot.lab.inventory import InventoryError

    seen = 0
    for path in sorted((REPO / "deploy").glob("*.toml")):
        for m in load_machines({"lab": load_toml(path).get("lab", {})}):
            seen += 1
            if m.backend != "qemu":
                assert "example" in m.tags and not m.enabled, (path.name, m.name)
            elif m.enabled:
                assert "example" not in m.tags
    assert seen >= 3
    bad = {"lab": {"machines": [{"name": "x", "arch": "x86_64", "backend": "ssh", "tags": ["example"]}]}}
    with pytest.raises(InventoryError, match="tagged 'example'"):
        load_machines(bad)
