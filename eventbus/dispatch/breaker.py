"""The circuit breaker per consumer: a consumer that keeps failing is paused before its retries
burn into the DLQ, probed after a cool-down, and resumed when the probe succeeds.

```
 running (closed) ── failure rate ≥ FAILURE_RATE over ≥ MIN_VOLUME in WINDOW_SECONDS ──▶ open
    ▲                                                                                  │
    │ the probe succeeded                          COOL_DOWN_SECONDS later, one worker │
    └──────────────────────── half_open ◀──── takes the probe (one delivery) ──────────┘
                                 │ the probe failed ──▶ open again (another cool-down)
```

Counting costs the settle path nothing in the database: `count()` (called by
eventbus/dispatch/settle.py for every settled batch) adds to this process's tally in memory, and
`flush()` writes the tally in ONE statement (per-consumer tumbling windows in
`eventbus_consumer_state`) about once a second: the runner flushes between steps, the jobs
process after each adopted delivery when due. The rows it returns say which consumers cross the
threshold; each is opened by a conditional UPDATE (`WHERE state = 'running'`: one process wins,
one alert goes out through `core.alerts.alert`). "Open" is a pause (eventbus/store/pauses.py): the
claims skip it, nothing is charged.

Webhook subscriptions (`webhook:<uuid>`) are not counted here: they have their own breaker
(webhooks/circuit.py: one probe at a time, then auto-disable after consecutive failures).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from core.alerts import alert
from eventbus.dispatch import claim as claims
from eventbus.store import pauses
from eventbus.store.conf import bus_settings

logger = logging.getLogger(__name__)

ACTOR = "system:breaker"
FLUSH_SECONDS = 1.0  # a process writes its tally at most this often

# Add a process's counts to each consumer's window (restarted once it is WINDOW old, or unset:
# NULL compares as unknown, so the ELSE branch restarts it); rows are
# locked in consumer order so two processes flushing the same consumers never deadlock. A
# consumer's first flush inserts its row (the UPDATE does not see it: it is counted once).
FLUSH_SQL = """
WITH v AS (
    SELECT * FROM unnest(%(consumers)s::text[], %(ok)s::int[], %(failed)s::int[],
                         %(cutoff)s::timestamptz[]) AS v(consumer, ok, failed, cutoff)
), fresh AS (
    INSERT INTO eventbus_consumer_state (consumer, state, since, reason, changed_by,
                                         window_started_at, window_ok, window_failed)
    SELECT v.consumer, 'running', %(now)s, '', '', %(now)s, v.ok, v.failed FROM v
    ON CONFLICT (consumer) DO NOTHING
    RETURNING consumer, state, window_ok, window_failed
), locked AS MATERIALIZED (
    SELECT s.consumer FROM eventbus_consumer_state s JOIN v ON v.consumer = s.consumer
     ORDER BY s.consumer
       FOR UPDATE OF s
), counted AS (
    UPDATE eventbus_consumer_state s
       SET window_started_at = CASE WHEN s.window_started_at > v.cutoff
                                    THEN s.window_started_at ELSE %(now)s END,
           window_ok = CASE WHEN s.window_started_at > v.cutoff
                            THEN s.window_ok + v.ok ELSE v.ok END,
           window_failed = CASE WHEN s.window_started_at > v.cutoff
                                THEN s.window_failed + v.failed ELSE v.failed END
      FROM v JOIN locked l ON l.consumer = v.consumer
     WHERE s.consumer = v.consumer
    RETURNING s.consumer, s.state, s.window_ok, s.window_failed
)
SELECT consumer, state, window_ok, window_failed FROM fresh
UNION ALL
SELECT consumer, state, window_ok, window_failed FROM counted
"""

# Open (from running, or again from half_open); its window starts afresh after the cool-down.
OPEN_SQL = """
UPDATE eventbus_consumer_state
   SET state = 'open', since = %(now)s, reason = %(reason)s, changed_by = %(actor)s,
       probe_at = %(probe_at)s, window_started_at = NULL, window_ok = 0, window_failed = 0
 WHERE consumer = %(consumer)s AND state = %(was)s
RETURNING consumer
"""

CLOSE_SQL = """
UPDATE eventbus_consumer_state
   SET state = 'running', since = %(now)s, reason = %(reason)s, changed_by = %(actor)s,
       probe_at = NULL, window_started_at = NULL, window_ok = 0, window_failed = 0
 WHERE consumer = %(consumer)s AND state = 'half_open'
