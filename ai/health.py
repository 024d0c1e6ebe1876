"""The model provider's health: `provider_ping` (run by `health-check-integrations`) embeds one
word through the installation's gateway and records a ProviderHealth row; an alert after
PROVIDER_ALERT_AFTER_FAILURES failed pings in a row. The health endpoint's `ai_provider` check
and the `deskcomm_ai_provider_up` gauge read the last row (no provider call inside either)."""

from __future__ import annotations

import datetime as dt
import time
from contextlib import closing

from django.utils import timezone

from ai.conf import ai_settings
from ai.gateway import GatewayError, gateway_for
from ai.models import ProviderHealth
from core.alerts import alert

PING_TEXT = "ping"


class ProviderUnhealthy(Exception):
    """The model provider's last ping failed (the answer names this class; the log the error)."""


def provider_ping() -> int:
    """Ping the provider once; returns 1 (one provider checked)."""
    started = time.monotonic()
    error = ""
    try:
        with closing(gateway_for(None)) as gateway:
            gateway.embed([PING_TEXT])
    except GatewayError as exc:
        code = getattr(exc.__cause__, "status_code", None)
        error = f"embedding: {exc.error_class}" + (f" ({code})" if code else "")
    previous = ProviderHealth.objects.order_by("-checked_at").first()
    failures = 0 if not error else (previous.consecutive_failures if previous else 0) + 1
    ProviderHealth.objects.create(
        checked_at=timezone.now(),
        ok=not error,
        latency_ms=int((time.monotonic() - started) * 1000),
        error=error,
        consecutive_failures=failures,
    )
    if failures == ai_settings.PROVIDER_ALERT_AFTER_FAILURES:
        alert("AI model provider unhealthy", consecutive_failures=failures, error=error)
    keep = dt.timedelta(days=ai_settings.PROVIDER_HEALTH_DAYS)
    ProviderHealth.objects.filter(checked_at__lt=timezone.now() - keep).delete()
    return 1


def last_ping_probe() -> None:
    """Raise ProviderUnhealthy when the provider's last ping failed (none yet: healthy)."""
    last = ProviderHealth.objects.order_by("-checked_at").first()
    if last is not None and not last.ok:
        raise ProviderUnhealthy(f"last ping failed: {last.error}")
