"""Replay one consumer over a time window of the hot log (R-S4): re-run its deliveries of the
events emitted in [since, until), optionally of one organization and one event type, without
touching any other consumer.

A replay has an id. Each delivery it queues (reset from done, dead or discarded, or created for
an event the consumer had no delivery of, e.g. one emitted before it subscribed) carries that id
(`Delivery.replay_id`) and gets fresh attempts; deliveries still pending or running are left
alone (they will run anyway). Running the same replay id again queues nothing twice, so a replay
cut off half-way is continued by running it again with its id. Every replay that queued
something is audited (`consumer.replay`, with its window and counts).

The events are read per event type the consumer subscribes to, in (created_at, id) order, in
chunks of `chunk` (event_log_type_created_idx: a range per type), and each chunk is queued in its
own transaction (claims.replay: the delivery upsert and the events' summary), so a replay of a
busy day never holds thousands of rows locked; the workers are woken once at the end.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.utils import timezone

from core import audit
from eventbus.dispatch import claim as claims
from eventbus.store import pauses
from eventbus.store.registry import Consumer, registry

CHUNK = 1000
ACTION = "consumer.replay"

# One chunk of a type's events in the window, after a (created_at, id) position.
WINDOW_SQL = """
SELECT id, created_at FROM event_log
 WHERE event_type = %(event_type)s AND created_at >= %(since)s AND created_at < %(until)s
   AND (%(organization)s::uuid IS NULL OR organization_id = %(organization)s::uuid)
   AND (created_at, id) > (%(after_at)s, %(after_id)s::uuid)
 ORDER BY created_at, id
 LIMIT %(limit)s
"""

# A dry run: what a replay of these events would do to the consumer's deliveries.
PREVIEW_SQL = """
SELECT coalesce(d.status, 'none') AS status, count(*) FROM event_log e
  LEFT JOIN eventbus_delivery d ON d.event_id = e.id AND d.consumer = %(consumer)s
 WHERE e.event_type = ANY(%(event_types)s::text[]) AND e.created_at >= %(since)s
   AND e.created_at < %(until)s
   AND (%(organization)s::uuid IS NULL OR e.organization_id = %(organization)s::uuid)
 GROUP BY 1
"""

_FIRST = (dt.datetime(1970, 1, 1, tzinfo=dt.UTC), uuid.UUID(int=0))


class ReplayError(ValueError):
    """A replay that cannot run as asked (unknown consumer or type, an empty window)."""


@dataclass(frozen=True)
class Window:
    """What to replay: one consumer's deliveries of the events emitted in [since, until)."""

    consumer: str
    since: dt.datetime
    until: dt.datetime
    organization_id: uuid.UUID | None = None
    event_type: str | None = None


@dataclass
class ReplayReport:
    """What a replay did (or, dry, would do)."""

    replay_id: uuid.UUID
    window: Window
    event_types: list[str]
    matched: int = 0  # events in the window
    queued: int = 0  # deliveries queued by this run
    dry_run: bool = False
    # dry run only: the consumer's deliveries of the matched events by status ("none": no delivery)
    by_status: dict[str, int] = field(default_factory=dict)

    @property
    def left(self) -> int:
        """Matched events this run did not queue (pending or running, or replayed already)."""
        return self.matched - self.queued


def window(
    *,
    consumer: str,
    since: dt.datetime,
    until: dt.datetime | None = None,
    organization_id: uuid.UUID | None = None,
    event_type: str | None = None,
) -> Window:
    """A validated Window (ReplayError with what is wrong otherwise)."""
    if registry.find(consumer) is None:
        known = ", ".join(sorted(c.name for c in registry.all()))
        raise ReplayError(f"no registered consumer named {consumer!r} (known: {known})")
    until = until or timezone.now()
    for name, moment in (("since", since), ("until", until)):
        if timezone.is_naive(moment):
            raise ReplayError(f"{name} needs a time zone (e.g. 2026-12-01T10:00:00-03:00)")
    if since >= until:
        raise ReplayError(f"since ({since.isoformat()}) must be before until ({until.isoformat()})")
    if event_type is not None and event_type not in registry.get(consumer).events:
        events = ", ".join(registry.get(consumer).events)
        raise ReplayError(f"{consumer} does not consume {event_type!r} (it consumes: {events})")
    return Window(consumer, since, until, organization_id, event_type)


def replay(
    target: Window,
    *,
    actor: str,
    reason: str,
    replay_id: uuid.UUID | None = None,
    dry_run: bool = False,
    chunk: int = CHUNK,
    progress: Callable[[ReplayReport], None] | None = None,
) -> ReplayReport:
    """Queue the consumer's deliveries of the window's events again (or, `dry_run`, count
    what that would do). `replay_id` continues an earlier replay; `progress` is called after
    every chunk."""
    if not reason.strip():
        raise ReplayError("a reason is required to replay a consumer")
    consumer = registry.get(target.consumer)
    types = [target.event_type] if target.event_type else list(consumer.events)
    report = ReplayReport(replay_id or uuid.uuid4(), target, types, dry_run=dry_run)
    if dry_run:
        report.by_status = _preview(target, types)
        report.matched = sum(report.by_status.values())
        return report
    for ids in _chunks(target, types, chunk):
        report.matched += len(ids)
        report.queued += len(_queue(consumer, ids, report.replay_id))
        if progress is not None:
            progress(report)
    if report.queued:
        pauses.wake_workers()
        audit.record(
            actor=actor,
            action=ACTION,
            target_type="eventbus.consumer",
            target_id=consumer.name,
            organization_id=target.organization_id,
            reason=reason.strip(),
            details={
                "replay_id": str(report.replay_id),
                "since": target.since.isoformat(),
                "until": target.until.isoformat(),
                "event_types": types,
                "matched": report.matched,
                "queued": report.queued,
            },
        )
    return report


def _queue(consumer: Consumer, ids: Sequence[uuid.UUID], replay_id: uuid.UUID) -> list[object]:
    return list(
        claims.replay(
            ids,
            consumer=consumer.name,
            max_attempts=consumer.effective_max_attempts(),
            replay_id=replay_id,
        )
    )


def _chunks(target: Window, types: Sequence[str], size: int) -> Iterator[list[uuid.UUID]]:
    for event_type in types:
        after_at, after_id = _FIRST
        while True:
            params: dict[str, Any] = {
                "event_type": event_type,
                "since": target.since,
                "until": target.until,
                "organization": target.organization_id,
                "after_at": after_at,
                "after_id": after_id,
                "limit": size,
            }
            with connection.cursor() as cursor:
                cursor.execute(WINDOW_SQL, params)
                rows = cursor.fetchall()
            if not rows:
                break
            yield [row[0] for row in rows]
            after_id, after_at = rows[-1]
            if len(rows) < size:
                break


def _preview(target: Window, types: Sequence[str]) -> dict[str, int]:
    params: dict[str, Any] = {
        "consumer": target.consumer,
        "event_types": list(types),
        "since": target.since,
        "until": target.until,
        "organization": target.organization_id,
    }
    with connection.cursor() as cursor:
        cursor.execute(PREVIEW_SQL, params)
        return {str(status): int(n) for status, n in cursor.fetchall()}
