"""Prometheus metrics of a running regtriage, computed from the database at scrape time (so
they survive restarts and agree across workers), plus this process's own counters."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import datetime, timezone
from typing import Any


class ProcessCounters:
    """Counters of this process (steps run, step failures), thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter = Counter()

    def inc(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self._counts[name] += amount

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


def _table_counts(conn, table_name: str, column: str) -> dict[str, int] | None:
    from sqlalchemy import func, inspect, select, table, column as col

    if not inspect(conn).has_table(table_name):
        return None
    t = table(table_name, col(column))
    return {str(k): int(n) for k, n in conn.execute(select(t.c[column], func.count()).group_by(t.c[column]))}


def collect(store, counters: ProcessCounters | None = None) -> list[tuple[str, str, str, list[tuple[dict, float]]]]:
    """(name, type, help, [(labels, value)]) for every metric."""
    from sqlalchemy import func, select

    from storage import schema

    now = datetime.now(timezone.utc)
    out: list[tuple[str, str, str, list[tuple[dict, float]]]] = []
    with store.engine.connect() as conn:
        def count(t, *where) -> int:
            q = select(func.count()).select_from(t)
            for w in where:
                q = q.where(w)
            return int(conn.execute(q).scalar_one())

        out.append(("regtriage_messages_ingested_total", "counter", "Messages stored.",
                    [({}, count(schema.messages))]))
        out.append(("regtriage_messages_quarantined_total", "counter", "Inputs quarantined with a reason.",
                    [({}, count(schema.quarantine))]))
        out.append(("regtriage_claims_found_total", "counter", "Messages carrying a regression claim.",
                    [({}, count(schema.claims, schema.claims.c.is_regression.is_(True)))]))
        out.append(("regtriage_poll_errors_total", "counter", "Errors recorded while polling sources.",
                    [({}, count(schema.source_errors))]))
        lag = []
        for sid, kind, last in conn.execute(select(schema.subscriptions.c.id, schema.subscriptions.c.kind,
                                                   schema.subscriptions.c.last_poll_at)):
            if last is not None:
                if last.tzinfo is None:
                    last = last.replace(tzinfo=timezone.utc)
                lag.append(({"subscription": str(sid), "kind": kind}, (now - last).total_seconds()))
        out.append(("regtriage_poll_lag_seconds", "gauge", "Seconds since each subscription was last polled.", lag))
        for name, table_name, column, help_ in (
                ("regtriage_regressions", "regressions", "status", "Regression records by status."),
                ("regtriage_reruns", "lab_jobs", "state", "Rerun jobs by state."),
                ("regtriage_notifications", "notifications", "state", "Notifications by state (sent, failed, queued)."),
                ("regtriage_replies", "replies", "status", "List replies by status.")):
            counts = _table_counts(conn, table_name, column)
            if counts is not None:
                label = "state" if column == "state" else "status"
                out.append((name, "gauge", help_, [({label: k}, v) for k, v in sorted(counts.items())]))
    if counters is not None:
        snap = counters.snapshot()
        out.append(("regtriage_steps_total", "counter", "Service steps run, by step and outcome.",
                    [({"step": k.split(":")[0], "outcome": k.split(":")[1]}, v) for k, v in sorted(snap.items())
                     if ":" in k]))
    return out


def render(store, counters: ProcessCounters | None = None) -> bytes:
    """The Prometheus text exposition format, built with prometheus_client."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    families = collect(store, counters)

    class _Collector:
        def collect(self) -> Any:
            for name, kind, help_, samples in families:
                labels = sorted({k for lab, _ in samples for k in lab})
                if kind == "counter":
                    fam = CounterMetricFamily(name.removesuffix("_total"), help_, labels=labels)
                else:
                    fam = GaugeMetricFamily(name, help_, labels=labels)
                for lab, value in samples:
                    fam.add_metric([lab.get(k, "") for k in labels], value)
                yield fam

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector())
    return generate_latest(registry)
