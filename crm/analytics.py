"""analytics-aggregator: daily per-organization counters (seed 000 §3's "analytics").

Each counted event adds 1 to `(organization, day, metric)` where the metric is the event type
and the day the event's creation date (UTC). One statement does it for a whole batch of events
(the consumer is a batch consumer): their ids go into `crm_analyticscounted` (ON CONFLICT DO
NOTHING) and only the new rows increment the counters, grouped (INSERT ... ON CONFLICT DO UPDATE
SET count = count + n), so a redelivery, a retry after a crash, a batch tried again in halves or
two workers racing on the same event count it once. Counted ids are kept
`CRM["ANALYTICS_DEDUP_DAYS"]` (the `analytics-prune` job), far beyond any redelivery.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence

from django.db import connection
from django.utils import timezone

import eventbus
from crm.conf import crm_settings
from crm.conversation_models import AnalyticsCounted, AnalyticsDaily

METRICS = (
    "lead_activity.recorded",
    "message.received",
    "message.sent",
    "message.delivered",
    "message.read",
    "message.failed",
    "ai.responded",
    "conversation.resolved",
    "conversation.reopened",
)

COUNT_SQL = """
WITH given AS (
    SELECT * FROM unnest(%(event_ids)s::uuid[], %(organization_ids)s::uuid[], %(days)s::date[],
                         %(metrics)s::text[]) AS t(event_id, organization_id, day, metric)
), counted AS (
    INSERT INTO crm_analyticscounted (event_id, organization_id, counted_at)
    SELECT event_id, organization_id, now() FROM given
    ON CONFLICT (event_id) DO NOTHING
    RETURNING event_id
), added AS (
    INSERT INTO crm_analyticsdaily (organization_id, day, metric, count, updated_at)
    SELECT g.organization_id, g.day, g.metric, count(*), now()
      FROM counted JOIN given g USING (event_id)
     GROUP BY g.organization_id, g.day, g.metric
    ON CONFLICT (organization_id, day, metric)
    DO UPDATE SET count = crm_analyticsdaily.count + EXCLUDED.count, updated_at = now()
)
SELECT count(*) FROM counted
"""


def count(event: eventbus.Event) -> bool:
    """Count `event` once; False when it was counted already."""
    return count_many([event]) == 1


def count_many(events: Sequence[eventbus.Event]) -> int:
    """Count each of `events` once, in one statement; returns how many were new. Events
    counted already (a redelivery, a retried batch) add nothing."""
    if not events:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            COUNT_SQL,
            {
                "event_ids": [e.id for e in events],
                "organization_ids": [e.organization_id for e in events],
                "days": [e.created_at.astimezone(dt.UTC).date() for e in events],
                "metrics": [e.event_type for e in events],
            },
        )
        (new,) = cursor.fetchone() or (0,)
    return int(new)


def daily(
    organization_id: uuid.UUID, *, since: dt.date, until: dt.date, metrics: list[str] | None = None
) -> list[AnalyticsDaily]:
    """The organization's counters from `since` to `until` (inclusive), by day and metric."""
    rows = AnalyticsDaily.objects.filter(
        organization_id=organization_id, day__gte=since, day__lte=until
    )
    if metrics:
        rows = rows.filter(metric__in=metrics)
    return list(rows.order_by("day", "metric"))


def prune(*, now: dt.datetime | None = None) -> int:
    """Forget counted event ids older than the dedup window."""
    limit = (now or timezone.now()) - dt.timedelta(days=crm_settings.ANALYTICS_DEDUP_DAYS)
    deleted, _ = AnalyticsCounted.objects.filter(counted_at__lt=limit).delete()
    return deleted
