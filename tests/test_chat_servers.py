"""Chat notifications against REAL servers on 127.0.0.1: ngircd (Debian package) and Synapse
(PyPI, in its own venv under ~/.cache/regtriage-test, made on first use), both started by
module fixtures as in /work/shared/docs/chat-servers.md.

Records come through the real pipeline (mail -> Ingester -> triage -> tracker).  Listener
clients sit in every channel and room and check that an event reaches the right ones and
not the others; chat queries get the right answers; notifications queued while a server is
down arrive exactly once when it is back on the same port (also with a fresh deliverer on the
same database, and after a crash between "accepted" and "marked sent"); only allow-listed
users can rerun/resolve; ``regtriage notify --test`` fails naming the target that is down.

Skipped only when the servers cannot be installed here (not root and no ngircd / no network
for Synapse); under CI (``$CI``) that is a failure instead.
"""

from __future__ import annotations

import asyncio
import base64
import fcntl
import hashlib
import hmac
import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from sqlalchemy import select

from bot.cli.main import main

if "notify" not in main.commands:  # until bot/cli/main.py wires it in
    from bot.cli.notify import register

    register(main)

pytest.importorskip("nio")
pytest.importorskip("pydle")

SYNAPSE_VERSION = "1.163.2"
CACHE = Path(os.environ.get("REGTRIAGE_TEST_CACHE") or Path.home() / ".cache" / "regtriage-test")
NGIRCD = shutil.which("ngircd") or "/usr/sbin/ngircd"
SECRET = "test-shared-secret"
BOT_PW = "bot-Pa55word-never-logged"
IN_CI = bool(os.environ.get("CI"))


def unavailable(reason: str):
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


# -- servers ---------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_tcp(port: int, proc: subprocess.Popen, timeout: float = 30) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited rc={proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(port)


def wait_http(url: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited rc={proc.returncode}")
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(url)


def stop_proc(proc: subprocess.Popen | None, timeout: float = 10) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()  # SIGTERM to this PID only
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def self_signed(d: Path) -> tuple[Path, Path]:
    """A self-signed certificate (also its own CA) for 127.0.0.1."""
    cert, key = d / "cert.pem", d / "key.pem"
    if shutil.which("openssl"):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1", "-addext", "basicConstraints=critical,CA:TRUE"],
                       check=True, capture_output=True)
    else:
        import datetime
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        k = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
        now = datetime.datetime.now(datetime.timezone.utc)
        c = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(k.public_key())
             .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
             .not_valid_after(now + datetime.timedelta(days=2))
             .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
             .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
             .sign(k, hashes.SHA256()))
        cert.write_bytes(c.public_bytes(serialization.Encoding.PEM))
        key.write_bytes(k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()))
    os.chmod(cert, 0o644)
    os.chmod(key, 0o644)  # a test key: ngircd reads it as nobody
    return cert, key


class Ngircd:
    def __init__(self, d: Path) -> None:
        self.dir = d
        self.port = free_port()
        self.tls_port = free_port()
        self.proc: subprocess.Popen | None = None
        os.chmod(d, 0o777)  # as root ngircd drops to nobody; the pidfile must be writable
        self.cert, key = self_signed(d)
        (d / "ngircd.conf").write_text(f"""[Global]
Name = irc.test.local
Info = test ircd
Listen = 127.0.0.1
Ports = {self.port}
MotdPhrase = "test"
PidFile = {d}/ngircd.pid
ServerUID = nobody
ServerGID = nogroup
[Limits]
MaxConnectionsIP = 0
MaxJoins = 0
MaxPenaltyTime = 0
[Options]
PAM = no
Ident = no
DNS = no
[SSL]
CertFile = {self.cert}
KeyFile = {key}
Ports = {self.tls_port}
""")
        os.chmod(d / "ngircd.conf", 0o644)

    def start(self) -> None:
        log = open(self.dir / "ngircd.log", "a")
        for _ in range(50):  # the old process may still hold the port for a moment
            self.proc = subprocess.Popen([NGIRCD, "-n", "-p", "-f", str(self.dir / "ngircd.conf")], stdout=log,
                                         stderr=subprocess.STDOUT)
            try:
                wait_tcp(self.port, self.proc, 15)
                wait_tcp(self.tls_port, self.proc, 15)
                return
            except RuntimeError:
                time.sleep(0.1)
        raise RuntimeError("ngircd does not start: " + (self.dir / "ngircd.log").read_text()[-2000:])

    def stop(self) -> None:
        stop_proc(self.proc)
        self.proc = None


def _synapse_ok(py: Path) -> bool:
    if not py.exists():
        return False
    r = subprocess.run([str(py), "-c", "import importlib.metadata as m; print(m.version('matrix-synapse'))"],
                       capture_output=True, text=True)
    return r.returncode == 0 and r.stdout.strip() == SYNAPSE_VERSION


