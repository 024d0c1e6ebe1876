"""Claim, ack, nack, release, extend, reap, reprocess, discard: all delivery state changes.

Every statement here is named and commented. The claim is one statement (SKIP LOCKED, eligibility
re-checked in the UPDATE, lease set, attempt counted). Every later transition is fenced by the
claim's `lease_token`: a worker whose lease was taken over changes 0 rows, and that is logged and
counted, never raised. Times come from Python (`timezone.now()`), so tests control them.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from deskcomm.db import bound_cursor
from eventbus.conf import bus_settings
from eventbus.event import Event
from eventbus.retry import Verdict

logger = logging.getLogger(__name__)

# `locked_by` of deliveries claimed by the outbox relay (published, not yet run).
RELAY_WORKER_PREFIX = "relay:"

# What a claimed delivery returns: the delivery's own columns, then its event (see Event), then
# the correlation ids a handler run binds, read here so the worker need not decode the metadata.
_EVENT_RETURNING = """RETURNING d.id, d.consumer, d.attempts, d.max_attempts, e.id,
          e.organization_id, e.event_type, e.entity_kind, e.entity_id, e.payload, e.metadata,
          e.created_at, e.metadata ->> 'request_id', e.metadata ->> 'trace_id',
          e.metadata ->> 'actor_id'"""

# CLAIM. Fair across tenants and consumers: list the organizations with pending work (a loose
# index scan over delivery_claim_idx, starting at a random organization so no tenant is always
# last), keep the (organization, consumer) pairs that have due work (one index probe each), give
# each pair an equal share of the batch, and take each share in due order with FOR UPDATE SKIP
# LOCKED. The picked ids are materialised (one pass, never more than the batch), and the UPDATE
# re-checks eligibility itself so a row rescheduled or claimed by another drain since the
# subquery's snapshot is never claimed twice. The statement is assembled from three parts so the
# prefixed claim below shares the organization scan and the pick/update.
_ORGS_WITH_WORK = """
WITH RECURSIVE after_start(org) AS (
    (SELECT organization_id FROM eventbus_delivery
      WHERE status = 'pending' AND organization_id >= %(start)s
      ORDER BY organization_id LIMIT 1)
    UNION ALL
    SELECT (SELECT d.organization_id FROM eventbus_delivery d
             WHERE d.status = 'pending' AND d.organization_id > a.org
             ORDER BY d.organization_id LIMIT 1)
      FROM after_start a WHERE a.org IS NOT NULL
), before_start(org) AS (
    (SELECT organization_id FROM eventbus_delivery
      WHERE status = 'pending' AND organization_id < %(start)s
      ORDER BY organization_id LIMIT 1)
    UNION ALL
    SELECT (SELECT d.organization_id FROM eventbus_delivery d
             WHERE d.status = 'pending' AND d.organization_id > b.org
               AND d.organization_id < %(start)s
             ORDER BY d.organization_id LIMIT 1)
      FROM before_start b WHERE b.org IS NOT NULL
), orgs AS MATERIALIZED (
    SELECT org FROM (SELECT org FROM after_start WHERE org IS NOT NULL
                     UNION ALL
                     SELECT org FROM before_start WHERE org IS NOT NULL) o
     LIMIT %(batch)s
)"""

# `active` (org, consumer, cap) -> each pair's share (at most its cap), picked and claimed.
_PICK_AND_CLAIM = f"""
, share AS MATERIALIZED (
    SELECT greatest(1, ceil(%(batch)s::numeric / greatest(1, count(*))))::int AS n FROM active
), picked AS MATERIALIZED (
    SELECT c.id
      FROM active
     CROSS JOIN LATERAL (
        SELECT d.id FROM eventbus_delivery d
         WHERE d.organization_id = active.org AND d.consumer = active.consumer
           AND d.status = 'pending' AND d.next_attempt_at <= %(now)s
         ORDER BY d.next_attempt_at
         LIMIT least((SELECT n FROM share), active.cap)
           FOR UPDATE SKIP LOCKED
     ) c
     LIMIT %(batch)s
)
UPDATE eventbus_delivery d
   SET status = 'processing', attempts = d.attempts + 1, lease_token = %(token)s,
       locked_until = %(lease_until)s, locked_by = %(worker)s, updated_at = %(now)s
  FROM event_log e
 WHERE d.id = ANY(ARRAY(SELECT id FROM picked))
   AND d.status = 'pending' AND d.next_attempt_at <= %(now)s
   AND e.id = d.event_id
{_EVENT_RETURNING}
"""

# ADOPT. The jobs process takes over a delivery the relay claimed and published: still leased
# with the token the message carries, the lease is renewed for the run; 0 rows means the lease
# was lost (expired and reaped, or the delivery was reprocessed) and the message is stale.
ADOPT_SQL = f"""
UPDATE eventbus_delivery d
   SET locked_until = %(lease_until)s, locked_by = %(worker)s, updated_at = %(now)s
  FROM event_log e
 WHERE d.id = %(id)s AND d.lease_token = %(token)s AND d.status = 'processing'
   AND e.id = d.event_id
{_EVENT_RETURNING}
"""

# The due probe: ORDER BY + LIMIT 1 is an index probe (EXISTS may become a scan).
_DUE_PROBE = """
     CROSS JOIN LATERAL (
        SELECT 1 FROM eventbus_delivery d
         WHERE d.organization_id = {org} AND d.consumer = {consumer}
           AND d.status = 'pending' AND d.next_attempt_at <= %(now)s
         ORDER BY d.next_attempt_at
         LIMIT 1
     ) AS probe
