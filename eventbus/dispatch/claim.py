"""Claim, ack, nack, release, extend, reap, reprocess, retry now, discard: all delivery state
changes.

The statements are the named files in `eventbus/store/sql/` (each with a header comment saying why
it is shaped so). The claim is one statement (SKIP LOCKED, eligibility re-checked in the UPDATE,
lease set, attempt counted). Every later transition is fenced by the claim's `lease_token`: a
worker whose lease was taken over changes 0 rows, and that is logged and counted, never raised.
Rows are read by column name. Times come from Python (`timezone.now()`), so tests control them.

Failure isolation (R-F1): an attempt is charged only to a delivery whose own handler may
have run. The reaper charges a dead worker's delivery only when it was the one thing that worker
held; when it held several, none is charged: each is marked `isolate` and `redelivered` and runs
alone next, so a delivery that kills its worker is soon the only one held when it does.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone
from psycopg.cursor import BaseCursor
from psycopg.rows import RowFactory, RowMaker, namedtuple_row

from core.db import bound_cursor
from eventbus.dispatch.retry import Verdict, decide
from eventbus.store.conf import bus_settings
from eventbus.store.event import Event, row_loader
from eventbus.store.registry import registry
from eventbus.store.sql import statement

logger = logging.getLogger(__name__)

# `locked_by` of deliveries claimed by the outbox relay (published, not yet run).
RELAY_WORKER_PREFIX = "relay:"

# When this process last claimed something (any pump): the worker registry's "last claim".
_last_claim: list[dt.datetime] = []


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
class DeadDelivery:
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
    probing: Sequence[str] = (),
    per_key: int = 1,
) -> Claim:
    """Claim up to `batch_size` due deliveries of `consumers`, fairly across organizations
    (deliveries waiting to run alone excepted: see `claim_isolated`; paused consumers too,
    except those in `probing`: the half-open probes the caller took, eventbus/dispatch/breaker.py).

    An ordered consumer's key gives one delivery, its head; with `per_key` above 1, up to that
    many of the key's next deliveries in id order (a run), which the caller must run one at a
    time in id order and stop at the first that does not succeed (eventbus/dispatch/drain.py's
    lanes). A claim with an ordered consumer among `consumers` runs claim_ordered.sql, the rest
    claim.sql (half the planning: the statements are planned per call).
    """
    if not consumers or batch_size < 1:
        return Claim(uuid.uuid4(), [])
    params: dict[str, Any] = {"consumers": list(consumers), "probing": list(probing)}
    if not any(c.ordered for c in map(registry.find, consumers) if c is not None):
        return _claim("claim", params, batch_size, worker_id, now)
    params["key_start"] = str(uuid.uuid4())  # where the walk over the keys begins
    params["per_key"] = max(1, per_key)
    return _claim("claim_ordered", params, batch_size, worker_id, now)


def claim_isolated(
    *,
    consumers: Sequence[str],
    batch_size: int = 1,
    worker_id: str,
    now: dt.datetime | None = None,
) -> Claim:
    """Claim due deliveries marked to run alone (their worker died holding several)."""
    if not consumers or batch_size < 1:
        return Claim(uuid.uuid4(), [])
    return _claim("claim_isolated", {"consumers": list(consumers)}, batch_size, worker_id, now)


def isolated_due(consumers: Sequence[str], *, now: dt.datetime | None = None) -> bool:
    """Whether a delivery of `consumers` waits to run alone."""
    params = {"consumers": list(consumers), "now": now or timezone.now()}
    return bool(consumers) and bool(_fetch("isolated_due", params)[0].due)


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
    return _claim("claim_prefixed", params, batch_size, worker_id, now)


def _claim(
    name: str,
    params: dict[str, Any],
    batch_size: int,
    worker_id: str,
    now: dt.datetime | None,
) -> Claim:
    """Run a claim statement with a new lease token; its rows become the claim's events."""
    now = now or timezone.now()
    token = uuid.uuid4()
    rows = _fetch(
        name,
        {
            **params,
            "start": uuid.uuid4(),  # the organization the fair scan starts at
            "batch": batch_size,
            "now": now,
            "token": token,
            "worker": worker_id,
            "lease_until": _lease_until(now),
        },
        row_factory=event_row,
    )
    if rows:
        _last_claim[:] = [now]
    return Claim(token, rows)


def last_claim_at() -> dt.datetime | None:
    """When a claim of this process last returned deliveries (None: never yet)."""
    return _last_claim[0] if _last_claim else None