def synapse_python() -> Path:
    """The python of a venv with matrix-synapse==SYNAPSE_VERSION (made once, then reused)."""
    if os.environ.get("SYNAPSE_PYTHON"):
        return Path(os.environ["SYNAPSE_PYTHON"])
    venv = CACHE / "synapse-venv"
    py = venv / "bin" / "python"
    if _synapse_ok(py):
        return py
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "synapse-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one maker at a time (parallel test runs)
        if _synapse_ok(py):
            return py
        tmp = Path(tempfile.mkdtemp(prefix="synapse-venv.", dir=CACHE))
        base = getattr(sys, "_base_executable", None) or shutil.which("python3") or sys.executable
        try:
            subprocess.run([base, "-m", "venv", str(tmp)], check=True, capture_output=True, timeout=300)
            subprocess.run([str(tmp / "bin" / "python"), "-m", "pip", "install", "-q", "--only-binary", ":all:",
                            f"matrix-synapse=={SYNAPSE_VERSION}"], check=True, capture_output=True, timeout=900)
        except (subprocess.SubprocessError, OSError) as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            out = getattr(exc, "stderr", b"") or b""
            unavailable(f"cannot install matrix-synapse=={SYNAPSE_VERSION} into its venv: {exc} "
                        f"{out.decode(errors='replace')[-500:]}")
        if venv.exists():
            shutil.rmtree(venv, ignore_errors=True)
        tmp.rename(venv)
    return py


class Synapse:
    def __init__(self, python: Path) -> None:
        base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None  # tmpfs: no fsync cost
        self.dir = Path(tempfile.mkdtemp(prefix="rt-synapse-", dir=base))
        self.python = python
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        d = self.dir
        rl = "{per_second: 1000, burst_count: 1000}"
        (d / "homeserver.yaml").write_text(f"""server_name: localhost
pid_file: {d}/homeserver.pid
report_stats: false
listeners:
  - {{port: {self.port}, bind_addresses: ['127.0.0.1'], type: http, tls: false, x_forwarded: false,
     resources: [{{names: [client], compress: false}}]}}
database: {{name: sqlite3, args: {{database: {d}/homeserver.db}}}}
media_store_path: {d}/media_store
signing_key_path: {d}/localhost.signing.key
registration_shared_secret: {SECRET}
macaroon_secret_key: test-macaroon-secret
form_secret: test-form-secret
enable_registration: false
trusted_key_servers: []
suppress_key_server_warning: true
federation_domain_whitelist: []
presence: {{enabled: false}}
bcrypt_rounds: 4
rc_message: {rl}
rc_registration: {rl}
rc_room_creation: {rl}
rc_joins_per_room: {rl}
rc_login: {{address: {rl}, account: {rl}, failed_attempts: {rl}}}
rc_joins: {{local: {rl}, remote: {rl}}}
rc_invites: {{per_room: {rl}, per_user: {rl}, per_issuer: {rl}}}
""")
        seed = base64.b64encode(os.urandom(32)).decode().rstrip("=")
        (d / "localhost.signing.key").write_text(f"ed25519 a_test {seed}\n")

    def start(self) -> None:
        log = open(self.dir / "synapse.log", "a")
        self.proc = subprocess.Popen([str(self.python), "-m", "synapse.app.homeserver", "-c",
                                      str(self.dir / "homeserver.yaml")], stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_http(self.url + "/health", self.proc)
        except Exception:
            stop_proc(self.proc)
            raise RuntimeError("synapse does not start: " + (self.dir / "synapse.log").read_text()[-3000:])

    def stop(self) -> None:
        stop_proc(self.proc)
        self.proc = None

    def register(self, user: str, pw: str, admin: bool = False) -> None:
        ep = self.url + "/_synapse/admin/v1/register"
        nonce = json.load(urllib.request.urlopen(ep))["nonce"]
        kind = "admin" if admin else "notadmin"
        mac = hmac.new(SECRET.encode(), b"\0".join(x.encode() for x in (nonce, user, pw, kind)),
                       hashlib.sha1).hexdigest()
        req = urllib.request.Request(ep, json.dumps({"nonce": nonce, "username": user, "password": pw,
                                                     "admin": admin, "mac": mac}).encode(),
                                     {"Content-Type": "application/json"})
        json.load(urllib.request.urlopen(req))


@pytest.fixture(scope="module")
def ircd(tmp_path_factory):
    if not os.path.exists(NGIRCD) and os.geteuid() == 0 and shutil.which("apt-get"):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "ngircd"]
        if subprocess.run(cmd, env=env, capture_output=True, timeout=600).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, timeout=600)
            subprocess.run(cmd, env=env, capture_output=True, timeout=600)
    if not os.path.exists(NGIRCD):
        unavailable("ngircd is not installed and cannot be installed here (not root: make system-deps, "
                    "or apt-get install ngircd)")
    srv = Ngircd(tmp_path_factory.mktemp("ircd"))
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def synapse():
    py = synapse_python()
    srv = Synapse(py)
    srv.start()
    for user, pw in (("notifybot", BOT_PW), ("alice", "alicepw"), ("boss", "bosspw")):
        srv.register(user, pw)

    async def rooms():
        from nio import AsyncClient

        alice = AsyncClient(srv.url, "@alice:localhost")
        try:
            await alice.login("alicepw")
            out = {}
            for alias in ("regressions", "other"):
                r = await alice.room_create(alias=alias, name=alias, preset=__import__("nio").RoomPreset.public_chat)
                out[f"#{alias}:localhost"] = r.room_id
            return out
        finally:
            await alice.close()

    srv.rooms = asyncio.run(rooms())
    yield srv
    srv.stop()
    shutil.rmtree(srv.dir, ignore_errors=True)


