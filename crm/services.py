"""CRM write services: confirming an order (seed 004) emits its event in the same transaction."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

import eventbus
from core.models import Organization
from crm.models import Order


def order_confirm(
    *, organization: Organization, number: str, total_cents: int, currency: str = "BRL"
) -> Order:
    """Confirm order `number` and emit `order.confirmed` in the same transaction (seed 004).

    Either the order and its event commit together or neither does. Confirming an order that is
    already confirmed returns it unchanged (no second event).
    """
    if not number or not number.strip():
        raise ValueError("an order number is required")
    if total_cents < 0:
        raise ValueError(f"total_cents must not be negative, got {total_cents}")
    with transaction.atomic():
        order, _ = Order.objects.select_for_update().get_or_create(
            organization=organization,
            number=number.strip(),
            defaults={"total_cents": total_cents, "currency": currency},
        )
        if order.status == Order.Status.CONFIRMED:
            return order
        order.status = Order.Status.CONFIRMED
        order.confirmed_at = timezone.now()
        order.save(update_fields=["status", "confirmed_at"])
        eventbus.emit(
            "order.confirmed",
            organization=organization,
            entity_kind="order",
            entity_id=order.id,
            payload={
                "order_id": str(order.id),
                "number": order.number,
                "total_cents": order.total_cents,
                "currency": order.currency,
                "confirmed_at": order.confirmed_at.isoformat(),
            },
            idempotency_key=f"order.confirmed:{order.id}",
        )
    return order