def ack(token: uuid.UUID, ids: Sequence[int], *, now: dt.datetime | None = None) -> int:
    """Mark deliveries done; returns how many were still ours (the rest lost their lease)."""
    if not ids:
        return 0
    [row] = _fetch("ack", {"ids": list(ids), "token": token, "now": now or timezone.now()})
    acked = int(row.acked)
    _log_lost("ack", token, len(ids), acked)
    return acked


def nack(
    token: uuid.UUID,
    failures: Sequence[Failure],
    *,
    worker_id: str = "",
    now: dt.datetime | None = None,
) -> list[DeadDelivery]:
    """Record failed attempts: retry later or dead-letter. Returns the deliveries that died."""
    if not failures:
        return []
    now = now or timezone.now()
    rows = _fetch(
        "nack",
        {
            "ids": [f.delivery_id for f in failures],
            "dead": [f.verdict.dead for f in failures],
            "next_at": [now + dt.timedelta(seconds=f.verdict.delay) for f in failures],
            "errors": [f.verdict.error for f in failures],
            "classes": [f.verdict.error_class for f in failures],
            "durations": [f.duration_ms for f in failures],
            "publish": [f.publish for f in failures],
            "tracebacks": [f.verdict.traceback for f in failures],
            "token": token,
            "now": now,
            "worker": worker_id,
        },
    )
    _log_lost("nack", token, len(failures), len(rows))
    return [
        DeadDelivery(r.delivery_id, r.event_id, r.organization_id, r.consumer, r.attempt, r.error)
        for r in rows
        if r.dead
    ]


def adopt(
    delivery_id: int,
    token: uuid.UUID,
    *,
    worker_id: str,
    extra_lease: float = 0.0,
    now: dt.datetime | None = None,
) -> Event | None:
    """Take over a delivery the relay published, leased `extra_lease` seconds longer than a
    claim (the jobs process has no heartbeat); None when its lease is no longer `token`'s.

    A delivery whose consumer was paused (or its breaker opened) since it was published is
    given back, pending and uncharged, and `HeldBack` raised: it runs once the consumer resumes.
    """
    now = now or timezone.now()
    rows = _fetch(
        "adopt",
        {
            "id": delivery_id,
            "token": token,
            "worker": worker_id,
            "now": now,
            "lease_until": _lease_until(now) + dt.timedelta(seconds=extra_lease),
        },
        row_factory=_held_back_or_event,
    )
    if not rows:
        return None
    held_back, event = rows[0]
    if held_back:
        release(token, [delivery_id], now=now)
        raise HeldBack(event.consumer)
    return event


class HeldBack(Exception):
    """The published delivery's consumer is paused: it was given back uncharged, not run."""


def _held_back_or_event(cursor: BaseCursor[Any, Any]) -> RowMaker[tuple[bool, Event]]:
    # Like event_row, made again once the statement has a description (psycopg also calls a
    # row factory when it is set, before any result).
    make_event = event_row(cursor)
    names = [column.name for column in cursor.description or ()]
    held_back = names.index("held_back") if "held_back" in names else None
    return lambda values: (held_back is not None and bool(values[held_back]), make_event(values))


def consumer_of(delivery_id: int) -> str | None:
    """The consumer a delivery belongs to (None when it is gone)."""
    with bound_cursor() as cursor:
        cursor.execute("SELECT consumer FROM eventbus_delivery WHERE id = %s", [delivery_id])
        row = cursor.fetchone()
    return str(row[0]) if row else None


def publish_failure_counts(ids: Sequence[int]) -> dict[int, int]:
    """How many times publishing each delivery to the broker has failed so far."""
    with bound_cursor() as cursor:
        cursor.execute(
            "SELECT id, publish_failures FROM eventbus_delivery WHERE id = ANY(%s::bigint[])",
            [list(ids)],
        )
        return dict(cursor.fetchall())


def release(token: uuid.UUID, ids: Sequence[int], *, now: dt.datetime | None = None) -> int:
    """Give back claimed deliveries whose handler never ran (pending again, attempt refunded)."""
    if not ids:
        return 0
    return len(_fetch("release", {"ids": list(ids), "token": token, "now": now or timezone.now()}))


