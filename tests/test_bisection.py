"""The pure bisection logic (bot.lab.bisection): git bisect semantics on a commit graph, judging a
step with the lab statistics, the bounds, the log.  Checked against real ``git bisect`` on small
repositories where the semantics matter."""

from __future__ import annotations

import random
import subprocess

import pytest

from bot.lab import bisection as b
from bot.lab.stats import Design


def linear(n: int) -> tuple[list[str], dict[str, list[str]]]:
    commits = [f"c{i:02d}" for i in range(1, n + 1)]
    return commits, {c: ([commits[i - 1]] if i else []) for i, c in enumerate(commits)}


def run_bisection(state, first_bad: str, oracle=None, max_steps=50):
    """Drive the state machine with an oracle (commit -> verdict)."""
    order = {c: i for i, c in enumerate(state["commits"])}
    oracle = oracle or (lambda c: b.BAD if order[c] >= order[first_bad] else b.GOOD)
    while True:
        a = b.next_action(state, max_steps=max_steps, max_lab_s=1e9)
        if a.kind != "test":
            return a, state
        state = b.record_step(state, a.commit, oracle(a.commit), lab_s=1.0)


@pytest.mark.parametrize("n", [1, 2, 3, 6, 8, 17, 100])
def test_linear_finds_every_culprit_in_log2_steps(n):
    commits, parents = linear(n)
    for culprit in commits:
        st = b.new_state("c00", commits[-1], commits, parents)
        a, st = run_bisection(st, culprit)
        assert a.kind == "done" and a.commit == culprit
        assert len(st["steps"]) <= max(1, (n - 1).bit_length())


def test_first_choice_is_the_middle_like_git():
    commits, parents = linear(8)
    st = b.new_state("c00", "c08", commits, parents)
    assert b.next_commit(st) == "c04"


def test_skips_lead_around_a_broken_commit_and_to_ambiguity():
    commits, parents = linear(8)
    st = b.new_state("c00", "c08", commits, parents)
    broken = "c04"

    def oracle(c):
        if c == broken:
            return b.SKIP
        return b.BAD if c >= "c06" else b.GOOD

    a, st = run_bisection(st, "c06", oracle)
    assert a.kind == "done" and a.commit == "c06"
    assert any(s["verdict"] == b.SKIP and s["commit"] == broken for s in st["steps"])
    # the culprit right after a skipped commit: ambiguous between the two
    st = b.new_state("c00", "c08", commits, parents)
    a, st = run_bisection(st, "c05", lambda c: b.SKIP if c == "c04" else (b.BAD if c >= "c04" else b.GOOD))
    assert a.kind == "ambiguous" and set(a.candidates) == {"c04", "c05"}


def test_bounds_stop_with_the_candidates_left():
    commits, parents = linear(64)
    st = b.new_state("c00", "c64", commits, parents)
    st = b.record_step(st, b.next_commit(st), b.GOOD, lab_s=600)
    a = b.next_action(st, max_steps=1, max_lab_s=1e9)
    assert a.kind == "exhausted" and "max_steps = 1" in a.reason and len(a.candidates) == 32
    a = b.next_action(st, max_steps=10, max_lab_s=600)
    assert a.kind == "exhausted" and "max_lab_minutes = 10" in a.reason


def test_transitions_are_validated():
    commits, parents = linear(4)
    st = b.new_state("c00", "c04", commits, parents)
    with pytest.raises(b.BisectError):
        b.record_step(st, "c02", "maybe")
    with pytest.raises(b.BisectError):
        b.record_step(st, "zz", b.GOOD)
    st2 = b.record_step(st, "c02", b.GOOD)
    assert st["goods"] == [] and st2["goods"] == ["c02"]  # the old state is untouched
    with pytest.raises(b.BisectError, match="not a candidate"):
        b.record_step(st2, "c01", b.BAD)
    with pytest.raises(b.BisectError):
        b.new_state("c02", "c04", commits, parents)  # good inside the range


