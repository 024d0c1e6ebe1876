"""Outbound webhooks: per-organization subscriptions, signed POSTs, SSRF-guarded transport.

A subscription is a consumer of the bus: every matching event gets one `eventbus_delivery` row
named `webhook:<subscription id>` in the emit transaction, and shares the bus's claim, backoff,
leases and DLQ. `manage.py deliver_webhooks` sends them.
"""
