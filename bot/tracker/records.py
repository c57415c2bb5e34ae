"""Regression tracker: thread claims and ``#regzbot`` commands in stored mail -> regression
records, with related messages, de-duplication, fixes from kernel trees and a full history.

Entry points:

* :func:`update_tracker` -- incremental; cheap to call after every ingest/triage.  Reads thread
  claims changed since the last run and messages stored since the last run (cursor
  ``tracker`` in the ``cursors`` table), in one transaction.
* :func:`set_status` -- for other components (reruns, users).
* :func:`check_fixes` -- Link:/Closes:/Fixes: commits in configured kernel trees.
* :func:`get_record`, :func:`find_record` -- read one record with its messages and history.

Status lifecycle: ``reported`` -> ``triaged`` (facts extracted: culprit, range or metric) ->
``rerun-scheduled`` -> ``confirmed`` / ``improved`` / ``not-reproduced`` / ``inconclusive`` ->
``fix-pending`` -> ``fixed``; also ``duplicate``, ``resolved``, ``backburner``.  Open = not in
:data:`CLOSED` (an inconclusive rerun keeps the record open).  ``#regzbot inconclusive`` (regzbot:
stop tracking) resolves the record with the reason in the note.

Who decides: a ``#regzbot`` command (or a user via :func:`set_status`) overrides the
extractor; fields set that way are listed in ``overrides`` with the actor and Message-ID and
are never overwritten by later extractor runs.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

from bot.msgid import MessageId, lore_url
from bot.sources.mail import is_own_mail
from bot.tracker.commands import CommandHandlers
from bot.tracker.fields import (CLAIM_MARGIN, CLOSED, CURSOR, DUP_CUE, FIX_CURSOR, MIN_CULPRIT_MATCH,
                                QUIET, SOURCES, STATUSES, URL_RE, clean_title, culprits_match,
                                empty_config, empty_hardware, fields_from_claim, has_facts, jsonish, search_text,
                                version_key)
from bot.tracker.regzbot import parse_commands
from bot.tracker.trust import TrustSettings
from storage import records as db
from storage.records import Record
from storage.store import Store, aware, utcnow

# -- the run ------------------------------------------------------------------------------------
class _Run(CommandHandlers):
    """One update_tracker transaction."""

    def __init__(self, tx: db.RecordTx, trees=None, trust: TrustSettings | None = None) -> None:
        self.tx = tx
        self.trees = trees
        self.trust = trust or TrustSettings()
        self.now = utcnow()
        self.stats = {"created": 0, "updated": 0, "commands_applied": 0, "commands_pending": 0,
                      "commands_ignored": 0, "commands_refused": 0, "messages_linked": 0, "duplicates": 0}
        self.touched: set[int] = set()
        self.culprit_changed: set[int] = set()

    # -- reading ------------------------------------------------------------------------------
    def record(self, rid: int) -> Record | None:
        return self.tx.record(rid)

    def message(self, mid: str) -> db.MessageHead | None:
        return self.tx.message(mid)

    def root_of(self, mid: str) -> str | None:
        return self.tx.root_of(mid)

    def parent_of(self, mid: str) -> str | None:
        return self.tx.parent_of(mid)

    def record_for_thread(self, root: str | None, *, monitored: bool = True) -> int | None:
        """The record whose report is in thread ``root`` (lowest id), else (``monitored``) the
        record monitoring that thread."""
        if not root:
            return None
        rid = self.tx.record_reported_in_thread(root)
        if rid is None and monitored:
            rid = self.tx.record_monitoring_thread(root)
        return rid

    def record_for_report(self, msgid: str | None) -> int | None:
        """The record whose report is ``msgid`` (or, failing that, whose thread holds it)."""
        if not msgid:
            return None
        rid = self.tx.record_with_report(msgid)
        if rid is None:
            rid = self.record_for_thread(self.root_of(msgid), monitored=False)
        return rid

    def topmost(self, rid: int) -> int:
        seen = {rid}
        while True:
            nxt = self.tx.duplicate_of(rid)
            if nxt is None or nxt in seen:
                return rid
            seen.add(nxt)
            rid = nxt

    # -- writing ------------------------------------------------------------------------------
    def history(self, rid: int, field: str, old: Any, new: Any, *, actor: str | None, message_id: str | None,
                source: str, note: str | None = None) -> None:
        self.tx.add_history(rid, at=self.now, field=field, old=jsonish(old), new=jsonish(new),
                            actor=actor, message_id=message_id, source=source, note=note)

    def set_fields(self, rid: int, values: dict[str, Any], *, actor: str | None, message_id: str | None,
                   source: str, note: str | None = None, override: bool = False,
                   sources: dict[str, str] | None = None) -> list[str]:
        """Change fields of a record, with one history row per change.  Fields overridden by a
        regzbot command or a user are left alone when ``source`` is the extractor or the tree.
        ``override``: remember the fields as set by hand.  Returns the fields changed."""
        rec = self.record(rid)
        if rec is None:
            return []
        overrides = dict(rec["overrides"] or {})
        changed: dict[str, Any] = {}
        for field, new in values.items():
            locked = field in overrides and (source == "extractor" or (source == "kernel-tree" and field != "status"))
            if locked:
                continue
            old = rec.get(field)
            if override and field not in QUIET:
                overrides[field] = {"actor": actor, "message_id": message_id, "source": source}
            if old == new or (old is not None and new is not None and jsonish(old) == jsonish(new)):
                continue
            changed[field] = new
            if field in QUIET:
                continue
            mid = (sources or {}).get(field, message_id)
            self.history(rid, field, old, new, actor=actor, message_id=mid, source=source, note=note)
        if changed.keys() & {"title", "culprit_subject", "metric"}:
            merged = {**rec, **changed}
            changed["search_text"] = search_text(merged["title"], merged["culprit_subject"], merged["metric"])
        if override or changed:
            vals = dict(changed)
            if override:
                vals["overrides"] = overrides
            if changed:
                vals["updated_at"] = self.now
            self.tx.update_record(rid, vals)
        if changed:
            self.touched.add(rid)
            if "culprit_commit" in changed:
                self.culprit_changed.add(rid)
        return list(changed)

    def relate(self, rid: int, message_id: str, relation: str, *, url: str | None = None,
               title: str | None = None, added_by: str | None = None, activity: bool = True) -> bool:
        # a thread message is related once, whatever the way
        if self.tx.has_relation(rid, message_id[:998], None if relation in ("reply", "monitor") else relation):
            return False
        self.tx.add_relation(rid, message_id=message_id[:998], relation=relation, url=url, title=title,
                             activity=activity, added_by=added_by, created_at=self.now)
        if activity:
            self.tx.update_record(rid, {"updated_at": self.now})
        self.stats["messages_linked"] += 1
        return True

    def create(self, *, report_message_id: str | None, title: str, created_at: datetime | None,
               actor: str, source: str, message_id: str | None, report_url: str | None = None,
               status: str = "reported", title_source: str = "report", note: str | None = None,
               thread_key: str | None = None) -> int:
        root = self.root_of(report_message_id) if report_message_id else thread_key
        created = aware(created_at) or self.now
        if created > self.now:
            created = self.now
        rid = self.tx.insert_record(dict(
            title=title, title_source=title_source, status=status, hardware=empty_hardware(), config=empty_config(),
            numbers=[], evidence={}, overrides={}, report_message_id=report_message_id, report_url=report_url,
            search_text=search_text(title),
            thread_key=root or report_message_id, ignore_activity=False, created_at=created,
            updated_at=self.now))
        self.history(rid, "status", None, status, actor=actor, message_id=message_id, source=source,
                     note=note or "record created")
        if report_message_id:
            self.relate(rid, report_message_id, "report", url=lore_url(report_message_id), added_by=message_id)
        if root:
            self.link_thread(rid, root)
        elif report_url:
            self.relate(rid, report_url, "report", url=report_url, added_by=message_id)
        self.stats["created"] += 1
        self.touched.add(rid)
        return rid

    def link_thread(self, rid: int, root: str, relation: str = "reply") -> None:
        """Relate every stored message of thread ``root`` (not related yet) to the record."""
        have = self.tx.related_ids(rid)
        for mid, subject in self.tx.thread_messages(root):
            if mid not in have:
                self.relate(rid, mid, relation, url=lore_url(mid), title=subject)

    # -- thread claims -> records ---------------------------------------------------------------
    def field_sources(self, root: str, fields: dict[str, Any]) -> dict[str, str]:
        """For each field, the newest message of the thread whose own claim states the value."""
        out: dict[str, str] = {}
        for mid, claim in self.tx.thread_message_claims(root):
            if not isinstance(claim, dict) or "error" in claim:
                continue
            own = fields_from_claim(claim)
            for f, v in fields.items():
                if f in out or v in (None, "", [], {}):
                    continue
                ov = own.get(f)
                if f == "culprit_commit" and culprits_match(ov, v):
                    out[f] = mid
                elif ov not in (None, "", [], {}) and jsonish(ov) == jsonish(v):
                    out[f] = mid
        return out

    def apply_claim(self, root: str, claim: dict[str, Any], messages: list[str]) -> int | None:
        rid = self.record_for_thread(root, monitored=False)
        fields = fields_from_claim(claim)
        first_tag = fields.pop("_first_tag", None)
        if rid is None:
            report = root if self.message(root) else next((m for m in messages if self.message(m)), None)
            if report is None:
                return None
            msg = self.message(report)
            rid = self.create(report_message_id=report, title=clean_title(msg["subject"]),
                              created_at=msg["date"], actor="extractor", source="extractor", message_id=report,
                              note="regression claim found in the thread")
        rec = self.record(rid)
        if "culprit_commit" in (rec["overrides"] or {}) and not culprits_match(rec["culprit_commit"],
                                                                               fields["culprit_commit"]):
            fields.pop("culprit_subject", None)  # the extractor's subject belongs to another commit
        if rec["culprit_commit"] and fields["culprit_commit"] and culprits_match(rec["culprit_commit"],
                                                                                 fields["culprit_commit"]):
            # the same culprit, maybe now spelled out in full: keep the longer id, never shorten
            if len(fields["culprit_commit"]) < len(rec["culprit_commit"]):
                fields["culprit_commit"] = rec["culprit_commit"]
        for f in ("culprit_commit", "culprit_subject", "good", "bad", "subsystem", "metric", "change_percent",
                  "kind"):
            if fields.get(f) in (None, "") and rec.get(f) not in (None, ""):
                fields.pop(f)  # a merged claim that lost a fact never erases what we know
        sources = self.field_sources(root, fields)
        self.set_fields(rid, fields, actor="extractor", message_id=messages[-1] if messages else None,
                        source="extractor", sources=sources)
        self.refresh_version(rid, first_tag)
        rec = self.record(rid)
        if rec["status"] == "reported" and has_facts(rec):
            self.set_fields(rid, {"status": "triaged"}, actor="extractor",
                            message_id=sources.get("culprit_commit") or (messages[-1] if messages else None),
                            source="extractor", note="facts extracted")
        self.link_thread(rid, root)
        if rec["thread_key"] != root:
            self.tx.update_record(rid, {"thread_key": root})
        return rid

    def refresh_version(self, rid: int, first_tag: str | None = None) -> None:
        rec = self.record(rid)
        key = version_key(first_tag) or version_key(rec["bad"])
        if key is None and self.trees is not None and rec["culprit_commit"]:
            info = self.trees.resolve(rec["culprit_commit"])
            key = version_key(info.first_tag) if info else None
        if key != rec["version_key"] and key is not None:
            self.tx.update_record(rid, {"version_key": key})

    # -- culprit de-duplication -------------------------------------------------------------------
    def dedupe(self, rid: int) -> None:
        rec = self.record(rid)
        c = rec and rec["culprit_commit"]
        if not c or len(c) < MIN_CULPRIT_MATCH:
            return
        group = [x for x in self.tx.records_with_culprit_prefix(c[:MIN_CULPRIT_MATCH])
                 if culprits_match(x["culprit_commit"], c)]
        if len(group) < 2:
            return
        heads = [g for g in group if g["status"] not in CLOSED]
        if len(heads) < 2:
            return
        primary = min(heads, key=lambda g: (g["created_at"], g["id"]))
        for g in heads:
            if g["id"] == primary["id"] or {"status", "duplicate_of"} & set(g["overrides"] or {}):
                continue
            self.mark_duplicate(g["id"], primary["id"], actor="extractor", message_id=None, source="extractor",
                                note=f"same culprit {primary['culprit_commit']}")

    def mark_duplicate(self, rid: int, target: int, *, actor: str | None, message_id: str | None, source: str,
                       note: str | None = None, override: bool = False) -> bool:
        target = self.topmost(target)
        if target == rid:
            return False
        rec = self.record(rid)
        self.set_fields(rid, {"duplicate_of": target, "status": "duplicate"}, actor=actor, message_id=message_id,
                        source=source, note=note, override=override)
        if rec["report_message_id"] or rec["report_url"]:
            mid = rec["report_message_id"] or rec["report_url"]
            url = lore_url(mid) if rec["report_message_id"] else rec["report_url"]
            if self.relate(target, mid, "duplicate", url=url, title=rec["title"], added_by=message_id):
                self.history(target, "duplicates", None, f"#{rid}", actor=actor, message_id=message_id,
                             source=source, note=note)
                self.touched.add(target)
        self.stats["duplicates"] += 1
        return True

    # -- messages since the last run --------------------------------------------------------------
    def backlinks(self, msg: dict[str, Any], body: str, own: int | None) -> None:
        """Lore links in the unquoted text pointing at a tracked report: the thread is monitored
        for that record; with a duplicate cue next to the link, the message's own record becomes
        a duplicate of it."""
        mid = msg["message_id"]
        for para in re.split(r"\n\s*\n", body):
            lines = [ln for ln in para.split("\n") if not ln.lstrip().startswith(">")]
            text = "\n".join(lines)
            if "://" not in text:
                continue
            for url in URL_RE.findall(text):
                target_mid = MessageId.from_ref(url.rstrip(".,;"))
                if not target_mid:
                    continue
                target = self.tx.record_with_report(target_mid)
                if target is None or target == own or (own is not None and self.topmost(own) == self.topmost(target)):
                    continue
                if own is not None and DUP_CUE.search(text):
                    rec = self.record(own)
                    if rec["status"] not in CLOSED and "status" not in (rec["overrides"] or {}):
                        self.mark_duplicate(own, target, actor=msg["from_addr"] or None, message_id=mid,
                                            source="extractor", note=f"points at the report {url}")
                        continue
                if self.relate(target, mid, "monitor", url=lore_url(mid), title=msg["subject"], added_by=mid):
                    self.history(target, "monitor", None, lore_url(mid), actor=msg["from_addr"] or None,
                                 message_id=mid, source="extractor", note="links to the report")

    def process_messages(self, after_id: int, chunk: int = 5000) -> int:
        """Messages stored after ``after_id``, in chunks of ids, each chunk in Date order."""
        last = after_id
        while True:
            ids = self.tx.message_ids_after(last, chunk)
            if not ids:
                return last
            lo, hi = ids[0], ids[-1]
            self._process_chunk(lo, hi)
            last = hi

    def _process_chunk(self, lo: int, hi: int) -> None:
        rows = self.tx.messages_between(lo, hi)
        interesting = self.tx.ids_with_body_words(lo, hi, ("#regzbot", "kernel.org/", "msgid.link/"))
        rows.sort(key=_date_order)
        for r in rows:
            body = ""
            if r["id"] in interesting:
                found = self.tx.body_and_headers(r["id"])
                # the bot's own replies carry #regzbot lines for regzbot, not commands for us
                body = "" if found is None or is_own_mail(found[1]) else (found[0] or "")
            commands = parse_commands(body)
            ignore = (any(c.name in ("ignore-activity", "poke") for c in commands)
                      or (r["subject"] or "").rstrip().lower().endswith("#forregzbot"))
            if commands:
                self.run_commands(r, commands)
            rid = self.record_for_thread(r["root_id"])
            if rid is not None:
                own = self.record_for_thread(r["root_id"], monitored=False)
                relation = "reply" if own == rid else "monitor"
                self.relate(rid, r["message_id"], relation, url=lore_url(r["message_id"]), title=r["subject"],
                            activity=not ignore)
                if ignore:
                    self.tx.mute_activity(r["message_id"])
            if body and ("kernel.org/" in body or "msgid.link/" in body):
                self.backlinks(r, body, self.record_for_thread(r["root_id"], monitored=False))

    def retry_pending(self) -> None:
        pending = self.tx.pending_command_messages(1000)
        if not pending:
            return
        for head, body in sorted(self.tx.messages_with_bodies(pending), key=lambda x: _date_order(x[0])):
            self.run_commands(head, parse_commands(body), retry=True)


_EPOCH = datetime.min.replace(tzinfo=timezone.utc)


def _date_order(m: db.MessageHead):
    """Messages in Date order (undated last), then in storage order."""
    return (m.date is None, m.date or _EPOCH, m.id)


def update_tracker(store: Store, config=None, *, trees=None, fixes: bool = True) -> dict[str, Any]:
    """Create/update regression records from what changed since the last run.

    1. messages stored since the last run, in Date order: ``#regzbot`` commands (each applied
       once), replies joining the record of their thread, links to tracked reports (monitor
       or, with a duplicate cue, duplicate);
    2. thread claims (regressions only) updated since the last run -> records (extractor facts,
       never over fields a regzbot command or user set);
    3. commands that waited for their thread to be tracked are retried;
    4. records whose culprit changed are de-duplicated by culprit;
    5. with kernel trees (``trees`` or ``[kernel] repos`` in ``config``): :func:`check_fixes`.
    """
    own_trees = False
    if trees is None and config is not None and fixes:
        from bot.triage.runner import open_trees

        trees = open_trees(config)
        own_trees = trees is not None
    try:
        with db.transaction(store) as tx:
            state = tx.cursor(CURSOR)
            run = _Run(tx, trees, TrustSettings.from_config(config))
            tx.lock_cursor(CURSOR, state, run.now)
            # commands first: a report a human designated (#regzbot introduced ^) wins over the
            # thread root the extractor would pick; commands waiting for a record are retried below
            last_id = run.process_messages(int(state.get("last_message_id") or 0))
            since = state.get("claims_since")
            for root, claim, msgs in tx.regression_claims_since(datetime.fromisoformat(since) if since else None):
                if isinstance(claim, dict):
                    run.apply_claim(root, claim, msgs)
            run.retry_pending()
            for rid in sorted(run.culprit_changed):
                run.dedupe(rid)
            new_state = {"claims_since": (run.now - CLAIM_MARGIN).isoformat(), "last_message_id": last_id}
            tx.set_cursor(CURSOR, new_state, run.now)
            stats = dict(run.stats)
            stats["records_changed"] = len(run.touched)
        if trees is not None and fixes:
            stats["fixes"] = check_fixes(store, trees)
        return stats
    finally:
        if own_trees:
            trees.close()


# -- API for other components ---------------------------------------------------------------------
def set_status(store: Store, rid: int, status: str, actor: str, note: str | None = None, *,
               source: str = "user", message_id: str | None = None) -> bool:
    """Set a record's status (validated), with history.  Returns False if it was already so."""
    if status not in STATUSES:
        raise ValueError(f"unknown status {status!r} (one of: {', '.join(STATUSES)})")
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}")
    with db.transaction(store) as tx:
        run = _Run(tx)
        if run.record(rid) is None:
            raise KeyError(f"no regression record {rid}")
        return bool(run.set_fields(rid, {"status": status}, actor=actor, message_id=message_id, source=source,
                                   note=note, override=source in ("user", "regzbot")))


