"""Operator actions on deliveries (admin, API): each one moves state and writes the audit trail."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from django.db import transaction

from core import audit
from eventbus.dispatch import claim as claims
from eventbus.operations import selectors
from eventbus.store import pauses
from eventbus.store.registry import registry


class UnknownConsumerError(ValueError):
    """The event was never fanned out to the consumer an operator named (or no such consumer)."""


def deliveries_reprocess(*, delivery_ids: Sequence[int], actor: str, reason: str = "") -> int:
    """Dead (or done) deliveries back to pending, attempts 0, due now; only those consumers re-run.

    Returns how many moved; the others were not dead/done (already pending, running, discarded).
    """
    with transaction.atomic():
        moved = claims.reprocess(delivery_ids)
        _audit(moved, actor=actor, action="delivery.reprocess", reason=reason)
    return len(moved)


def deliveries_retry_now(*, delivery_ids: Sequence[int], actor: str, reason: str = "") -> int:
    """Deliveries waiting to retry after a failure are due now (their attempts and history kept);
    idle workers are woken at commit. Returns how many moved; the others were not waiting."""
    with transaction.atomic():
        moved = claims.retry_now(delivery_ids)
        _audit(moved, actor=actor, action="delivery.retry_now", reason=reason)
        if moved:
            pauses.wake_workers()
    return len(moved)


def deliveries_discard(*, delivery_ids: Sequence[int], actor: str, reason: str) -> int:
    """Dead deliveries leave the DLQ for good, with who/when/why in the audit trail."""
    if not reason or not reason.strip():
        raise ValueError("a reason is required to discard dead deliveries")
    with transaction.atomic():
        moved = claims.discard(delivery_ids)
        _audit(moved, actor=actor, action="delivery.discard", reason=reason.strip())
    return len(moved)


def _audit(moved: Sequence[claims.Moved], *, actor: str, action: str, reason: str) -> None:
    audit.record_many(
        actor=actor,
        action=action,
        target_type="eventbus.delivery",
        reason=reason,
        targets=[
            (
                str(m.delivery_id),
                m.organization_id,
                {"event_id": str(m.event_id), "consumer": m.consumer},
            )
            for m in moved
        ],
    )


def event_reprocess(
    *,
    organization_id: uuid.UUID,
    event_id: uuid.UUID,
    consumer: str | None = None,
    actor: str,
    reason: str = "",
) -> int:
    """Re-run one event: its dead deliveries, or one consumer's dead or done delivery.

    Scoped to the organization (another tenant's event moves nothing). Returns how many moved;
    raises UnknownConsumerError when the event has no delivery for `consumer`.
    """
    statuses = ["dead"] if consumer is None else ["dead", "done"]
    ids = _event_deliveries(organization_id, event_id, statuses, consumer)
    return deliveries_reprocess(delivery_ids=ids, actor=actor, reason=reason)


def event_discard(
    *,
    organization_id: uuid.UUID,
    event_id: uuid.UUID,
    consumer: str | None = None,
    actor: str,
    reason: str,
) -> int:
    """Discard one event's dead deliveries (or one consumer's), audited with the reason."""
    ids = _event_deliveries(organization_id, event_id, ["dead"], consumer)
    return deliveries_discard(delivery_ids=ids, actor=actor, reason=reason)


def _event_deliveries(
    organization_id: uuid.UUID, event_id: uuid.UUID, statuses: list[str], consumer: str | None
) -> list[int]:
    if consumer is not None and not selectors.event_has_consumer(
        organization_id=organization_id, event_id=event_id, consumer=consumer
    ):
        raise UnknownConsumerError(f"event {event_id} has no delivery for consumer {consumer!r}")
    return selectors.event_delivery_ids(
        organization_id=organization_id, event_id=event_id, statuses=statuses, consumer=consumer
    )


def consumer_pause(
    *, consumer: str, actor: str, reason: str, organization_id: uuid.UUID | None = None
) -> bool:
    """Pause a consumer: its deliveries stay pending, no attempt charged (eventbus/store/pauses.py).

    `consumer` is a registered consumer (platform-wide) or a consumer that is data
    (`webhook:<uuid>`, whose app checked the tenant and passes its `organization_id` for the
    audit trail). Returns False when it was paused already. Audited, with the reason.
    """
    if not reason or not reason.strip():
        raise ValueError("a reason is required to pause a consumer")
    return _consumer_change(
        pauses.pause,
        "consumer.pause",
        consumer=consumer,
        actor=actor,
        reason=reason,
        organization_id=organization_id,
    )


def consumer_resume(
    *, consumer: str, actor: str, reason: str = "", organization_id: uuid.UUID | None = None
) -> bool:
    """Resume a paused consumer (or one whose circuit breaker is open); wakes the workers.
    Returns False when it was running. Audited."""
    return _consumer_change(
        pauses.resume,
        "consumer.resume",
        consumer=consumer,
        actor=actor,
        reason=reason,
        organization_id=organization_id,
    )


def _consumer_change(
    change: Callable[..., bool],
    action: str,
    /,
    *,
    consumer: str,
    actor: str,
    reason: str,
    organization_id: uuid.UUID | None,
) -> bool:
    """Change the state and audit it in one transaction (the NOTIFY goes out at commit)."""
    _check_pausable(consumer)
    reason = reason.strip()
    with transaction.atomic():
        changed = change(consumer=consumer, actor=actor, reason=reason)
        if changed:
            pauses.audit(
                consumer, action, actor=actor, reason=reason, organization_id=organization_id
            )
    return changed


def _check_pausable(consumer: str) -> None:
    if ":" in consumer:  # a consumer that is data: its app vouches for the name
        return
    if consumer not in {c.name for c in registry.all()}:
        raise UnknownConsumerError(f"no registered consumer named {consumer!r}")
