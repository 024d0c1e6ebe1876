"""LGPD over WhatsApp records: a redacted contact's WhatsApp messages (inbound through the WAHA
webhook, outbound through the send worker) keep no phone number, name or identifier, and the
export shows them."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.test import Client
from django.utils import timezone

from core.lgpd_subject import Subject
from crm import personal_data as categories
from crm.models import Contact, Message
from crm.services import send_message
from eventbus.dispatch.worker import Worker, WorkerOptions
from lgpd import services
from lgpd.handlers import EXPORT_CONSUMER, REDACT_CONSUMER
from tests.support.traces import traces
from tests.support.waha import FakeWaha, inbound_message, signed_webhook
from tests.whatsapp.conftest import HMAC_SECRET
from whatsapp.conf import SEND_CONSUMER
from whatsapp.models import WahaSession

pytestmark = pytest.mark.django_db(transaction=True)

CHAT = "5511955554444@c.us"
NEEDLES = ("5511955554444", "Beatriz Carvalho", "Carvalho", "beatriz@example.com")


def run(*consumers: str) -> None:
    worker = Worker(WorkerOptions(consumers=list(consumers), listen=False, startup_jitter=0))
    while worker.run_once():
        pass
    worker.close()


def test_a_redacted_contact_keeps_no_phone_name_or_identifier_in_its_whatsapp_messages(
    session: WahaSession, waha: FakeWaha
) -> None:
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        body, headers = signed_webhook(
            "loja",
            "message",
            inbound_message(
                CHAT, "Oi, sou a Beatriz Carvalho, beatriz@example.com", name="Beatriz Carvalho"
            ),
            secret=HMAC_SECRET,
        )
        client = Client()
        extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
        answer = client.post(
            "/api/webhooks/waha/loja", data=body, content_type="application/json", **extra
        )
        assert answer.status_code == 200
        contact = Contact.objects.get()
        outbound = send_message(conversation=contact.conversations.get(), body="Olá Beatriz!")
        run(SEND_CONSUMER)
        outbound.refresh_from_db()
        assert outbound.status == "sent" and CHAT in outbound.external_id
        before = traces(NEEDLES)
        assert "crm.Message.external_id ~ 5511955554444" in before
        assert "crm.Message.body ~ Carvalho" in before

        exported = categories.MessageCategory().export(Subject.of(contact))
        assert {row["external_id"] for row in exported} == {
            m.external_id for m in Message.objects.all()
        }

        services.data_request_create(
            organization_id=contact.organization_id,
            contact_id=contact.pk,
            kind="redact",
            channel="command",
            actor="test",
        )
        clock.shift(dt.timedelta(days=15, seconds=1))
        run(EXPORT_CONSUMER, REDACT_CONSUMER)

    assert traces(NEEDLES) == []
    inbound = Message.objects.get(direction="inbound")
    assert "Beatriz" not in inbound.body and inbound.external_id == ""
    assert Message.objects.get(pk=outbound.pk).external_id == ""
    contact.refresh_from_db()
    assert (contact.name, contact.phone) == ("", "")
