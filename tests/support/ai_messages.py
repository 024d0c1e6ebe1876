"""Inbound messages for the AI tests: the CRM row and its `message.received` event, as the
WhatsApp app emits it (v1 of the seed: body + waha_message_id; v2: ids only)."""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid

import time_machine

import eventbus
from crm.models import Conversation, Message
from eventbus.store.models import EventLog

# v1 (the seed's, with the text) was superseded on this day and stays emittable for the catalog's
# support window after it: v1 events are emitted as of this moment, so the tests keep working
# after the window (a stored v1 event, e.g. a dead letter, is what the workers must still read).
V1_EMITTED_AT = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def receive(conversation: Conversation, text: str, *, version: int = 2) -> tuple[Message, EventLog]:
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
        payload = {
            **ids,
            "message_id": str(message.pk),
            "channel": conversation.channel,
            "waha_message_id": external_id,
        }
        metadata = {"schema_version": 2}
    with time_machine.travel(V1_EMITTED_AT) if version == 1 else contextlib.nullcontext():
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