# -- listener clients --------------------------------------------------------------------------------
class IrcUser:
    """A plain-socket IRC client in a thread: joins channels, records every PRIVMSG/NOTICE."""

    def __init__(self, port: int, nick: str, user: str = "tester") -> None:
        self.nick = nick
        self.sock = socket.create_connection(("127.0.0.1", port), 5)
        # the connect timeout must not stay on the socket: the reader would take 5 s without a
        # line (a quiet channel while the bot polls and triages) for a closed connection
        self.sock.settimeout(None)
        self.lines: "queue.Queue[str]" = queue.Queue()
        self.got: list[tuple[str, str, str, str]] = []  # (command, sender nick, target, text)
        self.joined: set[str] = set()
        self.welcome = threading.Event()
        self._lock = threading.Lock()
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()
        self.send(f"NICK {nick}")
        self.send(f"USER {user} 0 * :{nick}")
        assert self.welcome.wait(10), f"{nick}: no welcome"

    def send(self, line: str) -> None:
        self.sock.sendall((line + "\r\n").encode())

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            buf += data
            while b"\r\n" in buf:
                raw, buf = buf.split(b"\r\n", 1)
                line = raw.decode("utf-8", "replace")
                prefix, rest = "", line
                if line.startswith(":"):
                    prefix, _, rest = line[1:].partition(" ")
                cmd, _, params = rest.partition(" ")
                if cmd == "PING":
                    self.send("PONG " + params)
                elif cmd == "001":
                    self.welcome.set()
                elif cmd == "JOIN" and prefix.split("!")[0] == self.nick:
                    self.joined.add(params.lstrip(":").lower())
                elif cmd in ("PRIVMSG", "NOTICE") and "!" in prefix:
                    target, _, text = params.partition(" :")
                    with self._lock:
                        self.got.append((cmd, prefix.split("!")[0], target, text))

    def join(self, *chans: str) -> None:
        for c in chans:
            self.send(f"JOIN {c}")
        end = time.time() + 10
        while not all(c.lower() in self.joined for c in chans):
            assert time.time() < end, f"{self.nick}: cannot join {chans}"
            time.sleep(0.01)

    def say(self, target: str, text: str) -> None:
        self.send(f"PRIVMSG {target} :{text}")

    def messages(self, target: str | None = None, sender: str | None = None) -> list[str]:
        with self._lock:
            return [t for c, s, tg, t in self.got if (target is None or tg.lower() == target.lower())
                    and (sender is None or s == sender)]

    def wait_for(self, pred, timeout: float = 10.0):
        end = time.time() + timeout
        while time.time() < end:
            v = pred()
            if v:
                return v
            time.sleep(0.02)
        return pred()

    def close(self) -> None:
        try:
            self.send("QUIT :bye")
        except OSError:
            pass
        self.sock.close()


async def room_events(url: str, user: str, pw: str, room_id: str, limit: int = 100) -> list[dict]:
    """The m.room.message events of a room (oldest first), read as ``user``."""
    from nio import AsyncClient, RoomMessagesResponse

    c = AsyncClient(url, f"@{user}:localhost")
    try:
        await c.login(pw)
        await c.join(room_id)
        r = await c.room_messages(room_id, start="", limit=limit)
        assert isinstance(r, RoomMessagesResponse), r
        return [e.source for e in reversed(r.chunk) if e.source.get("type") == "m.room.message"]
    finally:
        await c.close()


def matrix_messages(synapse, alias: str, sender: str = "@notifybot:localhost") -> list[dict]:
    evs = asyncio.run(room_events(synapse.url, "alice", "alicepw", synapse.rooms[alias]))
    return [e for e in evs if e["sender"] == sender]


# -- records through the real pipeline ------------------------------------------------------------------
def mail(mid, subject, body, date, *, frm="Perf Tester <perf@example.org>", parent=None):
    head = f"From: {frm}\nTo: linux-kernel@vger.kernel.org\nSubject: {subject}\nMessage-ID: <{mid}>\nDate: {date}\n"
    if parent:
        head += f"In-Reply-To: <{parent}>\nReferences: <{parent}>\n"
    return (head + "\n" + body).encode()


CULPRIT = "54a6eb5c4765aa573a030ceeba2c14e3d2ea5706"
MM1 = mail("mm-1@example.org", "[REGRESSION] page_fault1 throughput regression in will-it-scale since v6.8", """Hi,

Since v6.8 we see a 15% drop in will-it-scale page_fault1 throughput on an AMD EPYC 7763 box.
v6.7 is fine. I am bisecting now.
""", "Mon, 04 Mar 2024 10:00:00 +0000")
MM2 = mail("mm-2@example.org", "Re: [REGRESSION] page_fault1 throughput regression in will-it-scale since v6.8",
           f"""The bisect finished. The first bad commit is:

commit {CULPRIT}
    mm: use zonelist_zone() to get zone

Reverting it on top of v6.8 restores the throughput.
""", "Tue, 05 Mar 2024 10:00:00 +0000", frm="Andrew Morton <akpm@linux-foundation.org>", parent="mm-1@example.org")
FS1 = mail("fs-1@example.org", "[REGRESSION] ext4: fsync returns EIO after remount since v6.9", """Hi,

Since v6.9, fsync() on ext4 returns EIO after a remount,ro cycle. v6.8 is fine.
The first bad commit is 0123456789abcdef0123456789abcdef01234567 ("ext4: rework remount").
""", "Fri, 08 Mar 2024 10:00:00 +0000", frm="Fs Tester <fs@example.org>")
# a hostile title: markup and IRC control characters must not pass through
MM3 = mail("mm-3@example.org", "[REGRESSION] mm: <script>alert(1)</script> \x02bold\x02 [x](javascript:alert(1)) "
           "page_fault2 throughput drop since v6.8", """Hi,

Since v6.8 will-it-scale page_fault2 throughput dropped by 9% on a Xeon box. v6.7 is fine.
""", "Sat, 09 Mar 2024 10:00:00 +0000")


