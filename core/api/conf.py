"""The API knobs, read from `settings.API` at call time (so tests can override them)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    "THROTTLE_RATE": "600/minute",
    "IDEMPOTENCY_TTL_SECONDS": 24 * 3600,
    "PAGE_SIZE": 50,
    "MAX_PAGE_SIZE": 200,
    "KEY_LAST_USED_RESOLUTION_SECONDS": 60,
    "RESERVED_EVENT_NAMESPACES": ["lgpd", "system", "webhook"],
}


class ApiSettings:
    """Attribute access to `settings.API[...]`, falling back to DEFAULTS."""

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"unknown API setting {name!r}")
        return getattr(settings, "API", {}).get(name, DEFAULTS[name])


api_settings = ApiSettings()
