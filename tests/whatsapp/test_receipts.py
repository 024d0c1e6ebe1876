"""Delivery and read receipts (`message.ack`) over real HTTP for each WAHA engine's documented
shapes, receipts that arrive before the send's answer, and failed sends in the DLQ."""

from __future__ import annotations

from typing import Any

import pytest

from crm.models import Conversation, Message
from crm.services import send_message
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.operations.services import deliveries_reprocess
from eventbus.store.models import DeadLetter, Delivery, EventLog
from eventbus.store.registry import registry
from tests.support.waha import FakeWaha, Misbehaviour, ack_payload, inbound_message
from tests.whatsapp.conftest import API_KEY
from tests.whatsapp.test_views import CHAT, deliver
from whatsapp.conf import SEND_CONSUMER
from whatsapp.models import PendingAck, WahaSession

pytestmark = pytest.mark.django_db(transaction=True)


def drain_once() -> None:
    Worker(
        WorkerOptions(consumers=[SEND_CONSUMER], once=True, listen=False, startup_jitter=0)
    ).run()


def sent_message(base: str, waha: FakeWaha) -> tuple[Message, dict[str, Any]]:
    """A contact writes, we answer; the message as stored, and as WAHA lists it."""
    deliver(base, "message", inbound_message(CHAT, "Oi"))
    message = send_message(conversation=Conversation.objects.get(), body="Olá, Maria!")
    drain_once()
    message.refresh_from_db()
    assert message.status == "sent"
    (listed,) = waha.chats[CHAT]
    return message, listed


@pytest.mark.parametrize("waha_engine", ["WEBJS", "NOWEB", "GOWS"])
def test_receipts_mark_the_message_delivered_then_read_on_every_engine(
    live_server: object, session: WahaSession, waha: FakeWaha, waha_engine: str
) -> None:
    base = live_server.url  # type: ignore[attr-defined]
    message, listed = sent_message(base, waha)
    # One spelling whatever the engine answered (NOWEB: "...@s.whatsapp.net" in its key).
    assert message.external_id == listed["id"] and "@c.us_" in message.external_id
    assert deliver(base, "message.ack", ack_payload(listed["id"], 2))[1] == {"result": "ack"}
    message.refresh_from_db()
    assert message.status == "delivered"
    assert deliver(base, "message.ack", ack_payload(listed["id"], 3))[1] == {"result": "ack"}
    message.refresh_from_db()
    assert message.status == "read"
    assert EventLog.objects.filter(event_type="message.delivered").count() == 1
    assert EventLog.objects.filter(event_type="message.read").count() == 1


def test_a_receipt_addressed_to_the_contacts_lid_matches_by_whatsapps_key(
    live_server: object, session: WahaSession, waha: FakeWaha
) -> None:
    base = live_server.url  # type: ignore[attr-defined]
    message, listed = sent_message(base, waha)
    receipt = ack_payload(listed["id"], 3, chat_id="123456789012345@lid")
    assert deliver(base, "message.ack", receipt)[1] == {"result": "ack"}
    message.refresh_from_db()
    assert message.status == "read" and message.delivered_at is not None


def test_a_receipt_before_the_sends_answer_is_kept_and_applied_when_the_id_is_stored(
    live_server: object, session: WahaSession, waha: FakeWaha
) -> None:
    base = live_server.url  # type: ignore[attr-defined]
    deliver(base, "message", inbound_message(CHAT, "Oi"))
    answers: list[dict[str, object]] = []

    def receipt_first(stored: dict[str, Any]) -> None:  # WAHA posts the ack, then answers
        answers.append(deliver(base, "message.ack", ack_payload(stored["id"], 2))[1])

    waha.fail_next(Misbehaviour(before_answer=receipt_first))
    message = send_message(conversation=Conversation.objects.get(), body="Olá, Maria!")
    drain_once()
    assert answers == [{"result": "ack_pending"}]
    message.refresh_from_db()
    assert message.status == "delivered" and message.delivered_at is not None
    assert EventLog.objects.filter(event_type="message.delivered").count() == 1
    assert not PendingAck.objects.exists()  # applied, then forgotten


def test_a_receipt_for_no_message_of_ours_is_kept_not_applied(
    live_server: object, session: WahaSession
) -> None:
    receipt = ack_payload(f"true_{CHAT}_3EB0AAAABBBBCCCCDDDD", 2)
    assert deliver(live_server.url, "message.ack", receipt)[1] == {"result": "ack_pending"}  # type: ignore[attr-defined]
    assert PendingAck.objects.get().message_key == "3EB0AAAABBBBCCCCDDDD"


def test_the_send_consumer_uses_the_bus_retry_table() -> None:
    assert registry.get(SEND_CONSUMER).effective_max_attempts() == 8


def test_a_permanent_failure_dead_letters_the_delivery_and_reprocess_sends_it(
    session: WahaSession, waha: FakeWaha, conversation: Conversation
) -> None:
    session.api_key = "a-wrong-key"  # pragma: allowlist secret
    session.save()
    message = send_message(conversation=conversation, body="Oi")
    drain_once()
    message.refresh_from_db()
    assert message.status == "failed" and message.error_code == "http_401"
    dead = DeadLetter.objects.get(consumer=SEND_CONSUMER)
    assert dead.status == "dead" and "http_401" in dead.last_error
    assert EventLog.objects.filter(event_type="message.failed").count() == 1
    assert waha.chats == {}  # refused at the door
    session.api_key = API_KEY  # the operator fixes the key, then reprocesses from the DLQ
    session.save()
    assert deliveries_reprocess(delivery_ids=[dead.pk], actor="ops") == 1
    drain_once()
    message.refresh_from_db()
    assert message.status == "sent" and len(waha.chats[conversation.external_chat_id]) == 1
    assert Delivery.objects.get(consumer=SEND_CONSUMER).status == "done"
