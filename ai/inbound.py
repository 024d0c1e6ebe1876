"""The inbound message a `message.received` event is about, for both payload versions.

v1 (seed 000 §3) carries `waha_message_id` and `body`; v2 (the WhatsApp app) carries ids only,
`message_id` among them. The text is always read from the `crm.Message` row when one is found
(v2: by id; v1: by the channel's id, `Message.external_id`, within the organization), so a body
in a payload is only a fallback for a v1 event whose row does not exist.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from crm.models import Conversation, Message


@dataclass(frozen=True)
class Inbound:
    conversation: Conversation
    message: Message | None  # None: a v1 event without its row (no reply_to possible)
    text: str


def resolve_inbound(organization_id: uuid.UUID, payload: dict[str, Any]) -> Inbound | None:
    """The conversation, message row and text of an inbound event; None when not inbound or gone."""
    if payload.get("direction") != Message.Direction.INBOUND:
        return None
    message = _message(organization_id, payload)
    conversation_id = message.conversation_id if message else payload.get("conversation_id")
    conversation = (
        Conversation.objects.filter(pk=conversation_id, organization_id=organization_id)
        .select_related("contact")
        .first()
        if conversation_id
        else None
    )
    if conversation is None:
        return None
    text = message.body if message is not None else str(payload.get("body") or "")
    return Inbound(conversation, message, text)


def _message(organization_id: uuid.UUID, payload: dict[str, Any]) -> Message | None:
    scoped = Message.objects.filter(organization_id=organization_id)
    if payload.get("message_id"):
        return scoped.filter(pk=payload["message_id"]).first()
    external = payload.get("waha_message_id") or payload.get("external_id")
    if external:
        return scoped.filter(external_id=external).first()
    return None
