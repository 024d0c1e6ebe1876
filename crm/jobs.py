"""The CRM's scheduled jobs (discovered at start-up)."""

from __future__ import annotations

import datetime as dt

from crm import analytics, sla
from jobs.registry import job


@job("sla-breaches", every=dt.timedelta(minutes=1))
def sla_breaches() -> int:
    """Record conversations' first responses; emit `conversation.sla_breached` for missed ones."""
    return sla.check_breaches()


@job("analytics-prune", every=dt.timedelta(hours=6))
def analytics_prune() -> int:
    """Forget the analytics aggregator's counted event ids past the dedup window."""
    return analytics.prune()
