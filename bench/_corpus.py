"""Corpus loading for bench/ and tests: .eml files + labels.jsonl.

Parsing uses ``bot.sources.mail.parse_message`` when it is importable, else a small stdlib helper.
"""

from __future__ import annotations

import email
import email.policy
import json
import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_CORPUS = Path(os.environ.get("REGTRIAGE_CORPUS", "/work/shared/corpus"))
# the project's own labelled corpus: train/ dev/ test/ (see bench/corpus/README.md)
CORPUS_ROOT = Path(__file__).resolve().parent / "corpus"


@dataclass
class Message:
    file: str
    subject: str | None
    message_id: str | None
    body: str
    label: dict | None = None


def _stdlib_parse(raw: bytes) -> tuple[str | None, str | None, str]:
    msg = email.message_from_bytes(raw, policy=email.policy.default)
    subject = msg.get("Subject")
    mid = msg.get("Message-ID")
    part = msg.get_body(preferencelist=("plain",)) or msg
    try:
        body = part.get_content()
    except Exception:  # unknown charset or broken transfer encoding
        payload = part.get_payload(decode=True) or b""
        charset = part.get_content_charset() or "utf-8"
        try:
            body = payload.decode(charset, errors="replace")
        except LookupError:
            body = payload.decode("latin-1", errors="replace")
    return (str(subject) if subject is not None else None), (str(mid) if mid else None), body


def parse(raw: bytes) -> tuple[str | None, str | None, str]:
    try:
        from bot.sources.mail import parse_message  # type: ignore
    except Exception:
        return _stdlib_parse(raw)
    try:
        p = parse_message(raw)
        return p.subject or None, p.message_id, p.body
    except Exception:
        return _stdlib_parse(raw)


def load_dir(d: Path) -> list[Message]:
    labels = {}
    lf = d / "labels.jsonl"
    if lf.exists():
        for line in lf.read_text().splitlines():
            if line.strip():
                obj = json.loads(line)
                labels[obj["file"]] = obj
    out = []
    for f in sorted(d.glob("*.eml")):
        subject, mid, body = parse(f.read_bytes())
        out.append(Message(f.name, subject, mid, body, labels.get(f.name)))
    return out


def load_corpus(root: Path | str | None = None, parts=("seeds", "dev")) -> list[Message]:
    root = Path(root) if root else DEFAULT_CORPUS
    if (root / "labels.jsonl").exists():
        return load_dir(root)
    msgs: list[Message] = []
    for p in parts:
        if (root / p).is_dir():
            msgs.extend(load_dir(root / p))
    return msgs


def load_split(split: str, root: Path | str | None = None) -> list[Message]:
    """One split (train, dev or test) of the project's corpus."""
    d = Path(root) if root else CORPUS_ROOT
    return load_dir(d / split) if (d / split).is_dir() else []
