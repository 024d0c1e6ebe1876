"""The one settlement path: ack, nack, release, metrics, the circuit breaker's tally and
dead-letter alerts, per claim.

Every pump (drain, relay, webhook sender), the jobs process and the reaper settle through
`settle()` or `reap()` here, so none of them can forget the metrics or the alert on a death.
The statements are fenced by the claim's lease token (see claim.py): settling again after a
database error is safe, and a lost lease changes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from eventbus.dispatch import breaker
from eventbus.dispatch import claim as claims
from eventbus.dispatch.alerts import notify_dead
from eventbus.store import metrics
from eventbus.store.event import Event


@dataclass
class Settlement:
    """What became of the deliveries of one claim."""

    token: uuid.UUID
    done: list[int] = field(default_factory=list)  # to ack
    committed: list[int] = field(default_factory=list)  # atomic consumers: acked already
    failures: list[claims.Failure] = field(default_factory=list)  # to nack (retry or dead)
    released: list[int] = field(default_factory=list)  # never ran: back to pending, refunded
    # May have run, fault unknown (a timed-out batch): refunded, redelivered, each runs alone
    set_apart: list[int] = field(default_factory=list)
    consumer_of: dict[int, str] = field(default_factory=dict)  # delivery id -> consumer
    event_type_of: dict[int, str] = field(default_factory=dict)  # delivery id -> event type

    @property
    def processed(self) -> int:
        """Deliveries whose handler ran to an outcome (not the released ones)."""
        return len(self.done) + len(self.committed) + len(self.failures)


def settle(settlement: Settlement, *, worker_id: str) -> list[claims.DeadDelivery]:
    """Ack, nack and release in three fenced statements (and set apart the deliveries of a
    batch that timed out); count them; alert on deaths."""
    token = settlement.token
    claims.ack(token, settlement.done)
    dead = claims.nack(token, settlement.failures, worker_id=worker_id)
    claims.release(token, settlement.released)
    claims.set_apart(token, settlement.set_apart)
    done = [*settlement.done, *settlement.committed]
    breaker.count(
        settlement.consumer_of,
        ok=done,
        failed=[f.delivery_id for f in settlement.failures if not f.publish],
    )
    metrics.count_settled(
        settlement.consumer_of,
        done=done,
        failed=[f.delivery_id for f in settlement.failures],
        dead=[d.delivery_id for d in dead],
        event_type_of=settlement.event_type_of,
    )
    notify_dead(dead)
    return dead


def by_token(claimed: Iterable[tuple[uuid.UUID, Event]]) -> dict[uuid.UUID, Settlement]:
    """Empty settlements for (claim token, event) pairs, one per claim."""
    settlements: dict[uuid.UUID, Settlement] = {}
    settlement: Settlement | None = None
    for token, event in claimed:
        if settlement is None or settlement.token is not token:  # a claim's come together
            settlement = settlements.setdefault(token, Settlement(token))
        settlement.consumer_of[event.delivery_id] = event.consumer
        settlement.event_type_of[event.delivery_id] = event.event_type
    return settlements


def reap(*, worker_id: str, limit: int = 1000) -> tuple[int, list[claims.DeadDelivery]]:
    """Take over expired leases (claim.reap) and alert on what died; returns how many were
    reaped and those that died."""
    reaped, dead = claims.reap(worker_id=worker_id, limit=limit)
    metrics.count_reaped(reaped)
    notify_dead(dead)
    return reaped, dead


def publish_failed(
    token: uuid.UUID,
    failures: Sequence[claims.Failure],
    events: Sequence[Event],
    *,
    worker_id: str,
) -> None:
    """The relay could not hand these deliveries to the broker (their attempt is refunded)."""
    settlement = by_token((token, event) for event in events)[token]
    settlement.failures = list(failures)
    settle(settlement, worker_id=worker_id)
