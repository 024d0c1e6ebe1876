"""LGPD's scrape-time gauge: data requests still open past their SLA (seed 001 A5/A6)."""

from __future__ import annotations

from collections.abc import Iterator

from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from lgpd import selectors
from lgpd.conf import lgpd_settings


class OverdueRequestsCollector(Collector):
    """Open requests older than the warn (D+5) and escalate (D+6) thresholds."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "deskcomm_lgpd_requests_open_past_sla",
            "LGPD data requests still open past the SLA threshold (level: warn, escalate).",
            labels=["level"],
        )
        now = timezone.now()
        for level, setting in (("warn", "SLA_WARN_DAYS"), ("escalate", "SLA_ESCALATE_DAYS")):
            # The SLA check's own selector; lgpd_request_open_idx reads the open requests only.
            late = selectors.open_requests_older_than(now - lgpd_settings.days(setting))
            family.add_metric([level], late.order_by().count())
        yield family
