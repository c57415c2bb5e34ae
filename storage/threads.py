"""JWZ-style threading over the ``thread_nodes`` table.

Every Message-ID seen (as a message or in References / In-Reply-To) gets a container row.
A container whose message has not arrived yet is a placeholder (``present = false``); it fills in
when the message arrives, in any order.  ``root_id`` is the thread key: the top container of the
conversation.  When two threads turn out to be one (a late parent arrives, or a References chain
joins them), the key of one is remapped onto the other with a single indexed UPDATE.

Work is done per batch in memory (one SELECT for the containers the batch touches, one write
per changed container, one UPDATE per merged thread), which keeps ingest fast on both SQLite
and PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, select, update

from storage.schema import thread_claims, thread_nodes

CHUNK = 400


@dataclass
class Node:
    parent: str | None
    root: str
    present: bool
    known: bool  # row exists in the database
    dirty: bool = False


class ThreadBatch:
    def __init__(self, conn: Connection, upsert=None) -> None:
        """``upsert(conn, table, rows, keys, update)``: how new containers are inserted (an
        upsert, so that two writers never fail on the same placeholder); default plain INSERT."""
        self.conn = conn
        self.upsert = upsert
        self.nodes: dict[str, Node] = {}
        self.remap: dict[str, str] = {}
        self.queried: set[str] = set()  # ids already looked up in the database
        self.db_keys: set[str] = set()  # thread keys that label rows in the database

    # -- loading ---------------------------------------------------------------------------
    def preload(self, ids: set[str]) -> None:
        missing = [i for i in ids if i not in self.nodes and i not in self.queried]
        self.queried.update(missing)
        for start in range(0, len(missing), CHUNK):
            chunk = missing[start:start + CHUNK]
            rows = self.conn.execute(
                select(thread_nodes.c.message_id, thread_nodes.c.parent_id, thread_nodes.c.root_id,
                       thread_nodes.c.present).where(thread_nodes.c.message_id.in_(chunk)))
            for mid, parent, root, present in rows:
                self.nodes[mid] = Node(parent, root, bool(present), True)
                self.db_keys.add(root)

    def node(self, mid: str) -> Node:
        n = self.nodes.get(mid)
        if n is None and mid not in self.queried:
            self.preload({mid})
            n = self.nodes.get(mid)
        if n is None:
            n = Node(None, mid, False, False, True)
            self.nodes[mid] = n
        return n

    # -- structure -------------------------------------------------------------------------
    def thread_of(self, mid: str) -> str:
        r = self.node(mid).root
        seen = 0
        while r in self.remap and seen < 10000:
            r = self.remap[r]
            seen += 1
        return r

    def _is_ancestor_or_self(self, candidate: str, mid: str) -> bool:
        cur: str | None = mid
        steps = 0
        while cur is not None and steps < 10000:
            if cur == candidate:
                return True
            cur = self.node(cur).parent
            steps += 1
        return steps >= 10000  # absurd depth: treat as a loop, refuse the link

    def link(self, child: str, parent: str, overwrite: bool) -> None:
        if child == parent:
            return
        c = self.node(child)
        if c.parent == parent or (c.parent is not None and not overwrite):
            return
        self.node(parent)
        if self._is_ancestor_or_self(child, parent):
            return  # would make a loop
        c.parent = parent
        c.dirty = True
        rc, rp = self.thread_of(child), self.thread_of(parent)
        if rc != rp:
            self.remap[rc] = rp

    def add_message(self, mid: str, refs: list[str]) -> None:
        """A message arrived: fill its container and hang it (and its References chain) in."""
        n = self.node(mid)
        if not n.present:
            n.present = True
            n.dirty = True
        for older, newer in zip(refs, refs[1:]):
            self.link(newer, older, overwrite=False)
        if refs:
            self.link(mid, refs[-1], overwrite=True)

    # -- writing ---------------------------------------------------------------------------
    def flush(self) -> None:
        resolved: dict[str, str] = {}
        for old in self.remap:
            resolved[old] = self._resolve(old)
        inserts, updates = [], []
        for mid, n in self.nodes.items():
            root = self._resolve(n.root)
            if root != n.root:
                n.root, n.dirty = root, True
            if not n.dirty:
                continue
            row = {"message_id": mid, "parent_id": n.parent, "root_id": n.root, "present": n.present}
            (updates if n.known else inserts).append(row)
            n.known, n.dirty = True, False
        if inserts and self.upsert is not None:
            self.upsert(self.conn, thread_nodes, inserts, ["message_id"], ["parent_id", "root_id", "present"])
        elif inserts:
            self.conn.execute(thread_nodes.insert(), inserts)
        if updates:
            from sqlalchemy import bindparam
            stmt = (update(thread_nodes).where(thread_nodes.c.message_id == bindparam("b_mid"))
                    .values(parent_id=bindparam("b_parent"), root_id=bindparam("b_root"),
                            present=bindparam("b_present")))
            self.conn.execute(stmt, [{"b_mid": r["message_id"], "b_parent": r["parent_id"],
                                      "b_root": r["root_id"], "b_present": r["present"]}
                                     for r in updates])
        for old, new in resolved.items():
            # only a key that already existed in the database can label rows not in memory
            if old != new and old in self.db_keys:
                self.conn.execute(update(thread_nodes).where(thread_nodes.c.root_id == old)
                                  .values(root_id=new))
                # the merged thread's claim is recomputed from its messages by the triage step
                self.conn.execute(thread_claims.delete().where(thread_claims.c.root_id == old))
        self.remap.clear()
        self.nodes.clear()
        self.queried.clear()
        self.db_keys.clear()

    def _resolve(self, r: str) -> str:
        steps = 0
        while r in self.remap and steps < 10000:
            r = self.remap[r]
            steps += 1
        return r
