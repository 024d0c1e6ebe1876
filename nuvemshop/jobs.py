"""Scheduled jobs of the Nuvemshop integration (seed 000 §7.5, §7.7; discovered at start-up)."""

from __future__ import annotations

import datetime as dt

from jobs.registry import integration_check, job, run_integration_checks
from nuvemshop import maintenance


@job("oauth-refresh-tokens", every=dt.timedelta(hours=1))
def refresh_tokens() -> int:
    """Check every connected store's token (Nuvemshop tokens do not expire: nothing to refresh),
    re-encrypt it under the current `oauth` key, mark and alert on a revoked one."""
    return maintenance.tokens_refresh()


@job("health-check-integrations", every=dt.timedelta(minutes=15))
def health_check_integrations() -> int:
    """Ping each connected store (`GET /store`) into integration_health, alert after 2 failures;
    then each WAHA session's status (whatsapp sync-sessions: stored, alerted when stuck) and the
    model provider (ai.health), as each integration registered them (jobs.registry). Each runs
    even when another failed; the first error is raised."""
    return run_integration_checks()


@integration_check("nuvemshop")
def stores_ping() -> int:
    return maintenance.stores_ping()


@job("poll-abandoned-carts", every=dt.timedelta(minutes=30))
def poll_abandoned_carts() -> int:
    """Emit `nuvemshop.cart_abandoned` once per abandoned checkout of each connected store."""
    return maintenance.carts_poll()
