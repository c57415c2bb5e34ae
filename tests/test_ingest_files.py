"""`regtriage ingest` on files: formats, idempotence, bad input, exit codes, the corpus."""

import gzip
import json
import mailbox
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.sources.files import to_mboxrd
from tests.test_storage import THREAD, eml


@pytest.fixture
def inp(tmp_path):
    d = tmp_path / "input"
    d.mkdir()
    return d


def counts(result):
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def write_mboxrd(path: Path, raws: list[bytes], gz: bool = False) -> None:
    data = to_mboxrd(raws)
    path.write_bytes(gzip.compress(data) if gz else data)


def test_eml_files_then_idempotent(cli, inp, db_url):
    tmp_path = inp
    for i, raw in enumerate(THREAD):
        (tmp_path / f"{i}.eml").write_bytes(raw)
    r = counts(cli("ingest", "--json", *sorted(tmp_path.glob("*.eml")), db=db_url))
    assert r == {"messages": 5, "stored": 5, "duplicates": 0, "quarantined": 0}
    r = counts(cli("ingest", "--json", tmp_path, db=db_url))
    assert r == {"messages": 5, "stored": 0, "duplicates": 5, "quarantined": 0}
    threads = json.loads(cli("threads", "--json", db=db_url).stdout)
    assert {t["root"]: t["messages"] for t in threads} == {"root@x": 4, "other@x": 1}


def test_mboxrd_unescapes_from_lines_and_keeps_bytes(cli, tmp_path):
    body = "From the report:\n>From the quote\nok\n"
    raw = eml("mb1@x", body=body)
    write_mboxrd(tmp_path / "a.mbox", [raw, eml("mb2@x")])
    r = counts(cli("ingest", "--json", tmp_path / "a.mbox"))
    assert r["stored"] == 2
    shown = json.loads(cli("show", "--json", "<mb1@x>").stdout)
    assert shown["body"] == body


def test_gzipped_mbox_and_stdlib_mboxo(cli, tmp_path):
    write_mboxrd(tmp_path / "t.mbox.gz", THREAD, gz=True)
    box = mailbox.mbox(str(tmp_path / "o.mbox"))
    box.add(eml("o1@x"))
    box.add(eml("o2@x", irt="o1@x"))
    box.flush()
    r = counts(cli("ingest", "--json", tmp_path / "t.mbox.gz", tmp_path / "o.mbox"))
    assert r == {"messages": 7, "stored": 7, "duplicates": 0, "quarantined": 0}


def test_maildir_and_nested_directories(cli, inp):
    tmp_path = inp
    (tmp_path / "top").mkdir()
    md = mailbox.Maildir(str(tmp_path / "top" / "Mail"), create=True)
    md.add(eml("md1@x"))
    md.add(eml("md2@x"))
    (tmp_path / "top" / "sub").mkdir()
    (tmp_path / "top" / "sub" / "x.eml").write_bytes(eml("d1@x"))
    (tmp_path / "top" / "sub" / "labels.jsonl").write_text('{"file": "x"}\n')  # not mail: skipped
    r = counts(cli("ingest", "--json", tmp_path / "top"))
    assert r == {"messages": 3, "stored": 3, "duplicates": 0, "quarantined": 0}


