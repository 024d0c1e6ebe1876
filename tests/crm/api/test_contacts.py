"""`/api/v1/contacts...` (crm.api.contacts): the key's organization only, the API's error shape,
cursor pages, and every write through the CRM's services (events, audit)."""

from __future__ import annotations

import uuid

import pytest

from core.models import AuditLog, Organization
from crm.models import Contact, Order
from crm.services import contact_resolve
from eventbus.store.models import EventLog
from tests.support.api import api_client, error_of
from tests.support.factories import OrderFactory

pytestmark = pytest.mark.django_db

WRITE = "contacts:write"
READ = "contacts:read"


def resolved(org: Organization, **ids: str) -> Contact:
    contact, _ = contact_resolve(organization_id=org.pk, source="test", **ids)
    return contact


def test_create_list_retrieve_update(org: Organization) -> None:
    client = api_client(org, WRITE)
    created = client.post(
        "/api/v1/contacts",
        {"name": "Maria", "phone": "11987654321", "email": "maria@example.com"},
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["identities"] == [
        {"kind": "email", "value": "maria@example.com"},
        {"kind": "phone", "value": "+5511987654321"},
    ]
    (event,) = EventLog.objects.filter(event_type="contact.created")
    assert event.payload == {"contact_id": body["id"], "source": "api"}
    assert AuditLog.objects.filter(action="crm.contact.create", target_id=body["id"]).exists()

    reader = api_client(org, READ)
    found = reader.get("/api/v1/contacts", {"phone": "+55 11 8765-4321"})  # the legacy form
    assert [c["id"] for c in found.json()["results"]] == [body["id"]]
    assert reader.get(f"/api/v1/contacts/{body['id']}").json()["name"] == "Maria"
    changed = client.patch(f"/api/v1/contacts/{body['id']}", {"name": "Maria Souza"}, format="json")
    assert changed.status_code == 200 and changed.json()["name"] == "Maria Souza"
    assert reader.patch(f"/api/v1/contacts/{body['id']}", {}, format="json").status_code == 403


def test_pages_follow_the_cursor(org: Organization) -> None:
    for n in range(3):
        resolved(org, email=f"c{n}@example.com")
    client = api_client(org, READ)
    first = client.get("/api/v1/contacts", {"limit": 2}).json()
    assert len(first["results"]) == 2 and first["next_cursor"]
    second = client.get("/api/v1/contacts", {"limit": 2, "cursor": first["next_cursor"]}).json()
    assert len(second["results"]) == 1 and second["next"] is None
    seen = {c["id"] for c in first["results"] + second["results"]}
    assert seen == {str(pk) for pk in Contact.objects.values_list("pk", flat=True)}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "Sem contato"}, "phone"),
        ({"phone": "12"}, "phone"),
        ({"email": "not an e-mail"}, "email"),
        ({"phone": "11987654321", "organization": "x"}, "organization"),
    ],
)
def test_bad_input_is_a_400_and_writes_nothing(
    org: Organization, body: dict[str, str], field: str
) -> None:
    response = api_client(org, WRITE).post("/api/v1/contacts", body, format="json")
    assert field in error_of(response, 400, "validation_error")["fields"]
    assert not Contact.objects.exists()


def test_a_phone_another_contact_holds_is_a_409_naming_it(org: Organization) -> None:
    holder = resolved(org, phone="+5511987654321")
    response = api_client(org, WRITE).post(
        "/api/v1/contacts", {"phone": "(11) 8765-4321"}, format="json"
    )
    assert str(holder.pk) in error_of(response, 409, "invalid_state")["message"]
    assert Contact.objects.count() == 1


def test_merge_moves_the_records_and_answers_the_survivor(org: Organization) -> None:
    into = resolved(org, whatsapp_chat_id="5511987654321@c.us")
    source = resolved(org, email="maria@example.com", name="Maria")
    OrderFactory(organization=org, contact=source, number="A-1")
    client = api_client(org, WRITE)
    response = client.post(
        f"/api/v1/contacts/{into.pk}/merge", {"from_contact_id": str(source.pk)}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["email"] == "maria@example.com"
    assert Order.objects.get().contact_id == into.pk
    assert client.get(f"/api/v1/contacts/{source.pk}").json()["merged_into"] == str(into.pk)
    again = client.post(
        f"/api/v1/contacts/{into.pk}/merge", {"from_contact_id": str(source.pk)}, format="json"
    )
    error_of(again, 409, "invalid_state")
    itself = client.post(
        f"/api/v1/contacts/{into.pk}/merge", {"from_contact_id": str(into.pk)}, format="json"
    )
    assert "from_contact_id" in error_of(itself, 400, "validation_error")["fields"]
    assert EventLog.objects.filter(event_type="contact.merged").count() == 1


def test_block_and_unblock(org: Organization) -> None:
    contact = resolved(org, email="a@example.com")
    client = api_client(org, WRITE)
    blocked = client.post(f"/api/v1/contacts/{contact.pk}/block", {}, format="json")
    assert blocked.status_code == 200 and blocked.json()["blocked_reason"] == "operator"
    assert EventLog.objects.filter(event_type="contact.blocked").count() == 1
    unblocked = client.post(f"/api/v1/contacts/{contact.pk}/unblock")
    assert unblocked.status_code == 200 and unblocked.json()["blocked_at"] is None
    actions = set(AuditLog.objects.values_list("action", flat=True))
    assert {"crm.contact.block", "crm.contact.unblock"} <= actions


def test_another_organizations_contacts_are_404s(org: Organization, org_b: Organization) -> None:
    theirs = resolved(org, email="a@example.com")
    mine = resolved(org_b, email="b@example.com")
    client = api_client(org_b, WRITE)
    assert client.get("/api/v1/contacts").json()["results"][0]["id"] == str(mine.pk)
    for response in (
        client.get(f"/api/v1/contacts/{theirs.pk}"),
        client.patch(f"/api/v1/contacts/{theirs.pk}", {"name": "x"}, format="json"),
        client.post(f"/api/v1/contacts/{theirs.pk}/block", {}, format="json"),
        client.post(f"/api/v1/contacts/{theirs.pk}/unblock"),
        client.post(
            f"/api/v1/contacts/{mine.pk}/merge", {"from_contact_id": str(theirs.pk)}, format="json"
        ),
        client.post(
            f"/api/v1/contacts/{theirs.pk}/merge", {"from_contact_id": str(mine.pk)}, format="json"
        ),
        client.get(f"/api/v1/contacts/{uuid.uuid4()}"),
    ):
        error_of(response, 404, "not_found")
    theirs.refresh_from_db()
    assert (theirs.name, theirs.blocked_at, theirs.merged_into_id) == ("", None, None)
    assert not EventLog.objects.filter(event_type__in=["contact.merged", "contact.blocked"])
