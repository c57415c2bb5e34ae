"""``#regzbot`` commands applied to the tracker: one handler per command (as regzbot has), a
mixin of the tracker's transaction (:class:`bot.tracker.records._Run`), and the dispatch table."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bot.msgid import MessageId, lore_url
from bot.tracker.fields import STATUSES, has_facts, clean_title, culprits_match
from bot.tracker.regzbot import RegzbotCommand


@dataclass
class _Cmd:
    """One ``#regzbot`` command being applied: the mail, the command, the thread and record."""

    msg: Any
    cmd: RegzbotCommand
    mid: str
    actor: str | None
    root: str | None
    rid: int | None

    @property
    def kw(self) -> dict[str, Any]:
        return dict(actor=self.actor, message_id=self.mid, source="regzbot")


class CommandHandlers:
    """The command half of a tracker run; the record half (set_fields, relate, create, ...)
    is :class:`bot.tracker.records._Run`, which mixes this in."""

    # -- bookkeeping -------------------------------------------------------------------------
    def command_done(self, msg_id: str, cmd: RegzbotCommand) -> str | None:
        return self.tx.command_outcome(msg_id, cmd.line_no, cmd.seq)

    def note_command(self, msg_id: str, cmd: RegzbotCommand, outcome: str, rid: int | None,
                     note: str | None, *, replace: bool = False) -> None:
        vals = dict(command=cmd.name[:32], args=cmd.args[:2000], regression_id=rid, outcome=outcome,
                    note=note, applied_at=self.now)
        self.tx.save_command(msg_id, cmd.line_no, cmd.seq, vals, replace=replace)
        key = {"applied": "commands_applied", "pending": "commands_pending",
               "refused": "commands_refused"}.get(outcome, "commands_ignored")
        self.stats[key] += 1

    def run_commands(self, msg: dict[str, Any], commands: list[RegzbotCommand], *, retry: bool = False) -> None:
        for cmd in commands:
            done = self.command_done(msg["message_id"], cmd)
            if done is not None and not (retry and done == "pending"):
                continue
            outcome, rid, note = self.apply_command(msg, cmd)
            if retry and outcome == "pending":
                continue  # still waiting; keep the row as it is
            self.note_command(msg["message_id"], cmd, outcome, rid, note, replace=done is not None)

    def apply_command(self, msg: dict[str, Any], cmd: RegzbotCommand) -> tuple[str, int | None, str | None]:
        """Apply one command; returns (outcome, record id, note).  outcome: applied | pending
        (the thread is not tracked yet: retried on later runs) | ignored | refused | unknown.
        Each command has one handler in :data:`COMMANDS`, as in regzbot."""
        mid, actor = msg["message_id"], msg["from_addr"] or None
        root = self.root_of(mid)
        c = _Cmd(msg, cmd, mid, actor, root, self.record_for_thread(root))
        if not cmd.known or cmd.name not in COMMANDS:
            return "unknown", c.rid, f"unknown regzbot command {cmd.name!r}"
        name = cmd.name
        if not self.trust.may_command(name, actor):
            # closing a record or making one rerunnable is for [trust] trusted_senders only
            reason = (f"#regzbot {name} refused: the sender is not on [trust] trusted_senders "
                      "(only they may close records or start lab work by mail)")
            if c.rid is not None:
                self.history(c.rid, "command-refused", None, f"#regzbot {name}: {cmd.args}"[:500], note=reason,
                             **c.kw)
                self.touched.add(c.rid)
            return "refused", c.rid, reason
        handler, needs_record = COMMANDS[name]
        if needs_record and c.rid is None:
            return "pending", None, "thread not tracked (yet)"
        return handler(self, c) or ("applied", c.rid, None)

    # one handler per command: (outcome, record id, note), or None for ("applied", c.rid, None)
    def cmd_dup_of(self, c: _Cmd):
        target = self.record_for_report(MessageId.from_ref(c.cmd.url))
        if target is None:
            return "pending", c.rid, "the report it points at is not tracked (yet)"
        if c.rid is None:
            report = c.root if c.root and self.message(c.root) else c.mid
            m = self.message(report) or c.msg
            c.rid = self.create(report_message_id=report, title=clean_title(m["subject"]), created_at=m["date"],
                                actor=c.actor, source="regzbot", message_id=c.mid, note="#regzbot dup-of")
        if self.topmost(target) == c.rid:
            return "ignored", c.rid, "would make the record a duplicate of itself"
        self.mark_duplicate(c.rid, target, note=f"#regzbot dup-of: {c.cmd.args}", override=True, **c.kw)
        return None

    def cmd_title(self, c: _Cmd):
        title = re.sub(r"\s+", " ", c.cmd.args).strip()[:300]
        if not title:
            return "ignored", c.rid, "empty title"
        self.set_fields(c.rid, {"title": title, "title_source": "regzbot"}, override=True, **c.kw)
        return None

    def cmd_dup(self, c: _Cmd):
        other_mid = MessageId.from_ref(c.cmd.url)
        other_url = None if other_mid else c.cmd.url
        if not other_mid and not other_url:
            return "ignored", c.rid, "no link given"
        other = self.record_for_report(other_mid) if other_mid else self.tx.record_with_report_url(other_url)
        if other is None:
            m = self.message(other_mid) if other_mid else None
            other = self.create(report_message_id=other_mid, report_url=other_url,
                                title=clean_title(m["subject"]) if m else (c.cmd.link_title or c.cmd.url),
                                created_at=m["date"] if m else None, actor=c.actor, source="regzbot",
                                message_id=c.mid, note="#regzbot dup")
        if self.topmost(c.rid) == other:
            return "ignored", c.rid, "would make the record a duplicate of itself"
        self.mark_duplicate(other, c.rid, note=f"#regzbot dup: {c.cmd.args}", override=True, **c.kw)
        return None

    def cmd_fix(self, c: _Cmd):
        commit, subject = c.cmd.fix
        if not commit and not subject:
            return "ignored", c.rid, "no commit or subject given"
        status, tree = "fix-pending", None
        if commit and self.trees is not None:
            info = self.trees.resolve(commit)
            if info is not None:
                subject = subject or info.subject
                tree = ",".join(info.trees) or None
                if info.mainline:
                    status = "fixed"
        self.set_fields(c.rid, {"fix_commit": commit, "fix_subject": subject, "fix_tree": tree, "status": status},
                        override=True, note=f"#regzbot fix: {c.cmd.args}", **c.kw)
        return None

    def cmd_resolve(self, c: _Cmd):
        # regzbot's "inconclusive" stops tracking: resolved, with the word in the note (the
        # lab's "inconclusive" status keeps a record open)
        note = c.cmd.args or None
        if c.cmd.name == "inconclusive":
            note = f"inconclusive: {c.cmd.args}" if c.cmd.args else "inconclusive"
        self.set_fields(c.rid, {"status": "resolved"}, override=True, note=note, **c.kw)
        return None

    def cmd_link(self, c: _Cmd):
        url = c.cmd.url
        if not url:
            return "ignored", c.rid, "no link given"
        target = MessageId.from_ref(url) or url
        if self.relate(c.rid, target, c.cmd.name, url=url if "://" in url else lore_url(target),
                       title=c.cmd.link_title, added_by=c.mid):
            self.history(c.rid, c.cmd.name, None, url, note=c.cmd.link_title, **c.kw)
            self.touched.add(c.rid)
        return None

    def cmd_unlink(self, c: _Cmd):
        url = c.cmd.url
        if not url:
            return "ignored", c.rid, "no link given"
        rel = "link" if c.cmd.name == "unlink" else "monitor"
        if not self.tx.remove_relations(c.rid, rel, MessageId.from_ref(url) or url, url):
            return "ignored", c.rid, f"not {rel}ed"
        self.history(c.rid, rel, url, None, **c.kw)
        self.touched.add(c.rid)
        return None

    def cmd_backburner(self, c: _Cmd):
        self.set_fields(c.rid, {"status": "backburner"}, override=True, note=c.cmd.args or None, **c.kw)
        return None

    def cmd_unbackburn(self, c: _Cmd):
        rec = self.record(c.rid)
        if rec["status"] != "backburner":
            return "ignored", c.rid, "not on the back burner"
        prev = self.tx.status_before(c.rid, "backburner")
        if prev not in STATUSES or prev == "backburner":
            prev = "triaged" if has_facts(rec) else "reported"
        self.set_fields(c.rid, {"status": prev}, override=True, note=c.cmd.args or None, **c.kw)
        return None

    def cmd_ignore_activity(self, c: _Cmd):
        self.tx.mute_activity(c.mid)
        if c.cmd.name == "poke":
            self.history(c.rid, "poke", None, None, **c.kw)
        return None

    def cmd_introduced(self, c: _Cmd) -> tuple[str, int | None, str | None]:
        return self.introduced(c.msg, c.cmd, c.rid)

    def introduced(self, msg: dict[str, Any], cmd: RegzbotCommand,
                   rid: int | None) -> tuple[str, int | None, str | None]:
        mid, actor = msg["message_id"], msg["from_addr"] or None
        intro = cmd.introduced
        if intro is None:
            return "ignored", rid, "cannot read the commit id or range"
        pointer = cmd.pointer
        report, report_url = mid, None
        if pointer == "^":
            report = self.parent_of(mid) or msg.get("in_reply_to")
            if not report:
                return "ignored", rid, "'^' but the mail has no parent"
        elif pointer in ("/", "~"):
            report = self.root_of(mid) or mid
        elif pointer:
            report = MessageId.from_ref(pointer)
            if report is None:
                report, report_url = None, pointer
        target = None
        if report is not None:
            target = self.record_for_report(report) if report != mid else rid
            if target is None and pointer is None:
                target = rid
        elif report_url:
            target = self.tx.record_with_report_url(report_url)
        if target is None:
            m = self.message(report) if report else None
            m = m or (msg if report == mid else None)
            target = self.create(report_message_id=report, report_url=report_url,
                                 thread_key=self.root_of(mid) if report_url else None,
                                 title=clean_title(m["subject"]) if m else clean_title(msg["subject"]),
                                 created_at=(m or msg)["date"], actor=actor, source="regzbot", message_id=mid,
                                 note=f"#regzbot {cmd.raw.split(None, 1)[1] if ' ' in cmd.raw else ''}".strip())
            if report is not None:
                root = self.root_of(report)
                found = self.tx.thread_claim(root) if root else None
                if found is not None:
                    self.apply_claim(root, *found)
        values: dict[str, Any] = {}
        if intro.culprit:
            values["culprit_commit"] = intro.culprit
            rec = self.record(target)
            if not culprits_match(rec["culprit_commit"], intro.culprit):
                self.set_fields(target, {"culprit_subject": None}, actor=actor, message_id=mid, source="regzbot")
        else:
            values["good"], values["bad"] = intro.good, intro.bad
        self.set_fields(target, values, actor=actor, message_id=mid, source="regzbot", override=True,
                        note=f"#regzbot introduced: {cmd.args}")
        if intro.culprit and self.trees is not None:
            info = self.trees.resolve(intro.culprit)
            if info is not None:
                self.set_fields(target, {"culprit_subject": info.subject}, actor=",".join(info.trees) or None,
                                message_id=mid, source="kernel-tree", note=f"{info.sha[:12]} in the kernel tree")
        self.refresh_version(target)
        rec = self.record(target)
        if rec["status"] == "reported" and has_facts(rec):
            self.set_fields(target, {"status": "triaged"}, actor=actor, message_id=mid, source="regzbot",
                            note="introduced given")
        return "applied", target, None


# command -> (handler, whether the thread must be tracked already)
COMMANDS: dict[str, tuple[Any, bool]] = {
    "introduced": (CommandHandlers.cmd_introduced, False), "dup-of": (CommandHandlers.cmd_dup_of, False),
    "title": (CommandHandlers.cmd_title, True), "dup": (CommandHandlers.cmd_dup, True), "fix": (CommandHandlers.cmd_fix, True),
    "resolve": (CommandHandlers.cmd_resolve, True), "inconclusive": (CommandHandlers.cmd_resolve, True),
    "link": (CommandHandlers.cmd_link, True), "monitor": (CommandHandlers.cmd_link, True),
    "unlink": (CommandHandlers.cmd_unlink, True), "unmonitor": (CommandHandlers.cmd_unlink, True),
    "backburner": (CommandHandlers.cmd_backburner, True), "unbackburn": (CommandHandlers.cmd_unbackburn, True),
    "ignore-activity": (CommandHandlers.cmd_ignore_activity, True), "poke": (CommandHandlers.cmd_ignore_activity, True),
}
