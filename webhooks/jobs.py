"""The webhooks app's scheduled jobs (declared with `jobs.registry.job`)."""

from __future__ import annotations

import datetime as dt

from django.db import connection

from eventbus.store.emitter import WAKEUP_CHANNEL
from jobs.registry import job, job_setting
from webhooks.services import attempts_purge


@job("webhook-attempts-purge", crontab="15 4 * * *")
def purge_webhook_attempts() -> int:
    """Delete webhook attempt-log rows older than WEBHOOKS_ATTEMPT_RETENTION_DAYS."""
    return attempts_purge()


@job("process-pending-webhooks", every=dt.timedelta(minutes=1))
def wake_webhooks() -> int:
    """Wake idle senders (NOTIFY) and send a bounded batch of due webhooks (seed 000 §7.3).

    The fallback for when no `deliver_webhooks` process is running: the same worker class, run
    until nothing is due or the limit is reached. It is a pass of the jobs process, which is in
    the worker registry already: the pass registers no worker of its own.
    """
    # The sender (httpx, ~11 MB) is imported by the run, not by every process that loads jobs.
    from webhooks.worker import WebhookWorker, WebhookWorkerOptions

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, 'process-pending-webhooks')", [WAKEUP_CHANNEL])
    limit = int(job_setting("process-pending-webhooks", "LIMIT", 500))
    worker = WebhookWorker(
        WebhookWorkerOptions(
            once=True, max_events=limit, listen=False, startup_jitter=0, presence=False
        )
    )
    worker.run()
    return worker.processed
