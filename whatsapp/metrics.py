"""The WhatsApp app's Prometheus metrics (declared here only)."""

from __future__ import annotations

from prometheus_client import Counter

SENDS = Counter(
    "deskcomm_whatsapp_sends_total",
    "Outbound WhatsApp sends by outcome (sent, resent, recovered, retry, failed, blocked).",
    ["outcome"],
)
INBOUND = Counter(
    "deskcomm_whatsapp_webhooks_total",
    "Inbound WAHA webhooks by result (stored, duplicate, ack, status, ignored, unauthorized...).",
    ["result"],
)
