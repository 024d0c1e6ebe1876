"""The event bus knobs, read from `settings.EVENTBUS` at call time (so tests can override them)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    "RETRY_SCHEDULE": [30, 60, 120, 300, 600, 1800, 3600, 7200],
    "RETRY_JITTER": 0.3,
    "MAX_ATTEMPTS": 8,
    "LEASE_SECONDS": 300.0,
    "MAX_PAYLOAD_BYTES": 256 * 1024,
    "NOTIFY_EVENT_TYPES": ["message.received", "ai.handoff_triggered"],
    "HANDLER_MODULES": [],
    "DEAD_LETTER_HOOKS": [],
    "DLQ_ALERT_THRESHOLD": 10,
    "DLQ_ALERT_INTERVAL": 3600.0,
    "DLQ_ALERT_WEBHOOK_URL": "",
}


class BusSettings:
    """Attribute access to `settings.EVENTBUS[...]`, falling back to DEFAULTS."""

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"unknown EVENTBUS setting {name!r}")
        return getattr(settings, "EVENTBUS", {}).get(name, DEFAULTS[name])


bus_settings = BusSettings()
