"""The bus's scrape-time gauges: the queue's shape and the busiest organizations' figures.

Read from the database when Prometheus scrapes (registered in eventbus/apps.py), never on the
hot path: the queue's shape (pending, in flight, dead, lag) with one grouped query served by the
(consumer, status) index, the per-organization figures from the rollup.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterator, Mapping

from django.db import connection
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from eventbus.history import rollup
from eventbus.history.dlq_sizes import dlq_sizes
from eventbus.store.conf import bus_settings
from eventbus.store.metrics import EventTypeLabels

# The unfinished rows only: each arm is one status, read through that status's partial index
# (delivery_claim_idx, delivery_lease_idx); done rows are never read. The dead letters are
# counted apart (eventbus/history/dlq_sizes.py).
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


# Per tenant (eventbus.history.rollup.tenant_figures): the busiest
# EVENTBUS["METRICS_TOP_ORGANIZATIONS"] organizations by settled volume in the last hour, each with
# its own series, the rest summed as organization="other" (lag: the worst of them; fail ratio:
# pooled). Two statements per scrape: the DLQ's size per organization, then a range of the rollup's
# primary key joined to it.
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
