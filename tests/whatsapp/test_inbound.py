"""whatsapp.inbound's first messages: one contact and one conversation per person, whatever the
chat id's form and however many first messages arrive at once (crm.services.contact_resolve).
Opting back in: a contact blocked by STOP who writes a START keyword is unblocked (audited);
any other message keeps the block."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from core.models import AuditLog, Organization
from crm.models import Contact, ContactIdentity, Conversation, Message
from eventbus.store.models import EventLog
from tests.support.factories import ContactFactory
from tests.support.waha import inbound_message
from whatsapp import inbound
from whatsapp.inbound import receive
from whatsapp.models import WahaSession

CHAT = "5511977776666@c.us"


def waha_session(org: Organization) -> WahaSession:
    return WahaSession.objects.create(
        organization=org, name="loja", base_url="http://127.0.0.1:9", status="WORKING"
    )


@pytest.mark.django_db(transaction=True)
def test_five_concurrent_first_messages_leave_one_contact_and_one_conversation(
    org: Organization,
) -> None:
    session = waha_session(org)
    senders = 5
    start = threading.Barrier(senders)
    results: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def first_message(n: int) -> None:
        try:
            start.wait(timeout=60)
            result = inbound.receive(session, inbound_message(CHAT, f"oi {n}"))
            with lock:
                results.append(result)
        except BaseException as exc:  # reported below, not lost in the thread
            with lock:
                errors.append(exc)
        finally:
            connection.close()  # each thread had its own connection

    threads = [threading.Thread(target=first_message, args=(n,)) for n in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert results == ["stored"] * senders
    (contact,) = Contact.objects.all()
    (conversation,) = Conversation.objects.all()
    assert conversation.contact_id == contact.pk
    assert Message.objects.filter(conversation=conversation).count() == senders
    assert EventLog.objects.filter(event_type="contact.created").count() == 1
    assert EventLog.objects.filter(event_type="conversation.opened").count() == 1
    assert EventLog.objects.filter(event_type="message.received").count() == senders


@pytest.mark.django_db
def test_the_legacy_eight_digit_chat_id_is_the_same_person(org: Organization) -> None:
    session = waha_session(org)
    assert inbound.receive(session, inbound_message("5511987654321@c.us", "oi")) == "stored"
    assert inbound.receive(session, inbound_message("551187654321@c.us", "de novo")) == "stored"
    (contact,) = Contact.objects.all()
    assert contact.phone == "+5511987654321"
    assert Conversation.objects.count() == 1
    assert Message.objects.count() == 2


@pytest.mark.django_db
def test_a_first_message_finds_the_contact_the_shop_created(org: Organization) -> None:
    from crm.services import contact_resolve

    shop, _ = contact_resolve(
        organization_id=org.pk,
        email="maria@example.com",
        phone="(11) 8765-4321",  # the legacy form of a mobile
        nuvemshop_customer="7:42",
        source="nuvemshop",
    )
    assert inbound.receive(waha_session(org), inbound_message("5511987654321@c.us", "oi")) == (
        "stored"
    )
    assert Contact.objects.get() == shop
    assert Conversation.objects.get().contact == shop


@pytest.mark.django_db
def test_a_lid_sender_is_one_contact_by_its_lid(org: Organization) -> None:
    session = waha_session(org)
    lid = "215873459765321@lid"
    inbound.receive(session, inbound_message(lid, "oi"))
    inbound.receive(session, inbound_message(lid, "oi de novo"))
    (contact,) = Contact.objects.all()
    assert contact.phone == ""
    assert list(ContactIdentity.objects.values_list("kind", "value")) == [("whatsapp_lid", lid)]


@pytest.mark.django_db
def test_another_organizations_contact_is_never_matched(
    org: Organization, org_b: Organization
) -> None:
    other = ContactFactory(organization=org_b, phone="+5511977776666")
    inbound.receive(waha_session(org), inbound_message(CHAT, "oi"))
    mine = Contact.objects.exclude(pk=other.pk).get()
    assert mine.organization_id == org.pk


@pytest.mark.django_db
def test_a_contact_written_before_identities_is_found_by_its_phone(org: Organization) -> None:
    older = ContactFactory(organization=org, phone="(11) 97777-6666")  # no identity rows
    inbound.receive(waha_session(org), inbound_message(CHAT, "oi"))
    assert Contact.objects.get() == older
    assert ContactIdentity.objects.get().contact == older  # its phone key, claimed now


START_CHAT = "5511987654321@c.us"


@pytest.mark.django_db
def test_start_unblocks_a_contact_blocked_by_stop(org: Organization, settings: object) -> None:
    session = WahaSession.objects.create(organization=org, name="default", status="WORKING")
    assert receive(session, inbound_message(START_CHAT, "SAIR")) == "stored"
    contact = Contact.objects.get(organization=org)
    assert contact.blocked_at is not None
    receive(session, inbound_message(START_CHAT, "oi de novo"))
    contact.refresh_from_db()
    assert contact.blocked_at is not None  # only a start keyword opts back in
    receive(session, inbound_message(START_CHAT, "Start!"))
    contact.refresh_from_db()
    assert (contact.blocked_at, contact.blocked_reason) == (None, "")
    (row,) = AuditLog.objects.filter(action="contact.opted_in")
    assert row.details["keyword"] == "start"
    settings.CRM = {"START_KEYWORDS": ["quero voltar"]}  # type: ignore[attr-defined]
    receive(session, inbound_message(START_CHAT, "parar"))
    receive(session, inbound_message(START_CHAT, "Quero voltar"))
    contact.refresh_from_db()
    assert contact.blocked_at is None