"""

CLAIM_SQL = (
    _ORGS_WITH_WORK
    + """
, active AS MATERIALIZED (
    SELECT orgs.org, k.consumer, %(batch)s AS cap
      FROM orgs
     CROSS JOIN unnest(%(consumers)s::text[]) AS k(consumer)"""
    + _DUE_PROBE.format(org="orgs.org", consumer="k.consumer")
    + ")"
    + _PICK_AND_CLAIM
)

# CLAIM BY PREFIX. For consumers that are data (webhook subscriptions: "webhook:<uuid>"), whose
# names are not known in advance: per organization with work, list its consumers with pending
# rows (a loose scan over delivery_claim_idx's (organization_id, consumer) prefix; every consumer
# is stepped over, so the cost is the number of (organization, consumer) pairs with pending work,
# whatever the backlog), keep those with the prefix, and cap each one's share at its free
# in-flight slots (`cap`, or `busy_free` for consumers the worker already has in flight; 0 skips
# them) so one slow consumer never holds more than its slots. Then the same share/pick/update.
CLAIM_PREFIXED_SQL = (
    _ORGS_WITH_WORK
    + """
, pairs(org, consumer) AS (
    SELECT o.org, (SELECT d.consumer FROM eventbus_delivery d
                    WHERE d.status = 'pending' AND d.organization_id = o.org
                    ORDER BY d.consumer LIMIT 1)
      FROM orgs o
    UNION ALL
    SELECT p.org, (SELECT d.consumer FROM eventbus_delivery d
                    WHERE d.status = 'pending' AND d.organization_id = p.org
                      AND d.consumer > p.consumer
                    ORDER BY d.consumer LIMIT 1)
      FROM pairs p WHERE p.consumer IS NOT NULL
), capped AS MATERIALIZED (
    SELECT p.org, p.consumer, coalesce(b.free, %(cap)s) AS cap
      FROM pairs p
      LEFT JOIN unnest(%(busy)s::text[], %(busy_free)s::int[]) AS b(consumer, free)
             ON b.consumer = p.consumer
     WHERE starts_with(p.consumer, %(prefix)s) AND coalesce(b.free, %(cap)s) > 0
), active AS MATERIALIZED (
    SELECT capped.org, capped.consumer, capped.cap
      FROM capped"""
    + _DUE_PROBE.format(org="capped.org", consumer="capped.consumer")
    + ")"
    + _PICK_AND_CLAIM
)

# ACK. Mark the batch done (fenced by the lease token), then fold the consumers into the events'
# summary. The summary UPDATE locks each event row itself and, under READ COMMITTED, re-reads
# the latest version of a row another worker's ack changed meanwhile, so no consumer is lost.
# Its input is materialised in event id order, so two acks of overlapping events lock their
# rows in the same order (no separate SELECT ... FOR UPDATE pass: that wrote every row twice).
# Should a plan ever visit them in another order, PostgreSQL detects the deadlock, and the
# worker keeps the results and settles them again (the fenced statements are safe to repeat).
# The update touches no indexed column: it stays on the page (HOT, see the fillfactor in
# migration 0011). `consumed_by` stays sorted and distinct; with one consumer (the usual case)
# that needs no sort.
ACK_SQL = """
WITH acked AS (
    UPDATE eventbus_delivery d
       SET status = 'done', locked_until = NULL, lease_token = NULL, last_error = NULL,
           error_class = NULL, updated_at = %(now)s, finished_at = %(now)s
     WHERE d.id = ANY(%(ids)b::bigint[]) AND d.lease_token = %(token)s
       AND d.status = 'processing'
    RETURNING d.id, d.event_id, d.consumer
), by_event AS MATERIALIZED (
    SELECT event_id, array_agg(consumer) AS consumers FROM acked GROUP BY event_id
     ORDER BY event_id
), summary AS (
    UPDATE event_log e
       SET consumed_by = CASE
               WHEN cardinality(e.consumed_by) + cardinality(p.consumers) <= 1  -- the usual case
               THEN e.consumed_by || p.consumers
               ELSE ARRAY(SELECT DISTINCT c FROM unnest(e.consumed_by || p.consumers) c
                           ORDER BY c) END,
           status = CASE
               WHEN e.status = 'dead' THEN 'dead'
               WHEN (CASE WHEN cardinality(e.consumed_by) + cardinality(p.consumers) <= 1
                          THEN cardinality(e.consumed_by) + cardinality(p.consumers)
                          ELSE cardinality(ARRAY(SELECT DISTINCT unnest(e.consumed_by
                                                                        || p.consumers)))
                     END) >= e.fanout THEN 'done'
               ELSE 'processing' END,
           updated_at = %(now)s
      FROM by_event p
     WHERE e.id = p.event_id
)
SELECT id FROM acked
"""

# NACK. Per-row verdicts (retry at a time, or dead) from parallel arrays; failed attempts are
# recorded in the attempt log; the events' summary gets the error, and `dead` when one died.
# A publish failure (the relay could not hand the delivery to the broker) gives the claimed
# attempt back, since the consumer never ran, and counts towards OUTBOX_MAX_ATTEMPTS instead.
NACK_SQL = """
WITH v AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(dead)s::bool[], %(next_at)s::timestamptz[],
                         %(errors)s::text[], %(classes)s::text[], %(durations)s::int[],
                         %(publish)s::bool[])
           AS v(id, dead, next_at, error, error_class, duration_ms, publish)
), nacked AS (
    UPDATE eventbus_delivery d
       SET status = CASE WHEN v.dead THEN 'dead' ELSE 'pending' END,
           next_attempt_at = CASE WHEN v.dead THEN d.next_attempt_at ELSE v.next_at END,
           attempts = d.attempts - v.publish::int,
           publish_failures = d.publish_failures + v.publish::int,
           locked_until = NULL, lease_token = NULL, last_error = v.error,
           error_class = v.error_class, updated_at = %(now)s,
           finished_at = CASE WHEN v.dead THEN %(now)s::timestamptz END
      FROM v
     WHERE d.id = v.id AND d.lease_token = %(token)s AND d.status = 'processing'
    RETURNING d.id, d.event_id, d.organization_id, d.consumer,
              d.attempts + v.publish::int AS attempt,
              v.dead, v.next_at, v.error, v.error_class, v.duration_ms
), history AS (
    INSERT INTO eventbus_deliveryattempt (delivery_id, attempt, outcome, error_class, error,
                                          duration_ms, worker, created_at)
    SELECT id, attempt, CASE WHEN dead THEN 'dead' ELSE 'retry' END, error_class, error,
           duration_ms, %(worker)s, %(now)s
      FROM nacked
), by_event AS (
    SELECT event_id, count(*) AS failures, bool_or(dead) AS any_dead, max(error) AS error,
           min(next_at) FILTER (WHERE NOT dead) AS next_at
      FROM nacked GROUP BY event_id
), locked AS MATERIALIZED (
    -- One pass, as in ACK: lock in id order and carry the per-event aggregates.
    SELECT e.id, p.failures, p.any_dead, p.error, p.next_at
      FROM event_log e JOIN by_event p ON p.event_id = e.id
     ORDER BY e.id
       FOR UPDATE OF e
), summary AS (
    UPDATE event_log e
       SET attempts = least(e.attempts + l.failures, 32767), last_error = l.error,
           status = CASE WHEN l.any_dead THEN 'dead' ELSE e.status END,
           next_attempt_at = coalesce(l.next_at, e.next_attempt_at), updated_at = %(now)s
      FROM locked l
     WHERE e.id = l.id
)
SELECT id, event_id, organization_id, consumer, attempt, dead, error FROM nacked
"""

# RELEASE. Claimed but never started (the worker is stopping): pending again at once, and the
# attempt the claim counted is given back.
RELEASE_SQL = """
UPDATE eventbus_delivery
   SET status = 'pending', attempts = greatest(attempts - 1, 0), locked_until = NULL,
       lease_token = NULL, locked_by = NULL, updated_at = %(now)s
 WHERE id = ANY(%(ids)s::bigint[]) AND lease_token = %(token)s AND status = 'processing'