def test_truncated_gzip_keeps_what_was_read_and_quarantines_tail(cli, inp):
    tmp_path = inp
    write_mboxrd(tmp_path / "full.mbox", [eml(f"tr{i}@x", body=os.urandom(30000).hex() + "\n") for i in range(6)])
    data = gzip.compress((tmp_path / "full.mbox").read_bytes())
    (tmp_path / "cut.mbox.gz").write_bytes(data[: len(data) * 2 // 3])
    r = cli("ingest", "--json", tmp_path / "cut.mbox.gz")
    assert r.exit_code == 0
    c = json.loads(r.stdout)
    assert c["quarantined"] == 1 and c["stored"] >= 1
    assert c["stored"] + c["duplicates"] + c["quarantined"] == c["messages"]
    q = json.loads(cli("quarantine", "--json").stdout)
    assert "truncated or corrupt compressed stream" in q[0]["reason"]


def test_unreadable_inputs_exit_nonzero_with_one_line_reason_batch_goes_on(cli, tmp_path):
    (tmp_path / "bad.gz").write_bytes(b"\x1f\x8b\x08garbage-not-gzip")
    (tmp_path / "ok.eml").write_bytes(eml("ok@x"))
    r = cli("ingest", "--json", tmp_path / "bad.gz", tmp_path / "missing.mbox", tmp_path / "ok.eml")
    assert r.exit_code == 1
    # a corrupt gzip file is an input: quarantined whole (its bytes were read); a missing
    # path is not, and fails the run
    assert json.loads(r.stdout) == {"messages": 2, "stored": 1, "duplicates": 0, "quarantined": 1}
    lines = [l for l in r.stderr.splitlines() if l]
    assert len(lines) == 1 and "no such file" in lines[0]
    assert "Traceback" not in r.stderr
    q, = json.loads(cli("quarantine", "--json").stdout)
    assert q["reason"].startswith("no message could be read: truncated or corrupt compressed stream")


def test_bad_messages_quarantined_or_stored_with_reasons(cli, inp):
    tmp_path = inp
    (tmp_path / "1.eml").write_bytes(b"")
    (tmp_path / "2.eml").write_bytes(b"\x00\x01\x02 not mail at all")
    (tmp_path / "3.eml").write_bytes(b"Subject: no id, no from\n\nbody\n")
    (tmp_path / "4.eml").write_bytes(b"From: a@x\nMessage-ID: <cs@x>\nSubject: =?x-nope?q?abc?=\n"
                                     b"Content-Type: text/plain; charset=klingon\n\n\xe9t\xe9\n")
    (tmp_path / "5.eml").write_bytes(eml("big@x", body="A" * 40_000_000))
    r = cli("ingest", "--json", tmp_path)
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout) == {"messages": 5, "stored": 2, "duplicates": 0, "quarantined": 3}
    reasons = sorted(q["reason"] for q in json.loads(cli("quarantine", "--json").stdout))
    assert reasons[0] == "empty message"
    assert reasons[1].startswith("message too large")
    assert reasons[2].startswith("not an RFC 5322 message")
    shown = json.loads(cli("show", "--json", "cs@x").stdout)
    assert any("unknown charset" in p for p in shown["problems"])


def test_crash_mid_batch_loses_nothing_and_rerun_resumes(cli, tmp_path, home, monkeypatch):
    from storage.store import Store

    raws = [eml(f"c{i}@x") for i in range(25)]
    write_mboxrd(tmp_path / "c.mbox", raws)
    calls = {"n": 0}
    original = Store.write_batch

    def flaky(self, *a, **k):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("power cut")
        return original(self, *a, **k)

    monkeypatch.setattr(Store, "write_batch", flaky)
    r = cli("ingest", "--json", "--batch-size", "10", tmp_path / "c.mbox")
    assert r.exit_code == 2 and "power cut" in r.stderr and "Traceback" not in r.stderr
    monkeypatch.setattr(Store, "write_batch", original)
    r = counts(cli("ingest", "--json", "--batch-size", "10", tmp_path / "c.mbox"))
    assert r == {"messages": 25, "stored": 5, "duplicates": 20, "quarantined": 0}


def test_corpus_ingests_completely(cli, corpus_dir):
    emls = list(corpus_dir.rglob("*.eml"))
    r = counts(cli("ingest", "--json", corpus_dir))
    assert r == {"messages": len(emls), "stored": len(emls), "duplicates": 0, "quarantined": 0}
    for path in emls[:5]:
        from bot.sources.mail import parse_message
        mid = parse_message(path.read_bytes()).message_id
        assert json.loads(cli("show", "--json", mid).stdout)["subject"] is not None


def test_help_is_fast_and_lazy():
    code = ("import sys; from bot.cli.main import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('spacy', 'sqlalchemy', 'rich', 'requests', 'git', 'jinja2') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out and "ingest" in out


def test_config_file_selects_database(tmp_path, home, cli):
    db = tmp_path / "other.sqlite3"
    (tmp_path / "regtriage.toml").write_text(f'[storage]\ndb = "sqlite:///{db}"\n')
    (tmp_path / "m.eml").write_bytes(eml("cfg@x"))
    assert counts(cli("ingest", "--json", tmp_path / "m.eml"))["stored"] == 1
    assert db.exists() and not (home / "regtriage.sqlite3").exists()


def test_sqlite_default_under_home(home, tmp_path, cli):
    (tmp_path / "m.eml").write_bytes(eml("home@x"))
    assert counts(cli("ingest", "--json", tmp_path / "m.eml"))["stored"] == 1
    assert (home / "regtriage.sqlite3").exists()