def add_note(store: Store, rid: int, field: str, new: str, *, actor: str, note: str, source: str = "user") -> bool:
    """A history row on record ``rid`` (e.g. field ``rerun``) that changes no field; False when
    there is no such record."""
    with db.transaction(store) as tx:
        run = _Run(tx)
        if run.record(rid) is None:
            return False
        run.history(rid, field, None, new, actor=actor, message_id=None, source=source, note=note)
        return True


def check_fixes(store: Store, trees, *, first_walk_limit: int | None = 20000) -> dict[str, int]:
    """Fixes in the kernel trees for open records: commits with ``Link:``/``Closes:`` to a
    report's Message-ID, or ``Fixes: <culprit>``.  In a mainline tree -> ``fixed``, elsewhere
    -> ``fix-pending``; ``fix-pending`` records whose fix commit reached mainline -> ``fixed``.

    Incremental per tree (cursor ``tracker:fixes``: the tips walked last time); records created
    since the last scan get one full walk (bounded by ``first_walk_limit`` commits with trailers).
    """
    out = {"fix_pending": 0, "fixed": 0}
    with db.transaction(store) as tx:
        state = tx.cursor(FIX_CURSOR)
        run = _Run(tx, trees)
        tx.lock_cursor(FIX_CURSOR, state, run.now)
        rows = tx.open_records(CLOSED)
        seen_max = int(state.get("max_id") or 0)
        old = [x for x in rows if x["id"] <= seen_max]
        new = [x for x in rows if x["id"] > seen_max]
        scans = []
        if old:
            scans.append((old, trees.find_fixes([x["report_message_id"] for x in old if x["report_message_id"]],
                                                [x["culprit_commit"] for x in old if x["culprit_commit"]],
                                                state.get("tips"), first_walk_limit=first_walk_limit)))
        if new:
            scans.append((new, trees.find_fixes([x["report_message_id"] for x in new if x["report_message_id"]],
                                                [x["culprit_commit"] for x in new if x["culprit_commit"]],
                                                None, first_walk_limit=first_walk_limit)))
        for group, scan in scans:
            by_msgid: dict[str, list[int]] = {}
            for x in group:
                if x["report_message_id"]:
                    by_msgid.setdefault(MessageId(x["report_message_id"]).folded, []).append(x["id"])
            # mainline first, so a fix seen in both a mainline and a -next tree counts as fixed
            for fx in sorted(scan.fixes, key=lambda f: not f.mainline):
                if fx.trailer in ("Link", "Closes"):
                    ids = by_msgid.get(MessageId(fx.matched).folded, [])
                else:
                    ids = [x["id"] for x in group if x["culprit_commit"] and x["culprit_commit"] == fx.matched]
                for rid in ids:
                    rec = run.record(rid)
                    if rec["status"] in CLOSED:
                        continue
                    status = "fixed" if fx.mainline else "fix-pending"
                    if rec["status"] == "fix-pending" and status == "fix-pending" and rec["fix_commit"]:
                        continue
                    run.set_fields(rid, {"fix_commit": fx.sha, "fix_subject": fx.subject, "fix_tree": fx.tree,
                                         "status": status}, actor=fx.tree, message_id=None, source="kernel-tree",
                                   note=f"{fx.trailer}: {fx.value}"[:500])
                    out["fixed" if status == "fixed" else "fix_pending"] += 1
        # fix-pending records whose fix commit has reached mainline since
        for rid, fix_commit in tx.fix_pending():
            info = trees.resolve(fix_commit)
            if info is not None and info.mainline:
                run.set_fields(rid, {"status": "fixed", "fix_commit": info.sha, "fix_tree": ",".join(info.trees)},
                               actor=",".join(info.trees), message_id=None, source="kernel-tree",
                               note=f"{info.sha[:12]} (\"{info.subject}\") is in mainline")
                out["fixed"] += 1
        tips = dict(state.get("tips") or {})
        for _, scan in scans:
            tips.update(scan.tips)
        if not scans:
            tips.update(trees.tips())
        tx.set_cursor(FIX_CURSOR, {"tips": tips, "max_id": tx.max_record_id()}, run.now)
    return out


# -- reading ---------------------------------------------------------------------------------------
def find_record(store: Store, ident: str) -> int | None:
    """A record id from ``123``, ``#123``, or the Message-ID of any related message."""
    ident = ident.strip()
    if re.fullmatch(r"#?\d+", ident):
        return int(ident.lstrip("#"))
    return db.find_record(store, MessageId.from_ref(ident) or ident.strip("<>"))


def get_record(store: Store, rid: int) -> Record | None:
    """The record plus ``messages`` (related, with subject/from/date where stored),
    ``history`` (oldest first) and ``duplicates`` (ids of records marked duplicate of it)."""
    return db.get_records(store, [rid]).get(rid)


get_records = db.get_records
record_ids = db.record_rows
