"""CRM write services: each writes its records and emits its event in one transaction.

- `order_confirm`: an order and `order.confirmed` (seed 004).
- `send_message`: an outbound message (`queued`) and `message.queued`, which the channel's send
  worker consumes (seed 000 §6.1); the worker, not this function, checks the send blockers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

import eventbus
from core.models import Organization
from crm.models import Conversation, Message, Order


def order_confirm(
    *,
    organization: Organization,
    number: str,
    total_cents: int,
    currency: str = "BRL",
    items: Sequence[Mapping[str, Any]] = (),
    status: Mapping[str, str] | None = None,
    also_emit: Sequence[Mapping[str, Any]] = (),
    fields: Mapping[str, Any] | None = None,
) -> Order:
    """Confirm order `number` and emit `order.confirmed` in the same transaction (seed 004).

    Either the order and its events commit together or neither does. Confirming an order that is
    already confirmed returns it unchanged (no second event). `order.confirmed` is a fat event:
    totals, external codes and items, so a consumer need not read the order back.
    `items`: `[{"sku", "name", "qty", "unit_cents"}]`. `status`: `status_tag`, `status_name`,
    `phase` to write on the order (an order.pre pipeline's set-status). `fields`: other Order
    fields (customer, shipping, Nuvemshop ids). `also_emit`: more events (`emit` keyword
    arguments: event_type, entity_kind, payload, idempotency_key...), written in the same
    transaction with `causation_id` = the `order.confirmed` event's id (and, for an
    `entity_kind` of "order" without an `entity_id`, this order's id).
    """
    if not number or not number.strip():
        raise ValueError("an order number is required")
    if total_cents < 0:
        raise ValueError(f"total_cents must not be negative, got {total_cents}")
    with transaction.atomic():
        order, _ = Order.objects.select_for_update().get_or_create(
            organization=organization,
            number=number.strip(),
            defaults={
                "total_cents": total_cents,
                "currency": currency,
                "items": [dict(item) for item in items],
                **dict(status or {}),
                **dict(fields or {}),
            },
        )
        if order.status == Order.Status.CONFIRMED:
            return order
        order.status = Order.Status.CONFIRMED
        order.confirmed_at = timezone.now()
        order.save(update_fields=["status", "confirmed_at"])
        confirmed = eventbus.emit(
            "order.confirmed",
            organization=organization,
            entity_kind="order",
            entity_id=order.id,
            payload=order_summary(order),
            idempotency_key=f"order.confirmed:{order.id}",
        )
        for extra in also_emit:
            about_order = {"entity_id": order.id} if extra.get("entity_kind") == "order" else {}
            eventbus.emit(
                **{"organization": organization, **about_order, **extra},
                causation_id=confirmed.id,
            )
    return order


def order_summary(order: Order) -> dict[str, Any]:
    """`order.confirmed`'s payload: ids, totals, external codes and items (no customer data)."""
    return {
        "order_id": str(order.id),
        "number": order.number,
        "total_cents": order.total_cents,
        "total_amount": f"{order.total_cents // 100}.{order.total_cents % 100:02d}",
        "currency": order.currency,
        "items": list(order.items),
        "ns_store_id": order.ns_store_id,
        "ns_order_id": order.ns_order_id,
        "status_tag": order.status_tag,
        "confirmed_at": order.confirmed_at.isoformat() if order.confirmed_at else None,
    }


def send_message(
    *,
    conversation: Conversation,
    body: str = "",
    media_urls: Sequence[str] = (),
    sender: str = Message.Sender.AGENT,
    reply_to: Message | None = None,
    is_template: bool = False,
) -> Message:
    """Queue an outbound message on `conversation` and emit `message.queued`, in one transaction.

    The event carries ids only (never the text or the phone number): the send worker reads the
    message row. With `sender="ai"` and `reply_to`, a second reply to the same inbound message is
    refused by the database (`message_one_ai_reply_uniq`) and the first one is returned.
    Raises ValueError for an empty message or a sender that is not a Message.Sender.
    """
    if not body.strip() and not media_urls:
        raise ValueError("a message needs a body or at least one media URL")
    if sender not in Message.Sender.values or sender == Message.Sender.CONTACT:
        raise ValueError(f"an outbound message's sender must be agent, ai or system: {sender!r}")
    if reply_to is not None and reply_to.conversation_id != conversation.pk:
        raise ValueError("reply_to must be a message of the same conversation")
    with transaction.atomic():
        if sender == Message.Sender.AI and reply_to is not None:
            existing = Message.objects.filter(reply_to=reply_to, sender=sender).first()
            if existing is not None:
                return existing
        message = Message.objects.create(
            organization_id=conversation.organization_id,
            conversation=conversation,
            direction=Message.Direction.OUTBOUND,
            status=Message.Status.QUEUED,
            sender=sender,
            body=body,
            media_urls=list(media_urls),
            reply_to=reply_to,
            is_template=is_template,
        )
        eventbus.emit(
            "message.queued",
            organization=conversation.organization_id,
            entity_kind="message",
            entity_id=message.id,
            payload={
                "message_id": str(message.id),
                "conversation_id": str(conversation.pk),
                "contact_id": str(conversation.contact_id),
                "channel": conversation.channel,
                "sender": sender,
            },
            idempotency_key=f"message.queued:{message.id}",
        )
    return message
