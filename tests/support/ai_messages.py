"""Inbound messages for the AI tests: the CRM row and its `message.received` event, as the
WhatsApp app emits it (v1 of the seed: body + waha_message_id; v2: ids only)."""

from __future__ import annotations

import datetime as dt
import uuid

import eventbus
from crm.models import Conversation, Message
from eventbus import catalog
from eventbus.models import EventLog

# What the WhatsApp app declares for v2 (ids only); declared here too when it has not landed.
V2_REQUIRED = ["direction", "conversation_id", "contact_id", "message_id"]


def ensure_message_received_v2() -> None:
    """Declare message.received v2 unless the WhatsApp app already did."""
    try:
        catalog.schema_for("message.received", 2, dt.date.today())
    except eventbus.EventValidationError:
        catalog.declare(
            "message.received",
            version=2,
            required=V2_REQUIRED,
            description="whatsapp: an inbound or outbound message was recorded (ids only)",
        )


def receive(conversation: Conversation, text: str, *, version: int = 1) -> tuple[Message, EventLog]:
    """Record an inbound message and emit its `message.received` (payload of `version`)."""
    external_id = f"false_{conversation.external_chat_id}_{uuid.uuid4().hex[:16]}"
    message = Message.objects.create(
        organization_id=conversation.organization_id,
        conversation=conversation,
        direction=Message.Direction.INBOUND,
        body=text,
        external_id=external_id,
    )
    ids = {
        "direction": "inbound",
        "conversation_id": str(conversation.pk),
        "contact_id": str(conversation.contact_id),
    }
    if version == 1:
        payload = {**ids, "body": text, "waha_message_id": external_id}
        metadata = {"schema_version": 1}  # explicit: once v2 is declared it is the latest
    else:
        ensure_message_received_v2()
        payload = {
            **ids,
            "message_id": str(message.pk),
            "channel": conversation.channel,
            "waha_message_id": external_id,
        }
        metadata = {"schema_version": 2}
    event = eventbus.emit(
        "message.received",
        organization=conversation.organization_id,
        entity_kind="message",
        entity_id=message.pk,
        payload=payload,
        metadata=metadata,
    )
    return message, event


def ai_replies(message: Message) -> list[Message]:
    return list(Message.objects.filter(reply_to=message, sender=Message.Sender.AI))
