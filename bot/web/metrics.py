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


def collect(store, counters: ProcessCounters | None = None) -> list[tuple[str, str, str, list[tuple[dict, float]]]]:
    """(name, type, help, [(labels, value)]) for every metric."""
    from storage.metrics import STATE_COLUMNS, counts

    now = datetime.now(timezone.utc)
    c = counts(store)
    out: list[tuple[str, str, str, list[tuple[dict, float]]]] = [
        ("regtriage_messages_ingested_total", "counter", "Messages stored.", [({}, c.messages)]),
        ("regtriage_messages_quarantined_total", "counter", "Inputs quarantined with a reason.",
         [({}, c.quarantined)]),
        ("regtriage_claims_found_total", "counter", "Messages carrying a regression claim.", [({}, c.claims)]),
        ("regtriage_poll_errors_total", "counter", "Errors recorded while polling sources.",
         [({}, c.source_errors)]),
        ("regtriage_poll_lag_seconds", "gauge", "Seconds since each subscription was last polled.",
         [({"subscription": str(sid), "kind": kind}, (now - last).total_seconds())
          for sid, kind, last in c.last_polls]),
    ]
    for name, table_name, help_ in (
            ("regtriage_regressions", "regressions", "Regression records by status."),
            ("regtriage_reruns", "lab_jobs", "Rerun jobs by state."),
            ("regtriage_notifications", "notifications", "Notifications by state (sent, failed, queued)."),
            ("regtriage_replies", "replies", "List replies by status.")):
        if table_name in c.by_state:
            label = dict(STATE_COLUMNS)[table_name]
            out.append((name, "gauge", help_, [({label: k}, v) for k, v in sorted(c.by_state[table_name].items())]))
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
