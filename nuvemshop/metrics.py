"""The Nuvemshop app's Prometheus metrics (declared here only)."""

from __future__ import annotations

from prometheus_client import Counter

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
