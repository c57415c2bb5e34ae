"""The spaCy pipeline: ``spacy.blank("en")`` with our own tokenizer and components.

Stages (all registered here, no model downloads):

* ``regtriage_mail_tokenizer`` - whitespace tokenizer that keeps the body text byte-exact
  (``doc.text == body``) and is ~10x faster than the rule tokenizer on mail.
* ``regtriage_mail_segmenter`` - cuts the body into lines / quoted blocks / sentences
  (``MailText``), sets ``Token.is_sent_start`` and stores the segmentation in ``doc._.mail``.
  ``Token._.quote_depth`` / ``Span._.quote_depth`` read the ``>`` depth from it.
* ``regtriage_kernel_entities`` - regex entity finder (commit ids, versions, ranges, CONFIG_
  options, percentages, CPU models, memory sizes, arch names, filesystems, benchmarks) into
  ``doc.spans["kernel"]`` (overlapping spans allowed, labels = entity type).
* ``regtriage_claim_scorer`` - the rule stages (``rules.rule_context``) deciding is_regression,
  kind, culprit, good/bad, measurements; the result is ``doc._.claim``.
* ``regtriage_learned_decider`` - the trained models (``learned``) deciding over the rule
  stages' candidates.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy
import spacy
from spacy.attrs import IDX, SENT_START
from spacy.language import Language
from spacy.tokens import Doc, Span, Token
from spacy.util import registry

from . import learned
from . import patterns as P
from .mailtext import MailText
from .mentions import clean_commits, clean_versions
from .rules import rule_context

WORD_SPACE = re.compile(r"(\S+)( ?)|(\s+)")

if not Doc.has_extension("mail"):
    Doc.set_extension("mail", default=None)
    Doc.set_extension("subject", default=None)
    Doc.set_extension("claim", default=None)
if not Doc.has_extension("rules"):
    Doc.set_extension("rules", default=None)
if not Doc.has_extension("mail_text"):
    Doc.set_extension("mail_text", default=None)


def _depth_of_token(tok: Token) -> int:
    mt = tok.doc._.mail
    return mt.depth_of_body(tok.idx) if mt is not None else 0


def _depth_of_span(span: Span) -> int:
    mt = span.doc._.mail
    return mt.depth_of_body(span.start_char) if mt is not None else 0


if not Token.has_extension("quote_depth"):
    Token.set_extension("quote_depth", getter=_depth_of_token)
if not Span.has_extension("quote_depth"):
    Span.set_extension("quote_depth", getter=_depth_of_span)


class MailTokenizer:
    """Whitespace tokenizer: words are runs of non-space; other whitespace becomes tokens."""

    def __init__(self, vocab):
        self.vocab = vocab

    def __call__(self, text: str) -> Doc:
        # a word takes one following " " as its trailing space; the rest of a whitespace run
        # (or all of it, at the start of the text or when it does not begin with " ") is a token
        parts = WORD_SPACE.findall(text)
        doc = Doc(self.vocab, words=[w or ws for w, _sp, ws in parts], spaces=[bool(sp) for _w, sp, ws in parts])
        doc._.mail_text = text  # == doc.text, without joining the tokens again
        return doc

    # spaCy serialisation hooks (nothing to store)
    def to_bytes(self, **kw):
        return b""

    def from_bytes(self, data, **kw):
        return self

    def to_disk(self, path, **kw):
        pass

    def from_disk(self, path, **kw):
        return self


@registry.tokenizers("regtriage_mail_tokenizer.v1")
def create_mail_tokenizer():
    def make(nlp):
        return MailTokenizer(nlp.vocab)
    return make


def _body_depth_index(mt: MailText):
    starts = [s.bstart for s in mt.segments]
    depths = [s.depth for s in mt.segments]
    from bisect import bisect_right

    def depth_of_body(pos: int) -> int:
        i = bisect_right(starts, pos) - 1
        return depths[i] if i >= 0 else 0
    return depth_of_body


@Language.component("regtriage_mail_segmenter")
def mail_segmenter(doc: Doc) -> Doc:
    text = doc._.mail_text
    mt = MailText(doc.text if text is None else text)
    mt.depth_of_body = _body_depth_index(mt)  # type: ignore[attr-defined]
    doc._.mail = mt
    starts = {mt.to_body(u.cstart) for u in mt.units}
    if len(doc):
        # one array assignment instead of a per-token property write (which re-checks annotations)
        idx = doc.to_array(IDX)
        arr = numpy.full(len(doc), -1, dtype="int64")
        arr[0] = 1
        if starts:
            # the tokens starting at a unit start (token offsets ascend: a binary search each)
            want = numpy.fromiter(sorted(starts), dtype=idx.dtype, count=len(starts))
            pos = numpy.searchsorted(idx, want)
            pos = pos[pos < len(idx)]
            arr[pos[idx[pos] == want[:len(pos)]]] = 1
        doc.from_array([SENT_START], arr.reshape(-1, 1).view("uint64"))
    return doc


_RANGE_SEP = re.compile(r"\s*(?:\.\.\.?|->|-->|→|=>)\s*")
ENTITY_LABELS = ("COMMIT", "VERSION", "RANGE", "CONFIG", "PERCENT", "CPU", "MEMORY", "ARCH", "FS", "BENCH")


@Language.component("regtriage_kernel_entities")
def kernel_entities(doc: Doc) -> Doc:
    mt: MailText = doc._.mail
    clean = mt.clean
    found: list[tuple[int, int, str]] = []
    for m in clean_commits(mt):
        found.append((m.cstart, m.cend, "COMMIT"))
    vs = clean_versions(mt)
    for m in vs:
        found.append((m.cstart, m.cend, "VERSION"))
    for a, b in zip(vs, vs[1:]):
        if _RANGE_SEP.fullmatch(clean, a.cend, b.cstart):
            found.append((a.cstart, b.cend, "RANGE"))
    for m in mt.finditer(P.CONFIG_OPT):
        found.append((m.start(), m.end(), "CONFIG"))
    for m in mt.finditer(P.PERCENT):
        found.append((m.start(), m.end(), "PERCENT"))
    for rx in P.CPU_PATTERNS[:7]:
        for m in mt.finditer(rx):
            found.append((m.start(1), m.end(1), "CPU"))
    for rx in P.MEMORY_PATTERNS:
        for m in mt.finditer(rx):
            found.append((m.start(1), m.end(1), "MEMORY"))
    for rx, _name in P.ARCH_WORDS:
        for m in mt.finditer(rx):
            found.append((m.start(), m.end(), "ARCH"))
    for m in mt.finditer(P.FS_RE):
        found.append((m.start(), m.end(), "FS"))
    for m in mt.finditer(P.BENCH_RE):
        found.append((m.start(), m.end(), "BENCH"))
    spans = []
    to_body = mt.to_body
    for cs, ce, label in found:
        bs, be = to_body(cs), to_body(max(cs, ce - 1)) + 1
        sp = doc.char_span(bs, be, label=label, alignment_mode="expand")
        if sp is not None:
            spans.append(sp)
    doc.spans["kernel"] = spans
    return doc


@Language.component("regtriage_claim_scorer")
def claim_scorer(doc: Doc) -> Doc:
    doc._.rules = rule_context(doc._.subject, doc._.mail)
    doc._.claim = doc._.rules.rule_claim
    return doc


@Language.component("regtriage_learned_decider")
def learned_decider(doc: Doc) -> Doc:
    """The trained models (``learned``) decide over the rule candidates."""
    model = learned.shipped_model()
    if model is not None and doc._.rules is not None:
        doc._.claim = learned.decide(doc._.rules, model)
    return doc


VOCAB_LIMIT = 400_000  # strings the pipeline's vocabulary may hold before it starts afresh


@lru_cache(maxsize=1)
def get_nlp() -> Language:
    """The pipeline, built once per process (and again when its vocabulary outgrows
    VOCAB_LIMIT: every new token string of every message stays in a spaCy vocabulary, so a
    bot that ingests for months would grow without bound).  The lexical attribute getters are
    dropped: no stage reads ``like_num``, ``shape`` and the like, and computing them for each
    new string was a third of the cost of building a Doc."""
    nlp = spacy.blank("en", config={"nlp": {"tokenizer": {"@tokenizers": "regtriage_mail_tokenizer.v1"}}})
    nlp.vocab.lex_attr_getters = {}
    nlp.add_pipe("regtriage_mail_segmenter")
    nlp.add_pipe("regtriage_kernel_entities")
    nlp.add_pipe("regtriage_claim_scorer")
    nlp.add_pipe("regtriage_learned_decider")
    return nlp


def run(subject: str | None, body: str, learned_stage: bool = True) -> Doc:
    """Run the pipeline; ``learned_stage=False`` stops after the rule stages (training)."""
    nlp = get_nlp()
    if len(nlp.vocab) > VOCAB_LIMIT:
        get_nlp.cache_clear()
        nlp = get_nlp()
    doc = nlp.make_doc(body)
    doc._.subject = subject
    for name, proc in nlp.pipeline:
        if name == "regtriage_learned_decider" and not learned_stage:
            break
        doc = proc(doc)
    return doc
