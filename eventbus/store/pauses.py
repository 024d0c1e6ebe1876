"""Pausing a consumer: its deliveries stay pending, no attempt charged, until it is resumed.

The state is one row per consumer in `eventbus_consumer_state` (no row: running). The claims
skip consumers in any state but `running` (sql/claim.sql and its siblings), so nothing new is
claimed once the pause commits; what a worker claimed concurrently and has not started yet is
released (attempt refunded) by the pump within about a second (`paused_among`, asked by each
pump about once a second and at once on a NOTIFY). What already runs finishes.

Operators pause and resume (`eventbus.operations.services.consumer_pause` / `consumer_resume`,
audited); the circuit breaker (eventbus/dispatch/breaker.py) moves a consumer between `running`,
`open` and `half_open` through the same row, so one mechanism holds deliveries back for both. A
resume sends the wake-up NOTIFY so idle workers claim at once.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from django.db import connection
from django.utils import timezone

from core import audit as core_audit
from eventbus.store.emitter import WAKEUP_CHANNEL
from eventbus.store.models import ConsumerRunState, ConsumerState

# Pause (or keep paused with a new reason); an open breaker becomes an operator's pause.
PAUSE_SQL = """
INSERT INTO eventbus_consumer_state AS s (consumer, state, since, reason, changed_by,
                                          window_ok, window_failed)
VALUES (%(consumer)s, 'paused', %(now)s, %(reason)s, %(actor)s, 0, 0)
ON CONFLICT (consumer) DO UPDATE
   SET state = 'paused', since = EXCLUDED.since, reason = EXCLUDED.reason,
       changed_by = EXCLUDED.changed_by, probe_at = NULL
 WHERE s.state <> 'paused'
RETURNING consumer
"""

# Back to running from any other state; the breaker's window starts afresh.
RESUME_SQL = """
UPDATE eventbus_consumer_state
   SET state = 'running', since = %(now)s, reason = %(reason)s, changed_by = %(actor)s,
       probe_at = NULL, window_started_at = NULL, window_ok = 0, window_failed = 0
 WHERE consumer = %(consumer)s AND state <> 'running'
RETURNING consumer
"""

# The states of the named consumers that are not running (a primary-key probe each).
PAUSED_AMONG_SQL = """
SELECT consumer, state FROM eventbus_consumer_state
 WHERE consumer = ANY(%(consumers)s::text[]) AND state <> 'running'
"""

# Consumers that are data (webhook:<uuid>): the paused ones with the prefix (a small table).
PAUSED_WITH_PREFIX_SQL = """
SELECT consumer, state FROM eventbus_consumer_state
 WHERE starts_with(consumer, %(prefix)s) AND state <> 'running'
"""


# Consumers that are data belong to an organization their app knows (webhooks registers
# "webhook:" at start-up): prefix -> lookup(consumer name) -> organization id, None if unknown.
OwnerLookup = Callable[[str], uuid.UUID | None]
_owners: dict[str, OwnerLookup] = {}


def register_owner(prefix: str, lookup: OwnerLookup) -> None:
    """Say how to find the organization of the consumers named `prefix...` (an app's hook)."""
    _owners[prefix] = lookup


def owner_of(consumer: str) -> uuid.UUID | None:
    """The organization a consumer that is data belongs to (None: unknown, or registered code,
    which is platform-wide)."""
    for prefix, lookup in _owners.items():
        if consumer.startswith(prefix):
            return lookup(consumer)
    return None


def pause(*, consumer: str, actor: str, reason: str, now: dt.datetime | None = None) -> bool:
    """Mark `consumer` paused and tell the workers (they release what they hold of it); False
    when it already was (nothing changed)."""
    params = {"consumer": consumer, "actor": actor, "reason": reason, "now": _now(now)}
    paused = _changed(PAUSE_SQL, params)
    if paused:
        wake_workers()
    return paused


def resume(*, consumer: str, actor: str, reason: str = "", now: dt.datetime | None = None) -> bool:
    """Mark `consumer` running again and wake the workers; False when it was running."""
    params = {"consumer": consumer, "actor": actor, "reason": reason, "now": _now(now)}
    resumed = _changed(RESUME_SQL, params)
    if resumed:
        wake_workers()
    return resumed


def audit(
    consumer: str, action: str, *, actor: str, reason: str, organization_id: uuid.UUID | None = None
) -> None:
    """One audit row for a change of a consumer's state (operator or breaker)."""
    core_audit.record(
        actor=actor,
        action=action,
        target_type="eventbus.consumer",
        target_id=consumer,
        organization_id=organization_id,
        reason=reason,
    )


def wake_workers() -> None:
    """The bus's wake-up NOTIFY (sent at commit): idle workers claim, pumps re-check pauses."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, 'consumers')", [WAKEUP_CHANNEL])


def paused_among(consumers: Sequence[str]) -> dict[str, str]:
    """The named consumers that are not running, with their state."""
    if not consumers:
        return {}
    return _states(PAUSED_AMONG_SQL, {"consumers": list(consumers)})


def paused_with_prefix(prefix: str) -> dict[str, str]:
    """The consumers named `prefix...` that are not running, with their state."""
    return _states(PAUSED_WITH_PREFIX_SQL, {"prefix": prefix})


def state_of(consumer: str) -> ConsumerState | None:
    """The consumer's row (None: never paused, breaker never counted)."""
    return ConsumerState.objects.filter(pk=consumer).first()


def is_paused(consumer: str) -> bool:
    state = state_of(consumer)
    return state is not None and state.state != ConsumerRunState.RUNNING


def _states(sql: str, params: dict[str, Any]) -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {str(consumer): str(state) for consumer, state in cursor.fetchall()}


def _changed(sql: str, params: dict[str, Any]) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone() is not None


def _now(now: dt.datetime | None) -> dt.datetime:
    return now or timezone.now()


# States whose unstarted deliveries a pump releases (a half-open consumer runs its probe).
HELD_STATES = frozenset({ConsumerRunState.PAUSED, ConsumerRunState.OPEN})
CHECK_SECONDS = 1.0  # how often a pump re-reads the pauses (at once after a NOTIFY)


class Watch:
    """A pump's view of which of its consumers are paused, re-read about once a second."""

    def __init__(self, *, names: Sequence[str] = (), prefix: str = "") -> None:
        self.names = list(names)
        self.prefix = prefix
        self._next = 0.0

    def poke(self) -> None:
        """A NOTIFY arrived (perhaps a pause): re-read on the next check."""
        self._next = 0.0

    def check(self) -> dict[str, str] | None:
        """The paused consumers and their states when due, else None (nothing to do)."""
        now = time.monotonic()
        if now < self._next:
            return None
        self._next = now + CHECK_SECONDS
        return paused_with_prefix(self.prefix) if self.prefix else paused_among(self.names)


def held(paused: dict[str, str]) -> set[str]:
    """The consumers whose unstarted deliveries go back (paused or open; not half-open)."""
    return {consumer for consumer, state in paused.items() if state in HELD_STATES}