"""

# EXTEND. A batch still running keeps its lease (heartbeat from the worker's main thread).
EXTEND_SQL = """
UPDATE eventbus_delivery SET locked_until = %(lease_until)s
 WHERE id = ANY(%(ids)s::bigint[]) AND lease_token = %(token)s AND status = 'processing'
"""

# REAP (step 1). Take over leases that ran out (their worker died): the rows get a fresh token,
# then go through NACK like any failed attempt (retry now, or dead if out of attempts).
STEAL_EXPIRED_SQL = """
WITH expired AS (
    SELECT id FROM eventbus_delivery
     WHERE status = 'processing' AND locked_until < %(now)s
     ORDER BY locked_until
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
)
UPDATE eventbus_delivery d
   SET lease_token = %(token)s, locked_until = %(lease_until)s, updated_at = %(now)s
  FROM expired
 WHERE d.id = expired.id AND d.status = 'processing' AND d.locked_until < %(now)s
RETURNING d.id, d.attempts, d.max_attempts, d.locked_by
"""

# REPROCESS. Dead (or done) deliveries back to pending, attempts 0, due now, error cleared;
# only those consumers re-run. The event summary forgets them and leaves `dead` when no dead
# delivery remains.
REPROCESS_SQL = """
WITH target AS (
    UPDATE eventbus_delivery d
       SET status = 'pending', attempts = 0, publish_failures = 0, next_attempt_at = %(now)s,
           last_error = NULL, error_class = NULL, locked_until = NULL, lease_token = NULL,
           locked_by = NULL, finished_at = NULL, updated_at = %(now)s
     WHERE d.id = ANY(%(ids)s::bigint[]) AND d.status IN ('dead', 'done')
    RETURNING d.id, d.event_id, d.organization_id, d.consumer
), locked AS MATERIALIZED (
    SELECT e.id FROM event_log e
     WHERE e.id IN (SELECT event_id FROM target)
     ORDER BY e.id
       FOR UPDATE
), by_event AS (
    SELECT event_id, array_agg(consumer) AS consumers FROM target GROUP BY event_id
), summary AS (
    UPDATE event_log e
       SET consumed_by = ARRAY(SELECT c FROM unnest(e.consumed_by) c
                                WHERE c <> ALL(p.consumers)),
           status = CASE
               WHEN EXISTS (SELECT 1 FROM eventbus_delivery o
                             WHERE o.event_id = e.id AND o.status = 'dead'
                               AND o.consumer <> ALL(p.consumers)) THEN 'dead'
               ELSE 'processing' END,
           updated_at = %(now)s
      FROM by_event p JOIN locked l ON l.id = p.event_id
     WHERE e.id = p.event_id
)
SELECT id, event_id, organization_id, consumer FROM target
"""

# DISCARD. Dead deliveries leave the DLQ for good (the audit trail says who and why). They no
# longer count towards the event's fan-out, so the event can still become `done`.
DISCARD_SQL = """
WITH target AS (
    UPDATE eventbus_delivery d
       SET status = 'discarded', finished_at = %(now)s, updated_at = %(now)s
     WHERE d.id = ANY(%(ids)s::bigint[]) AND d.status = 'dead'
    RETURNING d.id, d.event_id, d.organization_id, d.consumer
), locked AS MATERIALIZED (
    SELECT e.id FROM event_log e
     WHERE e.id IN (SELECT event_id FROM target)
     ORDER BY e.id
       FOR UPDATE
), by_event AS (
    SELECT event_id, count(*) AS discarded FROM target GROUP BY event_id
), summary AS (
    UPDATE event_log e
       SET fanout = greatest(e.fanout - p.discarded, 0),
           status = CASE
               WHEN EXISTS (SELECT 1 FROM eventbus_delivery o
                             WHERE o.event_id = e.id AND o.status = 'dead'
                               AND o.id NOT IN (SELECT id FROM target)) THEN 'dead'
               WHEN cardinality(e.consumed_by) >= e.fanout - p.discarded THEN 'done'
               ELSE 'processing' END,
           updated_at = %(now)s
      FROM by_event p JOIN locked l ON l.id = p.event_id
     WHERE e.id = p.event_id
)
SELECT id, event_id, organization_id, consumer FROM target
"""

# REPLAY (step 1). Deliver events (again) to one consumer: a new pending delivery, or the existing
# one back to pending when it is finished (done, dead, discarded); running ones are left alone.
REPLAY_SQL = """
INSERT INTO eventbus_delivery (event_id, organization_id, consumer, event_type, status, attempts,
                               max_attempts, next_attempt_at, created_at, updated_at)
