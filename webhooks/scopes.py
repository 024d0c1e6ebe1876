"""The API key scopes of the webhook endpoints (loaded by WebhooksConfig.ready)."""

from __future__ import annotations

from core.scopes import declare

WEBHOOKS_READ = declare(
    "webhooks:read", "List and read webhook subscriptions, deliveries and attempts."
)
WEBHOOKS_WRITE = declare(
    "webhooks:write", "Create, change, rotate, ping and delete subscriptions; resend deliveries."
)