RETURNING consumer
"""

# One worker takes each due probe (open past its cool-down, or a probe never answered: its
# worker died); probe_at is then when an unanswered probe may be taken again.
TAKE_PROBES_SQL = """
UPDATE eventbus_consumer_state s
   SET state = 'half_open', since = %(now)s, changed_by = %(actor)s,
       reason = 'cool-down over: one probe delivery runs',
       probe_at = %(now)s + make_interval(secs => v.retake)
  FROM unnest(%(consumers)s::text[], %(retake)s::float8[]) AS v(consumer, retake)
 WHERE s.consumer = v.consumer AND s.state IN ('open', 'half_open') AND s.probe_at <= %(now)s
RETURNING s.consumer
"""

# The probe found nothing due: open again, to be probed as soon as something is due.
NO_PROBE_SQL = """
UPDATE eventbus_consumer_state SET state = 'open', probe_at = %(now)s
 WHERE consumer = %(consumer)s AND state = 'half_open'
"""


@dataclass(frozen=True)
class Policy:
    """When a consumer's breaker opens and how long it stays open."""

    enabled: bool
    failure_rate: float
    min_volume: int
    window_seconds: float
    cool_down_seconds: float

    def trips(self, ok: int, failed: int) -> bool:
        total = ok + failed
        return self.enabled and total >= self.min_volume and failed >= self.failure_rate * total


def policy_for(consumer: str) -> Policy:
    """The BREAKER_* settings, with the consumer's BREAKER_CONSUMERS overrides."""
    override = bus_settings.BREAKER_CONSUMERS.get(consumer, {})
    return Policy(
        enabled=bus_settings.BREAKER_ENABLED,
        failure_rate=override.get("FAILURE_RATE", bus_settings.BREAKER_FAILURE_RATE),
        min_volume=max(1, int(override.get("MIN_VOLUME", bus_settings.BREAKER_MIN_VOLUME))),
        window_seconds=override.get("WINDOW_SECONDS", bus_settings.BREAKER_WINDOW_SECONDS),
        cool_down_seconds=override.get("COOL_DOWN_SECONDS", bus_settings.BREAKER_COOL_DOWN_SECONDS),
    )


