"""The trained extractor: what ships is what `make model` builds, it decides from contexts
(not values), its evidence points at the values, and it holds its level on the dev split."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import extractors  # noqa: E402
from bench import accuracy, train_model  # noqa: E402
from bench._corpus import load_split  # noqa: E402
from extractors import features, learned, rangefeats  # noqa: E402
from extractors.boards import arch_from_hardware  # noqa: E402


def test_shipped_model_is_what_make_model_builds():
    assert learned.MODEL_FILE.exists(), "run make model"
    assert learned.MODEL_FILE.stat().st_size < 50 * 2**20
    shipped = learned.MODEL_FILE.read_text(encoding="utf-8")
    assert shipped == train_model.build(), "extractors/data/model.json is stale: run make model"
    d = json.loads(shipped)
    assert d["trained_on"]["split"] == "train"
    assert {"is_regression", "kind", "culprit", "good", "bad"} <= set(d["models"])


def test_model_loads_from_the_package_without_network(monkeypatch):
    import socket

    def no_network(*a, **k):
        raise AssertionError("network used")
    monkeypatch.setattr(socket, "create_connection", no_network)
    learned.shipped_model.cache_clear()
    m = learned.shipped_model()
    assert m is not None and m.get("is_regression") is not None


REPORT = """Hi,

after upgrading from {good} to {bad} the machine no longer boots. I bisected it and
git bisect says {sha} is the first bad commit.  Reverting {sha} on top of {bad} makes
it boot again.

