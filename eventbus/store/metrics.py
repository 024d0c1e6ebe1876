"""The event bus's Prometheus counters and histograms (declared here only).

Hot-path counters are incremented once per claim and outcome (not per row), and never query
the database; the queue's shape (pending, in flight, dead, lag) is read at scrape time by the
collectors in eventbus/operations/gauges.py. Fail rate is a query over the outcomes:
`rate(deskcomm_eventbus_deliveries_processed_total{outcome!="done"}[5m])
 / rate(deskcomm_eventbus_deliveries_processed_total[5m])`.

The `event_type` label (seed 000 §10.1: consumed, lag, DLQ) has a cardinality guard: only
declared event types, at most EVENTBUS["METRICS_MAX_EVENT_TYPES"] distinct values per metric
and process; anything else is counted as "other".
"""

from __future__ import annotations

import threading
from collections import Counter as Tally
from collections.abc import Iterable, Mapping

from prometheus_client import Counter, Histogram

from eventbus.store import catalog
from eventbus.store.conf import bus_settings

OTHER = "other"

EVENTS_EMITTED = Counter(
    "deskcomm_eventbus_events_emitted_total",
    "Events written by emit/emit_many (inside the caller's transaction), by type.",
    ["event_type"],
)
DELIVERIES_PROCESSED = Counter(
    "deskcomm_eventbus_deliveries_processed_total",
    "Deliveries settled by a worker, by consumer, event type and outcome (done, retry, dead).",
    ["consumer", "event_type", "outcome"],
)
HANDLER_DURATION = Histogram(
    "deskcomm_eventbus_handler_duration_seconds",
    "Time a consumer's handler took, success or failure, by consumer and event type.",
    ["consumer", "event_type"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)

# Failure isolation (eventbus/dispatch/claim.py, eventbus/dispatch/slots.py): what the worker took
# back or gave up.
DELIVERIES_REAPED = Counter(
    "deskcomm_eventbus_deliveries_reaped_total",
    "Deliveries taken over after their worker's lease ran out (killed, stuck, disconnected).",
)
HANDLER_TIMEOUTS = Counter(
    "deskcomm_eventbus_handler_timeouts_total",
    "Handler runs given up after their consumer's timeout (the thread is abandoned).",
    ["consumer"],
)
LEASES_LOST = Counter(
    "deskcomm_eventbus_leases_lost_total",
    "Deliveries a worker found taken over by another at its heartbeat (not run, results dropped).",
)


def count_reaped(n: int) -> None:
    if n:
        DELIVERIES_REAPED.inc(n)


class EventTypeLabels:
    """Bounded `event_type` label values: declared types, first come, up to the cap; else other."""

    def __init__(self) -> None:
        self._kept: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, event_type: str | None) -> str:
        if not event_type or not catalog.is_declared(event_type):
            return OTHER
        if event_type in self._kept:
            return event_type
        with self._lock:
            if len(self._kept) >= bus_settings.METRICS_MAX_EVENT_TYPES:
                return OTHER
            self._kept.add(event_type)
        return event_type


processed_event_type = EventTypeLabels()


def count_emitted(event_types: Iterable[str]) -> None:
    """One increment per event type of a statement."""
    for event_type, n in Tally(event_types).items():
        EVENTS_EMITTED.labels(event_type).inc(n)


def count_settled(
    consumer_of: Mapping[int, str],
    *,
    done: Iterable[int],
    failed: Iterable[int],
    dead: Iterable[int],
    event_type_of: Mapping[int, str] | None = None,
) -> None:
    """Outcomes of one settled claim: failures that died count as dead, the others as retry.

    `event_type_of` (delivery id -> event type) fills the event_type label; without it the
    outcomes are counted under "other".
    """
    dead_ids = set(dead)
    types = event_type_of or {}
    tally: Tally[tuple[str, str | None, str]] = Tally()
    tally.update((consumer_of[i], types.get(i), "done") for i in done)
    tally.update(
        (consumer_of[i], types.get(i), "dead" if i in dead_ids else "retry") for i in failed
    )
    for (consumer, event_type, outcome), n in tally.items():
        DELIVERIES_PROCESSED.labels(consumer, processed_event_type(event_type), outcome).inc(n)
