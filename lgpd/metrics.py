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

import datetime as dt
from collections.abc import Iterator

from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from core.metrics import top_organizations
from eventbus.store.conf import bus_settings
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
        yield self._by_organization(now)

    def _by_organization(self, now: dt.datetime) -> GaugeMetricFamily:
        """Seed 001 §9.3's lgpd.request.sla_lag_hours by tenant: the organizations whose
        requests are the most late on their own series, the worst of the rest as `other`."""
        family = GaugeMetricFamily(
            "deskcomm_lgpd_organization_sla_lag_hours",
            "Hours the organization's most late open LGPD request is past its due date, for "
            "organizations with one late (slug, top N; other: the worst of the rest).",
            labels=["organization"],
        )
        due = {kind: levels["due"] for kind, levels in deadlines().items()}
        lags: dict[str, float] = {}
        for slug, kind, oldest in selectors.oldest_open_requests_by_organization():
            hours = (now - oldest - due[kind]).total_seconds() / 3600
            if hours > 0:
                lags[slug] = max(lags.get(slug, 0.0), hours)
        top = bus_settings.METRICS_TOP_ORGANIZATIONS
        for slug, hours in top_organizations(lags, top, max).items():
            family.add_metric([slug], hours)
        return family