SELECT e.id, e.organization_id, %(consumer)s, e.event_type, 'pending', 0, %(max_attempts)s,
       %(now)s, %(now)s, %(now)s
  FROM event_log e
 WHERE e.id = ANY(%(ids)s::uuid[])
ON CONFLICT (event_id, consumer) DO UPDATE
   SET status = 'pending', attempts = 0, publish_failures = 0, next_attempt_at = %(now)s,
       last_error = NULL, error_class = NULL, locked_until = NULL, lease_token = NULL,
       locked_by = NULL, finished_at = NULL, updated_at = %(now)s
 WHERE eventbus_delivery.status IN ('done', 'dead', 'discarded')
RETURNING id, event_id, organization_id, consumer
"""

# REPLAY (step 2). Recompute the replayed events' summary from their deliveries (a separate
# statement: a data-modifying CTE's changes are invisible to its siblings). Event rows are locked
# in id order first, like the ack.
RESUMMARISE_SQL = """
WITH locked AS MATERIALIZED (
    SELECT id FROM event_log WHERE id = ANY(%(ids)s::uuid[]) ORDER BY id FOR UPDATE
)
UPDATE event_log e
   SET fanout = (SELECT count(*) FROM eventbus_delivery d
                  WHERE d.event_id = e.id AND d.status <> 'discarded'),
       consumed_by = ARRAY(SELECT d.consumer FROM eventbus_delivery d
                            WHERE d.event_id = e.id AND d.status = 'done' ORDER BY 1),
       status = CASE
           WHEN EXISTS (SELECT 1 FROM eventbus_delivery d
                         WHERE d.event_id = e.id AND d.status = 'dead') THEN 'dead'
           ELSE 'processing' END,
       updated_at = %(now)s
  FROM locked
 WHERE e.id = locked.id
