"""A generator of hostile mail input: what an attacker (or an unlucky archive) feeds the ingest.

``generate(root)`` writes the corpus under ``root`` and returns a Manifest: how many messages
the files hold (each must end stored, duplicate or quarantined), the exact bytes of every
message that may be stored, and which files are no input at all (a FIFO, a symlink to a device:
skipped with a reason).  Deterministic for a seed; also runnable:
``python -m tests.hostile_corpus DIR``.

Cases: charset names of non-text codecs (zlib, base64, rot13, hex, uu, bz2, quopri, idna,
undefined, a NUL in the name ...) in bodies, encoded-words and RFC 2231 parameters; encoded-word
abuse; 8-bit UTF-8 and latin-1 headers; NUL bytes; Message-IDs longer than 998 characters;
100,000 References; deep MIME nesting; thousands of parts; missing boundaries; CRLF / LF / CR
mixes; huge headers and header blocks; gzip bombs, junk after gzip data; an mboxo file with an
unescaped "From " body line; a file name that is not UTF-8; empty, binary and header-less files;
duplicates and Message-ID collisions; broken transfer encodings; and seeded random mutations of
a valid message.
"""

from __future__ import annotations

import gzip
import os
import random
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

CODECS = ["zlib", "base64", "rot13", "hex", "uu", "bz2", "quopri", "idna", "undefined", "punycode",
          "unicode_escape", "utf-8\x00", "zlib_codec", "x-\x01bogus", "utf-16", "utf-7"]
MIB = 1024 * 1024


@dataclass
class Manifest:
    messages: int = 0  # messages in the input files: stored + duplicates + quarantined
    raws: set = field(default_factory=set)  # exact bytes each stored message may have
    not_inputs: list = field(default_factory=list)  # paths that must be skipped with a reason
    cases: dict = field(default_factory=dict)  # case name -> file name(s)
    total_bytes: int = 0


def eml(mid: str, subject: str = "hostile", body: str = "body\n", extra: str = "",
        from_: str = "Attacker <a@example.org>") -> bytes:
    return (f"From: {from_}\nTo: list@example.org\nSubject: {subject}\n"
            f"Date: Mon, 01 Jan 2024 00:00:00 +0000\nMessage-ID: <{mid}>\n{extra}"
            f"\n{body}").encode("utf-8", "surrogateescape")


class _Writer:
    def __init__(self, root: Path, man: Manifest) -> None:
        self.root, self.man = root, man

    def file(self, case: str, name: str | bytes, data: bytes, messages: int = 1,
             raws: list[bytes] | None = None) -> Path:
        path = Path(os.fsdecode(os.path.join(os.fsencode(self.root), os.fsencode(name))))
        path.write_bytes(data)
        self.man.messages += messages
        self.man.total_bytes += len(data)
        self.man.raws.update(raws if raws is not None else [data])
        self.man.cases.setdefault(case, []).append(os.fsdecode(name))
        return path


def _mboxrd(raws: list[bytes]) -> bytes:
    from bot.sources.files import to_mboxrd

    return to_mboxrd(raws)