Thanks,
Someone
"""


def test_decisions_follow_context_not_values():
    """The same sentence with other versions and ids gets the same probabilities and picks
    the values in the same roles: features are shapes, not values."""
    m = learned.shipped_model()
    a = REPORT.format(good="v6.9", bad="v6.10", sha="1b2c3d4e5f60")
    b = REPORT.format(good="v5.4", bad="v5.15", sha="a9b8c7d6e5f4")
    ca = extractors.extract("boot failure after upgrade", a)
    cb = extractors.extract("boot failure after upgrade", b)
    assert ca.confidence == cb.confidence
    assert ca.is_regression and cb.is_regression
    roles = lambda c, vals: [vals.get(x) for x in (c.culprit_commit, c.good, c.bad)]  # noqa: E731
    assert roles(ca, {"1b2c3d4e5f60": "c", "v6.9": "g", "v6.10": "b"}) == \
        roles(cb, {"a9b8c7d6e5f4": "c", "v5.4": "g", "v5.15": "b"})
    assert m is not None


def test_a_different_model_changes_the_decision():
    """extract(model=...) really decides with the given weights (here: one that says never)."""
    never = learned.Model.from_dict({"models": {"is_regression": {"bias": -50.0, "weights": {}}}})
    text = REPORT.format(good="v6.9", bad="v6.10", sha="1b2c3d4e5f60")
    assert extractors.extract("boot failure", text).is_regression
    assert not extractors.extract("boot failure", text, model=never).is_regression


@pytest.mark.parametrize("text,arch", [
    ("The i.MX28 board hangs at boot", "arm"),
    ("on an i.MX8MP EVK the kernel panics", "arm64"),
    ("my MT8173 Chromebook shows a black screen", "arm64"),
    ("PowerBook G4 fails to resume", "powerpc"),
    ("Raspberry Pi 5 runs 30% slower", "arm64"),
    ("at91sam9g20 based board", "arm"),
    ("VisionFive 2 board does not boot", "riscv"),
    ("the power 5 watts higher on my laptop", None),
    ("my desktop machine no longer boots", None),
])
def test_arch_from_board_soc_or_machine(text, arch):
    got = arch_from_hardware(text, None, None)
    assert (got[0] if got else None) == arch
    if got:
        s, e = got[1]
        assert text[s:e].strip()


def test_strict_scoring_rules():
    assert not accuracy.match("arch", "x86", "x86_64")
    assert accuracy.match("good", "v6.9", "6.9") and accuracy.match("good", "linux-3.18", "3.18")
    assert not accuracy.match("good", "6.9", "6.9-rc1")
    assert accuracy.match("culprit", "54a6eb5c", "54a6eb5c4765aa57")
    assert accuracy.match("change_percent", -13.0, -13.6) and not accuracy.match("change_percent", 13.6, -13.6)
    assert accuracy.match("change_percent", -95.0, -99.0) and not accuracy.match("change_percent", -90.0, -99.0)
    assert accuracy.match("memory", "8 GB", "8 GB RAM") and not accuracy.match("cpu", "Xeon", "Intel Xeon Gold 6248R")
    assert not accuracy.match("subsystem", "fs", "fs/xfs") and accuracy.match("subsystem", "sched", "kernel/sched")
    lab = {"is_regression": True, "culprit_commit": "abcdef1", "kernel_config": [], "good": "6.1"}
    pred = {"is_regression": False, "culprit": {"commit": "abcdef1"}, "good": "6.1",
            "hardware": {k: None for k in ("cpu", "arch", "memory", "storage")},
            "config": {"filesystem": None, "benchmark": None, "kernel_config": []}}
    out = accuracy.score([("x", lab, pred)])
    # a missed report costs is_regression recall only; its fields are not scored
    assert out["fields"]["is_regression"]["fn"] == 1 and out["fields"]["culprit"]["tp"] == 0
    assert out["fields"]["culprit"]["fn"] == 0


VALUE_FIELDS = ("culprit", "good", "bad", "cpu", "memory", "storage", "benchmark", "filesystem")


@pytest.mark.parametrize("split", ["train", "dev"])
def test_evidence_contains_the_value(split):
    msgs = [m for m in load_split(split) if m.label and m.label["is_regression"]]
    assert msgs
    checked = bad = 0
    for m in msgs:
        c = extractors.extract(m.subject, m.body)
        for f in c.facts:
            if f.field not in VALUE_FIELDS or f.value in (None, ""):
                continue
            checked += 1
            value = " ".join(str(f.value).lower().split())
            if f.field in ("good", "bad") and re.match(r"v\d", value):
                value = value[1:]  # "v4.7-rc5" stated as "Linux 4.7-rc5"
            if re.fullmatch(r"[0-9a-f]{8,40}", value):
                value = value[:7]  # the same commit, written shorter where the evidence is
            if value not in " ".join((f.sentence or "").lower().split()):
                bad += 1
    assert checked > 30
    assert bad / checked <= 0.02, f"{bad} of {checked} facts whose evidence lacks the value"


def test_dev_split_level():
    """Guards against a broken model or pipeline: the dev split (never trained on) keeps a
    floor well under the measured figures (README, "Extraction accuracy")."""
    out = accuracy.score(accuracy.predict(load_split("dev")))
    s = out["summary"]
    assert out["messages"] >= 40
    assert s["is_regression_f1"] >= 0.8
    assert out["fields"]["is_regression"]["precision"] >= 0.8
    assert s["culprit_f1"] >= 0.6
    assert s["mean_recall_non_culprit"] >= 0.4


def test_candidates_cover_distro_and_vendor_versions():
    ctx = extractors.pipeline.run("x", "Works with 6.1.0-18-amd64, fails with 5.14.0-427.el9 "
                                        "and linux-3.18-at91 and next-20240603.", learned_stage=False)._.rules
    values = {c.value for c in features.version_candidates(ctx.ex)}
    assert {"6.1.0-18-amd64", "5.14.0-427.el9", "linux-3.18-at91", "next-20240603"} <= values
    assert not any(re.fullmatch(r"\d+", v) for v in values)


def test_range_pairs_are_never_backwards_between_builds_of_one_release():
    """Two distro builds of one release are ordered by their build numbers ("6.8.0-31" before
    "6.8.0-32"), git snapshots likewise; a commit id written short and long is one end."""
    cands = [features.Candidate(v, [], set(), features.norm_version(v))
             for v in ("6.8.0-32", "6.8.0-31", "2.6.18-git7", "2.6.18-git6", "0123abcd4567", "0123abcd")]
    pg = [0.9, 0.5, 0.9, 0.5, 0.9, 0.1]
    pb = [0.5, 0.9, 0.5, 0.9, 0.1, 0.9]
    pairs = {(cands[i].value, cands[j].value) for i, j, _ in rangefeats.pair_options(cands, pg, pb, features.range_order)}
    assert ("6.8.0-31", "6.8.0-32") in pairs and ("6.8.0-32", "6.8.0-31") not in pairs
    assert ("2.6.18-git6", "2.6.18-git7") in pairs and ("2.6.18-git7", "2.6.18-git6") not in pairs
    assert ("0123abcd4567", "0123abcd") not in pairs


def test_candidates_cover_dated_tags_of_subsystem_trees():
    ctx = extractors.pipeline.run("x", "The display works on drm-next-2024-09-19 but the panel stays dark "
                                        "with drm-fixes-2024-10-04.", learned_stage=False)._.rules
    values = {c.value for c in features.version_candidates(ctx.ex)}
    assert {"drm-next-2024-09-19", "drm-fixes-2024-10-04"} <= values
    with pytest.raises(ValueError):
        features.range_order("drm-next-2024-09-19")  # no place in release history of its own


def test_range_pair_features_say_how_specific_each_end_is():
    """A release and its build ("5.16" / "5.16.5-200"): the pair knows which end is the base
    form and which the most specific one (the labels take a version as written)."""
    cands = [features.Candidate(v, [], set(), features.norm_version(v)) for v in ("5.15.18-200", "5.16", "5.16.5-200")]
    for c in cands:
        c.feats.add(f"vrel:longer={c.value == '5.16'}")
    pairs = {(cands[i].value, cands[j].value): f
             for i, j, f in rangefeats.pair_options(cands, [0.9, 0.1, 0.1], [0.1, 0.8, 0.7], features.range_order)}
    assert "b:vrel:longer=True" in pairs[("5.15.18-200", "5.16")]
    assert "b:vrel:longer=False" not in pairs[("5.15.18-200", "5.16.5-200")]
    assert "rel:next_release" in pairs[("5.15.18-200", "5.16.5-200")]


def _evidence(subject: str, body: str) -> set[str]:
    ctx = extractors.pipeline.run(subject, body, learned_stage=False)._.rules
    return features.change_evidence(ctx.ex, ctx.why)


def test_change_evidence_features():
    """The message model sees whether the text says something changed between kernels, and
    where the rule scorer's claim words stand (own text, quoted text, subject)."""
    f = _evidence("NFS write problem", "Since 5.19 our NFS clients hang on write, 5.18 was fine.\n")
    assert "evid=True" in f
    f = _evidence("laptop fails to suspend", "My new laptop fails to suspend with 6.8.2, the screen "
                                             "goes black.\nWhat can I try?\n")
    assert "evid=False" in f and "claim_none" in f
    f = _evidence("Re: lockups", "Now I know the change which caused the lockups on my server.\n")
    assert "evid=True" in f
    f = _evidence("Re: [linux-next:master] build error", "> error: implicit declaration of function "
                                                         "'foo'\n\nThanks, will fix.\n")
    assert {"evid:devtree", "evid:devtree_build"} <= f
    f = _evidence("Re: crash", "> After upgrading to 6.2 the box fails to boot.\n\nWhich config?\n")
    assert "claim_quoted" in f and "claim_own" not in f


@pytest.mark.parametrize("subject,body,expected", [
    # a bug in one kernel with no older kernel that worked (never worked, or not known): no claim
    ("Kernel oops when unplugging USB audio interface on 6.1",
     "Hi,\n\nEvery time I unplug my USB audio interface the kernel oopses and the sound stack hangs.\n"
     "This is on 6.1.12 on a Dell laptop.\n\n"
     "[  120.123456] BUG: kernel NULL pointer dereference, address: 0000000000000008\n"
     "[  120.123460] RIP: 0010:snd_usb_disconnect+0x2f/0x1a0\n\nAny ideas what could be wrong?\n", False),
    ("laptop fails to suspend", "Hello,\n\nMy new laptop fails to suspend with 6.8.2, the screen goes black "
                                "and the fans keep spinning.\nI have attached dmesg. What can I try?\n", False),
    # breakage told without the word regression: a failing and a working version
    ("NFS write problem", "Since 5.19 our NFS clients hang on write, 5.18 was fine.\n", True),
])
def test_change_between_kernels_decides_the_claim(subject, body, expected):
    assert extractors.extract(subject, body).is_regression is expected