def set_apart(token: uuid.UUID, ids: Sequence[int], *, now: dt.datetime | None = None) -> None:
    """Give back claimed deliveries that may have run but cannot be blamed (a batch that timed
    out as a whole): pending again, attempt refunded, marked redelivered, each to run alone, so
    the one at fault is charged when it fails again by itself."""
    reason = (
        "its batch timed out before the handler returned: this delivery may have run; "
        "no attempt charged, it runs alone next"
    )
    _requeue(token, ids, now=now or timezone.now(), isolate=True, reason=reason)


def extend(token: uuid.UUID, ids: Sequence[int], *, now: dt.datetime | None = None) -> set[int]:
    """Push the lease of held deliveries forward; returns the ids still ours (the rest are lost)."""
    if not ids:
        return set()
    now = now or timezone.now()
    rows = _fetch("extend", {"ids": list(ids), "token": token, "lease_until": _lease_until(now)})
    return {row.id for row in rows}


def reap(
    *, now: dt.datetime | None = None, limit: int = 1000, worker_id: str = "reaper"
) -> tuple[int, list[DeadDelivery]]:
    """Take over deliveries whose lease expired (dead, hung or disconnected worker).

    What did finish was acked and is not `processing`, so it is never re-run. A delivery its
    worker held alone is charged (retry, or dead when out of attempts); the deliveries of a
    worker that held several are refunded and each runs alone next; deliveries the relay
    published but the jobs process never took are refunded. Every re-run of a delivery that
    may have run is marked `redelivered`. Returns the number reaped and those that died.
    """
    now = now or timezone.now()
    token = uuid.uuid4()
    with transaction.atomic():
        rows = _fetch(
            "reap",
            {"now": now, "limit": limit, "token": token, "lease_until": _lease_until(now)},
        )
        dead = _settle_reaped(token, rows, now=now, worker_id=worker_id)
    if rows:
        logger.warning("reaped %d expired deliveries (%d dead)", len(rows), len(dead))
    return len(rows), dead


def _settle_reaped(
    token: uuid.UUID, rows: Sequence[Any], *, now: dt.datetime, worker_id: str
) -> list[DeadDelivery]:
    published = [r for r in rows if (r.locked_by or "").startswith(RELAY_WORKER_PREFIX)]
    charged = [r for r in rows if r not in published and (r.held_by_worker == 1 or r.isolate)]
    refunded = [r for r in rows if r not in published and r not in charged]
    _requeue(token, [r.delivery_id for r in published], now=now, isolate=False, reason=None)
    by_worker: dict[str, list[int]] = {}
    for r in refunded:
        by_worker.setdefault(r.locked_by or "?", []).append(r.delivery_id)
    for worker, ids in by_worker.items():
        reason = (
            f"worker {worker} stopped holding its lease (killed, stuck or disconnected) while "
            f"it held {len(ids)} deliveries: this one may have run; no attempt charged"
        )
        _requeue(token, ids, now=now, isolate=True, reason=reason)
    dead = nack(token, [_lease_expired(r) for r in charged], worker_id=worker_id, now=now)
    for r in charged:
        reason = (
            f"worker {r.locked_by or '?'} died or stalled while running this delivery alone "
            f"(attempt {r.attempt})"
        )
        _fetch("mark_redelivered", {"ids": [r.delivery_id], "reason": reason}, rows=False)
    return dead


def _lease_expired(row: Any) -> Failure:
    """An attempt whose worker vanished: charged, and due again at once (the wait a backoff
    gives a failing handler is no use here) unless that was its last attempt."""
    return Failure(
        row.delivery_id,
        decide(
            row.attempt,
            max_attempts=row.max_attempts,
            permanent=False,
            schedule=(),
            jitter=0.0,
            delay=0.0,
            error_class="LeaseExpired",
            error=f"LeaseExpired: worker {row.locked_by or '?'} did not finish attempt "
            f"{row.attempt} before its lease ran out (killed or stuck)",
        ),
    )


def _requeue(
    token: uuid.UUID, ids: Sequence[int], *, now: dt.datetime, isolate: bool, reason: str | None
) -> None:
    if ids:
        params = {"ids": list(ids), "token": token, "now": now, "isolate": isolate}
        _fetch("requeue", {**params, "redelivered": reason is not None, "reason": reason})


@dataclass(frozen=True)
class Moved:
    """A delivery an operator action changed (for the audit trail)."""

    delivery_id: int
    event_id: uuid.UUID
    organization_id: uuid.UUID
    consumer: str


