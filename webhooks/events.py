"""Event types the webhooks app emits (each app's `events` module is imported at start-up)."""

from __future__ import annotations

from eventbus import catalog

# A test ping: delivered only to the subscription named in the payload (see the org routes).
catalog.declare(
    "webhook.ping", required=["subscription_id"], description="webhooks: test ping of one endpoint"
)