def build(store, *raws) -> None:
    from bot.sources.ingest import Ingester
    from bot.tracker.records import update_tracker
    from bot.triage.runner import triage_pending

    ing = Ingester(store, workers=1)
    for raw in raws:
        ing.add(raw, "test")
    ing.flush()
    triage_pending(store)
    update_tracker(store, None, fixes=False)


def rid_of(store, msgid: str) -> int:
    import storage.tracker_schema as ts

    with store.engine.connect() as conn:
        rid = conn.execute(select(ts.regressions.c.id).where(ts.regressions.c.report_message_id == msgid)).scalar()
    assert rid is not None, f"no record for {msgid}"
    return rid


@pytest.fixture
def records(tmp_path):
    from storage.store import Store

    s = Store(f"sqlite:///{tmp_path / 'regtriage.sqlite3'}")
    build(s, MM1, MM2, FS1, MM3)
    ids = {"mm": rid_of(s, "mm-1@example.org"), "fs": rid_of(s, "fs-1@example.org"),
           "hostile": rid_of(s, "mm-3@example.org")}
    yield s, ids
    s.close()


# -- config ---------------------------------------------------------------------------------------------
BASE = "https://regtriage.test"


def config_text(ircd, synapse, *, irc_channels=("#mm-regressions", "#fs", "#quiet"), admins=(), extra="",
                irc_port=None, hs=None) -> str:
    chans = ", ".join(json.dumps(c) for c in irc_channels)
    return f"""
[web]
base_url = "{BASE}"

[notify]
retry_base = 1
retry_max = 2
send_timeout = 8
lease = 30
watch_tracker = false

[[notify.irc]]
name = "test"
server = "127.0.0.1"
port = {irc_port or ircd.port}
tls = false
nick = "rtbot"
channels = [{chans}]
flood_burst = 50
flood_rate = 100
connect_timeout = 5
reconnect_min = 0.2
reconnect_max = 1

[[notify.matrix]]
homeserver = "{hs or synapse.url}"
user_id = "@notifybot:localhost"
password_env = "RT_TEST_MATRIX_PW"
device_id = "RTTESTDEVICE"
rooms = ["#regressions:localhost", "#other:localhost"]
request_timeout = 8

[[notify.route]]
events = ["confirmed", "fix-landed"]
subsystem = "mm/"
targets = ["irc:#mm-regressions", "matrix:#regressions:localhost"]

[[notify.route]]
events = ["confirmed"]
subsystem = "fs/"
kind = "functional"
targets = ["irc:#fs", "matrix:#other:localhost"]

[chat]
admins = [{", ".join(json.dumps(a) for a in admins)}]
max_lines = 2
user_rate = 50
user_burst = 50
channel_rate = 50
channel_burst = 50
{extra}
"""


@pytest.fixture
def settings_for(ircd, synapse, monkeypatch):
    monkeypatch.setenv("RT_TEST_MATRIX_PW", BOT_PW)

    def make(**kw):
        import tomllib

        from bot.notify.settings import load_settings

        return load_settings(tomllib.loads(config_text(ircd, synapse, **kw)))

    return make