"""


@dataclass(frozen=True)
class Claim:
    """A claimed batch: one lease token fences every later transition of its rows."""

    token: uuid.UUID
    events: list[Event]

    @property
    def ids(self) -> list[int]:
        return [e.delivery_id for e in self.events]


@dataclass(frozen=True)
class Failure:
    """A failed attempt and what to do about it."""

    delivery_id: int
    verdict: Verdict
    duration_ms: int | None = None
    publish: bool = False  # the relay could not publish it: the consumer never ran


@dataclass(frozen=True)
class DeadLetter:
    """A delivery that just died (for alerts)."""

    delivery_id: int
    event_id: uuid.UUID
    organization_id: uuid.UUID
    consumer: str
    attempts: int
    error: str


def claim(
    *,
    consumers: Sequence[str],
    batch_size: int,
    worker_id: str,
    now: dt.datetime | None = None,
) -> Claim:
    """Claim up to `batch_size` due deliveries of `consumers`, fairly across organizations."""
    if not consumers or batch_size < 1:
        return Claim(uuid.uuid4(), [])
    return _claim(
        CLAIM_SQL,
        {"consumers": list(consumers)},
        batch_size=batch_size,
        worker_id=worker_id,
        now=now,
    )


def claim_prefixed(
    *,
    prefix: str,
    batch_size: int,
    worker_id: str,
    cap: int,
    busy: Mapping[str, int] | None = None,
    now: dt.datetime | None = None,
) -> Claim:
    """Claim up to `batch_size` due deliveries of consumers named `prefix...`, fairly.

    Each consumer gets at most `cap` rows, or `busy[consumer]` (its free in-flight slots) when
    the caller already runs some of its deliveries; 0 skips it.
    """
    if batch_size < 1 or cap < 1:
        return Claim(uuid.uuid4(), [])
    busy = busy or {}
    params: dict[str, Any] = {
        "prefix": prefix,
        "cap": cap,
        "busy": list(busy),
        "busy_free": [max(0, free) for free in busy.values()],
    }
    return _claim(CLAIM_PREFIXED_SQL, params, batch_size=batch_size, worker_id=worker_id, now=now)


def _claim(
    sql: str,
    params: dict[str, Any],
    *,
    batch_size: int,
    worker_id: str,
    now: dt.datetime | None,
) -> Claim:
    """Run a claim statement with a new lease token; its rows become the claim's events."""
    now = now or timezone.now()
    token = uuid.uuid4()
    with bound_cursor() as cursor:
        cursor.execute(
            sql,
            {
                **params,
                "start": uuid.uuid4(),  # the organization the fair scan starts at
                "batch": batch_size,
                "now": now,
                "token": token,
                "worker": worker_id,
                "lease_until": _lease_until(now),
            },
        )
        rows = cursor.fetchall()
    return Claim(token, [_event_from_row(row) for row in rows])


