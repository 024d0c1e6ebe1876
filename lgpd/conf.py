"""The LGPD knobs, read from `settings.LGPD` at call time (so tests can override them)."""

from __future__ import annotations

import datetime as dt

from core.conf import AppSettings


class LgpdSettings(AppSettings, namespace="LGPD"):
    """Each `settings.LGPD` knob with its type and default (env names: deskcomm/settings.py)."""

    EXPORT_DELAY_DAYS: float = 7.0
    REDACT_DELAY_DAYS: float = 15.0
    EXPORT_LINK_DAYS: float = 30.0
    # LGPD Art. 19 II: a full access request is answered within 15 days of the request. The SLA
    # check and the alerts escalate LEGAL_MARGIN_DAYS before that deadline (lgpd.sla.deadlines).
    LEGAL_DEADLINE_DAYS: float = 15.0
    LEGAL_MARGIN_DAYS: float = 2.0
    DPO_EMAIL: str = ""
    PUBLIC_BASE_URL: str = "http://localhost:8000"

    def days(self, name: str) -> dt.timedelta:
        """The `*_DAYS` knob `name` as a timedelta."""
        days: float = getattr(self, name)
        return dt.timedelta(days=days)


lgpd_settings = LgpdSettings()


def export_delay() -> dt.timedelta:
    """D+7 by default: when the export of an access request runs."""
    return lgpd_settings.days("EXPORT_DELAY_DAYS")


def redact_delay() -> dt.timedelta:
    """D+15 by default: when the redaction of a redact request runs."""
    return lgpd_settings.days("REDACT_DELAY_DAYS")


def legal_deadline() -> dt.timedelta:
    """D+15 by default: LGPD Art. 19 II's deadline to answer an access request."""
    return lgpd_settings.days("LEGAL_DEADLINE_DAYS")
