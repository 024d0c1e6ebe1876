"""Status page aggregates: backlog, lag, DLQ, throughput, failures and latency per event type,
consumer and tenant (the bus's metrics as the admin shows them, R-O3).

Statements over `eventbus_delivery` (deliveries carry their event's type), none reading the
finished history: the backlog comes from the partial indexes of pending and processing rows, the
DLQ's size from the dead rows' (eventbus/history/dlq_sizes.py: a loose scan, no hashing), the
throughput and the emit-to-done latency from an index range over the last hour's done rows
(`delivery_consumer_done_idx`), the failures from the last hour's attempt rows
(`delivery_attempt_created_idx`). Backlog and throughput are grouped twice in one pass (GROUPING
SETS): per (event type, consumer) and per organization. The charts (done / failed / dead and lag
over the last hour, day or week: `RANGES`) read the per-minute rollup (`eventbus.history.rollup`),
not the deliveries.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from core.models import Organization
from core.replica.routing import read_connection
from eventbus.history import rollup
from eventbus.history.dlq_sizes import dlq_sizes
from eventbus.operations.distinct import distinct_values

WINDOW = dt.timedelta(hours=1)
DAY = dt.timedelta(hours=24)
QUARTER = dt.timedelta(minutes=15)
BUCKETS = 12  # five-minute buckets over the hour
TOP_ORGANIZATIONS = 50

# BACKLOG. Each arm is one status, so it is served by that status's partial index
# (delivery_claim_idx, delivery_lease_idx): unfinished work only. The dead letters, which pile up
# with the history, are counted apart (eventbus/history/dlq_sizes.py).
BACKLOG_SQL = """
WITH backlog AS (
    SELECT event_type, organization_id, consumer, status, next_attempt_at
      FROM eventbus_delivery WHERE status = 'pending'
    UNION ALL
    SELECT event_type, organization_id, consumer, status, next_attempt_at
      FROM eventbus_delivery WHERE status = 'processing'
)
SELECT b.event_type, b.consumer, b.organization_id,
       count(*) FILTER (WHERE b.status = 'pending'),
       count(*) FILTER (WHERE b.status = 'pending' AND b.next_attempt_at <= %(now)s),
       count(*) FILTER (WHERE b.status = 'processing'),
       0,
       min(b.next_attempt_at) FILTER (WHERE b.status = 'pending'
                                        AND b.next_attempt_at <= %(now)s)
  FROM backlog b
 GROUP BY GROUPING SETS ((b.event_type, b.consumer), (b.organization_id))
"""

# THROUGHPUT. Deliveries done in the window, per five-minute bucket: an index range scan of
# delivery_consumer_done_idx per consumer (consumer = ANY(...) AND status AND finished_at).
THROUGHPUT_SQL = """
WITH done AS (
    SELECT d.event_type, d.consumer, d.organization_id,
           width_bucket(extract(epoch FROM d.finished_at - %(since)s),
                        0, %(window)s, %(buckets)s) AS bucket
      FROM eventbus_delivery d
     WHERE d.consumer = ANY(%(consumers)s) AND d.status = 'done'
       AND d.finished_at >= %(since)s AND d.finished_at < %(now)s
)
SELECT event_type, consumer, organization_id, bucket, count(*)
  FROM done
 GROUP BY GROUPING SETS ((event_type, consumer, bucket), (organization_id))
"""

# FAILURES. Failed attempts in the window per (event type, consumer): a range of
# delivery_attempt_created_idx (attempt rows exist only for failures), each joined to its delivery.
FAILURES_SQL = """
SELECT d.event_type, d.consumer, count(*)
  FROM eventbus_deliveryattempt a JOIN eventbus_delivery d ON d.id = a.delivery_id
 WHERE a.created_at >= %(since)s AND a.created_at < %(now)s
 GROUP BY d.event_type, d.consumer
