"""Hostile input never stops the ingest: the generated corpus (tests/hostile_corpus.py) through
the real ``regtriage ingest`` CLI, in its own process, on SQLite and on PostgreSQL; and the
single cases that need a closer look (decoding, limits, non-regular files, gzip, mboxo, names,
long ids, References, concurrency)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from bot.sources.mail import parse_message
from bot.sources.files import to_mboxrd
from tests import hostile_corpus

REPO = Path(__file__).resolve().parent.parent
MEMORY_LIMIT_KIB = 1_500_000  # peak RSS of the ingest and its parse workers


def run_cli(*args, db: str, home: Path, config: Path | None = None, timeout: float = 900):
    env = {k: v for k, v in os.environ.items() if not k.startswith("REGTRIAGE_")}
    env["REGTRIAGE_HOME"] = str(home)
    argv = [sys.executable, "-m", "bot.cli.main", "--db", db]
    if config is not None:
        argv += ["--config", str(config)]
    return subprocess.run(argv + [str(a) for a in args], capture_output=True, cwd=REPO, env=env,
                          timeout=timeout)


def stored_rows(db_url: str) -> list[tuple[str, bytes, str]]:
    from storage import schema
    from storage.store import Store

    store = Store(db_url)
    try:
        with store.engine.connect() as conn:
            return [tuple(r) for r in conn.execute(select(schema.messages.c.message_id, schema.messages.c.raw,
                                                          schema.messages.c.sha256))]
    finally:
        store.close()


# ------------------------------------------------------------------ the corpus, through the CLI
def test_hostile_corpus_through_the_cli(tmp_path, db_url):
    corpus = tmp_path / "corpus"
    man = hostile_corpus.generate(corpus)
    assert man.messages >= 200 and len(man.not_inputs) == 3
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.monotonic()
    r = run_cli("ingest", "--json", "--no-triage", corpus, db=db_url, home=tmp_path / "home")
    elapsed = time.monotonic() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    stderr = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 0, stderr
    assert "Traceback" not in stderr and "Error" not in stderr.replace("corrupt", "")
    counts = json.loads(r.stdout)
    assert counts["messages"] == man.messages, (counts, man.messages)
    assert counts["stored"] + counts["duplicates"] + counts["quarantined"] == man.messages
    assert counts["duplicates"] >= 4  # dup-2.eml, and the same mbox messages in three files
    # every non-input was skipped with its reason, without reading it (no hang on the FIFO)
    for path in man.not_inputs:
        assert f"{path.name}: skipped" in stderr
    assert "junk after the last gzip member" in stderr
    # raw bytes kept exactly for everything stored
    rows = stored_rows(db_url)
    assert len(rows) == counts["stored"]
    for mid, raw, sha in rows:
        assert hashlib.sha256(raw).hexdigest() == sha
        assert raw in man.raws, mid
    # bounded: a 1 GiB bomb and 40 MB messages do not need their size in memory (the fork
    # workers count too: RUSAGE_CHILDREN is the largest of the process tree)
    if peak > before:
        assert peak < MEMORY_LIMIT_KIB, f"peak RSS {peak} KiB"
    assert elapsed < 300


# ------------------------------------------------------------------ decoding
@pytest.mark.parametrize("cs", hostile_corpus.CODECS)
def test_non_text_codec_charsets_fall_back_with_a_problem(cs):
    raw = hostile_corpus.eml("c@h", subject=f"=?{cs}?q?abc?=", body="caf\udce9\n",
                             extra=f'Content-Type: text/plain; charset="{cs}"\n')
    p = parse_message(raw)
    assert p.reject is None and p.message_id == "c@h"
    if cs not in ("utf-16", "utf-7"):
        assert any("unknown charset" in x for x in p.problems), p.problems
        assert p.body.startswith("caf")


def test_rfc6532_utf8_headers_decode_as_utf8():
    p = parse_message("From: J\u00f6rg <j@x>\nSubject: h\u00e9llo \u2603\nMessage-ID: <\u00fc@x>\n\nb\n".encode())
    assert (p.subject, p.from_addr, p.message_id) == ("h\u00e9llo \u2603", "J\u00f6rg <j@x>", "\u00fc@x")
    assert dict(p.headers)["Subject"] == "h\u00e9llo \u2603" and not p.problems
    latin = parse_message(b"From: a@x\nSubject: caf\xe9\nMessage-ID: <l@x>\n\nb\n")
    assert latin.subject == "caf\u00e9" and any("latin-1" in x for x in latin.problems)


def test_nul_bytes_shown_and_noted():
    p = parse_message(b"From: a@x\nSubject: a\x00b\nMessage-ID: <n@x>\n\nx\x00y\n")
    assert p.subject == "a\u2400b" and p.body == "x\u2400y\n"
    assert any("NUL" in x for x in p.problems)


def test_long_message_ids_get_a_bounded_key_and_keep_the_whole():
    long_id = "L" * 5000 + "@h"
    p = parse_message(hostile_corpus.eml(long_id, extra=f"In-Reply-To: <{'P' * 3000}@h>\n"))
    assert len(p.message_id.encode()) <= 998 and p.message_id_full == long_id
    assert p.message_id == parse_message(hostile_corpus.eml(long_id, body="other\n")).message_id
    assert len(p.in_reply_to) <= 998
    # a reply that names the long id threads under its key
    child = parse_message(hostile_corpus.eml("child@h", extra=f"In-Reply-To: <{long_id}>\n"))
    assert child.in_reply_to == p.message_id


def test_100k_references_are_bounded_and_linear():
    refs = " ".join(f"<r{i}@h>" for i in range(100_000))
    t = time.perf_counter()
    p = parse_message(hostile_corpus.eml("m@h", extra=f"References: {refs}\n"))
    assert time.perf_counter() - t < 2
    assert len(p.references) == 64 and p.references[0] == "r0@h" and p.references[-1] == "r99999@h"
    assert any("100000 ids" in x for x in p.problems)


def test_parser_crash_is_quarantined_not_raised(monkeypatch):
    import bot.sources.mail

    def boom(raw):
        raise RecursionError("deep")

    monkeypatch.setattr(bot.sources.mail.email, "message_from_bytes", boom)
    p = parse_message(b"From: a@x\nMessage-ID: <x@x>\n\nb\n")
    assert p.reject and "nested too deeply" in p.reject


# ------------------------------------------------------------------ files and limits
def test_limits_come_from_the_config_and_quarantine_keeps_a_prefix(tmp_path):
    cfg = tmp_path / "regtriage.toml"
    cfg.write_text("[ingest]\nmax_message_bytes = 100000\nquarantine_prefix_bytes = 1000\n")
    big = hostile_corpus.eml("big@h", body="B" * 300_000)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "big.eml").write_bytes(big)
    (tmp_path / "in" / "ok.eml").write_bytes(hostile_corpus.eml("ok@h"))
    db = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    r = run_cli("ingest", "--json", "--no-triage", tmp_path / "in", db=db, home=tmp_path / "home", config=cfg)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"messages": 2, "stored": 1, "duplicates": 0, "quarantined": 1}
    q, = json.loads(run_cli("quarantine", "--json", db=db, home=tmp_path / "home").stdout)
    assert q["size"] == len(big) and q["kept"] == 1000
    assert q["sha256"] == hashlib.sha256(big).hexdigest()
    assert "max_message_bytes" in q["reason"]
    raw = run_cli("quarantine", "--raw", str(q["id"]), db=db, home=tmp_path / "home").stdout
    assert raw == big[:1000]
    cfg.write_text("[ingest]\nmax_message_bytes = -1\n")
    r = run_cli("ingest", tmp_path / "in", db=db, home=tmp_path / "home", config=cfg)
    assert r.returncode == 2 and b"max_message_bytes" in r.stderr and b"Traceback" not in r.stderr


def test_fifo_and_device_symlinks_are_skipped_never_read(cli, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    os.mkfifo(d / "pipe.eml")
    (d / "zero.eml").symlink_to("/dev/zero")
    (d / "ok.eml").write_bytes(hostile_corpus.eml("ok@h"))
    r = cli("ingest", "--json", "--no-triage", d)  # would hang on the FIFO, or eat memory
    assert r.exit_code == 0
    assert json.loads(r.stdout)["stored"] == 1
    assert "pipe.eml: skipped, a FIFO" in r.stderr and "zero.eml: skipped, a character device" in r.stderr
    # named explicitly, it is an input that cannot be read: the run fails, the others go on
    r = cli("ingest", "--json", "--no-triage", d / "zero.eml", d / "ok.eml")
    assert r.exit_code == 1 and json.loads(r.stdout)["duplicates"] == 1


def test_junk_after_gzip_keeps_the_last_message(cli, tmp_path):
    raws = [hostile_corpus.eml(f"g{i}@h") for i in range(3)]
    (tmp_path / "a.mbox.gz").write_bytes(gzip.compress(to_mboxrd(raws)) + b"trailing junk \x00\x01")
    r = cli("ingest", "--json", "--no-triage", tmp_path / "a.mbox.gz")
    assert r.exit_code == 0
    assert json.loads(r.stdout) == {"messages": 3, "stored": 3, "duplicates": 0, "quarantined": 0}
    assert "junk after the last gzip member" in r.stderr


def test_gzip_bomb_is_cut_fast(cli, tmp_path):
    (tmp_path / "b.mbox.gz").write_bytes(hostile_corpus._zero_bomb(
        1 << 30, b"From x Mon Jan  1 00:00:00 2024\nFrom: a@x\nMessage-ID: <bomb@h>\n\n"))
    t = time.perf_counter()
    r = cli("ingest", "--json", "--no-triage", tmp_path / "b.mbox.gz")
    assert time.perf_counter() - t < 10
    assert r.exit_code == 0 and json.loads(r.stdout)["quarantined"] == 1
    q, = json.loads(cli("quarantine", "--json").stdout)
    assert "max_compression_ratio" in q["reason"] and q["kept"] <= 1 << 20


def test_mboxo_unescaped_from_line_is_not_a_split(cli, tmp_path):
    o1 = hostile_corpus.eml("o1@h", body="Report:\n\nFrom the logs: slower.\nok\n")
    data = b"From a@x Mon Jan  1 00:00:00 2024\n" + o1 + b"\nFrom b@x Mon Jan  1 00:00:00 2024\n" + \
        hostile_corpus.eml("o2@h") + b"\n"
    (tmp_path / "o.mbox").write_bytes(data)
    r = cli("ingest", "--json", "--no-triage", tmp_path / "o.mbox")
    assert json.loads(r.stdout)["stored"] == 2
    shown = json.loads(cli("show", "--json", "o1@h").stdout)
    assert "From the logs: slower." in shown["body"]
    assert any("not escaped" in p for p in shown["problems"])


def test_file_name_not_utf8(cli, tmp_path, db_url):
    d = tmp_path / "in"
    d.mkdir()
    name = os.path.join(os.fsencode(d), b"caf\xe9-\xff.eml")
    with open(name, "wb") as fh:
        fh.write(hostile_corpus.eml("name@h"))
    r = cli("ingest", "--json", "--no-triage", d, db=db_url)
    assert r.exit_code == 0 and json.loads(r.stdout)["stored"] == 1
    shown = json.loads(cli("show", "--json", "name@h", db=db_url).stdout)
    assert shown["origin"].endswith("caf\\xe9-\\xff.eml")


def test_database_refusal_costs_only_that_message(store, monkeypatch):
    """A message the database refuses (whatever the reason) is quarantined alone; its
    neighbours in the batch are stored."""
    from bot.sources.ingest import Ingester

    real = store.write_batch

    def picky(parsed, rejected, cursor=None, **kw):
        if any(p.message_id == "bad@h" for p, _, _ in parsed):
            from sqlalchemy.exc import DataError
            raise DataError("INSERT", {}, ValueError("refused"))
        return real(parsed, rejected, cursor, **kw)

    monkeypatch.setattr(store, "write_batch", picky)
    ing = Ingester(store, batch_size=10)
    for mid in ("a@h", "bad@h", "c@h"):
        ing.add(hostile_corpus.eml(mid), "test")
    ing.flush(cursor=("k", {"n": 3}))
    assert ing.stats == {"messages": 3, "stored": 2, "duplicates": 0, "quarantined": 1}
    assert store.get_cursor("k") == {"n": 3}
    assert "database refused" in store.quarantined()[0]["reason"]


# ------------------------------------------------------------------ concurrency
def test_two_concurrent_ingests_of_the_same_mail(tmp_path, db_url):
    raws = [hostile_corpus.eml(f"cc{i}@h", extra=f"In-Reply-To: <cc{max(i - 1, 0)}@h>\n" if i else "")
            for i in range(3000)]
    (tmp_path / "a.mbox").write_bytes(to_mboxrd(raws))
    (tmp_path / "b.mbox").write_bytes(to_mboxrd(list(reversed(raws))))
    env_home = tmp_path / "home"
    run_cli("ingest", "--json", "--no-triage", tmp_path / "none.eml", db=db_url, home=env_home)  # migrate once
    procs = []
    for name in ("a.mbox", "b.mbox"):
        env = {k: v for k, v in os.environ.items() if not k.startswith("REGTRIAGE_")}
        env["REGTRIAGE_HOME"] = str(env_home)
        procs.append(subprocess.Popen([sys.executable, "-m", "bot.cli.main", "--db", db_url, "ingest", "--json",
                                       "--no-triage", "--batch-size", "50", str(tmp_path / name)],
                                      cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err.decode()
        results.append(json.loads(out))
    assert sum(r["stored"] for r in results) == 3000
    assert sum(r["duplicates"] for r in results) == 3000
    assert all(r["quarantined"] == 0 for r in results)
    rows = stored_rows(db_url)
    assert len(rows) == 3000
    from storage.store import Store

    store = Store(db_url)
    try:
        threads = store.threads()
    finally:
        store.close()
    assert len(threads) == 1 and threads[0]["messages"] == 3000


# ------------------------------------------------------------------ public-inbox git path
def test_git_epoch_with_hostile_blobs_advances_its_cursor(tmp_path, db_url):
    """The git walk (subscriptions' path) takes the same hostile messages: every blob ends
    stored or quarantined, an oversized blob is never held whole, and the cursor reaches the
    tip, so the next poll does not fail on the same messages again."""
    import shutil

    if shutil.which("git") is None:
        pytest.skip("git not installed")
    from bot.sources.limits import IngestLimits
    from bot.sources.pigit import ingest_epochs
    from storage.store import Store
    from tests.publicinbox import make_epoch

    blobs = [hostile_corpus.eml(f"git-cs-{cs.strip(chr(0))}@h", body="caf\udce9\n",
                                extra=f'Content-Type: text/plain; charset="{cs}"\n') for cs in hostile_corpus.CODECS]
    blobs += [hostile_corpus.eml("L" * 3000 + "@h"), b"From: a\x00@x\nMessage-ID: <git-nul@h>\nSubject: \x00\n\n\x00\n",
              hostile_corpus.eml("git-big@h", body="B" * 300_000), hostile_corpus.eml("git-ok@h")]
    inbox = tmp_path / "inbox"
    (inbox / "git").mkdir(parents=True)
    make_epoch(inbox / "git" / "0.git", [("add", b) for b in blobs])
    store = Store(db_url)
    try:
        limits = IngestLimits(max_message_bytes=100_000, quarantine_prefix_bytes=500)
        stats = ingest_epochs(store, inbox, workers=0, limits=limits)
        assert stats["messages"] == len(blobs)
        assert stats["stored"] == len(blobs) - 1 and stats["quarantined"] == 1
        tip = subprocess.run(["git", "--git-dir", str(inbox / "git" / "0.git"), "rev-parse", "master"],
                             capture_output=True, text=True, check=True).stdout.strip()
        assert store.get_cursor(f"pigit:{inbox}")["epochs"] == {"0.git": tip}
        q, = store.quarantined()
        assert q["kept"] == 500 and q["size"] == len(blobs[-2]) and "max_message_bytes" in q["reason"]
        again = ingest_epochs(store, inbox, workers=0, limits=limits)
        assert again["messages"] == 0  # nothing left behind to fail on
    finally:
        store.close()
