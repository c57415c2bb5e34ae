"""#regzbot command parsing (bot.tracker.regzbot): syntax and meaning as in regzbot's reference docs."""

import pytest

from bot.msgid import MessageId
from bot.tracker.regzbot import parse_commands, parse_fix, parse_introduced


def names(body):
    return [(c.name, c.args) for c in parse_commands(body)]


def test_every_documented_command_is_recognised():
    body = "\n".join([
        "#regzbot introduced: v6.1..v6.2",
        "#regzbot title: mm: slow page faults",
        "#regzbot dup-of: https://lore.kernel.org/r/other@example.org/",
        "#regzbot dup: https://lore.kernel.org/lkml/dup@example.org/",
        "#regzbot fix: 0123456789ab",
        "#regzbot resolve: user error",
        "#regzbot inconclusive: nobody can bisect",
        "#regzbot link: https://bugzilla.kernel.org/show_bug.cgi?id=1 bugzilla entry",
        "#regzbot unlink: https://bugzilla.kernel.org/show_bug.cgi?id=1",
        "#regzbot monitor: https://lore.kernel.org/all/patch@example.org/",
        "#regzbot unmonitor: https://lore.kernel.org/all/patch@example.org/",
        "#regzbot backburner: waiting for hardware",
        "#regzbot unbackburn",
        "#regzbot ignore-activity",
    ])
    got = parse_commands(body)
    assert [c.name for c in got] == ["introduced", "title", "dup-of", "dup", "fix", "resolve", "inconclusive",
                                     "link", "unlink", "monitor", "unmonitor", "backburner", "unbackburn",
                                     "ignore-activity"]
    assert all(c.known for c in got)
    assert [c.line_no for c in got] == list(range(1, 15))
    link = got[7]
    assert link.url == "https://bugzilla.kernel.org/show_bug.cgi?id=1" and link.link_title == "bugzilla entry"
    assert got[1].args == "mm: slow page faults"
    assert got[5].args == "user error"


def test_keyword_case_colon_and_leading_blanks():
    assert names("#REGZBOT Introduced:  v6.1..v6.2\n") == [("introduced", "v6.1..v6.2")]
    assert names("#regzbot introduced v6.1..v6.2\n") == [("introduced", "v6.1..v6.2")]  # no colon, as regzbot
    assert names("  #regzbot title:no space after colon") == [("title", "no space after colon")]
    intro = parse_commands("#regzbot introduced v6.1..v6.2")[0].introduced
    assert (intro.good, intro.bad, intro.culprit, intro.pointer) == ("v6.1", "v6.2", None, None)


def test_quoted_lines_signature_and_mid_line_mentions_are_ignored():
    body = ("> #regzbot resolve: quoted\n>> #regzbot fix: abcdef1234\n"
            "As I said, #regzbot title: not at line start\n"
            "#regzbotx title: not the keyword\n"
            "#regzbot title: the real one\n"
            "-- \n#regzbot resolve: in the signature\n")
    assert names(body) == [("title", "the real one")]
    assert parse_commands("") == [] and parse_commands(None) == []


def test_several_commands_on_one_line_and_introduced_first():
    cmds = parse_commands("#regzbot title: foo; #regzbot introduced: abcdef123456 ^\n#regzbot poke\n")
    assert [(c.name, c.line_no, c.seq) for c in cmds] == [("introduced", 1, 1), ("title", 1, 0), ("poke", 2, 0)]
    assert cmds[0].pointer == "^" and cmds[0].introduced.culprit == "abcdef123456"


def test_caret_forms_and_report_urls():
    c = parse_commands("#regzbot ^introduced: v6.7..v6.8")[0]
    assert c.name == "introduced" and c.pointer == "^" and c.introduced.bad == "v6.8"
    c = parse_commands("#regzbot introduced: 1f2e3d4c5d https://bugzilla.kernel.org/show_bug.cgi?id=42")[0]
    assert c.pointer.startswith("https://bugzilla") and c.introduced.culprit == "1f2e3d4c5d"


@pytest.mark.parametrize("args,expected", [
    ("v5.13..v5.14", (None, "v5.13", "v5.14")),
    ("v5.14-rc1..v5.14-rc2", (None, "v5.14-rc1", "v5.14-rc2")),
    ("v5.13..1F2E3D4C5D", (None, "v5.13", "1f2e3d4c5d")),
    ("next-20211006..next-20211008", (None, "next-20211006", "next-20211008")),
    ("ABCDEF123456", ("abcdef123456", None, None)),
    ("v6.8-rc3", (None, None, "v6.8-rc3")),
])
def test_introduced_values(args, expected):
    i = parse_introduced(args)
    assert (i.culprit, i.good, i.bad) == expected


def test_introduced_garbage_is_rejected():
    assert parse_introduced("") is None
    assert parse_introduced("v6.1..$(rm -rf /)") is None
    assert parse_introduced("'; DROP TABLE regressions;--") is None


def test_fix_by_commit_or_subject():
    assert parse_fix("0123456789ab") == ("0123456789ab", None)
    assert parse_fix('0123456789AB ("mm: fix it")') == ("0123456789ab", "mm: fix it")
    assert parse_fix('"mm: fix the zonelist walk"') == (None, "mm: fix the zonelist walk")
    assert parse_fix("mm: fix the zonelist walk") == (None, "mm: fix the zonelist walk")


def test_aliases_map_to_canonical_names():
    body = ("#regzbot subject: t\n#regzbot fixed-by: abcdef1234\n#regzbot resolved: r\n#regzbot related: "
            "https://lore.kernel.org/r/x@y/\n#regzbot back-burner: later\n#regzbot activity-ignore\n"
            "#regzbot frobnicate: what\n")
    cmds = parse_commands(body)
    assert [c.name for c in cmds] == ["title", "fix", "resolve", "monitor", "backburner", "ignore-activity",
                                      "frobnicate"]
    assert [c.known for c in cmds][-1] is False


@pytest.mark.parametrize("ref,msgid", [
    ("https://lore.kernel.org/r/abc@example.org/", "abc@example.org"),
    ("https://lore.kernel.org/lkml/abc@example.org/T/#u", "abc@example.org"),
    ("https://lore.kernel.org/all/abc%40example.org/", "abc@example.org"),
    ("https://lkml.kernel.org/r/abc@example.org", "abc@example.org"),
    ("https://patch.msgid.link/abc@example.org", "abc@example.org"),
    ("<abc@example.org>", "abc@example.org"),
    ("abc@example.org", "abc@example.org"),
    ("https://bugzilla.kernel.org/show_bug.cgi?id=1", None),
    ("not a link", None),
])
def test_msgid_from_ref(ref, msgid):
    assert MessageId.from_ref(ref) == msgid


def test_every_command_the_parser_knows_has_one_handler():
    from bot.tracker import commands, regzbot

    assert set(commands.COMMANDS) == set(regzbot.COMMANDS)
    assert all(callable(handler) for handler, _ in commands.COMMANDS.values())
