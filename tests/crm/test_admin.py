"""The contacts admin (crm.admin): merge (a confirmation page picks the survivor), block and
unblock through the CRM's services, audited as the admin user; read-only without the change
permission."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from core.models import AuditLog, Organization
from crm.models import Contact, Order
from crm.services import contact_resolve
from eventbus.store.models import EventLog
from tests.support.admin import staff
from tests.support.factories import OrderFactory

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/crm/contact/"


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def act(client: Client, action: str, *contacts: Contact, **extra: str) -> str:
    data = {"action": action, "_selected_action": [str(c.pk) for c in contacts], **extra}
    response = client.post(CHANGELIST, data, follow=True)
    assert response.status_code == 200
    return response.content.decode()


def two(org: Organization) -> tuple[Contact, Contact]:
    first, _ = contact_resolve(
        organization_id=org.pk, whatsapp_chat_id="5511987654321@c.us", source="whatsapp"
    )
    second, _ = contact_resolve(
        organization_id=org.pk, email="maria@example.com", name="Maria", source="nuvemshop"
    )
    return first, second


def test_merge_asks_which_contact_to_keep_then_merges(org: Organization) -> None:
    first, second = two(org)
    OrderFactory(organization=org, contact=second, number="A-1")
    client = logged_in(staff("ana", "crm.view_contact", "crm.change_contact"))
    page = act(client, "merge_selected", first, second)
    assert "Keep this contact" in page and "Yes, merge" in page
    assert not EventLog.objects.filter(event_type="contact.merged").exists()
    done = act(client, "merge_selected", first, second, confirm="yes", into=str(first.pk))
    assert "Merged 1 contact(s)" in done
    assert Order.objects.get().contact_id == first.pk
    second.refresh_from_db()
    assert second.merged_into_id == first.pk
    audit = AuditLog.objects.get(action="crm.contact.merge")
    assert audit.actor == "user:ana"
    detail = client.get(f"{CHANGELIST}{first.pk}/change/").content.decode()
    assert "maria@example.com" in detail and "+5511987654321" in detail  # its identities


def test_merge_refuses_contacts_of_two_organizations(
    org: Organization, org_b: Organization
) -> None:
    mine, _ = contact_resolve(organization_id=org.pk, email="a@example.com", source="t")
    theirs, _ = contact_resolve(organization_id=org_b.pk, email="b@example.com", source="t")
    client = logged_in(staff("ana", "crm.view_contact", "crm.change_contact"))
    page = act(client, "merge_selected", mine, theirs, confirm="yes", into=str(mine.pk))
    assert "of one organization" in page
    assert not EventLog.objects.filter(event_type="contact.merged").exists()


def test_block_and_unblock(org: Organization) -> None:
    contact, _ = contact_resolve(organization_id=org.pk, email="a@example.com", source="t")
    client = logged_in(staff("ana", "crm.view_contact", "crm.change_contact"))
    assert "Blocked 1 contact(s)" in act(client, "block_selected", contact)
    contact.refresh_from_db()
    assert contact.blocked_at is not None
    assert "blocked (operator)" in client.get(CHANGELIST).content.decode()
    assert "Unblocked 1 contact(s)" in act(client, "unblock_selected", contact)
    contact.refresh_from_db()
    assert contact.blocked_at is None
    actions = list(AuditLog.objects.order_by("id").values_list("action", "actor"))
    assert actions == [("crm.contact.block", "user:ana"), ("crm.contact.unblock", "user:ana")]


def test_without_the_change_permission_there_is_no_action(org: Organization) -> None:
    contact, _ = contact_resolve(organization_id=org.pk, email="a@example.com", source="t")
    client = logged_in(staff("viewer", "crm.view_contact"))
    page = client.get(CHANGELIST).content.decode()
    assert "merge_selected" not in page and "block_selected" not in page
    act(client, "block_selected", contact)
    contact.refresh_from_db()
    assert contact.blocked_at is None
