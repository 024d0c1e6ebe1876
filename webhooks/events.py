"""The webhooks app's event types. None is open to the API or to pipelines: a ping is a command
to the sender, and the failures and disablings report the sender's own work."""

from __future__ import annotations

from eventbus.store import catalog

SEED = "seed 000 §3"

catalog.declare(
    "webhook.delivery_failed",
    required=("subscription_id", "event_id", "attempt", "error"),
    description=SEED,
)
catalog.declare(
    "webhook.subscription_disabled",
    required=("subscription_id", "reason", "last_error"),
    description=SEED,
)
# A test ping: delivered only to the subscription named in the payload (see the org routes).
catalog.declare(
    "webhook.ping", required=["subscription_id"], description="webhooks: test ping of one endpoint"
)
