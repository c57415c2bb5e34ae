"""The SQL of automatic bisections (tables ``lab_bisections`` and ``lab_bisection_steps`` in
storage/lab_schema.py, migration 0009).  Everything returns dataclasses; bot.lab.bisect_driver
holds no SQL.

Workers take a bisection with a lease (``owner`` / ``lease_until``) through a conditional UPDATE
(free, theirs, or the lease expired), so two workers never advance the same bisection, and a
worker that died leaves it to the next one after ``lease_s``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import insert, or_, select, update

from storage.lab_schema import BISECT_ACTIVE, lab_bisection_steps as S, lab_bisections as B


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _aware(dt: datetime | None) -> datetime | None:
    return dt.replace(tzinfo=timezone.utc) if dt is not None and dt.tzinfo is None else dt


@dataclass
class Step:
    id: int
    bisection_id: int
    n: int
    commit: str
    state: str
    build: dict | None = None
    handle: str | None = None
    samples: dict | None = None
    verdict: str | None = None
    change_percent: float | None = None
    judgement: dict | None = None
    lab_s: float | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass
class Bisection:
    id: int
    regression_id: int | None
    state: str
    tree: str
    good_ref: str | None
    bad_ref: str | None
    machine: str | None
    plan: dict
    bisect: dict | None = None
    ends: dict | None = None
    result: dict | None = None
    owner: str | None = None
    lease_until: datetime | None = None
    cancel_requested: bool = False
    record_updated: bool = False
    message: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    finished_at: datetime | None = None
    steps: list[Step] = field(default_factory=list)

    @property
    def active(self) -> bool:
        return self.state in BISECT_ACTIVE


def _row(cls, row) -> Any:
    d = dict(row._mapping)
    names = {f.name for f in fields(cls)}
    kw = {k: (_aware(v) if isinstance(v, datetime) else v) for k, v in d.items() if k in names}
    return cls(**kw)


def create(store, *, regression_id: int | None, tree: str, good_ref: str | None, bad_ref: str | None,
           machine: str | None, plan: dict, state: str = "queued", message: str | None = None,
           bisect: dict | None = None) -> Bisection:
    now = _now()
    with store.engine.begin() as conn:
        bid = conn.execute(insert(B).values(
            regression_id=regression_id, state=state, tree=tree, good_ref=good_ref, bad_ref=bad_ref,
            machine=machine, plan=plan, bisect=bisect, message=message, cancel_requested=False,
            record_updated=False, created_at=now, updated_at=now,
            finished_at=now if state not in BISECT_ACTIVE else None)).inserted_primary_key[0]
    return get(store, bid)


def get(store, bid: int, *, steps: bool = True) -> Bisection | None:
    with store.engine.connect() as conn:
        row = conn.execute(select(B).where(B.c.id == bid)).first()
        if row is None:
            return None
        b = _row(Bisection, row)
        if steps:
            b.steps = [_row(Step, r) for r in conn.execute(select(S).where(S.c.bisection_id == bid).order_by(S.c.n))]
    return b


def for_record(store, rid: int, *, limit: int = 20) -> list[Bisection]:
    with store.engine.connect() as conn:
        ids = [r[0] for r in conn.execute(select(B.c.id).where(B.c.regression_id == rid)
                                          .order_by(B.c.id.desc()).limit(limit))]
    return [get(store, i) for i in ids]


def for_records(store, rids, *, limit: int = 20) -> dict[int, list[Bisection]]:
    """{record id: its bisections, newest first, at most ``limit``}, without their steps, in
    one statement (the tracker entry's view of several records)."""
    rids = list(dict.fromkeys(int(r) for r in rids))
    out: dict[int, list[Bisection]] = {r: [] for r in rids}
    if not rids:
        return out
    with store.engine.connect() as conn:
        for row in conn.execute(select(B).where(B.c.regression_id.in_(rids)).order_by(B.c.id.desc())):
            group = out[row.regression_id]
            if len(group) < limit:
                group.append(_row(Bisection, row))
    return out


def active_for_record(store, rid: int) -> Bisection | None:
    with store.engine.connect() as conn:
        row = conn.execute(select(B.c.id).where(B.c.regression_id == rid, B.c.state.in_(BISECT_ACTIVE))
                           .order_by(B.c.id).limit(1)).first()
    return get(store, row[0]) if row else None


def list_bisections(store, *, states: tuple[str, ...] | None = None, limit: int = 100) -> list[Bisection]:
    q = select(B)
    if states:
        q = q.where(B.c.state.in_(states))
    with store.engine.connect() as conn:
        return [_row(Bisection, r) for r in conn.execute(q.order_by(B.c.id.desc()).limit(limit))]


def takeable(store, owner: str, now: datetime | None = None) -> list[int]:
    """Active bisections this worker may advance (free, its own, or the lease expired)."""
    now = now or _now()
    with store.engine.connect() as conn:
        return [r[0] for r in conn.execute(select(B.c.id).where(
            B.c.state.in_(BISECT_ACTIVE),
            or_(B.c.owner.is_(None), B.c.owner == owner, B.c.lease_until < now)).order_by(B.c.id))]


def take(store, bid: int, owner: str, lease_s: float, now: datetime | None = None) -> bool:
    """Take (or renew) the lease of an active bisection; False when another worker holds it."""
    now = now or _now()
    with store.engine.begin() as conn:
        r = conn.execute(update(B).where(
            B.c.id == bid, B.c.state.in_(BISECT_ACTIVE),
            or_(B.c.owner.is_(None), B.c.owner == owner, B.c.lease_until < now)).values(
            owner=owner, lease_until=now + timedelta(seconds=lease_s)))
    return r.rowcount == 1


def save(store, bid: int, owner: str | None, **values) -> bool:
    """Update a bisection this worker holds (``owner``; None: whoever holds it).  A final
    ``state`` releases the lease and sets ``finished_at``."""
    now = _now()
    values = {**values, "updated_at": now}
    if values.get("state") in ("done", "failed", "cancelled"):
        values.update(owner=None, lease_until=None, finished_at=now)
    cond = [B.c.id == bid]
    if owner is not None:
        cond.append(B.c.owner == owner)
    with store.engine.begin() as conn:
        r = conn.execute(update(B).where(*cond).values(**values))
    return r.rowcount == 1


def request_cancel(store, bid: int) -> Bisection | None:
    """Queued: cancelled at once; running: flagged for its worker."""
    now = _now()
    with store.engine.begin() as conn:
        r = conn.execute(update(B).where(B.c.id == bid, B.c.state == "queued", B.c.owner.is_(None)).values(
            state="cancelled", message="cancelled on request", updated_at=now, finished_at=now))
        if not r.rowcount:
            conn.execute(update(B).where(B.c.id == bid, B.c.state.in_(BISECT_ACTIVE))
                         .values(cancel_requested=True, updated_at=now))
    return get(store, bid)


def release(store, owner: str) -> int:
    with store.engine.begin() as conn:
        r = conn.execute(update(B).where(B.c.owner == owner).values(owner=None, lease_until=None))
    return r.rowcount or 0


def mark_record_updated(store, bid: int) -> bool:
    with store.engine.begin() as conn:
        r = conn.execute(update(B).where(B.c.id == bid, B.c.record_updated.is_(False)).values(record_updated=True))
    return r.rowcount == 1


def pending_record_updates(store) -> list[int]:
    with store.engine.connect() as conn:
        return [r[0] for r in conn.execute(select(B.c.id).where(B.c.state == "done", B.c.record_updated.is_(False)))]


# ---------------------------------------------------------------------------------- steps
def add_step(store, bid: int, n: int, commit: str, *, state: str = "building") -> Step:
    with store.engine.begin() as conn:
        sid = conn.execute(insert(S).values(bisection_id=bid, n=n, commit=commit, state=state,
                                            started_at=_now(), lab_s=0.0)).inserted_primary_key[0]
        return _row(Step, conn.execute(select(S).where(S.c.id == sid)).first())


def open_step(store, bid: int) -> Step | None:
    """The step in progress (no verdict yet), if any."""
    with store.engine.connect() as conn:
        row = conn.execute(select(S).where(S.c.bisection_id == bid, S.c.verdict.is_(None))
                           .order_by(S.c.n.desc()).limit(1)).first()
    return _row(Step, row) if row else None


def save_step(store, sid: int, **values) -> None:
    if values.get("verdict") is not None and "finished_at" not in values:
        values["finished_at"] = _now()
    with store.engine.begin() as conn:
        conn.execute(update(S).where(S.c.id == sid).values(**values))


def get_step(store, sid: int) -> Step | None:
    with store.engine.connect() as conn:
        row = conn.execute(select(S).where(S.c.id == sid)).first()
    return _row(Step, row) if row else None
