"""The per-minute rollup (`eventbus_rollup`): chart series, failure rates, lag samples, purge.

The counters are written by the settle statements themselves (`sql/ack.sql`, `sql/nack.sql`:
one upsert of the rows each changed, per minute, organization and consumer), so reading them
never scans the log. The lag is sampled once a minute (`sample_lag`, job eventbus-rollup-sample)
and rows older than EVENTBUS["ROLLUP_KEEP_DAYS"] are purged hourly (`purge`). Reads are ranges
of the primary key (bucket_start, consumer, organization_id).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache
from django.db import connection
from django.utils import timezone

from core.replica.routing import read_connection
from eventbus.history.dlq_sizes import dlq_sizes, per_organization
from eventbus.store.conf import bus_settings
from eventbus.store.sql import statement

MINUTE = dt.timedelta(minutes=1)
# A step is final this long after it ended (a margin for clocks and settles in flight); final
# steps of a series are cached this long (a day's window, and an hour more).
FINAL_AFTER = dt.timedelta(minutes=2)
CACHE_SECONDS = 25 * 3600
# Steps are aligned to this origin (date_bin in rollup_series.sql): 15 minutes start at :00.
ORIGIN = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class Bucket:
    """What was settled in one step (and the worst sampled lag, None when none was sampled)."""

    start: dt.datetime
    done: int = 0
    failed: int = 0  # failed attempts to be retried
    dead: int = 0  # attempts that dead-lettered their delivery
    lag_seconds: float | None = None


@dataclass(frozen=True)
class Outcomes:
    """Settled attempts of one consumer over a window."""

    done: int
    failed: int
    dead: int

    @property
    def attempts(self) -> int:
        return self.done + self.failed + self.dead

    @property
    def failure_rate(self) -> float | None:
        """(failed + dead) / attempts; None when nothing was settled."""
        return (self.failed + self.dead) / self.attempts if self.attempts else None


def floor(moment: dt.datetime, step: dt.timedelta) -> dt.datetime:
    """The start of the `step` that holds `moment` (aligned to ORIGIN)."""
    return moment - (moment - ORIGIN) % step


def series(
    *,
    window: dt.timedelta,
    step: dt.timedelta,
    consumer: str | None = None,
    organization_id: uuid.UUID | None = None,
    now: dt.datetime | None = None,
) -> list[Bucket]:
    """One Bucket per `step` over the `window` that ends with the step holding `now`, oldest
    first (steps with nothing settled or sampled are zeros).

    A step that ended FINAL_AFTER ago no longer changes (settles count into the minute they run
    in), so it is read once and then kept in Django's cache: a refresh reads only the newest
    steps, not a day of minutes (1,440 x pairs rows) each time.
    """
    now = now or timezone.now()
    last = floor(now, step)
    starts = [last - step * i for i in range(round(window / step) - 1, -1, -1)]
    keys = {start: _cache_key(start, step, consumer, organization_id) for start in starts}
    kept = cache.get_many([keys[s] for s in starts if s + step + FINAL_AFTER <= now])
    missing = [s for s in starts if keys[s] not in kept]
    found = _read(missing[0], last + step, step, consumer, organization_id) if missing else {}
    buckets = [kept.get(keys[s]) or _bucket(s, found.get(s)) for s in starts]
    final = {keys[b.start]: b for b in buckets if b.start in found or b.start in missing}
    cache.set_many(
        {k: b for k, b in final.items() if b.start + step + FINAL_AFTER <= now}, CACHE_SECONDS
    )
    return buckets


def _read(
    since: dt.datetime,
    until: dt.datetime,
    step: dt.timedelta,
    consumer: str | None,
    organization_id: uuid.UUID | None,
) -> dict[dt.datetime, dict[str, Any]]:
    params = {
        "step": step,
        "origin": ORIGIN,
        "since": since,
        "until": until,
        "consumer": consumer,
        "organization": organization_id,
    }
    return {row["start"]: row for row in _rows("rollup_series", params)}


def _cache_key(
    start: dt.datetime, step: dt.timedelta, consumer: str | None, organization: uuid.UUID | None
) -> str:
    scope = f"{start.timestamp():.0f}:{step.total_seconds():.0f}:{consumer}:{organization}"
    return "eventbus.rollup." + hashlib.sha256(scope.encode()).hexdigest()[:32]


def _bucket(start: dt.datetime, row: dict[str, Any] | None) -> Bucket:
    if row is None:
        return Bucket(start)
    return Bucket(start, row["done"], row["failed"], row["dead"], row["lag_seconds"])


def outcomes(consumer: str, window: dt.timedelta, *, now: dt.datetime | None = None) -> Outcomes:
    """`consumer`'s settled attempts in the whole minutes of `window` up to now (the current
    minute included, so the window is up to a minute longer than asked)."""
    since = floor((now or timezone.now()) - window, MINUTE)
    [row] = _rows("rollup_outcomes", {"since": since, "consumer": consumer})
    return Outcomes(row["done"], row["failed"], row["dead"])


def failure_rate(
    consumer: str, window: dt.timedelta, *, now: dt.datetime | None = None
) -> float | None:
    """(failed + dead) / settled attempts of `consumer` over `window`; None when none settled.

    For circuit breakers: one range of the rollup's primary key (a row per minute and
    organization), never a scan of deliveries or attempts.
    """
    return outcomes(consumer, window, now=now).failure_rate


@dataclass(frozen=True)
class Tenant:
    """Per-tenant /metrics figures of one organization (or of all the others summed)."""

    label: str  # the organization's slug, or OTHER
    volume: int  # settled attempts in the ranking window (the last hour)
    failures: int  # failed + dead attempts in the recent window
    attempts: int  # settled attempts in the recent window
    lag_seconds: float  # worst sampled lag in the last two minutes (0: none sampled)
    dead: int  # DLQ size

    @property
    def fail_ratio(self) -> float:
        return self.failures / self.attempts if self.attempts else 0.0


OTHER = "other"
RANKING_WINDOW = dt.timedelta(hours=1)
RECENT_WINDOW = dt.timedelta(minutes=5)


def tenant_figures(*, top: int, now: dt.datetime | None = None) -> list[Tenant]:
    """The `top` organizations by settled volume in the last hour (then DLQ size), each on its
    own, and the rest summed as OTHER (lag: the worst): the cardinality guard of /metrics."""
    now = now or timezone.now()
    with read_connection().cursor() as cursor:
        dead = per_organization(dlq_sizes(cursor))
    params = {
        "since": floor(now - RANKING_WINDOW, MINUTE),
        "recent": floor(now - RECENT_WINDOW, MINUTE),
        "lag_since": floor(now, MINUTE) - MINUTE,
        "dead_organizations": list(dead),
        "dead": list(dead.values()),
    }
    tenants = [_tenant(row) for row in _rows("rollup_tenants", params)]
    tenants.sort(key=lambda t: (-t.volume, -t.dead, t.label))
    rest = tenants[top:]
    return tenants[:top] + ([_summed(rest)] if rest else [])


def _tenant(row: dict[str, Any]) -> Tenant:
    return Tenant(
        str(row["label"]),
        int(row["volume"]),
        int(row["failures"]),
        int(row["attempts"]),
        float(row["lag_seconds"] or 0.0),
        int(row["dead"]),
    )


def _summed(tenants: list[Tenant]) -> Tenant:
    return Tenant(
        OTHER,
        sum(t.volume for t in tenants),
        sum(t.failures for t in tenants),
        sum(t.attempts for t in tenants),
        max(t.lag_seconds for t in tenants),
        sum(t.dead for t in tenants),
    )


def sample_lag(*, now: dt.datetime | None = None) -> int:
    """Record each (organization, consumer) pair's oldest-due lag in this minute's rows;
    returns how many pairs had pending work."""
    [row] = _rows("rollup_sample", {"now": now or timezone.now()}, writes=True)
    return int(row["pairs"])


def purge(*, now: dt.datetime | None = None) -> int:
    """Delete rows older than EVENTBUS["ROLLUP_KEEP_DAYS"]; returns how many."""
    before = (now or timezone.now()) - dt.timedelta(days=bus_settings.ROLLUP_KEEP_DAYS)
    with connection.cursor() as cursor:
        cursor.execute(statement("rollup_purge"), {"before": before})
        return cursor.rowcount


def _rows(name: str, params: dict[str, Any], *, writes: bool = False) -> list[dict[str, Any]]:
    """A named statement's rows; a read-only one may run on the read replica (status page)."""
    with (connection if writes else read_connection()).cursor() as cursor:
        cursor.execute(statement(name), params)
        columns = [column.name for column in cursor.description or ()]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
