"""The API knobs, read from `settings.API` at call time (so tests can override them)."""

from __future__ import annotations

from core.conf import AppSettings


class ApiSettings(AppSettings, namespace="API"):
    """Each `settings.API` knob with its type and default (env names: deskcomm/settings.py)."""

    THROTTLE_RATE: str = "600/minute"
    IDEMPOTENCY_TTL_SECONDS: int = 24 * 3600
    PAGE_SIZE: int = 50
    MAX_PAGE_SIZE: int = 200
    KEY_LAST_USED_RESOLUTION_SECONDS: int = 60


api_settings = ApiSettings()