# -- tests ------------------------------------------------------------------------------------------------
def test_event_reaches_the_right_room_and_channel_only(records, ircd, synapse, settings_for):
    from bot.notify.deliver import deliver_pending
    from bot.notify.outbox import enqueue_event, list_notifications

    store, ids = records
    s = settings_for()
    before = {a: len(matrix_messages(synapse, a)) for a in synapse.rooms}
    lis = IrcUser(ircd.port, "lis1")
    lis.join("#mm-regressions", "#fs", "#quiet")
    try:
        made = enqueue_event(store, "confirmed", ids["mm"], settings=s)
        assert sorted(m["target"] for m in made) == ["irc:#mm-regressions", "matrix:#regressions:localhost"]
        assert all(m["created"] for m in made)
        # the same event again (another process, a restart): nothing new
        assert not any(m["created"] for m in enqueue_event(store, "confirmed", ids["mm"], settings=s))
        stats = deliver_pending(store, settings=s)
        assert stats["sent"] == 2 and stats["retry"] == 0, stats
        got = lis.wait_for(lambda: lis.messages("#mm-regressions", "rtbot"))
        assert len(got) == 1
        line = got[0]
        assert line.startswith(f"confirmed #{ids['mm']}: [REGRESSION] page_fault1 throughput regression")
        assert f"{BASE}/regressions/{ids['mm']}" in line and "[mm]" in line
        # the other channels heard nothing
        time.sleep(0.3)
        assert lis.messages("#fs") == [] and lis.messages("#quiet") == []
        after = {a: matrix_messages(synapse, a) for a in synapse.rooms}
        new = after["#regressions:localhost"][before["#regressions:localhost"]:]
        assert len(new) == 1 and len(after["#other:localhost"]) == before["#other:localhost"]
        c = new[0]["content"]
        assert c["msgtype"] == "m.notice" and c["format"] == "org.matrix.custom.html"
        assert c["body"].startswith(f"[regtriage] confirmed: regression #{ids['mm']}")
        assert f"{BASE}/regressions/{ids['mm']}" in c["body"]
        assert "<strong>Regression #" in c["formatted_body"] and CULPRIT in c["formatted_body"]
        first_event = new[0]["event_id"]
        rows = {r["target"]: r for r in list_notifications(store)}
        assert rows["matrix:#regressions:localhost"]["remote_id"] == first_event
        assert {r["state"] for r in rows.values()} == {"sent"}

        # a follow-up on the same regression: threaded under the first event in Matrix
        enqueue_event(store, "fix-landed", ids["mm"], settings=s)
        # fs/ functional confirmed: the other room and channel only
        enqueue_event(store, "confirmed", ids["fs"], settings=s)
        stats = deliver_pending(store, settings=s)
        assert stats["sent"] == 4, stats
        assert lis.wait_for(lambda: len(lis.messages("#mm-regressions", "rtbot")) == 2)
        assert lis.wait_for(lambda: lis.messages("#fs", "rtbot"))
        assert "fix landed #" in lis.messages("#mm-regressions", "rtbot")[1]
        assert lis.messages("#fs", "rtbot")[0].startswith(f"confirmed #{ids['fs']}: ")
        time.sleep(0.2)
        assert lis.messages("#quiet") == []
        after2 = {a: matrix_messages(synapse, a) for a in synapse.rooms}
        follow = after2["#regressions:localhost"][-1]
        rel = follow["content"]["m.relates_to"]
        assert rel["rel_type"] == "m.thread" and rel["event_id"] == first_event
        assert rel["m.in_reply_to"]["event_id"] == first_event
        other = after2["#other:localhost"]
        assert len(other) == before["#other:localhost"] + 1
        assert other[-1]["content"]["body"].startswith(f"[regtriage] confirmed: regression #{ids['fs']}")
        assert "m.relates_to" not in other[-1]["content"]

        # a hostile title: no markup in the HTML, no IRC control characters
        enqueue_event(store, "confirmed", ids["hostile"], settings=s)
        assert deliver_pending(store, settings=s)["sent"] == 2
        hostile_line = lis.wait_for(lambda: [m for m in lis.messages("#mm-regressions", "rtbot") if "page_fault2" in m])
        assert hostile_line and "\x02" not in hostile_line[0]
        html = matrix_messages(synapse, "#regressions:localhost")[-1]["content"]["formatted_body"]
        assert "<script" not in html and "javascript:" not in html.replace("javascript:alert", "") \
            and 'href="javascript' not in html and "&lt;script&gt;" in html
    finally:
        lis.close()


