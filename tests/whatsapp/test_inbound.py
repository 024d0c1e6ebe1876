"""Opting back in: a contact blocked by STOP who writes a START keyword is unblocked (audited);
any other message keeps the block."""

from __future__ import annotations

import pytest

from core.models import AuditLog, Organization
from crm.models import Contact
from tests.support.waha import inbound_message
from whatsapp.inbound import receive
from whatsapp.models import WahaSession

pytestmark = pytest.mark.django_db

CHAT = "5511987654321@c.us"


def test_start_unblocks_a_contact_blocked_by_stop(org: Organization, settings: object) -> None:
    session = WahaSession.objects.create(organization=org, name="default", status="WORKING")
    assert receive(session, inbound_message(CHAT, "SAIR")) == "stored"
    contact = Contact.objects.get(organization=org)
    assert contact.blocked_at is not None
    receive(session, inbound_message(CHAT, "oi de novo"))
    contact.refresh_from_db()
    assert contact.blocked_at is not None  # only a start keyword opts back in
    receive(session, inbound_message(CHAT, "Start!"))
    contact.refresh_from_db()
    assert (contact.blocked_at, contact.blocked_reason) == (None, "")
    (row,) = AuditLog.objects.filter(action="contact.opted_in")
    assert row.details["keyword"] == "start"
    settings.CRM = {"START_KEYWORDS": ["quero voltar"]}  # type: ignore[attr-defined]
    receive(session, inbound_message(CHAT, "parar"))
    receive(session, inbound_message(CHAT, "Quero voltar"))
    contact.refresh_from_db()
    assert contact.blocked_at is None
