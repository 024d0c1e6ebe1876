"""CRM write services (crm.services): each writes its records and its event in one transaction."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.utils import timezone

from core.models import AuditLog, Organization
from crm.identity import normalize_phone
from crm.models import (
    ConsentRecord,
    Contact,
    ContactIdentity,
    Conversation,
    Lead,
    Message,
    Order,
)
from crm.services import (
    ContactConflict,
    contact_block,
    contact_merge,
    contact_resolve,
    contact_unblock,
    send_message,
)
from eventbus.store.models import EventLog
from tests.support.factories import (
    ContactFactory,
    ConversationFactory,
    LeadFactory,
    MessageFactory,
    OrderFactory,
)

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


# Contacts: one door (contact_resolve), merge, block/unblock.


def test_contact_resolve_creates_once_and_emits_contact_created_with_ids_only(
    org: Organization,
) -> None:
    first, created = contact_resolve(
        organization_id=org.pk, phone="(11) 98765-4321", name="Maria", source="api"
    )
    again, created_again = contact_resolve(
        organization_id=org.pk, whatsapp_chat_id="551187654321@c.us", source="whatsapp"
    )
    assert (created, created_again, again.pk) == (True, False, first.pk)
    (event,) = EventLog.objects.filter(event_type="contact.created")
    assert event.payload == {"contact_id": str(first.pk), "source": "api"}
    assert (event.entity_id, first.phone) == (first.pk, "(11) 98765-4321")


def test_contact_resolve_rolls_back_with_its_caller(org: Organization) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        contact_resolve(organization_id=org.pk, email="ana@example.com", source="api")
        raise RuntimeError("the caller's transaction fails")
    assert not Contact.objects.exists()
    assert not ContactIdentity.objects.exists()
    assert not EventLog.objects.filter(event_type="contact.created").exists()


def test_contact_resolve_needs_an_identifier(org: Organization) -> None:
    with pytest.raises(ValueError, match="needs a phone"):
        contact_resolve(organization_id=org.pk, phone="12", name="x", source="api")
    assert not Contact.objects.exists()


@pytest.mark.parametrize(
    ("raw", "e164"),
    [
        ("+55 (11) 98765-4321", "+5511987654321"),
        ("11 8765-4321", "+5511987654321"),  # a mobile before the ninth digit
        ("551187654321", "+5511987654321"),
        ("(11) 3456-7890", "+551134567890"),  # a landline keeps 8 digits
        ("+1 415 555 0100", "+14155550100"),
        ("123", ""),
    ],
)
def test_phones_are_compared_in_e164_with_the_ninth_digit(raw: str, e164: str) -> None:
    assert normalize_phone(raw) == e164


def merged_pair(org: Organization) -> tuple[Contact, Contact]:
    whatsapp, _ = contact_resolve(
        organization_id=org.pk, whatsapp_chat_id="5511987654321@c.us", source="whatsapp"
    )
    shop, _ = contact_resolve(
        organization_id=org.pk,
        email="Maria.Souza@example.com",
        phone="+55 21 99999-0000",
        nuvemshop_customer="7:42",
        name="Maria Souza",
        source="nuvemshop",
    )
    conversation = ConversationFactory(organization=org, contact=whatsapp)
    MessageFactory(organization=org, conversation=conversation, body="oi")
    OrderFactory(organization=org, contact=shop, number="S-1")
    LeadFactory(organization=org, contact=shop, name="Maria Souza - bota")
    ConsentRecord.objects.create(
        organization=org,
        contact=shop,
        consent_type="marketing_whatsapp",
        granted=True,
        source="web_form",
        recorded_at=timezone.now(),
    )
    return whatsapp, shop


def test_merge_moves_everything_and_emits_ids_only(org: Organization) -> None:
    whatsapp, shop = merged_pair(org)
    into = contact_merge(source=shop, into=whatsapp, actor="user:ana")
    assert into.pk == whatsapp.pk
    assert (into.name, into.email) == ("Maria Souza", "Maria.Souza@example.com")
    for rows in (Order.objects, Lead.objects, ConsentRecord.objects, Conversation.objects):
        assert set(rows.values_list("contact_id", flat=True)) == {whatsapp.pk}
    kinds = set(ContactIdentity.objects.values_list("contact_id", "kind"))
    assert kinds == {(whatsapp.pk, k) for k in ("phone", "email", "nuvemshop")}
    shop.refresh_from_db()
    assert (shop.name, shop.phone, shop.email, shop.merged_into_id) == ("", "", "", whatsapp.pk)
    (event,) = EventLog.objects.filter(event_type="contact.merged")
    assert event.payload == {
        "from_contact_id": str(shop.pk),
        "into_contact_id": str(whatsapp.pk),
        "merged_fields": ["name", "email"],
    }
    audit = AuditLog.objects.get(action="crm.contact.merge")
    assert (audit.actor, audit.target_id) == ("user:ana", str(whatsapp.pk))
    # The shop's next order finds the surviving contact.
    found, created = contact_resolve(
        organization_id=org.pk, nuvemshop_customer="7:42", source="nuvemshop"
    )
    assert (found.pk, created) == (whatsapp.pk, False)


def test_merge_refusals_change_nothing(org: Organization, org_b: Organization) -> None:
    whatsapp, shop = merged_pair(org)
    with pytest.raises(ContactConflict, match="itself"):
        contact_merge(source=shop, into=shop, actor="t")
    with pytest.raises(ContactConflict, match="same organization"):
        contact_merge(source=ContactFactory(organization=org_b), into=shop, actor="t")
    contact_merge(source=shop, into=whatsapp, actor="t")
    with pytest.raises(ContactConflict, match="merged into"):
        contact_merge(source=shop, into=whatsapp, actor="t")
    assert EventLog.objects.filter(event_type="contact.merged").count() == 1


def test_block_and_unblock_are_audited(org: Organization) -> None:
    contact, _ = contact_resolve(organization_id=org.pk, email="a@example.com", source="api")
    contact_block(contact, actor="api_key:k", reason="customer_request")
    contact_block(contact, actor="api_key:k")  # already blocked: nothing more
    contact.refresh_from_db()
    assert (contact.blocked_at is not None, contact.blocked_reason) == (True, "customer_request")
    (event,) = EventLog.objects.filter(event_type="contact.blocked")
    assert event.payload == {"contact_id": str(contact.pk), "reason": "customer_request"}
    contact_unblock(contact, actor="api_key:k")
    contact.refresh_from_db()
    assert contact.blocked_at is None
    actions = list(AuditLog.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["crm.contact.block", "crm.contact.unblock"]