def ack(token: uuid.UUID, ids: Sequence[int], *, now: dt.datetime | None = None) -> int:
    """Mark deliveries done; returns how many were still ours (the rest lost their lease)."""
    if not ids:
        return 0
    with bound_cursor() as cursor:
        cursor.execute(ACK_SQL, {"ids": list(ids), "token": token, "now": now or timezone.now()})
        acked = len(cursor.fetchall())
    _log_lost("ack", token, len(ids), acked)
    return acked


def nack(
    token: uuid.UUID,
    failures: Sequence[Failure],
    *,
    worker_id: str = "",
    now: dt.datetime | None = None,
) -> list[DeadLetter]:
    """Record failed attempts: retry later or dead-letter. Returns the deliveries that died."""
    if not failures:
        return []
    now = now or timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            NACK_SQL,
            {
                "ids": [f.delivery_id for f in failures],
                "dead": [f.verdict.dead for f in failures],
                "next_at": [now + dt.timedelta(seconds=f.verdict.delay) for f in failures],
                "errors": [f.verdict.error for f in failures],
                "classes": [f.verdict.error_class for f in failures],
                "durations": [f.duration_ms for f in failures],
                "publish": [f.publish for f in failures],
                "token": token,
                "now": now,
                "worker": worker_id,
            },
        )
        rows = cursor.fetchall()
    _log_lost("nack", token, len(failures), len(rows))
    return [DeadLetter(r[0], r[1], r[2], r[3], r[4], r[6]) for r in rows if r[5]]


def adopt(
    delivery_id: int,
    token: uuid.UUID,
    *,
    worker_id: str,
    now: dt.datetime | None = None,
) -> Event | None:
    """Take over a delivery the relay published; None when its lease is no longer `token`'s."""
    now = now or timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            ADOPT_SQL,
            {
                "id": delivery_id,
                "token": token,
                "worker": worker_id,
                "now": now,
                "lease_until": _lease_until(now),
            },
        )
        row = cursor.fetchone()
    return _event_from_row(row) if row is not None else None


