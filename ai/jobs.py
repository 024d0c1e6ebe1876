"""The AI app's scheduled jobs (declared with `jobs.registry.job`)."""

from __future__ import annotations

from ai.budget import budgets_reset
from ai.health import provider_ping
from ai.media import media_prune
from jobs.registry import integration_check, job


@job("daily-budget-reset", crontab="0 0 * * *", timezone="America/Sao_Paulo")
def reset_budgets() -> int:
    """Snapshot each organization's AI usage of the day into ai_usage_daily and reset its budget,
    then index the sources deferred for want of budget (ai_index_pending)."""
    from ai.rag.indexer import pending_index  # the gateway's HTTP stack: only when this runs

    reset = budgets_reset()
    pending_index()
    return reset


@job("prune-old-media", crontab="30 3 * * *")
def prune_old_media() -> int:
    """Remove message attachments older than the organization's retention (default 365 days)."""
    return media_prune()


integration_check("ai")(provider_ping)  # the model provider, in health-check-integrations
