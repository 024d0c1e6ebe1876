"""The Nuvemshop app's Prometheus metrics (declared here only): API calls, webhooks, and each
store's sync lag (scrape time)."""

from __future__ import annotations

from collections.abc import Iterator

from django.utils import timezone
from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from core.metrics import top_organizations
from eventbus.store.conf import bus_settings

API_REQUESTS = Counter(
    "deskcomm_nuvemshop_api_requests_total",
    "Requests to the Nuvemshop API by status class (2xx..5xx; 429 counted as throttled).",
    ["status_class"],
)
WEBHOOKS = Counter(
    "deskcomm_nuvemshop_webhooks_total",
    "Store webhooks received, by outcome (accepted, duplicate, bad_signature, bad_payload).",
    ["outcome"],
)


def count_response(status_code: int) -> None:
    label = "throttled" if status_code == 429 else f"{status_code // 100}xx"
    API_REQUESTS.labels(label).inc()


class SyncLagCollector(Collector):
    """Seconds since each syncing store's last completed sync (never synced: since installed),
    by organization within the per-tenant cardinality guard (the worst of the rest: `other`)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from nuvemshop.models import Store

        family = GaugeMetricFamily(
            "deskcomm_nuvemshop_sync_lag_seconds",
            "Seconds since the store's last completed sync, by organization (slug; other).",
            labels=["organization"],
        )
        now = timezone.now()
        lags: dict[str, float] = {}
        stores = Store.objects.filter(status=Store.Status.CONNECTED).exclude(
            access_token_encrypted=""
        )
        for slug, synced, installed in stores.values_list(
            "organization__slug", "last_sync_at", "installed_at"
        ):
            lag = (now - (synced or installed)).total_seconds()
            lags[slug] = max(lags.get(slug, 0.0), lag)
        for slug, lag in top_organizations(
            lags, bus_settings.METRICS_TOP_ORGANIZATIONS, max
        ).items():
            family.add_metric([slug], lag)
        yield family
