"""Senders WhatsApp addresses by a privacy id (`<n>@lid`, no phone number): stored, answered
at the lid, and given their number by sync-sessions through WAHA's lids API."""

from __future__ import annotations

import pytest

from crm.models import Conversation, Message
from crm.services import send_message
from eventbus.store.models import EventLog
from jobs.registry import job_run
from tests.support.waha import FakeWaha, inbound_message
from tests.whatsapp.test_receipts import drain_once
from tests.whatsapp.test_views import deliver
from whatsapp.models import WahaSession

pytestmark = pytest.mark.django_db(transaction=True)

LID = "215873459765321@lid"


def test_a_lid_sender_is_stored_answered_and_resolved_to_its_number(
    live_server: object, session: WahaSession, waha: FakeWaha
) -> None:
    base = live_server.url  # type: ignore[attr-defined]
    assert deliver(base, "message", inbound_message(LID, "Oi, meu pedido?"))[1] == {
        "result": "stored"
    }
    conversation = Conversation.objects.select_related("contact").get()
    assert conversation.external_chat_id == LID
    assert conversation.contact.phone == "" and conversation.contact.name == "Maria"
    (inbound,) = Message.objects.filter(direction="inbound")
    assert inbound.body == "Oi, meu pedido?"
    assert EventLog.objects.filter(event_type="message.received").count() == 1

    send_message(conversation=conversation, body="Já saiu!")  # the reply goes to the lid
    drain_once()
    (call,) = waha.sends()
    assert call.body is not None and call.body["chatId"] == LID
    assert Message.objects.get(direction="outbound").status == "sent"

    job_run(name="sync-sessions", trigger="test")  # WAHA does not know it yet: asked again
    conversation.contact.refresh_from_db()
    assert conversation.contact.phone == ""
    waha.lids[LID] = "5511966665555@c.us"
    job_run(name="sync-sessions", trigger="test")
    conversation.contact.refresh_from_db()
    assert conversation.contact.phone == "+5511966665555"
    lookups = [c.path for c in waha.calls if "/lids/" in c.path]
    assert lookups == [f"/api/loja/lids/{LID}"] * 2
