"""LGPD's scrape-time gauges: open data requests late against their own schedule and against
the legal deadline (seed 001 A5/A6, alert rules in deploy/prometheus), and the SLA lag in hours.

A request is late when it is still open past its due date (`lgpd.sla.due_at`: the export at D+7,
the redaction at D+15), never merely for being N days old: a redaction waiting for its D+15 run
is on schedule. Access requests also have a legal deadline (LGPD Art. 19 II: 15 days); the
`legal_margin` level counts those within LEGAL_MARGIN_DAYS of it, `legal` those past it.
Redactions have no fixed statutory term (Art. 18 leaves it to regulation): their due date is the
deadline the alerts watch.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from lgpd import selectors
from lgpd.sla import deadlines


class OverdueRequestsCollector(Collector):
    """Open requests past each deadline level, and how many hours the oldest is past its due."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        late = GaugeMetricFamily(
            "deskcomm_lgpd_requests_open_late",
            "LGPD data requests still open past a deadline, by kind and deadline (due: their own "
            "due date; legal_margin: near the legal deadline; legal: past it).",
            labels=["kind", "deadline"],
        )
        lag = GaugeMetricFamily(
            "deskcomm_lgpd_sla_lag_hours",
            "Hours the oldest open LGPD request of each kind is past its due date (0: none late).",
            labels=["kind"],
        )
        now = timezone.now()
        for kind, levels in deadlines().items():
            for level, after in levels.items():
                # lgpd_request_open_idx reads the open requests only.
                count = selectors.open_requests_older_than(now - after).filter(kind=kind).count()
                late.add_metric([kind, level], count)
            oldest = selectors.oldest_open_request_received_at(kind)
            past = 0.0 if oldest is None else (now - oldest - levels["due"]).total_seconds()
            lag.add_metric([kind], max(past, 0.0) / 3600)
        yield late
        yield lag
