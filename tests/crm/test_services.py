"""CRM write services (crm.services): each writes its records and its event in one transaction."""

from __future__ import annotations

import pytest
from django.db import transaction

from crm.models import Message
from crm.services import send_message
from eventbus.models import EventLog
from tests.support.factories import ConversationFactory, MessageFactory

pytestmark = pytest.mark.django_db


def test_send_message_queues_the_message_and_emits_ids_only() -> None:
    conversation = ConversationFactory()
    message = send_message(conversation=conversation, body="Seu pedido saiu para entrega")
    assert (message.direction, message.status, message.sender) == ("outbound", "queued", "agent")
    event = EventLog.objects.get(event_type="message.queued")
    assert event.entity_id == message.id
    assert event.payload == {
        "message_id": str(message.id),
        "conversation_id": str(conversation.pk),
        "contact_id": str(conversation.contact_id),
        "channel": "whatsapp",
        "sender": "agent",
    }  # no body, no phone: webhooks may carry this event


def test_a_failed_transaction_leaves_neither_message_nor_event() -> None:
    conversation = ConversationFactory()
    with pytest.raises(RuntimeError), transaction.atomic():
        send_message(conversation=conversation, body="oi")
        raise RuntimeError("the caller's transaction fails")
    assert not Message.objects.exists()
    assert not EventLog.objects.filter(event_type="message.queued").exists()


def test_the_ai_replies_once_to_an_inbound_message() -> None:
    inbound = MessageFactory(direction="inbound")
    first = send_message(
        conversation=inbound.conversation, body="Olá!", sender="ai", reply_to=inbound
    )
    again = send_message(
        conversation=inbound.conversation, body="Olá de novo", sender="ai", reply_to=inbound
    )
    assert again.pk == first.pk
    assert EventLog.objects.filter(event_type="message.queued").count() == 1


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"body": "  "}, "needs a body"),
        ({"body": "oi", "sender": "contact"}, "sender must be"),
        ({"body": "oi", "sender": "robot"}, "sender must be"),
    ],
)
def test_bad_input_is_refused_and_writes_nothing(kwargs: dict[str, str], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        send_message(conversation=ConversationFactory(), **kwargs)  # type: ignore[arg-type]
    assert not Message.objects.exists()


def test_reply_to_must_be_in_the_same_conversation() -> None:
    other = MessageFactory(direction="inbound")
    with pytest.raises(ValueError, match="same conversation"):
        send_message(conversation=ConversationFactory(), body="oi", reply_to=other)
