"""analytics-aggregator: daily per-organization counters (seed 000 §3's "analytics").

Each counted event adds 1 to `(organization, day, metric)` where the metric is the event type
and the day the event's creation date (UTC). One statement does it: the event's id goes into
`crm_analyticscounted` (ON CONFLICT DO NOTHING) and only a new row increments the counter
(INSERT ... ON CONFLICT DO UPDATE SET count = count + 1), so a redelivery, a retry after a
crash or two workers racing on the same event count it once. Counted ids are kept
`CRM["ANALYTICS_DEDUP_DAYS"]` (the `analytics-prune` job), far beyond any redelivery.
"""

from __future__ import annotations

import datetime as dt
import uuid

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
WITH counted AS (
    INSERT INTO crm_analyticscounted (event_id, organization_id, counted_at)
    VALUES (%(event_id)s, %(organization_id)s, now())
    ON CONFLICT (event_id) DO NOTHING
    RETURNING organization_id
)
INSERT INTO crm_analyticsdaily (organization_id, day, metric, count, updated_at)
SELECT organization_id, %(day)s, %(metric)s, 1, now() FROM counted
ON CONFLICT (organization_id, day, metric)
DO UPDATE SET count = crm_analyticsdaily.count + 1, updated_at = now()
"""


def count(event: eventbus.Event) -> bool:
    """Count `event` once; False when it was counted already."""
    with connection.cursor() as cursor:
        cursor.execute(
            COUNT_SQL,
            {
                "event_id": event.id,
                "organization_id": event.organization_id,
                "day": event.created_at.astimezone(dt.UTC).date(),
                "metric": event.event_type,
            },
        )
        return bool(cursor.rowcount)


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