"""

# LATENCY. How long the deliveries done in the window took from emit to done (their due time
# included: initial delays and retries count), median and 95th percentile per (event type,
# consumer): the same index range as THROUGHPUT.
LATENCY_SQL = """
SELECT d.event_type, d.consumer,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY d.finished_at - d.created_at),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY d.finished_at - d.created_at)
  FROM eventbus_delivery d
 WHERE d.consumer = ANY(%(consumers)s) AND d.status = 'done'
   AND d.finished_at >= %(since)s AND d.finished_at < %(now)s
 GROUP BY d.event_type, d.consumer
"""

ESTIMATE_SQL = "SELECT reltuples::bigint FROM pg_class WHERE oid = 'event_log'::regclass"


@dataclass
class Counts:
    """Backlog and throughput of one row of the status page."""

    pending: int = 0
    due: int = 0
    processing: int = 0
    dead: int = 0
    oldest_due_at: dt.datetime | None = None
    done: int = 0  # finished in the window
    throughput: list[int] = field(default_factory=lambda: [0] * BUCKETS)  # done per bucket
    failed: int = 0  # failed attempts in the window (each retry or death)
    latency_p50: dt.timedelta | None = None  # emit -> done, deliveries done in the window
    latency_p95: dt.timedelta | None = None

    @property
    def fail_rate(self) -> float | None:
        """Failed attempts / attempts that ended in the window (done or failed)."""
        ended = self.done + self.failed
        return self.failed / ended if ended else None

    def add_backlog(
        self, pending: int, due: int, processing: int, dead: int, oldest: dt.datetime | None
    ) -> None:
        self.pending += pending
        self.due += due
        self.processing += processing
        self.dead += dead
        if oldest is not None and (self.oldest_due_at is None or oldest < self.oldest_due_at):
            self.oldest_due_at = oldest

    def add_done(self, buckets: list[int]) -> None:
        self.throughput = [a + b for a, b in zip(self.throughput, buckets, strict=True)]
        self.done += sum(buckets)


@dataclass(frozen=True)
class Row:
    """A labelled line of the status page: (event type, consumer) or one organization."""

    key: tuple[str, str]
    counts: Counts


@dataclass(frozen=True)
class BusStatus:
    now: dt.datetime
    by_type: list[Row]
    by_organization: list[Row]  # key: (organization id, name)
    totals: Counts
    events_estimate: int  # planner statistics (no COUNT(*)); -1 before the first ANALYZE

    @property
    def bucket_minutes(self) -> int:
        return int(WINDOW.total_seconds() // 60 // BUCKETS)


def bus_status(*, now: dt.datetime | None = None) -> BusStatus:
    """The status page's figures, as of `now`."""
    now = now or timezone.now()
    by_type: dict[tuple[str, str], Counts] = defaultdict(Counts)
    by_org: dict[uuid.UUID, Counts] = defaultdict(Counts)
    _read_backlog(now, by_type, by_org)
    _read_throughput(now, by_type, by_org)
    _read_failures_and_latency(now, by_type)
    totals = Counts()
    for counts in by_type.values():
        totals.add_backlog(
            counts.pending, counts.due, counts.processing, counts.dead, counts.oldest_due_at
        )
        totals.add_done(counts.throughput)
        totals.failed += counts.failed
    return BusStatus(
        now=now,
        by_type=[Row(key, by_type[key]) for key in sorted(by_type)],
        by_organization=_organization_rows(by_org),
        totals=totals,
        events_estimate=_events_estimate(),
    )


def _read_backlog(
    now: dt.datetime,
    by_type: dict[tuple[str, str], Counts],
    by_org: dict[uuid.UUID, Counts],
) -> None:
    with read_connection().cursor() as cursor:
        cursor.execute(BACKLOG_SQL, {"now": now})
        for event_type, consumer, org_id, *backlog in cursor.fetchall():
            # organization_id is NOT NULL, so NULL marks the (event type, consumer) grouping set.
            target = by_org[org_id] if org_id is not None else by_type[(event_type, consumer)]
            target.add_backlog(*backlog)
        for size in dlq_sizes(cursor):
            by_type[(size.event_type, size.consumer)].dead += size.dead
            by_org[size.organization_id].dead += size.dead


