"""The event bus's Prometheus metrics (declared here only) and the scrape-time queue gauges.

Hot-path counters are incremented once per claim and outcome (not per row), and never query
the database; the queue's shape (pending, in flight, dead, lag) is read at scrape time with one
grouped query served by the (consumer, status) index. Fail rate is a query over the outcomes:
`rate(deskcomm_eventbus_deliveries_processed_total{outcome!="done"}[5m])
 / rate(deskcomm_eventbus_deliveries_processed_total[5m])`.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Iterator, Mapping

from django.db import connection
from django.utils import timezone
from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

EVENTS_EMITTED = Counter(
    "deskcomm_eventbus_events_emitted_total",
    "Events written by emit/emit_many (inside the caller's transaction), by type.",
    ["event_type"],
)
DELIVERIES_PROCESSED = Counter(
    "deskcomm_eventbus_deliveries_processed_total",
    "Deliveries settled by a worker, by consumer and outcome (done, retry, dead).",
    ["consumer", "outcome"],
)
HANDLER_DURATION = Histogram(
    "deskcomm_eventbus_handler_duration_seconds",
    "Time a consumer's handler took, success or failure.",
    ["consumer"],
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
) -> None:
    """Outcomes of one settled claim: failures that died count as dead, the others as retry."""
    dead_ids = set(dead)
    tally: Tally[tuple[str, str]] = Tally()
    tally.update((consumer_of[i], "done") for i in done)
    tally.update((consumer_of[i], "dead" if i in dead_ids else "retry") for i in failed)
    for (consumer, outcome), n in tally.items():
        DELIVERIES_PROCESSED.labels(consumer, outcome).inc(n)


# -- scrape time --------------------------------------------------------------------------------

# The unfinished rows only: each arm is one status, read through that status's partial index
# (delivery_claim_idx, delivery_lease_idx, delivery_dead_idx); done rows are never read.
QUEUE_SHAPE_SQL = """
SELECT consumer, status, count(*),
       min(next_attempt_at) FILTER (WHERE status = 'pending' AND next_attempt_at <= %(now)s)
  FROM (SELECT consumer, status, next_attempt_at FROM eventbus_delivery WHERE status = 'pending'
        UNION ALL
        SELECT consumer, status, next_attempt_at FROM eventbus_delivery
         WHERE status = 'processing'
        UNION ALL
        SELECT consumer, status, next_attempt_at FROM eventbus_delivery WHERE status = 'dead') d
 GROUP BY consumer, status
"""

_STATUS_GAUGES = {
    "pending": ("deskcomm_eventbus_deliveries_pending", "Deliveries waiting (due or not)."),
    "processing": ("deskcomm_eventbus_deliveries_in_flight", "Deliveries claimed by a worker."),
    "dead": ("deskcomm_eventbus_deliveries_dead", "Deliveries in the dead-letter queue."),
}


class QueueCollector(Collector):
    """Queue-shape gauges per consumer, read from the database when Prometheus scrapes."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = timezone.now()
        with connection.cursor() as cursor:
            cursor.execute(QUEUE_SHAPE_SQL, {"now": now})
            rows = cursor.fetchall()
        families = {
            status: GaugeMetricFamily(name, doc, labels=["consumer"])
            for status, (name, doc) in _STATUS_GAUGES.items()
        }
        lag = GaugeMetricFamily(
            "deskcomm_eventbus_lag_seconds",
            "Age of the oldest due pending delivery, per consumer (0 when none is due).",
            labels=["consumer"],
        )
        oldest: dict[str, float] = {}
        for consumer, status, count, due_since in rows:
            families[status].add_metric([consumer], count)
            if status == "pending":
                oldest[consumer] = (now - due_since).total_seconds() if due_since else 0.0
        for consumer, seconds in sorted(oldest.items()):
            lag.add_metric([consumer], max(seconds, 0.0))
        yield from families.values()
        yield lag
