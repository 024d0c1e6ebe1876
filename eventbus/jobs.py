"""The event bus's scheduled jobs (seed 000 §7, §11.4; R-C1). Each returns the rows it processed.

Declared with `jobs.registry.job`, so each is also a dramatiq actor and `POST /api/v1/cron/<name>`.
"""

from __future__ import annotations

import datetime as dt
import logging

from core.alerts import alert
from eventbus.dispatch import settle
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.history import archive, partitions, rollup
from eventbus.operations.dlq_alerts import dlq_alerts_check
from eventbus.store.conf import bus_settings
from jobs.registry import job, job_setting

logger = logging.getLogger(__name__)


@job("event-log-reaper", every=dt.timedelta(minutes=1))
def reap_expired_leases() -> int:
    """Return deliveries of dead workers (expired leases) to pending (seed 000 §11.4)."""
    reaped, _ = settle.reap(worker_id="cron:event-log-reaper")
    return reaped


@job("event-log-drain", every=dt.timedelta(minutes=1))
def drain_fallback() -> int:
    """Fallback drain: run a bounded batch of due deliveries (and relay due broker deliveries)."""
    limit = int(job_setting("event-log-drain", "LIMIT", 1000))
    worker = Worker(_bounded(limit, relay=bus_settings.RELAY_ENABLED))
    published = worker.relay_due()
    return _drain(worker, limit) + published


@job("event-log-archive", crontab="30 3 * * *")
def archive_old_events() -> int:
    """Archive events older than the hot window (gzip NDJSON per organization and day), then
    delete them (R-E6); a partitioned log drops whole months' partitions instead."""
    return archive.archive_due().events


@job("event-log-partitions", crontab="15 3 * * *")
def create_partitions_ahead() -> int:
    """A partitioned event log: create the monthly partitions up to EVENT_LOG_PARTITIONS_AHEAD
    (3) months ahead, and alert if fewer than EVENTBUS_PARTITIONS_MIN_AHEAD are ready after it
    (emits fail once the last partition's month is over); then ANALYZE the partitioned table
    (autovacuum analyzes the partitions, never their parent). Nothing on an unpartitioned log."""
    created = partitions.ensure_partitions()
    partitions.analyze_parent()
    try:
        partitions.check_partitions_ahead()
    except partitions.PartitionError as exc:
        alert("event log partitions behind", error=str(exc))
    return len(created)


@job("dlq-alert", every=dt.timedelta(minutes=5))
def dlq_alert() -> int:
    """Alert (ADMINS mail, optional Slack webhook, alert hooks) about consumers whose DLQ grew
    past EVENTBUS_DLQ_ALERT_THRESHOLD within the interval, at most once per interval each."""
    return len(dlq_alerts_check())


def _bounded(
    limit: int, *, consumers: list[str] | None = None, relay: bool = False
) -> WorkerOptions:
    return WorkerOptions(
        consumers=consumers,
        batch_size=max(1, min(100, limit)),
        max_events=limit,
        listen=False,
        startup_jitter=0,
        relay=relay,
    )


def _drain(worker: Worker, limit: int) -> int:
    while worker.processed < limit and worker.run_once():
        continue
    return worker.processed


@job("eventbus-rollup-sample", every=dt.timedelta(minutes=1))
def sample_rollup_lag() -> int:
    """Record each (organization, consumer) pair's lag (oldest due pending delivery) in the
    rollup, once a minute: the status page's lag chart and the per-tenant lag gauge."""
    return rollup.sample_lag()


@job("eventbus-rollup-purge", every=dt.timedelta(hours=1))
def purge_rollup() -> int:
    """Delete rollup rows older than EVENTBUS_ROLLUP_KEEP_DAYS (default 8)."""
    return rollup.purge()
