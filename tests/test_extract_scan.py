"""The fast scanning helpers give exactly what ``re`` gives.

``scan.find_all`` / ``scan.search`` / ``MailText.finditer`` skip or narrow regex scans
(literal guards, prefix scans, word lists), the cue patterns carry a ``\\b(?=\\w)`` check
(``word_led``), the stated-percent search is '%'-anchored and the tokenizer is one ``findall``:
all of it must be invisible in the results.  Checked on the bundled real mail and on random text.
"""

from __future__ import annotations

import email
import email.policy
import random
import re
from pathlib import Path

import pytest

from extractors import (classify, culprits, evidence, hwconfig, measures, mentions, numbers, patterns as P, pipeline,
                        ranges, rules, scan, subsystems, titles)
from extractors import mailtext
from extractors.mailtext import MailText

DATA = Path(__file__).resolve().parent / "data"


def _bodies() -> list[str]:
    out = []
    for f in sorted(DATA.glob("corpus/*/*.eml")) + sorted(DATA.glob("threads/*.eml")):
        msg = email.message_from_bytes(f.read_bytes(), policy=email.policy.default)
        part = msg.get_body(preferencelist=("plain",)) or msg
        try:
            out.append(part.get_content())
        except Exception:
            continue
    return out


def _patterns() -> dict[str, re.Pattern]:
    import extractors
    pats: dict[str, re.Pattern] = {"prefilter._CUES": extractors._CUES, "prefilter._STRONG": extractors._STRONG}
    for mod in (P, scan, rules, mentions, titles, culprits, ranges, measures, hwconfig, classify, evidence, pipeline,
                numbers, subsystems, mailtext):
        for name, v in vars(mod).items():
            items = [(name, v)] if isinstance(v, re.Pattern) else []
            if isinstance(v, list):
                for i, x in enumerate(v):
                    x = x[0] if isinstance(x, tuple) else x
                    if isinstance(x, re.Pattern):
                        items.append((f"{name}[{i}]", x))
            for n, rx in items:
                if isinstance(rx.pattern, str):
                    pats[f"{mod.__name__}.{n}"] = rx
    return pats


RANDOM_PIECES = ["about", "ABOUT", "more than", " ", "  ", "\n", "\t", "20", "3.5", "-", "+", "%", "regression",
                 "Regressed", "drop", "of", "the", "commit", "a1b2c3d4e5", "v6.1", "5.15-rc3", "ext4", "XFS", "fio",
                 "bisected to", "caused by", "İ", "ſ", "K", "x86_64", "ARM64", "> ", "CONFIG_FOO=y", "MB/s", ".",
                 ",", "(", ")", ":", "fails to boot", "performance", "Intel(R)", "16GB RAM", "will-it-scale"]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    rng = random.Random(11)
    out = []
    for b in _bodies():
        mt = MailText(b)
        out += [mt.clean] + [u.text for u in mt.units[:8]]
    for _ in range(150):
        out.append("".join(rng.choice(RANDOM_PIECES) for _ in range(rng.randint(1, 30))))
    return out


def test_find_all_and_search_equal_re(texts):
    for name, rx in _patterns().items():
        for t in texts:
            want = [(m.span(), m.groups()) for m in rx.finditer(t)]
            assert [(m.span(), m.groups()) for m in scan.find_all(rx, t)] == want, name
            first = rx.search(t)
            got = scan.search(rx, t)
            assert (got and (got.span(), got.groups())) == (first and (first.span(), first.groups())), name
            if first is not None:
                assert scan.may_match(rx, t), name


def test_mailtext_scans_equal_re():
    for b in _bodies():
        mt = MailText(b)
        for rx in list(_patterns().values()) + list(P.WORD_GUARDS):
            assert [m.span() for m in mt.finditer(rx)] == [m.span() for m in rx.finditer(mt.clean)]
            m = mt.search(rx)
            s = rx.search(mt.clean)
            assert (m and m.span()) == (s and s.span())


def test_word_led_keeps_the_matches(texts):
    sources = [r"\b(?:regress\w*|broken|fails?|crash\w*|\d+(?:\.\d+)?\s?%\s+(?:regression|drop))\b",
               r"\bbisect\w*\b[^.\n]{0,60}?\b(?:to|at|down)\s*$", r"\b(?:this|your) patch\b"]
    for src in sources:
        for flags in (0, re.I):
            rx = re.compile(src, flags)
            fast = scan.word_led(rx)
            assert fast is not rx
            for t in texts:
                assert [m.span() for m in fast.finditer(t)] == [m.span() for m in rx.finditer(t)]
    # not every match starts a word: left alone
    assert scan.word_led(re.compile(r"\b(?:foo|%)")).pattern == r"\b(?:foo|%)"


def test_stated_percent_search_equals_re(texts):
    rng = random.Random(3)
    extra = ["".join(rng.choice(RANDOM_PIECES + ["~", ">", "nearly", "approximately", "1-3", "worse"])
                     for _ in range(rng.randint(1, 12))) for _ in range(2000)]
    for t in texts + extra:
        a = measures._STATED_PCT.search(t)
        b = measures._search_stated_pct(t, scan.fold(t))
        assert (a and (a.span(), a.groups())) == (b and (b.span(), b.groups())), t


