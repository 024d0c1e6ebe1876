"""DLQ growth alert (R-D3): a consumer whose deliveries keep dying pages a human, once per interval.

"Growth" is how many of a consumer's deliveries died within the last `DLQ_ALERT_INTERVAL` seconds
and are still in the DLQ. At `DLQ_ALERT_THRESHOLD` or more, ADMINS get a mail and, when
`DLQ_ALERT_WEBHOOK_URL` is set, a Slack-compatible webhook gets `{"text": ...}` through the
SSRF-guarded client. The per-consumer slot in `eventbus_dlqalertstate` is taken by one conditional
upsert before sending, so concurrent checkers (workers, cron) alert at most once per interval.

Run it from cron (`manage.py check_dlq_alerts`) or on every death by adding
`eventbus.operations.dlq_alerts.on_dead_letters` to EVENTBUS_DEAD_LETTER_HOOKS.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from django.utils import timezone

from core.alerts import alert, post_webhook
from eventbus.dispatch.claim import DeadDelivery
from eventbus.store.conf import bus_settings

# GROWTH. Deaths per consumer in the window that are still dead: a range of delivery_dlq_idx
# (dead rows only, by finished_at), plus each consumer's whole DLQ size for the message.
GROWTH_SQL = """
WITH grown AS (
    SELECT consumer, count(*) AS died FROM eventbus_delivery
     WHERE status = 'dead' AND finished_at > %(since)s AND finished_at <= %(now)s
     GROUP BY consumer
    HAVING count(*) >= %(threshold)s
)
SELECT g.consumer, g.died,
       (SELECT count(*) FROM eventbus_delivery d
         WHERE d.consumer = g.consumer AND d.status = 'dead') AS dlq_size
  FROM grown g
 ORDER BY g.consumer
"""

# SLOT. Take each consumer's alert slot for this interval: a row per consumer, updated only when
# its last alert is at least one interval old. Only consumers returned here are alerted.
CLAIM_SLOTS_SQL = """
INSERT INTO eventbus_dlqalertstate AS s (consumer, last_sent_at, dead_in_window)
SELECT * FROM unnest(%(consumers)s::text[], array_fill(%(now)s::timestamptz,
                     ARRAY[cardinality(%(consumers)s::text[])]), %(died)s::int[])
ON CONFLICT (consumer) DO UPDATE
   SET last_sent_at = EXCLUDED.last_sent_at, dead_in_window = EXCLUDED.dead_in_window
 WHERE s.last_sent_at <= %(now)s::timestamptz - %(interval)s * interval '1 second'
RETURNING consumer
"""


@dataclass(frozen=True)
class DlqGrowth:
    """One consumer's DLQ growth: `died` in the window, `dlq_size` dead in total."""

    consumer: str
    died: int
    dlq_size: int


def dlq_alerts_check(*, now: dt.datetime | None = None) -> list[DlqGrowth]:
    """Alert ADMINS (and the webhook) about consumers whose DLQ grew past the threshold.

    Returns the growths alerted now; a consumer alerted less than one interval ago is skipped.
    Sending failures are logged, never raised (the caller may be a worker).
    """
    now = now or timezone.now()
    interval = bus_settings.DLQ_ALERT_INTERVAL
    grown = _growth(now, interval, bus_settings.DLQ_ALERT_THRESHOLD)
    due = _claim_slots(grown, now, interval)
    if due:
        _send(due, interval)
    return due


def on_dead_letters(dead: Sequence[DeadDelivery]) -> None:
    """EVENTBUS_DEAD_LETTER_HOOKS entry: check the DLQ growth right after work dies."""
    if dead:
        dlq_alerts_check()


def _growth(now: dt.datetime, interval: float, threshold: int) -> list[DlqGrowth]:
    since = now - dt.timedelta(seconds=interval)
    with connection.cursor() as cursor:
        cursor.execute(GROWTH_SQL, {"since": since, "now": now, "threshold": max(threshold, 1)})
        return [DlqGrowth(*row) for row in cursor.fetchall()]


def _claim_slots(grown: list[DlqGrowth], now: dt.datetime, interval: float) -> list[DlqGrowth]:
    if not grown:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            CLAIM_SLOTS_SQL,
            {
                "consumers": [g.consumer for g in grown],
                "died": [g.died for g in grown],
                "now": now,
                "interval": interval,
            },
        )
        won = {row[0] for row in cursor.fetchall()}
    return [g for g in grown if g.consumer in won]


def alert_text(due: Sequence[DlqGrowth], interval: float) -> str:
    """The alert's body (mail and webhook)."""
    minutes = round(interval / 60)
    lines = [
        f"- {g.consumer}: {g.died} died in the last {minutes} min, {g.dlq_size} in the DLQ "
        f"(admin: /admin/eventbus/deadletter/?consumer={g.consumer})"
        for g in due
    ]
    return "Dead-letter queue growing:\n" + "\n".join(lines)


def _send(due: Sequence[DlqGrowth], interval: float) -> None:
    text = alert_text(due, interval)
    subject = f"DLQ growing: {', '.join(g.consumer for g in due)}"
    # The log line, ADMINS' mail, ALERT_WEBHOOK_URL and the ALERT_HOOKS (core.alerts).
    alert(subject, text=text, consumer=",".join(g.consumer for g in due))
    url = bus_settings.DLQ_ALERT_WEBHOOK_URL
    if url and url != getattr(settings, "ALERT_WEBHOOK_URL", ""):
        post_webhook(url, text, label="DLQ alert")
