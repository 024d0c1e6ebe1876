"""The WhatsApp app's Prometheus metrics (declared here only): sends, their latency, inbound
webhooks, and the sessions' status (scrape time, seed 001 A4)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

SENDS = Counter(
    "deskcomm_whatsapp_sends_total",
    "Outbound WhatsApp sends by outcome (sent, resent, recovered, retry, failed, blocked).",
    ["outcome"],
)
INBOUND = Counter(
    "deskcomm_whatsapp_webhooks_total",
    "Inbound WAHA webhooks by result (stored, duplicate, ack, ack_pending, status, ignored...).",
    ["result"],
)
# Seed 001 §12: WAHA send latency (POST -> WAHA's answer) p95 < 1.5 s, warn > 2 s, crit > 5 s.
SEND_SECONDS = Histogram(
    "deskcomm_whatsapp_send_duration_seconds",
    "Time of a send call to WAHA (POST to its answer), by outcome (sent, error).",
    ["outcome"],
    buckets=(0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 30),
)


@dataclass
class Timed:
    outcome: str = "error"


@contextmanager
def send_timer() -> Iterator[Timed]:
    """Times the block as one WAHA send; `outcome` stays `error` unless the block sets it."""
    timed = Timed()
    started = time.perf_counter()
    try:
        yield timed
    finally:
        SEND_SECONDS.labels(timed.outcome).observe(time.perf_counter() - started)


class SessionsCollector(Collector):
    """Sessions per status, and how long the longest-STARTING one has been starting (A4)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from whatsapp.models import WahaSession

        by_status = GaugeMetricFamily(
            "deskcomm_whatsapp_sessions",
            "WAHA sessions by their last synced status.",
            labels=["status"],
        )
        starting = GaugeMetricFamily(
            "deskcomm_whatsapp_session_starting_seconds",
            "How long the longest-STARTING WAHA session has been STARTING (0: none is).",
        )
        rows = WahaSession.objects.order_by().values("status")
        counts = {row["status"]: row["n"] for row in rows.annotate(n=Count("id"))}
        for status in WahaSession.Status.values:
            by_status.add_metric([status], counts.get(status, 0))
        since = WahaSession.objects.filter(status=WahaSession.Status.STARTING).aggregate(
            since=Min("status_changed_at")
        )["since"]
        age = 0.0 if since is None else (timezone.now() - since).total_seconds()
        starting.add_metric([], max(age, 0.0))
        yield by_status
        yield starting