def test_tokenizer_tokens_unchanged():
    ws = re.compile(r"\S+|\s+")

    def reference(text):  # the original whitespace tokenizer
        words, spaces = [], []
        for m in ws.finditer(text):
            tok = m.group()
            if tok[0].isspace():
                if words and not spaces[-1] and tok.startswith(" "):
                    spaces[-1] = True
                    tok = tok[1:]
                if tok:
                    words.append(tok)
                    spaces.append(False)
            else:
                words.append(tok)
                spaces.append(False)
        return words, spaces

    nlp = pipeline.get_nlp()
    rng = random.Random(5)
    samples = _bodies() + ["", " ", "  a", "a \n b", "a\u00a0 b", "x\r\n y "]
    samples += ["".join(rng.choice("ab \n\t\u00a0\r") for _ in range(rng.randint(0, 12))) for _ in range(2000)]
    for t in samples:
        doc = nlp.make_doc(t)
        assert doc.text == t
        assert ([x.text for x in doc], [bool(x.whitespace_) for x in doc]) == reference(t)


def test_pipeline_vocabulary_is_bounded(monkeypatch):
    """Every new token string stays in a spaCy vocabulary: past VOCAB_LIMIT the pipeline starts
    afresh, so months of ingest do not grow the process without bound; results are the same."""
    import extractors
    from extractors import pipeline

    text = "v6.7 was fine, v6.8 is 20% slower. Bisected to 0123456789ab.\n" + " ".join(
        f"token{i}" for i in range(300))
    before = extractors.extract("[REGRESSION] xfs: 20% slower since v6.8", text)
    monkeypatch.setattr(pipeline, "VOCAB_LIMIT", 100)
    first = pipeline.get_nlp()
    assert len(first.vocab) > 100
    after = extractors.extract("[REGRESSION] xfs: 20% slower since v6.8", text)
    assert pipeline.get_nlp() is not first
    assert (after.good, after.bad, after.culprit_commit, after.change_percent) == (
        before.good, before.bad, before.culprit_commit, before.change_percent)


def test_scout_of_a_case_insensitive_pattern_keeps_the_matches(texts):
    """``scan.scout``: the lower-cased, case-sensitive copy run on ``fold(text)`` finds the same
    matches (written in any case, with the characters that fold to ASCII letters)."""
    rx = re.compile(r"\b(?:performance|Throughput|I/O)\s+(?:drop|regression)s?\b|\b[A-Z]{2}\d+\b|(?P<n>\d+)\s?%", re.I)
    assert scan.scout(rx) is not None
    assert scan.scout(re.compile(r"(?i)x")) is None and scan.scout(re.compile(r"[A-z]", re.I)) is None
    assert scan.scout(re.compile(r"\x41", re.I)) is None and scan.scout(re.compile("a")) is None
    more = [t.swapcase() for t in texts] + ["THROUGHPUT DROPS", "İ/O regreſſion", "PERFORMANCE\nREGRESSION",
                                            "AB12 15 %"]
    for t in texts + more:
        want = [(m.span(), m.groups()) for m in rx.finditer(t)]
        assert [(m.span(), m.groups()) for m in scan.find_all(rx, t)] == want, t
        first = rx.search(t)
        got = scan.search(rx, t)
        assert (got and (got.span(), got.groups())) == (first and (first.span(), first.groups())), t


def test_version_mentions_found_without_a_pattern_per_version():
    rng = random.Random(5)
    alphabet = ["6", ".", "1", "v", " ", "_", "a", "-", "é", "²", "\n"]
    for _ in range(20000):
        clean = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3)))
        rx = re.compile(r"(?<![\w.])" + re.escape(text) + r"(?![\w])")
        assert evidence._written(clean, text) == [m.span() for m in rx.finditer(clean)], (clean, text)


def test_prefix_plans_through_optional_leads_icase_groups_and_many_prefixes(texts):
    from extractors import boards
    # an optional lead part, a (?i:...) group in a case-sensitive pattern, more than 40 prefixes:
    # each is tried only at its literal prefixes now, with the matches of a full scan
    cases = [r"\b((?:Intel\s+)?(?:Core\s+)?i[3579]-\d{4,5}[A-Z]{0,2})\b",
             r"\b((?:Marvell\s+)?Kirkwood|(?i:UltraSPARC)(?:[\s-]?[IVX]+\w*)?|Dove)",
             r"\b(?:this|your|the) (?:patch|commit|change|series) (?:causes|caused|introduces|introduced)\b"]
    extra = ["an Intel Core i7-8700K box, i5-1135G7 too", "Marvell Kirkwood and ULTRASPARC IIi, ultraſparc-III, Dove",
             "I think the patch introduced it; This commit causes a hang; your series introduces"]
    for src in cases:
        for flags in (0, re.I):
            rx = re.compile(src, flags)
            assert scan.scan_plan(rx) is not None, src
            for t in texts + extra:
                want = [(m.span(), m.groups()) for m in rx.finditer(t)]
                assert [(m.span(), m.groups()) for m in scan.find_all(rx, t)] == want, src
                s, g = rx.search(t), scan.search(rx, t)
                assert (g and g.span()) == (s and s.span()), src
    # the lazy scan up to an end position (boards.arch_guess) equals finditer(text, 0, end)
    for rx, _arch, _src in boards._ALL:
        for t in texts[:60] + extra:
            low = scan.fold(t)
            for end in (len(t), len(t) // 2):
                assert ([m.span() for m in scan.iter_matches(rx, t, low, end)]
                        == [m.span() for m in rx.finditer(t, 0, end)]), rx.pattern