def _git(repo, *args):
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x.invalid", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
           "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_merges_agree_with_git_bisect(tmp_path):
    """A history with two merged topic branches: for every possible first bad commit, the pure
    module and real ``git bisect run`` name the same commit."""
    repo = tmp_path / "r"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    n = 0

    def commit(label):
        nonlocal n
        n += 1
        (repo / label).write_text(label)
        _git(repo, "add", label)
        _git(repo, "commit", "-q", "-m", label)
        return _git(repo, "rev-parse", "HEAD")

    good = commit("base")
    for topic in ("a", "b"):
        commit(f"main-{topic}")
        _git(repo, "checkout", "-q", "-b", topic, "HEAD~1")
        for i in range(3):
            commit(f"{topic}{i}")
        _git(repo, "checkout", "-q", "main")
        _git(repo, "merge", "-q", "--no-ff", "-m", f"merge {topic}", topic)
    bad = commit("tip")
    commits, parents = b.parse_rev_list(_git(repo, "rev-list", "--topo-order", "--parents", f"{good}..{bad}"))
    assert len(commits) == 11
    rng = random.Random(1)
    for culprit in rng.sample(commits, 6):
        bad_set = set(_git(repo, "rev-list", culprit).split()) | {culprit}
        is_bad = {c: any(c2 == culprit for c2 in _git(repo, "rev-list", c).split()) for c in commits}
        st = b.new_state(good, bad, commits, parents)
        a, st = run_bisection(st, culprit, lambda c: b.BAD if is_bad[c] else b.GOOD)
        assert a.kind == "done" and a.commit == culprit, (culprit, st["steps"])
        assert bad_set  # (git's own answer below)
        _git(repo, "bisect", "start", bad, good)
        script = tmp_path / "t.sh"
        script.write_text(f"#!/bin/sh\ngit merge-base --is-ancestor {culprit} HEAD && exit 1; exit 0\n")
        script.chmod(0o755)
        out = _git(repo, "bisect", "run", str(script))
        _git(repo, "bisect", "reset")
        assert f"{culprit} is the first bad commit" in out


def _design():
    return Design.from_settings({"runs": 5, "extend_step": 5, "max_runs": 10})


def test_judge_step_good_bad_more_skip():
    """The step's interval against the good end (same runs) vs half the ends' change."""
    rng = random.Random(7)
    good = [100 + rng.gauss(0, 1) for _ in range(5)]
    d = _design()
    ends = -20.0  # the bad end measured 20% lower
    j = b.judge_step(good, [100 + rng.gauss(0, 1) for _ in range(5)], d, ends_change_percent=ends)
    assert j.verdict == b.GOOD and abs(j.change_percent) < 3 and "like the good end" in j.reasons[0]
    j = b.judge_step(good, [80 + rng.gauss(0, 1) for _ in range(5)], d, ends_change_percent=ends)
    assert j.verdict == b.BAD and j.change_percent < -15
    # a real but small change (-4%: well under half of -20%) is still "good"; -15% is "bad"
    assert b.judge_step(good, [96 + rng.gauss(0, 0.5) for _ in range(5)], d, ends_change_percent=ends).verdict == b.GOOD
    assert b.judge_step(good, [85 + rng.gauss(0, 0.5) for _ in range(5)], d, ends_change_percent=ends).verdict == b.BAD
    # noisy samples around the half-way point: more runs, then skip
    noisy = [95.0, 80.0, 91.0, 84.0, 88.0]
    j = b.judge_step(good, noisy, d, ends_change_percent=ends)
    assert j.verdict == b.MORE and j.next_runs == 5
    j = b.judge_step(good + [100.0, 99.5, 100.5, 100.2, 99.8], noisy + [94.0, 81.0, 90.0, 85.0, 89.0], d,
                     ends_change_percent=ends)
    assert j.verdict == b.SKIP and "inconclusive after 10 runs" in j.reasons[0]
    j = b.judge_step(good, noisy[:1], d, ends_change_percent=ends)
    assert j.verdict == b.MORE and j.next_runs == 4
    # one boot per build (5 runs each): no interval yet, so no call from the point estimate
    boots = Design.from_settings({"runs": 5, "extend_step": 5, "max_runs": 10, "samples_per_batch": 5})
    j = b.judge_step(good, [80 + rng.gauss(0, 1) for _ in range(5)], boots, ends_change_percent=ends)
    assert j.verdict == b.MORE and j.next_runs == 5
    # lower is better (time): the bad end is 2x slower; a step as slow is bad, one as fast good
    fast = [1.0 + i / 1000 for i in range(5)]
    assert b.judge_step(fast, [2.0 + i / 1000 for i in range(5)], d, ends_change_percent=100.0,
                        higher_is_better=False).verdict == b.BAD
    assert b.judge_step(fast, [1.0 + i / 900 for i in range(5)], d, ends_change_percent=100.0,
                        higher_is_better=False).verdict == b.GOOD


def test_bisect_log_looks_like_git():
    commits, parents = linear(4)
    st = b.new_state("c00", "c04", commits, parents, {"c03": "mm: slow down"})
    st = b.record_step(st, "c02", b.GOOD, info={"change_percent": 0.4})
    st = b.record_step(st, "c03", b.BAD, info={"change_percent": -35.0})
    a = b.next_action(st, max_steps=10, max_lab_s=1e9)
    log = b.bisect_log(st, {"culprit": a.commit})
    assert log.splitlines()[:5] == ["git bisect start", "# bad: [c04]", "git bisect bad c04", "# good: [c00]",
                                    "git bisect good c00"]
    assert "# bad: [c03] mm: slow down (-35.0% vs good)\ngit bisect bad c03" in log
    assert log.endswith("# first bad commit: [c03] mm: slow down")
