"""The event bus's Prometheus metrics (declared here only) and the scrape-time queue gauges.

Hot-path counters are incremented once per claim and outcome (not per row), and never query
the database; the queue's shape (pending, in flight, dead, lag) is read at scrape time with one
grouped query served by the (consumer, status) index. Fail rate is a query over the outcomes:
`rate(deskcomm_eventbus_deliveries_processed_total{outcome!="done"}[5m])
 / rate(deskcomm_eventbus_deliveries_processed_total[5m])`.

The `event_type` label (seed 000 §10.1: consumed, lag, DLQ) has a cardinality guard: only
declared event types, at most EVENTBUS["METRICS_MAX_EVENT_TYPES"] distinct values per metric
and process; anything else is counted as "other".
"""

from __future__ import annotations

import threading
from collections import Counter as Tally
from collections.abc import Iterable, Iterator, Mapping

from django.db import connection
from django.utils import timezone
from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from eventbus import catalog, rollup
from eventbus.conf import bus_settings
from eventbus.dlq_sizes import dlq_sizes

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

# Failure isolation (eventbus/claim.py, eventbus/slots.py): what the worker took back or gave up.
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


# -- scrape time --------------------------------------------------------------------------------

# The unfinished rows only: each arm is one status, read through that status's partial index
# (delivery_claim_idx, delivery_lease_idx); done rows are never read. The dead letters are
# counted apart (eventbus/dlq_sizes.py).
QUEUE_SHAPE_SQL = """
SELECT consumer, event_type, status, count(*),
       min(next_attempt_at) FILTER (WHERE status = 'pending' AND next_attempt_at <= %(now)s)
  FROM (SELECT consumer, event_type, status, next_attempt_at FROM eventbus_delivery
         WHERE status = 'pending'
        UNION ALL
        SELECT consumer, event_type, status, next_attempt_at FROM eventbus_delivery
         WHERE status = 'processing') d
 GROUP BY consumer, event_type, status
"""

_STATUS_GAUGES = {
    "pending": ("deskcomm_eventbus_deliveries_pending", "Deliveries waiting (due or not)."),
    "processing": ("deskcomm_eventbus_deliveries_in_flight", "Deliveries claimed by a worker."),
    "dead": ("deskcomm_eventbus_deliveries_dead", "Deliveries in the dead-letter queue."),
}
LABELS = ["consumer", "event_type"]


class QueueCollector(Collector):
    """Queue-shape gauges per consumer and event type, read from the database at scrape time."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = timezone.now()
        with connection.cursor() as cursor:
            cursor.execute(QUEUE_SHAPE_SQL, {"now": now})
            rows = cursor.fetchall()
            dead = dlq_sizes(cursor)
        label = EventTypeLabels()  # per scrape: the cap bounds one exposition
        counts: Tally[tuple[str, str, str]] = Tally()
        oldest: dict[tuple[str, str], float] = {}
        for consumer, event_type, status, count, due_since in rows:
            key = (consumer, label(event_type))
            counts[(*key, status)] += count
            if status == "pending":
                seconds = max((now - due_since).total_seconds(), 0.0) if due_since else 0.0
                oldest[key] = max(oldest.get(key, 0.0), seconds)
        for size in dead:
            counts[(size.consumer, label(size.event_type), "dead")] += size.dead
        yield from self._families(counts, oldest)

    def _families(
        self, counts: Mapping[tuple[str, str, str], int], oldest: Mapping[tuple[str, str], float]
    ) -> Iterator[GaugeMetricFamily]:
        families = {
            status: GaugeMetricFamily(name, doc, labels=LABELS)
            for status, (name, doc) in _STATUS_GAUGES.items()
        }
        for (consumer, event_type, status), count in sorted(counts.items()):
            families[status].add_metric([consumer, event_type], count)
        lag = GaugeMetricFamily(
            "deskcomm_eventbus_lag_seconds",
            "Age of the oldest due pending delivery, per consumer and event type (0: none due).",
            labels=LABELS,
        )
        for (consumer, event_type), seconds in sorted(oldest.items()):
            lag.add_metric([consumer, event_type], seconds)
        yield from families.values()
        yield lag


# Per tenant (eventbus.rollup.tenant_figures): the busiest EVENTBUS["METRICS_TOP_ORGANIZATIONS"]
# organizations by settled volume in the last hour, each with its own series, the rest summed as
# organization="other" (lag: the worst of them; fail ratio: pooled). Two statements per scrape:
# the DLQ's size per organization, then a range of the rollup's primary key joined to it.
_TENANT_GAUGES = {
    "lag_seconds": (
        "deskcomm_eventbus_organization_lag_seconds",
        "Age of the organization's oldest due pending delivery, sampled once a minute.",
    ),
    "dead": (
        "deskcomm_eventbus_organization_dead_deliveries",
        "Deliveries of the organization in the dead-letter queue.",
    ),
    "fail_ratio": (
        "deskcomm_eventbus_organization_fail_ratio",
        "Failed attempts (retried or dead) / settled attempts of the organization, last 5 minutes.",
    ),
}


class TenantCollector(Collector):
    """Per-organization lag, DLQ size and fail ratio, with the top-N cardinality guard."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        tenants = rollup.tenant_figures(top=bus_settings.METRICS_TOP_ORGANIZATIONS)
        for attribute, (name, doc) in _TENANT_GAUGES.items():
            family = GaugeMetricFamily(name, doc, labels=["organization"])
            for tenant in tenants:
                family.add_metric([tenant.label], float(getattr(tenant, attribute)))
            yield family
