"""The triage step: claims extracted from stored mail, merged per thread, enriched from a
kernel tree; and the `extract` command's JSON contract."""

import json
from pathlib import Path

import pytest

CONTRACT_KEYS = ["source", "message_id", "subject", "is_regression", "confidence", "kind", "culprit",
                 "good", "bad", "metric", "change_percent", "hardware", "config", "subsystem",
                 "numbers", "evidence"]

REPORT = """From: Perf Tester <perf@example.org>
Subject: dbench throughput regression on ext4 between v6.7 and v6.8
Message-ID: <rep-1@example.org>
Date: Mon, 04 Mar 2024 10:00:00 +0000

Hi,

After moving from v6.7 to v6.8, dbench throughput on ext4 dropped from 1200.5 MB/s
to 960.4 MB/s on our test box (Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz, 64G memory, x86_64).
The regression is reproducible every time. I am bisecting now.
"""

FOLLOWUP = """From: Perf Tester <perf@example.org>
Subject: Re: dbench throughput regression on ext4 between v6.7 and v6.8
Message-ID: <rep-2@example.org>
In-Reply-To: <rep-1@example.org>
References: <rep-1@example.org>
Date: Tue, 05 Mar 2024 09:00:00 +0000

The bisect finished. The first bad commit is:

commit 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b
    ext4: rework the delayed allocation path

Reverting it on top of v6.8 brings the throughput back to 1195 MB/s.
"""

PATCH = """From: Dev <dev@example.org>
Subject: [PATCH] mm: tidy up a comment
Message-ID: <patch-1@example.org>
Date: Tue, 05 Mar 2024 11:00:00 +0000

Fix a typo.

Signed-off-by: Dev <dev@example.org>
---
 mm/page_alloc.c | 2 +-
"""


@pytest.fixture
def mail_dir(tmp_path):
    d = tmp_path / "mail"
    d.mkdir()
    for name, text in (("1.eml", REPORT), ("2.eml", FOLLOWUP), ("3.eml", PATCH)):
        (d / name).write_text(text)
    return d


def test_extract_contract_and_input_order(mail_dir, cli):
    r = cli("extract", "--json", mail_dir / "3.eml", mail_dir / "1.eml")
    assert r.exit_code == 0, r.stderr
    objs = [json.loads(line) for line in r.stdout.splitlines()]
    assert [list(o) for o in objs] == [CONTRACT_KEYS, CONTRACT_KEYS]
    assert [o["message_id"] for o in objs] == ["patch-1@example.org", "rep-1@example.org"]
    assert objs[0]["is_regression"] is False
    assert objs[1]["is_regression"] is True and objs[1]["kind"] == "performance"
    assert objs[1]["source"] == str(mail_dir / "1.eml")
    assert objs[1]["evidence"]  # every extracted field says where it came from


def test_extract_unreadable_input_is_reported(mail_dir, cli):
    r = cli("extract", "--json", mail_dir / "nope.eml", mail_dir / "1.eml")
    assert r.exit_code == 1 and "nope.eml" in r.stderr
    assert len(r.stdout.splitlines()) == 1


def test_triage_merges_thread_and_refines_with_bisect(mail_dir, cli, db_url):
    r = cli("ingest", "--json", mail_dir, db=db_url)
    assert json.loads(r.stdout)["stored"] == 3
    claims = json.loads(cli("claims", "--json", db=db_url).stdout)
    assert len(claims) == 1
    c = claims[0]
    assert c["root_id"] == "rep-1@example.org"
    assert c["messages"] == ["rep-1@example.org", "rep-2@example.org"]
    merged = c["claim"]
    assert merged["culprit"]["commit"].startswith("1a2b3c4d")  # from the later bisect result
    assert merged["good"] == "v6.7" and merged["bad"] == "v6.8"  # from the report
    assert merged["change_percent"] == pytest.approx(-20.0, abs=0.1)
    shown = json.loads(cli("show", "--json", "rep-1@example.org", db=db_url).stdout)
    facts = shown["claim"]["claim"]["facts"]
    body = shown["body"]
    located = [f for f in facts if f["start"] >= 0]
    assert located and all(body[f["start"]:f["end"]] for f in located)
    # triage is incremental: a second run reads nothing new
    again = json.loads(cli("triage", "--json", db=db_url).stdout)
    assert again["extracted"] == 0


def test_extractor_failure_is_recorded_and_batch_goes_on(mail_dir, cli, monkeypatch):
    import extractors

    real = extractors.extract

    def flaky(subject, body):
        if "bisect finished" in body:
            raise ValueError("boom")
        return real(subject, body)

    monkeypatch.setattr(extractors, "extract", flaky)
    assert cli("ingest", "--json", mail_dir).exit_code == 0
    shown = json.loads(cli("show", "--json", "rep-2@example.org").stdout)
    assert "extractor failed: ValueError: boom" in shown["claim"]["claim"]["error"]
    assert json.loads(cli("show", "--json", "rep-1@example.org").stdout)["claim"]["is_regression"]


def test_culprit_enriched_from_kernel_tree(tmp_path, cli, home):
    import git

    repo = git.Repo.init(tmp_path / "linux")
    def commit(files, msg):
        for name, text in files.items():
            p = Path(repo.working_tree_dir) / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
            repo.index.add([name])
        return repo.index.commit(msg).hexsha
    commit({"MAINTAINERS": "EXT4 FILE SYSTEM\nM:\tTed <ted@example.org>\nL:\tlinux-ext4@vger.kernel.org\n"
            "S:\tMaintained\nF:\tfs/ext4/\n\nTHE REST\nM:\tLinus <l@example.org>\nS:\tBuried alive\nF:\t*\nF:\t*/\n",
            "fs/ext4/inode.c": "int x;\n"}, "initial")
    repo.create_tag("v6.7")
    sha = commit({"fs/ext4/inode.c": "int y;\n"}, "ext4: rework the delayed allocation path")
    repo.create_tag("v6.8")
    (tmp_path / "regtriage.toml").write_text(f'[kernel]\nrepos = ["{repo.git_dir}"]\n')
    mail = tmp_path / "mail"
    mail.mkdir()
    (mail / "r.eml").write_text(REPORT.replace("I am bisecting now.", f"Bisected to commit {sha[:12]}."))
    assert cli("ingest", "--json", mail).exit_code == 0
    claim = json.loads(cli("claims", "--json").stdout)[0]["claim"]
    assert claim["culprit"]["sha"] == sha
    assert claim["culprit"]["subject"] == "ext4: rework the delayed allocation path"
    assert claim["kernel"]["first_tag"] == "v6.8"
    assert claim["subsystem"] == "fs/ext4"
    assert claim["evidence"]["subsystem"].startswith("MAINTAINERS: EXT4 FILE SYSTEM")