def reprocess(ids: Sequence[int], *, now: dt.datetime | None = None) -> list[Moved]:
    """Dead or done deliveries back to pending, attempts 0, due now; returns those moved."""
    return _operator_move("reprocess", ids, now)


def replay(
    event_ids: Sequence[uuid.UUID],
    *,
    consumer: str,
    max_attempts: int,
    replay_id: uuid.UUID | None = None,
    now: dt.datetime | None = None,
) -> list[Moved]:
    """Deliver events to `consumer` again (restored archives, operator replays); returns the
    deliveries now pending. Deliveries still running are left alone, and so are those already
    replayed under `replay_id` (an operator replay's id, flagged on the deliveries it resets)."""
    if not event_ids:
        return []
    now = now or timezone.now()
    params: dict[str, Any] = {"ids": list(event_ids), "now": now}
    declared = registry.find(consumer)
    replayed = {
        "consumer": consumer,
        "max_attempts": max_attempts,
        "replay_id": replay_id,
        "ordered": bool(declared and declared.ordered),
    }
    with transaction.atomic():
        rows = _fetch("replay", {**params, **replayed})
        _fetch("resummarise", params, rows=False)
    return [Moved(*row) for row in rows]


def retry_now(ids: Sequence[int], *, now: dt.datetime | None = None) -> list[Moved]:
    """Deliveries waiting to retry after a failure due at once; returns those moved."""
    return _operator_move("retry_now", ids, now)


def discard(ids: Sequence[int], *, now: dt.datetime | None = None) -> list[Moved]:
    """Dead deliveries out of the DLQ for good; returns those discarded."""
    return _operator_move("discard", ids, now)


def _operator_move(name: str, ids: Sequence[int], now: dt.datetime | None) -> list[Moved]:
    if not ids:
        return []
    return [Moved(*row) for row in _fetch(name, {"ids": list(ids), "now": now or timezone.now()})]


def _fetch(
    name: str,
    params: Mapping[str, Any],
    *,
    rows: bool = True,
    row_factory: RowFactory[Any] = namedtuple_row,
) -> list[Any]:
    """Run the named statement on a binary-bound cursor; its rows by column name (named
    tuples, or what `row_factory` makes of them)."""
    with bound_cursor() as cursor:
        cursor.row_factory = row_factory
        cursor.execute(statement(name), params)
        return cursor.fetchall() if rows else []


def _lease_until(now: dt.datetime) -> dt.datetime:
    return now + dt.timedelta(seconds=bus_settings.LEASE_SECONDS)


def _log_lost(step: str, token: uuid.UUID, expected: int, changed: int) -> None:
    if changed < expected:
        logger.warning(
            "%s changed %d of %d deliveries: the rest lost their lease (taken over after expiry)",
            step,
            changed,
            expected,
            extra={"lease_token": str(token), "lost": expected - changed},
        )


# The claimed event's columns as Event's keyword arguments (the claim statements' RETURNING).
_EVENT_COLUMNS = {
    "delivery_id": "delivery_id",
    "consumer": "consumer",
    "attempt": "attempt",
    "max_attempts": "max_attempts",
    "redelivered": "redelivered",
    "redelivery_reason": "redelivery_reason",
    "ordering_key": "ordering_key",
    "event_id": "id",
    "organization_id": "organization_id",
    "event_type": "event_type",
    "entity_kind": "entity_kind",
    "entity_id": "entity_id",
    "payload": "payload",
    "metadata": "metadata",
    "created_at": "created_at",
}
_CORRELATION_COLUMNS = ("request_id", "trace_id", "actor_id")


def event_row(cursor: BaseCursor[Any, Any]) -> RowMaker[Event]:
    """A psycopg row factory: a claimed delivery's row straight into an Event, its columns
    found by name in the statement's description (once per statement, not per row)."""
    names = [column.name for column in cursor.description or ()]
    fields = [(i, _EVENT_COLUMNS[n]) for i, n in enumerate(names) if n in _EVENT_COLUMNS]
    ids = [(i, n) for i, n in enumerate(names) if n in _CORRELATION_COLUMNS]

    # payload and metadata come as JSON text: Event decodes them if a handler reads them.
    try:
        return row_loader(fields, ids)
    except TypeError:
        # Not a claim's columns: psycopg also calls a row factory when it is set, with the
        # description of the cursor's last statement (this cursor runs many: core.db).
        return _no_event


def _no_event(values: Sequence[Any]) -> Event:
    raise TypeError("the statement did not return an event's columns")
