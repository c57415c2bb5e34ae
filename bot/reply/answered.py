"""The message a reply answers: its headers as written (:class:`Answered`), read from a stored
message, and which Message-IDs may be named in ``In-Reply-To``/``References``.  Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

MAX_MSGID = 250
_MSGID = re.compile(r"[!-;=?-~]{1,%d}@[!-;=?-~]{1,%d}" % (MAX_MSGID, MAX_MSGID))  # printable, no < > or space
SYNTHETIC_SUFFIX = "@synthetic.regtriage.invalid"


def valid_msgid(mid: str | None) -> bool:
    return bool(mid) and bool(_MSGID.fullmatch(mid)) and not mid.endswith(SYNTHETIC_SUFFIX)


@dataclass(frozen=True)
class Answered:
    """Headers of the message a reply answers (as written: RFC 2047 words still encoded)."""

    message_id: str
    subject: str
    from_: tuple[str, ...] = ()
    to: tuple[str, ...] = ()
    cc: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    list_post: tuple[str, ...] = ()
    auto_submitted: str | None = None
    regtriage_record: str | None = None

    @property
    def synthetic(self) -> bool:
        return self.message_id.endswith(SYNTHETIC_SUFFIX)


def answered_from_stored(msg: dict[str, Any]) -> Answered:
    """An :class:`Answered` from a stored message (``Store.get_message``)."""
    heads: dict[str, list[str]] = {}
    for name, value in msg.get("headers") or []:
        heads.setdefault(str(name).lower(), []).append(str(value))
    return Answered(message_id=msg["message_id"], subject=msg.get("subject") or "",
                    from_=tuple(heads.get("from", [])), to=tuple(heads.get("to", [])), cc=tuple(heads.get("cc", [])),
                    references=tuple(msg.get("refs") or []), list_post=tuple(heads.get("list-post", [])),
                    auto_submitted=(heads.get("auto-submitted") or [None])[0],
                    regtriage_record=(heads.get("x-regtriage-record") or [None])[0])