class BotThread:
    """The notification service (adapters listening for chat) in its own event loop thread."""

    def __init__(self, store, settings) -> None:
        from bot.service.notify import NotifyService

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.svc = self.call(self._make(NotifyService, store, settings))

    @staticmethod
    async def _make(cls, store, settings):
        return cls(store, settings)

    def call(self, coro, timeout: float = 60):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> dict:
        errors = self.call(self.svc.start())
        m = self.svc.adapters[("matrix", "@notifybot:localhost")]
        self.call(asyncio.wait_for(m.synced.wait(), 20))
        return errors

    def close(self) -> None:
        try:
            self.call(self.svc.stop(), 30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


async def matrix_say_and_wait(synapse, user: str, pw: str, alias: str, text: str, timeout: float = 15) -> list[dict]:
    """Post ``text`` as ``user`` and return the bot's answers that follow it."""
    from nio import AsyncClient, RoomMessagesResponse

    room = synapse.rooms[alias]
    c = AsyncClient(synapse.url, f"@{user}:localhost")
    try:
        await c.login(pw)
        await c.join(room)
        sent = await c.room_send(room, "m.room.message", {"msgtype": "m.text", "body": text})
        end = time.time() + timeout
        while time.time() < end:
            r = await c.room_messages(room, start="", limit=30)
            assert isinstance(r, RoomMessagesResponse), r
            evs = [e.source for e in reversed(r.chunk) if e.source.get("type") == "m.room.message"]
            ids = [e["event_id"] for e in evs]
            after = evs[ids.index(sent.event_id) + 1:] if sent.event_id in ids else []
            answers = [e for e in after if e["sender"] == "@notifybot:localhost"]
            if answers:
                return answers
            await asyncio.sleep(0.1)
        return []
    finally:
        await c.close()


def test_chat_queries_and_allow_list(records, ircd, synapse, settings_for):
    from bot.tracker.records import get_record

    store, ids = records
    s = settings_for(admins=["boss!*@*", "@boss:localhost"])
    bot = BotThread(store, s)
    users = []
    try:
        assert bot.start() == {"irc:test": None, "matrix:@notifybot:localhost": None}
        asker = IrcUser(ircd.port, "asker")
        boss = IrcUser(ircd.port, "boss")
        users += [asker, boss]
        for u in users:
            u.join("#mm-regressions")

        # a query in IRC: the open mm/ regressions, short lines with links
        asker.say("#mm-regressions", "!regtriage open mm/")
        ans = asker.wait_for(lambda: asker.messages("#mm-regressions", "rtbot"))
        assert len(ans) == 2, ans  # the two mm/ records, not the fs/ one
        assert {a.split(" ")[0] for a in ans} == {f"#{ids['mm']}", f"#{ids['hostile']}"}
        assert all(a.split(" ")[-1].startswith(f"{BASE}/regressions/") for a in ans)
        assert all("\x02" not in a for a in ans)
        # addressed by name, natural language; more results than max_lines: "and K more: <link>"
        before = len(asker.messages("#mm-regressions", "rtbot"))
        asker.say("#mm-regressions", "rtbot: regressions")
        asker.wait_for(lambda: len(asker.messages("#mm-regressions", "rtbot")) >= before + 2)
        time.sleep(0.2)
        ans = asker.messages("#mm-regressions", "rtbot")[before:]
        assert len(ans) == 2 and ans[-1] == f"and 2 more: {BASE}/?q=regressions", ans
        # show
        before = len(asker.messages("#mm-regressions", "rtbot"))
        asker.say("#mm-regressions", f"!regtriage show {ids['fs']}")
        asker.wait_for(lambda: len(asker.messages("#mm-regressions", "rtbot")) >= before + 2)
        ans = asker.messages("#mm-regressions", "rtbot")[before:]
        assert ans[0].startswith(f"#{ids['fs']} [triaged] [REGRESSION] ext4: fsync returns EIO")
        assert "[fs/ext4]" in ans[0] and ans[0].endswith(f"{BASE}/regressions/{ids['fs']}")
        # lines that are not addressed to the bot get no answer
        before = len(asker.messages("#mm-regressions", "rtbot"))
        asker.say("#mm-regressions", "open mm/ regressions anyone?")
        time.sleep(0.5)
        assert len(asker.messages("#mm-regressions", "rtbot")) == before

        # not allow-listed: refused, record unchanged
        status = get_record(store, ids["mm"])["status"]
        hist = len(get_record(store, ids["mm"])["history"])
        before = len(asker.messages("#mm-regressions", "rtbot"))
        asker.say("#mm-regressions", f"!regtriage resolve {ids['mm']} not a bug")
        asker.say("#mm-regressions", f"!regtriage rerun {ids['mm']}")
        asker.wait_for(lambda: len(asker.messages("#mm-regressions", "rtbot")) >= before + 2)
        refusals = asker.messages("#mm-regressions", "rtbot")[before:]
        assert len(refusals) == 2 and all("only for allow-listed users" in r for r in refusals), refusals
        rec = get_record(store, ids["mm"])
        assert rec["status"] == status and len(rec["history"]) == hist
        # allow-listed (boss!*@*): rerun is recorded through ChatActions
        before = len(boss.messages("#mm-regressions", "rtbot"))
        boss.say("#mm-regressions", f"!regtriage rerun {ids['mm']}")
        got = boss.wait_for(lambda: boss.messages("#mm-regressions", "rtbot")[before:])
        assert got and got[0].startswith(f"#{ids['mm']}: rerun requested by boss"), got
        rec = get_record(store, ids["mm"])
        assert rec["status"] == "rerun-scheduled"
        assert rec["history"][-1]["actor"].startswith("irc:boss!") and rec["history"][-1]["source"] == "user"

        # Matrix: a query, a refused resolve (alice), an allowed resolve (boss)
        ans = asyncio.run(matrix_say_and_wait(synapse, "alice", "alicepw", "#regressions:localhost",
                                              "!regtriage open regressions in fs/"))
        assert len(ans) == 1 and ans[0]["content"]["msgtype"] == "m.notice"
        body = ans[0]["content"]["body"]
        assert body.startswith(f"#{ids['fs']} [triaged]") and body.count("\n") == 0
        assert f'<a href="{BASE}/regressions/{ids["fs"]}">' in ans[0]["content"]["formatted_body"]
        ans = asyncio.run(matrix_say_and_wait(synapse, "alice", "alicepw", "#regressions:localhost",
                                              f"notifybot: resolve {ids['fs']} works for me"))
        assert "only for allow-listed users" in ans[0]["content"]["body"]
        assert get_record(store, ids["fs"])["status"] == "triaged"
        ans = asyncio.run(matrix_say_and_wait(synapse, "boss", "bosspw", "#regressions:localhost",
                                              f"!regtriage resolve {ids['fs']} works for me"))
        assert ans[0]["content"]["body"].startswith(f"#{ids['fs']}: resolved by @boss:localhost")
        rec = get_record(store, ids["fs"])
        assert rec["status"] == "resolved" and rec["history"][-1]["actor"] == "matrix:@boss:localhost"
        assert rec["history"][-1]["note"] == "works for me"
    finally:
        for u in users:
            u.close()
        bot.close()


def test_outage_then_exactly_once(records, ircd, synapse, settings_for, monkeypatch):
    from bot.notify import deliver
    from bot.notify.deliver import deliver_pending
    from bot.notify.outbox import enqueue_event, list_notifications
    from storage.store import Store

    store, ids = records
    s = settings_for()
    room = "#regressions:localhost"
    n_room = len(matrix_messages(synapse, room))
    bot = BotThread(store, s)
    lis = None
    try:
        assert set(bot.start().values()) == {None}
        irc_adapter = bot.svc.adapters[("irc", "test")]
        # both servers go down while events happen
        ircd.stop()
        synapse.stop()
        enqueue_event(store, "confirmed", ids["mm"], settings=s)
        enqueue_event(store, "fix-landed", ids["mm"], settings=s)
        stats = bot.call(bot.svc.run_pass(scan=False))
        assert stats["sent"] == 0 and stats["retry"] + stats["waiting"] == 4, stats
        rows = list_notifications(store)
        assert {r["state"] for r in rows} == {"queued"}
        first = [r for r in rows if r["event"] == "confirmed"]
        assert all(r["attempts"] == 1 and r["last_error"] for r in first), first
        # another process (the CLI) tries too: still down, retried later, nothing lost
        stats = deliver_pending(store, settings=s, ignore_schedule=True)
        assert stats["sent"] == 0 and stats["retry"] >= 2, stats
        assert all(r["attempts"] == 2 for r in list_notifications(store) if r["event"] == "confirmed")
        assert BOT_PW not in json.dumps(list_notifications(store))

        # back on the same ports
        ircd.start()
        synapse.start()
        lis = IrcUser(ircd.port, "lis2")
        lis.join("#mm-regressions", "#fs", "#quiet")
        end = time.time() + 20
        while not (irc_adapter.connected and "#mm-regressions" in irc_adapter._joined):
            assert time.time() < end, f"the IRC adapter did not reconnect: {irc_adapter.last_error}"
            time.sleep(0.05)
        stats = bot.call(bot.svc.run_pass(scan=False, ignore_schedule=True))
        assert stats["sent"] == 4, stats
        # the service "restarts": a fresh deliverer on the same database sends nothing again,
        # and the same events reported again are not queued again
        bot.close()
        bot = None
        fresh = Store(store.url)
        try:
            assert not any(m["created"] for m in enqueue_event(fresh, "confirmed", ids["mm"], settings=s))
            stats = deliver_pending(fresh, settings=s, ignore_schedule=True)
            assert stats["due"] == 0 and stats["sent"] == 0, stats
        finally:
            fresh.close()
        lines = lis.wait_for(lambda: len(lis.messages("#mm-regressions", "rtbot")) >= 2 and
                             lis.messages("#mm-regressions", "rtbot"))
        time.sleep(0.3)
        lines = lis.messages("#mm-regressions", "rtbot")
        assert len(lines) == 2, lines
        assert lines[0].startswith(f"confirmed #{ids['mm']}:") and lines[1].startswith(f"fix landed #{ids['mm']}:")
        assert lis.messages("#fs") == [] and lis.messages("#quiet") == []
        msgs = matrix_messages(synapse, room)[n_room:]
        assert [m["content"]["body"].split("\n")[0] for m in msgs] == [
            f"[regtriage] confirmed: regression #{ids['mm']}: {t}" for t in
            ["[REGRESSION] page_fault1 throughput regression in will-it-scale since v6.8"]] + [
            f"[regtriage] fix landed: regression #{ids['mm']}: "
            "[REGRESSION] page_fault1 throughput regression in will-it-scale since v6.8"]
        assert msgs[1]["content"]["m.relates_to"]["event_id"] == msgs[0]["event_id"]
        assert all(r["attempts"] == 3 and r["state"] == "sent" for r in list_notifications(store)
                   if r["event"] == "confirmed")

        # a crash after the homeserver accepted a message but before it was marked sent:
        # the resend (same transaction id, same device, a new login) is deduplicated by the server
        n_room = len(matrix_messages(synapse, room))
        enqueue_event(store, "confirmed", ids["hostile"], settings=s)
        real_mark = deliver.Deliverer._mark_sent

        def crash(self, row, remote_id, thread_root):
            if row.target_kind == "matrix":
                raise KeyboardInterrupt("crash after the server accepted the message")
            return real_mark(self, row, remote_id, thread_root)

        monkeypatch.setattr(deliver.Deliverer, "_mark_sent", crash)
        with pytest.raises(KeyboardInterrupt):
            deliver_pending(store, settings=s)
        monkeypatch.setattr(deliver.Deliverer, "_mark_sent", real_mark)
        row = [r for r in list_notifications(store) if r["regression_id"] == ids["hostile"]
               and r["target"] == "matrix:" + room][0]
        assert row["state"] == "queued"
        assert deliver_pending(store, settings=s)["due"] == 0  # still leased by the crashed pass
        from datetime import timedelta

        from storage.store import utcnow

        stats = deliver_pending(store, settings=s, now=utcnow() + timedelta(seconds=s.lease + 1))
        assert stats["sent"] == 1, stats
        msgs = matrix_messages(synapse, room)[n_room:]
        assert len(msgs) == 1, [m["content"]["body"][:80] for m in msgs]
        row = [r for r in list_notifications(store) if r["id"] == row["id"]][0]
        assert row["state"] == "sent" and row["remote_id"] == msgs[0]["event_id"]
        assert len([m for m in lis.messages("#mm-regressions", "rtbot") if "page_fault2" in m]) == 1
    finally:
        if lis is not None:
            lis.close()
        if bot is not None:
            bot.close()
        if ircd.proc is None:
            ircd.start()
        if synapse.proc is None:
            synapse.start()


def test_cli_notify_test_send_pending_list(records, ircd, synapse, settings_for, cli, tmp_path, monkeypatch, caplog):
    import logging

    caplog.set_level(logging.DEBUG)
    store, ids = records
    monkeypatch.setenv("RT_TEST_MATRIX_PW", BOT_PW)
    cfg = tmp_path / "regtriage.toml"
    cfg.write_text(config_text(ircd, synapse) + f'\n[storage]\ndb = "{store.url}"\n')
    lis = IrcUser(ircd.port, "lis3")
    lis.join("#mm-regressions", "#fs", "#quiet")
    try:
        r = cli("notify", "--test", "--config", cfg)
        assert r.exit_code == 0, r.output
        for t in ("irc:#mm-regressions", "irc:#fs", "irc:#quiet", "matrix:#regressions:localhost",
                  "matrix:#other:localhost"):
            assert f"ok      {t}" in r.output
        assert lis.wait_for(lambda: all(lis.messages(c, "rtbot") for c in ("#mm-regressions", "#fs", "#quiet")))
        assert "regtriage test message for irc:#fs" in lis.messages("#fs", "rtbot")[0]
        assert "regtriage test message for matrix:#other:localhost" in \
            matrix_messages(synapse, "#other:localhost")[-1]["content"]["body"]

        # enqueue by hand, deliver, list
        r = cli("notify", "--enqueue", "confirmed", "--record", ids["fs"], "--config", cfg)
        assert r.exit_code == 0 and "-> irc:#fs: queued" in r.output, r.output
        r = cli("notify", "--send-pending", "--json", "--config", cfg)
        assert r.exit_code == 0, r.output
        assert json.loads(r.output)["sent"] == 2
        r = cli("notify", "--list", "--json", "--config", cfg)
        rows = json.loads(r.output)
        assert {(x["target"], x["state"]) for x in rows} == {("irc:#fs", "sent"), ("matrix:#other:localhost", "sent")}

        # IRC down: --test fails, naming every IRC target; Matrix still ok
        ircd.stop()
        r = cli("notify", "--test", "--config", cfg)
        assert r.exit_code == 1
        for t in ("irc:#mm-regressions", "irc:#fs", "irc:#quiet"):
            assert f"FAILED  {t}:" in r.output
        assert "ok      matrix:#regressions:localhost" in r.output
        assert "3 of 5 targets failed" in r.output
        # Matrix down, IRC back: the Matrix rooms are named
        ircd.start()
        synapse.stop()
        r = cli("notify", "--test", "--config", cfg)
        assert r.exit_code == 1
        assert "FAILED  matrix:#regressions:localhost:" in r.output and "FAILED  matrix:#other:localhost:" in r.output
        assert "ok      irc:#fs" in r.output and "2 of 5 targets failed" in r.output
        for text in (r.output, caplog.text):
            assert BOT_PW not in text and "syt_" not in text  # no password, no access token
    finally:
        lis.close()
        if ircd.proc is None:
            ircd.start()
        if synapse.proc is None:
            synapse.start()


def test_irc_tls_verified_with_the_servers_ca(ircd, tmp_path):
    from bot.notify.base import OutMessage, TransientError
    from bot.notify.irc import IrcAdapter
    from bot.notify.settings import load_settings

    def adapter(**kw):
        t = {"server": "127.0.0.1", "port": ircd.tls_port, "tls": True, "nick": "tlsbot", "channels": ["#tls"],
             "connect_timeout": 5, **kw}
        return IrcAdapter(load_settings({"notify": {"irc": [t]}}).irc[0])

    lis = IrcUser(ircd.port, "lis4")  # plain port, same server
    lis.join("#tls")
    try:
        async def go(a):
            try:
                await a.start(timeout=10)
                await a.send("#tls", OutMessage(text="over TLS"))
            finally:
                await a.stop()

        asyncio.run(go(adapter(tls_ca_file=str(ircd.cert))))
        assert lis.wait_for(lambda: lis.messages("#tls", "tlsbot")) == ["over TLS"]
        # verification is on by default: a self-signed server without its CA is refused
        with pytest.raises(TransientError, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            asyncio.run(go(adapter()))
    finally:
        lis.close()


def test_irc_nick_refused_falls_back_and_names_the_cause(ircd):
    """ngircd's NICKLEN is 9: an over-long nick gets 432, a taken one 433.  The adapter tries the
    configured alternatives, then the nick cut to fit; when nothing is left, `notify --test`'s
    error names the server's answer (not "timeout")."""
    from bot.notify.base import OutMessage
    from bot.notify.irc import IrcAdapter, nick_candidates
    from bot.notify.deliver import send_test
    from bot.notify.settings import load_settings

    def settings(**kw):
        t = {"server": "127.0.0.1", "port": ircd.port, "tls": False, "channels": ["#nicks"], "connect_timeout": 5, **kw}
        return load_settings({"notify": {"irc": [t], "send_timeout": 10}})

    async def go(a, text):
        try:
            await a.start(timeout=10)
            await a.send("#nicks", OutMessage(text=text))
            return a.nick
        finally:
            await a.stop()

    lis = IrcUser(ircd.port, "lis5")
    lis.join("#nicks")
    holders = []
    try:
        # over-long: 432, then the nick cut to the RFC's 9 characters
        assert asyncio.run(go(IrcAdapter(settings(nick="regtriage-notifier").irc[0]), "cut")) == "regtriage"
        assert lis.wait_for(lambda: lis.messages("#nicks", "regtriage")) == ["cut"]
        # a configured alternative comes first
        assert asyncio.run(go(IrcAdapter(settings(nick="regtriage-notifier", alt_nicks=["rtalt"]).irc[0]),
                              "alt")) == "rtalt"
        # taken: 433, then a suffix within the length
        holders.append(IrcUser(ircd.port, "rtbusy"))
        assert asyncio.run(go(IrcAdapter(settings(nick="rtbusy").irc[0]), "busy")) == "rtbusy_"
        # every candidate taken: the test message fails naming 433, not a timeout
        for n in nick_candidates("rtbusy")[1:]:
            holders.append(IrcUser(ircd.port, n))
        res = asyncio.run(send_test(settings(nick="rtbusy")))
        assert res and not res[0]["ok"]
        err = res[0]["error"]
        assert "433" in err and "nickname in use" in err and "no usable nick" in err and "timeout" not in err, err
    finally:
        lis.close()
        for h in holders:
            h.close()