def _read_throughput(
    now: dt.datetime,
    by_type: dict[tuple[str, str], Counts],
    by_org: dict[uuid.UUID, Counts],
) -> None:
    consumers = distinct_values("done_consumer")
    if not consumers:
        return
    params: dict[str, Any] = {
        "now": now,
        "since": now - WINDOW,
        "window": WINDOW.total_seconds(),
        "buckets": BUCKETS,
        "consumers": consumers,
    }
    with read_connection().cursor() as cursor:
        cursor.execute(THROUGHPUT_SQL, params)
        for event_type, consumer, org_id, bucket, done in cursor.fetchall():
            if org_id is not None:
                by_org[org_id].done += done  # per tenant: the hour's total only
            elif 1 <= bucket <= BUCKETS:
                by_type[(event_type, consumer)].add_done(_one_bucket(bucket, done))


def _read_failures_and_latency(now: dt.datetime, by_type: dict[tuple[str, str], Counts]) -> None:
    params: dict[str, Any] = {"now": now, "since": now - WINDOW}
    with read_connection().cursor() as cursor:
        cursor.execute(FAILURES_SQL, params)
        for event_type, consumer, failed in cursor.fetchall():
            by_type[(event_type, consumer)].failed = failed
        consumers = sorted({consumer for _, consumer in by_type})
        if not consumers:
            return
        cursor.execute(LATENCY_SQL, {**params, "consumers": consumers})
        for event_type, consumer, p50, p95 in cursor.fetchall():
            counts = by_type[(event_type, consumer)]
            counts.latency_p50, counts.latency_p95 = p50, p95


def _one_bucket(bucket: int, done: int) -> list[int]:
    buckets = [0] * BUCKETS
    buckets[bucket - 1] = done
    return buckets


def _organization_rows(by_org: dict[uuid.UUID, Counts]) -> list[Row]:
    busiest = sorted(
        by_org.items(),
        key=lambda item: -(item[1].dead + item[1].pending + item[1].processing),
    )[:TOP_ORGANIZATIONS]
    names = Organization.objects.in_bulk([org_id for org_id, _ in busiest])
    return [
        Row((str(org_id), str(names[org_id]) if org_id in names else str(org_id)), counts)
        for org_id, counts in busiest
    ]


def _events_estimate() -> int:
    with read_connection().cursor() as cursor:
        cursor.execute(ESTIMATE_SQL)
        row = cursor.fetchone()
    return int(row[0]) if row else -1


@dataclass(frozen=True)
class ChartRange:
    """A window of the charts and the step of its points."""

    key: str  # "1h", "24h", "7d": the query parameter
    label: str  # "1 h": the range switch
    window: dt.timedelta
    step: dt.timedelta
    span: str  # "last hour" and ...
    per: str  # ... "per minute": the charts' titles
    time_format: str  # strftime of the time axis and of each point
    ticks: int  # labelled times on the axis


RANGES = {
    r.key: r
    for r in (
        ChartRange("1h", "1 h", WINDOW, rollup.MINUTE, "last hour", "per minute", "%H:%M", 6),
        ChartRange("24h", "24 h", DAY, QUARTER, "last 24 hours", "per 15 minutes", "%H:%M", 6),
        ChartRange(
            "7d",
            "7 d",
            dt.timedelta(days=7),
            dt.timedelta(hours=1),
            "last 7 days",
            "per hour",
            "%m-%d %H:%M",
            4,
        ),
    )
}
DEFAULT_RANGE = "1h"


def chart_series(
    chart_range: ChartRange,
    *,
    now: dt.datetime | None = None,
    consumer: str | None = None,
    organization_id: uuid.UUID | None = None,
) -> list[rollup.Bucket]:
    """The rollup over `chart_range`, one bucket per step, oldest first, optionally for one
    consumer and/or one tenant: a range of the rollup's primary key (steps that ended are
    cached, so a refresh reads the newest ones only)."""
    return rollup.series(
        window=chart_range.window,
        step=chart_range.step,
        now=now or timezone.now(),
        consumer=consumer,
        organization_id=organization_id,
    )
