"""The webhook knobs, read from `settings.WEBHOOKS` at call time (so tests can override them)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    "CONNECT_TIMEOUT": 3.0,
    "TIMEOUT": 10.0,
    "ALLOW_PRIVATE_TARGETS": False,
    "ALLOW_HTTP": False,
    "MAX_ATTEMPTS": 8,
    "DISABLE_AFTER_FAILURES": 10,
    "MAX_RETRY_AFTER": 3600.0,
    "ROTATION_GRACE_HOURS": 24.0,
    "ATTEMPT_RETENTION_DAYS": 30,
    "MAX_IN_FLIGHT_PER_SUBSCRIPTION": 8,
    "USER_AGENT": "Deskcomm-Webhooks/1.0",
}

SECRETS_CONTEXT = "webhook_secrets"  # core.crypto context of the signing secrets
CONSUMER_PREFIX = "webhook:"  # delivery consumer names: "webhook:<subscription uuid>"
# Namespaces "*" does not match: a subscription receives them only by listing them (an exact type
# or "lgpd.*"). Mirrored in the fan-out SQL (migration 0003_wildcards_skip_sensitive).
SENSITIVE_NAMESPACES = ("lgpd", "system")


class WebhookSettings:
    """Attribute access to `settings.WEBHOOKS[...]`, falling back to DEFAULTS."""

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"unknown WEBHOOKS setting {name!r}")
        return getattr(settings, "WEBHOOKS", {}).get(name, DEFAULTS[name])


webhook_settings = WebhookSettings()
