"""Tables of the regression tracker (SQLAlchemy Core), on the shared ``storage.schema.metadata``.

Created by migration 0003 (storage/migrations/versions/0003_tracker.py); keep the two in step.
Import this module (bot.tracker.records, bot.tracker.query do) before querying the tables.

* ``regressions``: one row per tracked regression (a report thread, or a report someone
  tagged with ``#regzbot introduced``).  ``overrides`` maps a field name to who set it by hand
  (a regzbot command or a user) so later extractor runs never overwrite it.
* ``regression_messages``: every message related to a record: ``report``, ``reply`` (same
  thread), ``link`` (``#regzbot link:``), ``monitor`` (a thread monitored because it links to
  the report or because of ``#regzbot monitor:``), ``duplicate`` (the report of a duplicate).
* ``regression_history``: every change, with the actor and the message that caused it.
* ``regzbot_commands_applied``: one row per ``#regzbot`` command seen (message, line, position
  on the line), so each command is applied exactly once.
"""

from __future__ import annotations

from sqlalchemy import (JSON, Boolean, Column, DateTime, Float, ForeignKey, Index, Integer, String, Table,
                        Text, UniqueConstraint)

from storage.schema import metadata

TZ = DateTime(timezone=True)

regressions = Table(
    "regressions", metadata,
    Column("id", Integer, primary_key=True),
    Column("title", Text, nullable=False, default=""),
    Column("title_source", String(16), nullable=False, default="report"),  # report|extractor|regzbot|user
    Column("status", String(24), nullable=False, default="reported"),
    Column("kind", String(16)),
    Column("culprit_commit", String(64)),  # lower-case hex as given (abbreviated or full)
    Column("culprit_subject", Text),
    Column("good", String(128)),
    Column("bad", String(128)),
    Column("version_key", String(24)),  # sortable key of the bad version / first release (since:vX)
    Column("subsystem", String(255)),  # path-style key: "mm", "fs/xfs" (no trailing slash)
    Column("metric", Text),
    Column("search_text", Text),  # lower-cased title + culprit subject + metric, for text: queries
    Column("change_percent", Float),
    Column("hardware", JSON, nullable=False),
    Column("config", JSON, nullable=False),
    Column("numbers", JSON, nullable=False),
    Column("evidence", JSON, nullable=False),
    Column("confidence", Float),
    Column("overrides", JSON, nullable=False),  # field -> {"actor", "message_id", "source"}
    Column("report_message_id", String(998)),
    Column("report_url", Text),  # set for reports outside lore (#regzbot introduced: ... <url>)
    Column("thread_key", String(998)),  # JWZ root of the report's thread when last seen
    Column("duplicate_of", Integer, ForeignKey("regressions.id")),
    Column("fix_commit", String(64)),
    Column("fix_subject", Text),
    Column("fix_tree", String(128)),
    Column("ignore_activity", Boolean, nullable=False, default=False),  # last mail said ignore-activity
    Column("created_at", TZ, nullable=False),  # Date of the report
    Column("updated_at", TZ, nullable=False),  # last change or counted activity
)
# list pages (migration 0010): filter by subsystem or status, and by kind, report date and
# version, order by updated_at, from the index alone (only the page's rows are read); on
# PostgreSQL the migration indexes subsystem COLLATE "C" (a path prefix is then a range)
Index("ix_regressions_list_subsystem", regressions.c.subsystem, regressions.c.status, regressions.c.kind,
      regressions.c.updated_at, regressions.c.created_at, regressions.c.version_key)
Index("ix_regressions_list_status", regressions.c.status, regressions.c.updated_at, regressions.c.kind,
      regressions.c.created_at, regressions.c.version_key, regressions.c.subsystem)
Index("ix_regressions_culprit", regressions.c.culprit_commit)
Index("ix_regressions_created", regressions.c.created_at)
Index("ix_regressions_updated", regressions.c.updated_at)
Index("ix_regressions_version", regressions.c.version_key)
Index("ix_regressions_report", regressions.c.report_message_id)
Index("ix_regressions_thread", regressions.c.thread_key)
Index("ix_regressions_duplicate_of", regressions.c.duplicate_of)

regression_messages = Table(
    "regression_messages", metadata,
    Column("id", Integer, primary_key=True),
    Column("regression_id", Integer, ForeignKey("regressions.id", ondelete="CASCADE"), nullable=False),
    Column("message_id", String(998), nullable=False),  # Message-ID, or the URL for non-lore links
    Column("relation", String(16), nullable=False),  # report|reply|link|monitor|duplicate
    Column("url", Text),
    Column("title", Text),
    Column("activity", Boolean, nullable=False, default=True),  # False: #regzbot ignore-activity
    Column("added_by", String(998)),  # Message-ID of the mail that caused the link
    Column("created_at", TZ, nullable=False),
    UniqueConstraint("regression_id", "message_id", "relation", name="uq_regression_message"),
)
Index("ix_regression_messages_msg", regression_messages.c.message_id)

regression_history = Table(
    "regression_history", metadata,
    Column("id", Integer, primary_key=True),
    Column("regression_id", Integer, ForeignKey("regressions.id", ondelete="CASCADE"), nullable=False),
    Column("at", TZ, nullable=False),
    Column("field", String(32), nullable=False),
    Column("old", Text),
    Column("new", Text),
    Column("actor", Text),  # From: of the message, "extractor", the tree name, or the user
    Column("message_id", String(998)),
    Column("source", String(16), nullable=False),  # extractor|regzbot|kernel-tree|user
    Column("note", Text),
)
Index("ix_regression_history_reg", regression_history.c.regression_id, regression_history.c.id)

regzbot_commands_applied = Table(
    "regzbot_commands_applied", metadata,
    Column("message_id", String(998), primary_key=True),
    Column("line_no", Integer, primary_key=True, autoincrement=False),
    Column("seq", Integer, primary_key=True, autoincrement=False, default=0),  # several commands on one line ("; #regzbot")
    Column("command", String(32), nullable=False),
    Column("args", Text),
    Column("regression_id", Integer),
    Column("outcome", String(16), nullable=False),  # applied|pending|ignored|unknown
    Column("note", Text),
    Column("applied_at", TZ, nullable=False),
)
Index("ix_regzbot_commands_outcome", regzbot_commands_applied.c.outcome)