def _zero_bomb(size: int, prefix: bytes = b"") -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [c.compress(prefix)]
    block = b"\0" * MIB
    for _ in range(size // MIB):
        out.append(c.compress(block))
    out.append(c.flush())
    return b"".join(out)


def generate(root: Path, seed: int = 10, fuzz: int = 100, bomb_bytes: int = 1 << 30,
             specials: bool = True) -> Manifest:
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    man = Manifest()
    w = _Writer(root, man)
    rnd = random.Random(seed)

    # -- charsets naming codecs that are not text charsets ------------------------------------
    for i, cs in enumerate(CODECS):
        w.file("charset-body", f"cs-body-{i}.eml", eml(f"cs-body-{i}@h", body="caf\udce9 body\n",
               extra=f'MIME-Version: 1.0\nContent-Type: text/plain; charset="{cs}"\n'
                     "Content-Transfer-Encoding: 8bit\n"))
        w.file("charset-word", f"cs-word-{i}.eml",
               eml(f"cs-word-{i}@h", subject=f"=?{cs}?q?abc=00?= =?{cs}?b?eJzLSM3JyQcABiwCFQ==?=",
                   from_=f"=?{cs}?q?Mallory?= <m@example.org>"))
        w.file("charset-2231", f"cs-2231-{i}.eml", eml(
            f"cs-2231-{i}@h", extra=f"MIME-Version: 1.0\nContent-Type: text/plain; charset*={cs}''%E9t%E9\n"))
    w.file("charset-html", "cs-html.eml", eml("cs-html@h", body="<p>hi</p>\n",
           extra='Content-Type: text/html; charset="rot13"\n'))

    # -- encoded-word abuse ---------------------------------------------------------------------
    w.file("ew-many", "ew-many.eml", eml("ew-many@h", subject=" ".join(["=?utf-8?q?a?="] * 50_000)))
    w.file("ew-broken", "ew-broken.eml", eml("ew-broken@h", subject="=?utf-8?b?!!!*?= =?utf-8?q?=ZZ?= =?"
                                             "?q?x?= =?utf-8??x?= =?=?utf-8?q?a?=?="))
    w.file("ew-nul", "ew-nul.eml", eml("ew-nul@h", subject="=?utf-8?q?nul=00here?=",
                                       from_="=?utf-8?q?E=00ve?= <e@example.org>"))
    w.file("ew-huge", "ew-huge.eml", eml("ew-huge@h", subject="=?utf-8?b?" + "QUFB" * 500_000 + "?="))
    w.file("ew-lang", "ew-lang.eml", eml("ew-lang@h", subject="=?utf-8*en?q?lang?= =?UTF-8?Q?=E2=80=AEevil?="))

    # -- 8-bit headers (RFC 6532), NUL bytes -----------------------------------------------------
    w.file("8bit-utf8", "8bit-utf8.eml", eml("8bit-utf8@h", subject="h\u00e9llo w\u00f6rld \u2603",
                                             from_="J\u00f6rg <j@example.org>"))
    w.file("8bit-latin1", "8bit-latin1.eml",
           b"From: J\xf6rg <j@example.org>\nSubject: caf\xe9\nMessage-ID: <8bit-latin1@h>\n\nbody\n")
    w.file("8bit-msgid", "8bit-msgid.eml", eml("\u00fcber-\u2603@h"))
    w.file("nul", "nul.eml", b"From: a\x00b@example.org\nSubject: nul\x00subject\nMessage-ID: <nul@h>\n"
           b"X-Nul: \x00\x00\x00\n\nbody \x00 with nul\n")
    w.file("nul-msgid", "nul-msgid.eml", eml("nul\x00id@h"))

    # -- Message-IDs and references -------------------------------------------------------------
    w.file("msgid-long", "msgid-long.eml", eml("L" * 5000 + "@h"))
    w.file("msgid-long-utf8", "msgid-long-utf8.eml", eml("\u00e9" * 990 + "@h"))
    w.file("msgid-huge", "msgid-huge.eml", eml("H" * 2_000_000 + "@h"))
    w.file("irt-long", "irt-long.eml", eml("irt-long@h", extra=f"In-Reply-To: <{'P' * 3000}@h>\n"))
    refs = " ".join(f"<ref{i}@h>" for i in range(100_000))
    w.file("refs-100k", "refs-100k.eml", eml("refs-100k@h", extra=f"References: {refs}\n"))
    w.file("refs-self", "refs-self.eml", eml("refs-self@h", extra="References: <refs-self@h> <refs-self@h>\n"
                                             "In-Reply-To: <refs-self@h>\n"))

    # -- MIME structure -------------------------------------------------------------------------
    depth = 3000
    nest = "".join(f'Content-Type: multipart/mixed; boundary="b{i}"\n\n--b{i}\n' for i in range(depth))
    w.file("mime-deep", "mime-deep.eml", eml("mime-deep@h", extra="MIME-Version: 1.0\n", body="") + nest.encode()
           + b"Content-Type: text/plain\n\ndeep\n")
    parts = "".join(f"--p\nContent-Type: text/plain\n\npart {i}\n" for i in range(5000)) + "--p--\n"
    w.file("mime-parts", "mime-parts.eml", eml("mime-parts@h", body=parts,
           extra='MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="p"\n'))
    mime = "MIME-Version: 1.0\nContent-Type: "
    for case, body, extra in (  # (case, body, headers): broken structure and transfer encodings
            ("mime-noboundary", "--x\n\nhello\n", mime + "multipart/mixed\n"),
            ("mime-unclosed", "--q\nContent-Type: text/plain\n\nx\n", mime + 'multipart/mixed; boundary="q"\n'),
            ("mime-absent", "no boundary ever\n", mime + 'multipart/alternative; boundary="never"\n'),
            ("cte-base64", "!!!@@@###=\n===\n", mime + "text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n"),
            ("cte-uu", "begin 644 x\n%%%%%\nend\n", mime + "text/plain\nContent-Transfer-Encoding: x-uuencode\n"),
            ("cte-qp", "=ZZ=\n=0=\n=", mime + "text/plain; charset=utf-8\nContent-Transfer-Encoding: quoted-printable\n")):
        w.file(case, f"{case}.eml", eml(f"{case}@h", body=body, extra=extra))
    w.file("html-junk", "html-junk.eml", eml("html-junk@h", body="<" * 1_000_000 + "<!--" * 100_000,
           extra="Content-Type: text/html\n"))
    w.file("ctype-params", "ctype-params.eml", eml("ctype-params@h", extra="Content-Type: text/plain; "
           + "; ".join(f"p{i}*{i}=x" for i in range(10_000)) + "\n"))

    # -- line endings and headers ---------------------------------------------------------------
    w.file("crlf-mix", "crlf-mix.eml", b"From: a@example.org\r\nSubject: mix\nMessage-ID: <crlf-mix@h>\r\n"
           b"\r\nline one\r\nline two\nline three\rline four\r\n")
    w.file("cr-only", "cr-only.eml", b"From: a@example.org\rSubject: cr\rMessage-ID: <cr-only@h>\r\rbody\r")
    w.file("headers-many", "headers-many.eml", eml("headers-many@h", extra="".join(
        f"X-H{i}: {'v' * 50}\n" for i in range(20_000))))
    w.file("header-line-huge", "header-line-huge.eml", eml("header-huge@h", extra="X-Big: " + "b" * 5 * MIB + "\n"))
    w.file("header-folds", "header-folds.eml", eml("header-folds@h", subject="s" + "\n s" * 200_000))
    w.file("no-body", "no-body.eml", b"From: a@example.org\nMessage-ID: <no-body@h>\nSubject: x")
    w.file("date-junk", "date-junk.eml", eml("date-junk@h").replace(
        b"Mon, 01 Jan 2024 00:00:00 +0000", b"Mon, 99 Foo 99999999 99:99:99 +99999"))
    w.file("long-line", "long-line.eml", eml("long-line@h", body="x" * 20 * MIB))

    # -- not mail / empty / too large ------------------------------------------------------------
    w.file("empty", "empty.eml", b"")
    w.file("binary", "binary.eml", bytes(rnd.randrange(256) for _ in range(4096)))
    w.file("too-large", "too-large.eml", eml("too-large@h", body="A" * (40 * MIB)))
    w.file("no-newline", "no-newline.eml", b"Z" * (34 * MIB))

    # -- duplicates and collisions ---------------------------------------------------------------
    dup = eml("dup@h")
    w.file("duplicate", "dup-1.eml", dup)
    w.file("duplicate", "dup-2.eml", dup)
    w.file("collision", "collide.eml", eml("dup@h", body="other content\n"))

    # -- file formats ----------------------------------------------------------------------------
    mbox_raws = [eml(f"mbox-{i}@h", body=f"message {i}\nFrom here on\n>From quoted\n") for i in range(3)]
    w.file("mboxrd", "plain.mbox", _mboxrd(mbox_raws), 3, mbox_raws)
    w.file("mbox-gz-junk", "junk.mbox.gz", gzip.compress(_mboxrd(mbox_raws)) + b"JUNK" * 100, 3, mbox_raws)
    two = gzip.compress(_mboxrd(mbox_raws[:1])) + gzip.compress(_mboxrd(mbox_raws[1:]))
    w.file("mbox-gz-members", "members.mbox.gz", two, 3, mbox_raws)
    o1 = eml("mboxo-1@h", body="The report:\n\nFrom the logs I see a regression.\nok\n")
    o2 = eml("mboxo-2@h")
    mboxo = (b"From someone@example.org Mon Jan  1 00:00:00 2024\n" + o1 + b"\n"
             b"From other@example.org Mon Jan  1 00:00:01 2024\n" + o2 + b"\n")
    w.file("mboxo-from", "mboxo.mbox", mboxo, 2, [o1, o2])
    w.file("mbox-crlf", "crlf.mbox", b"From x Mon Jan  1 00:00:00 2024\r\n" + eml("mbox-crlf@h").replace(b"\n", b"\r\n")
           + b"\r\n", 1, [eml("mbox-crlf@h").replace(b"\n", b"\r\n")])
    w.file("bomb-gz", "bomb.eml.gz", _zero_bomb(bomb_bytes, b"From: a@example.org\nMessage-ID: <bomb@h>\n\n"))
    w.file("bomb-mbox-gz", "bomb.mbox.gz", _zero_bomb(bomb_bytes, b"From x Mon Jan  1 00:00:00 2024\n"
                                                        b"From: a@example.org\nMessage-ID: <bomb2@h>\n\n"))
    w.file("gz-corrupt", "corrupt.gz", b"\x1f\x8b\x08\x00garbage that is not deflate data")
    w.file("gz-empty", "empty.gz", b"\x1f\x8b")
    w.file("name-not-utf8", b"bad-\xff\xfe-name.eml", eml("bad-name@h"))

    # -- seeded random mutations of a valid message ----------------------------------------------
    base = eml("fuzz-base@h", subject="=?utf-8?q?Re=3A_[REGRESSION]_perf?=", body="perf drops 10%\n",
               extra='MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="zz"\nReferences: <a@h> <b@h>\n')
    base += b"--zz\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\nSGVsbG8=\n--zz--\n"
    tokens = [b"\x00", b"\xff", b"=?", b"?=", b"\r", b"\n", b"--zz", b"charset=zlib", b"<", b">", b"\n\n",
              b": ", b"\xc3", b"\xe2\x80\xae", b"=00", b"From ", b"\t", b"boundary=\"", b"=?rot13?q?"]
    for i in range(fuzz):
        data = bytearray(base.replace(b"fuzz-base@h", f"fuzz-{i}@h".encode()))
        for _ in range(rnd.randint(1, 12)):
            op = rnd.random()
            pos = rnd.randrange(len(data) + 1)
            if op < 0.4:
                data[pos:pos] = rnd.choice(tokens) * rnd.randint(1, 50)
            elif op < 0.7 and len(data) > 1:
                del data[pos:pos + rnd.randint(1, 30)]
            elif len(data) > 0:
                data[min(pos, len(data) - 1)] = rnd.randrange(256)
        if data.startswith(b"From ") or data.startswith(b"\x1f\x8b"):
            data[0:0] = b"X"  # stays one message (a file starting "From " is an mbox)
        w.file("fuzz", f"fuzz-{i:03d}.eml", bytes(data))

    # -- not inputs: skipped with a reason --------------------------------------------------------
    if specials:
        fifo = root / "a-fifo.eml"
        os.mkfifo(fifo)
        man.not_inputs.append(fifo)
        for target, name in (("/dev/zero", "zero.eml"), ("/dev/null", "null.mbox")):
            link = root / name
            link.symlink_to(target)
            man.not_inputs.append(link)
    return man


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m tests.hostile_corpus DIR", file=sys.stderr)
        return 2
    man = generate(Path(argv[1]))
    print(f"{man.messages} messages in {sum(map(len, man.cases.values()))} files "
          f"({len(man.cases)} cases, {man.total_bytes / MIB:.1f} MiB), {len(man.not_inputs)} non-inputs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
