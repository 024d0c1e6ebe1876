"""Outbound webhooks (signed, retried, SSRF-guarded deliveries). Built by the webhooks issue."""
