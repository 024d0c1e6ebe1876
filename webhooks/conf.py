"""The webhook knobs, read from `settings.WEBHOOKS` at call time (so tests can override them)."""

from __future__ import annotations

from core.conf import AppSettings

SECRETS_CONTEXT = "webhook_secrets"  # core.crypto context of the signing secrets
CONSUMER_PREFIX = "webhook:"  # delivery consumer names: "webhook:<subscription uuid>"
# Namespaces "*" does not match: a subscription receives them only by listing them (an exact type
# or "lgpd.*"). Mirrored in the fan-out SQL (migration 0003_wildcards_skip_sensitive).
SENSITIVE_NAMESPACES = ("lgpd", "system")


class WebhookSettings(AppSettings, namespace="WEBHOOKS"):
    """Each `settings.WEBHOOKS` knob with its type and default (env names: deskcomm/settings.py)."""

    CONNECT_TIMEOUT: float = 3.0
    TIMEOUT: float = 10.0
    ALLOW_PRIVATE_TARGETS: bool = False
    ALLOW_HTTP: bool = False
    MAX_ATTEMPTS: int = 8
    DISABLE_AFTER_FAILURES: int = 10
    MAX_RETRY_AFTER: float = 3600.0
    ROTATION_GRACE_HOURS: float = 24.0
    ATTEMPT_RETENTION_DAYS: int = 30
    MAX_IN_FLIGHT_PER_SUBSCRIPTION: int = 8
    USER_AGENT: str = "Deskcomm-Webhooks/1.0"


webhook_settings = WebhookSettings()
