"""Event types the webhooks app emits (discovered at start-up like every app's handlers)."""

from __future__ import annotations

from eventbus import catalog

# A test ping: delivered only to the subscription named in the payload (see the org routes).
catalog.declare(
    "webhook.ping", required=["subscription_id"], description="webhooks: test ping of one endpoint"
)
