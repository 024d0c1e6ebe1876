"""The webhooks app's scheduled jobs (declared with `deskcomm.cron.job`)."""

from __future__ import annotations

from deskcomm.cron import job
from webhooks.services import attempts_purge


@job("webhook-attempts-purge", crontab="15 4 * * *")
def purge_webhook_attempts() -> int:
    """Delete webhook attempt-log rows older than WEBHOOKS_ATTEMPT_RETENTION_DAYS."""
    return attempts_purge()
