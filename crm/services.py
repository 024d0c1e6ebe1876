"""CRM write services: each writes its records and emits its event in one transaction.

- `order_confirm`: an order and `order.confirmed` (seed 004).
- `send_message`: an outbound message (`queued`) and `message.queued`, which the channel's send
  worker consumes (seed 000 §6.1); the worker, not this function, checks the send blockers.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction
from django.utils import timezone

import eventbus
from core.models import Organization
from crm.models import Conversation, Message, Order


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