def publish_failure_counts(ids: Sequence[int]) -> dict[int, int]:
    """How many times publishing each delivery to the broker has failed so far."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, publish_failures FROM eventbus_delivery WHERE id = ANY(%s::bigint[])",
            [list(ids)],
        )
        return dict(cursor.fetchall())


def release(token: uuid.UUID, ids: Sequence[int], *, now: dt.datetime | None = None) -> int:
    """Give back claimed deliveries that were never started (pending again, attempt refunded)."""
    if not ids:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(
            RELEASE_SQL, {"ids": list(ids), "token": token, "now": now or timezone.now()}
        )
        return cursor.rowcount


def extend(token: uuid.UUID, ids: Sequence[int], *, now: dt.datetime | None = None) -> int:
    """Push the lease of still-running deliveries forward; returns how many are still ours."""
    if not ids:
        return 0
    now = now or timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            EXTEND_SQL, {"ids": list(ids), "token": token, "lease_until": _lease_until(now)}
        )
        return cursor.rowcount


def reap(
    *, now: dt.datetime | None = None, limit: int = 1000, worker_id: str = "reaper"
) -> tuple[int, list[DeadLetter]]:
    """Return deliveries whose lease expired (dead worker) to pending, or dead when out of attempts.

    What did finish was acked and is not `processing`, so it is never re-run. Returns the number
    of deliveries reaped and those that died.
    """
    from eventbus.retry import Verdict

    now = now or timezone.now()
    token = uuid.uuid4()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                STEAL_EXPIRED_SQL,
                {"now": now, "limit": limit, "token": token, "lease_until": _lease_until(now)},
            )
            rows = cursor.fetchall()
        # Published by the relay but never picked up by the jobs process (broker or jobs process
        # down): the consumer never ran, so the delivery goes back without costing an attempt.
        unstarted = [row[0] for row in rows if (row[3] or "").startswith(RELAY_WORKER_PREFIX)]
        failures = [
            Failure(
                row[0],
                Verdict(
                    dead=row[1] >= row[2],
                    delay=0.0,
                    error_class="LeaseExpired",
                    error=f"LeaseExpired: worker {row[3] or '?'} did not finish attempt {row[1]} "
                    "before its lease ran out (killed or stuck)",
                ),
            )
            for row in rows
            if row[0] not in unstarted
        ]
        release(token, unstarted, now=now)
        dead = nack(token, failures, worker_id=worker_id, now=now)
    if rows:
        logger.warning("reaped %d expired deliveries (%d dead)", len(rows), len(dead))
    return len(rows), dead


@dataclass(frozen=True)
class Moved:
    """A delivery an operator action changed (for the audit trail)."""

    delivery_id: int
    event_id: uuid.UUID
    organization_id: uuid.UUID
    consumer: str


def reprocess(ids: Sequence[int], *, now: dt.datetime | None = None) -> list[Moved]:
    """Dead or done deliveries back to pending, attempts 0, due now; returns those moved."""
    return _operator_move(REPROCESS_SQL, ids, now)


def replay(
    event_ids: Sequence[uuid.UUID],
    *,
    consumer: str,
    max_attempts: int,
    now: dt.datetime | None = None,
) -> list[Moved]:
    """Deliver events to `consumer` again (restored archives, operator replays); returns the
    deliveries now pending. Deliveries still running are left alone."""
    if not event_ids:
        return []
    now = now or timezone.now()
    params: dict[str, Any] = {
        "ids": list(event_ids),
        "consumer": consumer,
        "max_attempts": max_attempts,
    }
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(REPLAY_SQL, {**params, "now": now})
        moved = [Moved(*row) for row in cursor.fetchall()]
        cursor.execute(RESUMMARISE_SQL, {"ids": list(event_ids), "now": now})
    return moved


def discard(ids: Sequence[int], *, now: dt.datetime | None = None) -> list[Moved]:
    """Dead deliveries out of the DLQ for good; returns those discarded."""
    return _operator_move(DISCARD_SQL, ids, now)


def _operator_move(sql: str, ids: Sequence[int], now: dt.datetime | None) -> list[Moved]:
    if not ids:
        return []
    with connection.cursor() as cursor:
        cursor.execute(sql, {"ids": list(ids), "now": now or timezone.now()})
        return [Moved(*row) for row in cursor.fetchall()]


def _lease_until(now: dt.datetime) -> dt.datetime:
    return now + dt.timedelta(seconds=float(bus_settings.LEASE_SECONDS))


def _log_lost(step: str, token: uuid.UUID, expected: int, changed: int) -> None:
    if changed < expected:
        logger.warning(
            "%s changed %d of %d deliveries: the rest lost their lease (taken over after expiry)",
            step,
            changed,
            expected,
            extra={"lease_token": str(token), "lost": expected - changed},
        )


def _event_from_row(row: Sequence[Any]) -> Event:
    (delivery_id, consumer, attempt, max_attempts, event_id, org_id, event_type, entity_kind,
     entity_id, payload, metadata, created_at, request_id, trace_id, actor_id) = row  # fmt: skip
    correlation = {}
    if request_id is not None:
        correlation["request_id"] = request_id
    if trace_id is not None:
        correlation["trace_id"] = trace_id
    if actor_id is not None:
        correlation["actor_id"] = actor_id
    # Django's psycopg setup returns jsonb as text; Event decodes it if a handler reads it.
    return Event(
        id=event_id,
        organization_id=org_id,
        event_type=event_type,
        entity_kind=entity_kind,
        entity_id=entity_id,
        payload=payload,
        metadata=metadata,
        created_at=created_at,
        consumer=consumer,
        delivery_id=delivery_id,
        attempt=attempt,
        max_attempts=max_attempts,
        correlation=correlation,
    )
