"""Operator actions on deliveries (admin, API): each one moves state and writes the audit trail."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction

from deskcomm import audit
from eventbus import claim as claims


def deliveries_reprocess(*, delivery_ids: Sequence[int], actor: str, reason: str = "") -> int:
    """Dead (or done) deliveries back to pending, attempts 0, due now; only those consumers re-run.

    Returns how many moved; the others were not dead/done (already pending, running, discarded).
    """
    with transaction.atomic():
        moved = claims.reprocess(delivery_ids)
        _audit(moved, actor=actor, action="delivery.reprocess", reason=reason)
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
