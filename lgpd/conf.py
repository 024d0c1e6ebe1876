"""The LGPD knobs, read from `settings.LGPD` at call time (so tests can override them)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    "EXPORT_DELAY_DAYS": 7.0,
    "REDACT_DELAY_DAYS": 15.0,
    "EXPORT_LINK_DAYS": 30.0,
    "SLA_WARN_DAYS": 5.0,
    "SLA_ESCALATE_DAYS": 6.0,
    "DPO_EMAIL": "",
    "PUBLIC_BASE_URL": "http://localhost:8000",
}


class LgpdSettings:
    """Attribute access to `settings.LGPD[...]`, falling back to DEFAULTS."""

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"unknown LGPD setting {name!r}")
        return getattr(settings, "LGPD", {}).get(name, DEFAULTS[name])

    def days(self, name: str) -> dt.timedelta:
        return dt.timedelta(days=float(getattr(self, name)))


lgpd_settings = LgpdSettings()


def export_delay() -> dt.timedelta:
    """D+7 by default: when the export of an access request runs."""
    return lgpd_settings.days("EXPORT_DELAY_DAYS")


def redact_delay() -> dt.timedelta:
    """D+15 by default: when the redaction of a redact request runs."""
    return lgpd_settings.days("REDACT_DELAY_DAYS")