class Tally:
    """This process's settled outcomes per consumer since the last flush."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, list[int]] = {}
        self._next_flush = 0.0

    def add(self, consumer_of: Mapping[int, str], ok: Iterable[int], failed: Iterable[int]) -> None:
        if not bus_settings.BREAKER_ENABLED:
            return  # switched off: nothing counted, nothing written
        with self._lock:
            for ids, column in ((ok, 0), (failed, 1)):
                for delivery_id in ids:
                    consumer = consumer_of[delivery_id]
                    if ":" not in consumer:  # webhook subscriptions: webhooks/circuit.py
                        self._counts.setdefault(consumer, [0, 0])[column] += 1

    def take(self, *, force: bool) -> dict[str, list[int]]:
        """The counts to flush now (and forget), or {} when not due yet."""
        now = time.monotonic()
        with self._lock:
            if not self._counts or (not force and now < self._next_flush):
                return {}
            self._next_flush = now + FLUSH_SECONDS
            counts, self._counts = self._counts, {}
        return counts

    def give_back(self, counts: Mapping[str, list[int]]) -> None:
        """A flush failed: keep the counts for the next one."""
        with self._lock:
            for consumer, (ok, failed) in counts.items():
                mine = self._counts.setdefault(consumer, [0, 0])
                mine[0] += ok
                mine[1] += failed


_tally = Tally()


def count(consumer_of: Mapping[int, str], *, ok: Iterable[int], failed: Iterable[int]) -> None:
    """Settled outcomes of one batch (the settle path; memory only)."""
    _tally.add(consumer_of, ok, failed)


def flush(*, force: bool = False, now: dt.datetime | None = None) -> list[str]:
    """Write this process's tally when due (or `force`), open the breakers it trips and settle
    half-open probes; returns the consumers whose state changed."""
    counts = _tally.take(force=force)
    if not counts:
        return []
    now = now or timezone.now()
    try:
        rows = _write(counts, now)
    except Exception:
        _tally.give_back(counts)
        raise
    return [c for c in (_transition(row, counts[row[0]], now) for row in rows) if c]


def _write(counts: Mapping[str, list[int]], now: dt.datetime) -> list[Any]:
    names = sorted(counts)
    params: dict[str, Any] = {
        "consumers": names,
        "ok": [counts[n][0] for n in names],
        "failed": [counts[n][1] for n in names],
        # a window that started after this is still current
        "cutoff": [now - dt.timedelta(seconds=policy_for(n).window_seconds) for n in names],
        "now": now,
    }
    with connection.cursor() as cursor:
        cursor.execute(FLUSH_SQL, params)
        return list(cursor.fetchall())


def _transition(row: Sequence[Any], flushed: Sequence[int], now: dt.datetime) -> str | None:
    consumer, state, window_ok, window_failed = row
    policy = policy_for(consumer)
    if state == "running" and policy.trips(window_ok, window_failed):
        reason = (
            f"{window_failed} of {window_ok + window_failed} deliveries failed within "
            f"{policy.window_seconds:g}s (threshold {policy.failure_rate:.0%}, minimum "
            f"{policy.min_volume})"
        )
        return consumer if _open(consumer, "running", reason, policy, now) else None
    if state == "half_open" and flushed[1]:
        reason = "the probe delivery failed: open again"
        return consumer if _open(consumer, "half_open", reason, policy, now) else None
    if state == "half_open" and flushed[0]:
        return consumer if _close(consumer, now) else None
    return None


def _open(consumer: str, was: str, reason: str, policy: Policy, now: dt.datetime) -> bool:
    probe_at = now + dt.timedelta(seconds=policy.cool_down_seconds)
    params = {"consumer": consumer, "was": was, "reason": reason, "actor": ACTOR, "now": now}
    with transaction.atomic():
        if not _changed(OPEN_SQL, {**params, "probe_at": probe_at}):
            return False
        pauses.audit(consumer, "consumer.breaker_open", actor=ACTOR, reason=reason)
    alert(
        "consumer circuit breaker open",
        consumer=consumer,
        reason=reason,
        probe_at=probe_at.isoformat(),
    )
    return True


def _close(consumer: str, now: dt.datetime) -> bool:
    reason = "the probe delivery succeeded: resumed"
    params = {"consumer": consumer, "reason": reason, "actor": ACTOR, "now": now}
    with transaction.atomic():
        if not _changed(CLOSE_SQL, params):
            return False
        pauses.audit(consumer, "consumer.breaker_close", actor=ACTOR, reason=reason)
        pauses.wake_workers()
    logger.warning("consumer %s: circuit breaker closed (%s)", consumer, reason)
    return True


def take_probes(consumers: Sequence[str], *, now: dt.datetime | None = None) -> list[str]:
    """The open consumers among `consumers` whose probe this worker now runs (half-open)."""
    if not consumers:
        return []
    params: dict[str, Any] = {
        "consumers": list(consumers),
        "retake": [_retake_seconds(c) for c in consumers],
        "now": now or timezone.now(),
        "actor": ACTOR,
    }
    with connection.cursor() as cursor:
        cursor.execute(TAKE_PROBES_SQL, params)
        return [str(row[0]) for row in cursor.fetchall()]


def claim_probes(paused: Mapping[str, str], *, worker_id: str) -> list[claims.Claim]:
    """Take the due probes among `paused` (consumer -> state) and claim one delivery for each;
    a probe with nothing due goes back to open."""
    probing = [c for c, state in paused.items() if state in ("open", "half_open")]
    batches = []
    for consumer in take_probes(probing):
        batch = claims.claim(
            consumers=[consumer], batch_size=1, worker_id=worker_id, probing=[consumer]
        )
        if batch.events:
            logger.warning("consumer %s: circuit half-open, probing with one delivery", consumer)
            batches.append(batch)
        else:
            probe_found_nothing(consumer)
    return batches


def probe_found_nothing(consumer: str, *, now: dt.datetime | None = None) -> None:
    """Nothing was due to probe with: open again, probed once something is due."""
    _changed(NO_PROBE_SQL, {"consumer": consumer, "now": now or timezone.now()}, returns=False)


def _retake_seconds(consumer: str) -> float:
    # An unanswered probe (its worker died) is taken again after its lease ran out and a cool-down.
    return bus_settings.LEASE_SECONDS + policy_for(consumer).cool_down_seconds


def _changed(sql: str, params: Mapping[str, Any], *, returns: bool = True) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone() is not None if returns else cursor.rowcount > 0
