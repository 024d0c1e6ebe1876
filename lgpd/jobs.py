"""The LGPD scheduled jobs: the daily SLA check (R-L4) and the hourly export expiry."""

from __future__ import annotations

from jobs.registry import job
from lgpd import services


@job("lgpd-sla-check", crontab="0 9 * * *")
def check_sla() -> int:
    """Warn the DPO about data requests open past their due date; escalate access requests
    near the legal deadline (lgpd.sla.deadlines)."""
    return services.sla_check()


@job("lgpd-export-expiry", crontab="20 * * * *")
def expire_exports() -> int:
    """Delete export files whose download period (LGPD_EXPORT_LINK_DAYS) has ended."""
    return services.exports_expire()
