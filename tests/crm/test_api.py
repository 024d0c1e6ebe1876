"""The CRM API (crm/api): leads, lead activities and sending a message to a contact, each scoped
to the API key's organization, each write with its event in the same transaction."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from core.models import Organization
from crm.models import Contact, Conversation, Lead, LeadActivity, Message
from eventbus.store.models import EventLog
from lgpd import services as lgpd_services
from tests.support.admin import staff
from tests.support.api import api_client, error_of, snapshot
from tests.support.factories import ContactFactory, ConversationFactory, LeadFactory
from tests.support.receiver import Receiver
from tests.webhooks.conftest import Subscribe, loopback_ok, run_worker, subscribe

# The webhook fixtures, for the lifecycle test.
__all__ = ["loopback_ok", "subscribe"]

pytestmark = pytest.mark.django_db

LEADS = "/api/v1/leads"
ALL_LEAD_SCOPES = ("leads:read", "leads:write", "messages:send")


def lead_url(lead: Lead | str, tail: str = "") -> str:
    ident = lead.pk if isinstance(lead, Lead) else lead
    return f"{LEADS}/{ident}{tail}"


def messages_url(contact: Contact) -> str:
    return f"/api/v1/contacts/{contact.pk}/messages"


def lead_events(lead_id: Any) -> list[str]:
    """The lead's event types, sorted: inside one test transaction the database's now() (the
    triggers' events) is the transaction's start, so created_at does not order them; the order
    is checked by the webhook test, whose requests commit one by one."""
    return sorted(EventLog.objects.filter(entity_id=lead_id).values_list("event_type", flat=True))


@pytest.fixture
def seller(org: Organization) -> User:
    return staff("seller", organizations=[org])


def test_a_lead_lives_its_lifecycle_through_the_api(org: Organization, seller: User) -> None:
    client = api_client(org, "leads:write")
    contact = ContactFactory(organization=org)
    created = client.post(
        LEADS,
        {"name": "Loja da Ana", "contact_id": str(contact.pk), "value_cents": 1000},
        format="json",
    )
    assert created.status_code == 201, created.content
    lead = created.json()
    assert (lead["status"], lead["source"], lead["contact_id"]) == ("open", "api", str(contact.pk))
    steps = [
        ("patch", "", {"value_cents": 1500}),
        ("post", "/stage", {"stage_id": "proposal"}),
        ("post", "/assign", {"owner_id": seller.pk}),
        ("post", "/activities", {"kind": "call", "note": "Pediu desconto"}),
        ("post", "/won", {"reason": "signed"}),
    ]
    for method, tail, body in steps:
        response = getattr(client, method)(lead_url(lead["id"], tail), body, format="json")
        assert response.status_code in (200, 201), (tail, response.content)
    final = client.get(lead_url(lead["id"])).json()
    assert (final["status"], final["stage_id"], final["owner_id"]) == ("won", "proposal", seller.pk)
    assert (final["value_cents"], final["close_reason"]) == (1500, "signed")
    assert lead_events(lead["id"]) == sorted(
        [
            "lead.created",
            "lead.updated",
            "lead.stage_changed",
            "lead.assigned",
            "lead_activity.recorded",
            "lead.won",
        ]
    )
    created_event = EventLog.objects.get(event_type="lead.created")
    assert created_event.metadata["provenance"]["producer"] == "app:crm"
    assert client.delete(lead_url(lead["id"])).status_code == 204
    assert client.get(lead_url(lead["id"])).status_code == 404
    deleted = EventLog.objects.get(event_type="lead.deleted")
    assert deleted.payload["deleted_by"].startswith("api_key:dck_")


def test_leads_are_listed_newest_first_filtered_and_paged(org: Organization, seller: User) -> None:
    client = api_client(org, "leads:read")
    leads = [LeadFactory(organization=org, stage_id="new") for _ in range(3)]
    LeadFactory(organization=org, stage_id="proposal", owner=seller)
    LeadFactory(organization=org, deleted_at=timezone.now())
    first = client.get(LEADS, {"stage_id": "new", "limit": 2}).json()
    assert [row["id"] for row in first["results"]] == [str(leads[2].pk), str(leads[1].pk)]
    rest = client.get(LEADS, {"stage_id": "new", "limit": 2, "cursor": first["next_cursor"]})
    assert [row["id"] for row in rest.json()["results"]] == [str(leads[0].pk)]
    assert rest.json()["next"] is None
    owned = client.get(LEADS, {"owner_id": seller.pk}).json()["results"]
    assert [row["stage_id"] for row in owned] == ["proposal"]
    assert len(client.get(LEADS).json()["results"]) == 4  # the deleted one is not listed


def test_activities_are_listed_newest_first_with_before_id(org: Organization) -> None:
    lead = LeadFactory(organization=org)
    client = api_client(org, "leads:write")
    for n in range(3):
        client.post(lead_url(lead, "/activities"), {"note": f"n{n}"}, format="json")
    page = client.get(lead_url(lead, "/activities"), {"limit": 2}).json()
    assert [row["note"] for row in page["results"]] == ["n2", "n1"]
    rest = client.get(lead_url(lead, "/activities"), {"before_id": page["next_before_id"]})
    assert [row["note"] for row in rest.json()["results"]] == ["n0"]
    assert EventLog.objects.filter(event_type="lead_activity.recorded").count() == 3


def test_create_with_an_idempotency_key_makes_one_lead(org: Organization) -> None:
    client = api_client(org, "leads:write")
    body = {"name": "Retried"}
    first = client.post(LEADS, body, format="json", HTTP_IDEMPOTENCY_KEY="form-77")
    again = client.post(LEADS, body, format="json", HTTP_IDEMPOTENCY_KEY="form-77")
    assert (first.status_code, again.status_code) == (201, 201)
    assert again["Idempotent-Replayed"] == "true" and again.json() == first.json()
    assert Lead.objects.count() == 1 and EventLog.objects.count() == 1


# -- tenant isolation, validation, scopes ---------------------------------------------------------


def test_another_organizations_key_cannot_see_or_change_a_lead(
    org: Organization, org_b: Organization
) -> None:
    lead = LeadFactory(organization=org)
    activity = LeadActivity.objects.create(organization=org, lead=lead, note="secret")
    contact = ConversationFactory(organization=org, last_inbound_at=timezone.now()).contact
    intruder = api_client(org_b, "leads:write", "messages:send")
    before = snapshot()
    attempts = [
        intruder.get(lead_url(lead)),
        intruder.patch(lead_url(lead), {"name": "mine"}, format="json"),
        intruder.delete(lead_url(lead)),
        intruder.post(lead_url(lead, "/stage"), {"stage_id": "x"}, format="json"),
        intruder.post(lead_url(lead, "/assign"), {"owner_id": None}, format="json"),
        intruder.post(lead_url(lead, "/won"), {}, format="json"),
        intruder.post(lead_url(lead, "/lost"), {"reason": "x"}, format="json"),
        intruder.get(lead_url(lead, "/activities")),
        intruder.post(lead_url(lead, "/activities"), {"note": "x"}, format="json"),
        intruder.post(messages_url(contact), {"body": "oi"}, format="json"),
    ]
    for response in attempts:
        error_of(response, 404, "not_found")
    assert intruder.get(LEADS).json()["results"] == []
    assert snapshot() == before
    lead.refresh_from_db()
    assert (lead.name, lead.status, lead.deleted_at) == (lead.name, "open", None)
    assert LeadActivity.objects.get().pk == activity.pk
    assert not EventLog.objects.exists() and not Message.objects.exists()
    # Naming org A's contact in org B's lead is refused too (400 on the field).
    refused = intruder.post(LEADS, {"name": "x", "contact_id": str(contact.pk)}, format="json")
    assert "contact_id" in error_of(refused, 400, "validation_error")["fields"]


@pytest.mark.parametrize(
    ("tail", "method", "body", "field"),
    [
        ("", "post", {"name": ""}, "name"),
        ("", "post", {"name": "x", "value_cents": -1}, "value_cents"),
        ("", "post", {"name": "x", "organization_id": "x"}, "organization_id"),
        ("", "post", {"name": 7}, "name"),
        ("", "post", {"name": "x", "owner_id": 999999}, "owner_id"),
        ("", "post", {"name": "x", "contact_id": "not-a-uuid"}, "contact_id"),
        ("/x", "patch", {"name": "   "}, "name"),
        ("/x", "patch", {"stage_id": "skip the trigger"}, "stage_id"),
        ("/x/stage", "post", {}, "stage_id"),
        ("/x/assign", "post", {"owner_id": "seller"}, "owner_id"),
        ("/x/lost", "post", {}, "reason"),
        ("/x/lost", "post", {"reason": "   "}, "reason"),
        ("/x/won", "post", {"value_cents": "lots"}, "value_cents"),
        ("/x/activities", "post", {"kind": "x" * 33}, "kind"),
    ],
)
def test_bad_input_is_a_400_on_its_field_and_writes_nothing(
    org: Organization, tail: str, method: str, body: dict[str, Any], field: str
) -> None:
    lead = LeadFactory(organization=org)
    client = api_client(org, "leads:write")
    before = snapshot()
    url = LEADS + tail.replace("/x", f"/{lead.pk}", 1)
    response = getattr(client, method)(url, body, format="json")
    assert field in error_of(response, 400, "validation_error")["fields"]
    assert snapshot() == before and Lead.objects.count() == 1
    assert not EventLog.objects.exists()


def test_malformed_json_and_a_closed_lead_are_clear_errors(org: Organization) -> None:
    lead = LeadFactory(organization=org)
    client = api_client(org, "leads:write")
    broken = client.post(LEADS, "{not json", content_type="application/json")
    error_of(broken, 400, "parse_error")
    assert (
        client.post(lead_url(lead, "/lost"), {"reason": "price"}, format="json").status_code == 200
    )
    again = client.post(lead_url(lead, "/won"), {}, format="json")
    assert "already lost" in error_of(again, 409, "invalid_state")["message"]
    assert lead_events(lead.pk) == ["lead.lost"]


@pytest.mark.parametrize(
    ("granted", "method", "url", "needed"),
    [
        ((), "get", LEADS, "leads:read"),
        (("leads:read",), "post", LEADS, "leads:write"),
        (("leads:read",), "delete", "lead", "leads:write"),
        (("leads:read",), "post", "won", "leads:write"),
        (("events:read",), "get", "lead", "leads:read"),
        (("leads:write",), "post", "messages", "messages:send"),
    ],
)
def test_each_operation_needs_its_scope(
    org: Organization, granted: tuple[str, ...], method: str, url: str, needed: str
) -> None:
    lead = LeadFactory(organization=org)
    contact = ConversationFactory(organization=org, last_inbound_at=timezone.now()).contact
    target = {
        "lead": lead_url(lead),
        "won": lead_url(lead, "/won"),
        "messages": messages_url(contact),
    }.get(url, url)
    client = api_client(org, *(granted or ("events:read",)))
    response = getattr(client, method)(target, {"name": "x", "body": "oi"}, format="json")
    assert needed in error_of(response, 403, "permission_denied")["message"]
    assert not EventLog.objects.exists()


def test_leads_write_implies_read(org: Organization) -> None:
    lead = LeadFactory(organization=org)
    assert api_client(org, "leads:write").get(lead_url(lead)).status_code == 200


# -- sending a message ----------------------------------------------------------------------------


def conversation_of(org: Organization, *, wrote_ago: dt.timedelta | None) -> Conversation:
    last = timezone.now() - wrote_ago if wrote_ago is not None else None
    return ConversationFactory(organization=org, last_inbound_at=last)


def test_a_message_within_the_window_is_queued_for_the_whatsapp_worker(
    org: Organization,
) -> None:
    conversation = conversation_of(org, wrote_ago=dt.timedelta(hours=2))
    client = api_client(org, "messages:send")
    response = client.post(
        messages_url(conversation.contact), {"body": "Seu orçamento"}, format="json"
    )
    assert response.status_code == 202, response.content
    body = response.json()
    message = Message.objects.get(pk=body["id"])
    assert (message.status, message.sender, message.conversation_id) == (
        "queued",
        "agent",
        conversation.pk,
    )
    event = EventLog.objects.get(event_type="message.queued")
    assert event.payload["message_id"] == body["id"]
    assert "orçamento" not in json.dumps(event.payload)


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        ("blocked", "contact_blocked"),
        ("window", "window_closed"),
        ("consent", "no_consent"),
        ("never", "no_conversation"),
    ],
)
def test_a_message_the_channel_would_refuse_is_refused_at_once(
    org: Organization, setup: str, reason: str
) -> None:
    conversation = conversation_of(
        org, wrote_ago=dt.timedelta(hours=30) if setup == "window" else dt.timedelta(hours=1)
    )
    contact = conversation.contact
    if setup == "blocked":
        Contact.objects.filter(pk=contact.pk).update(blocked_at=timezone.now())
    if setup == "consent":
        lgpd_services.consent_record(
            contact=contact, consent_type="marketing_whatsapp", granted=False, source="test"
        )
    if setup == "never":
        contact = ContactFactory(organization=org)
    events = EventLog.objects.count()
    response = api_client(org, "messages:send").post(
        messages_url(contact), {"body": "oi"}, format="json"
    )
    error = error_of(response, 409, "send_refused")
    assert error["fields"] == {"reason": [reason]}
    assert not Message.objects.exists() and EventLog.objects.count() == events


def test_a_template_may_go_outside_the_window_but_not_to_a_blocked_contact(
    org: Organization,
) -> None:
    conversation = conversation_of(org, wrote_ago=dt.timedelta(days=3))
    client = api_client(org, "messages:send")
    url = messages_url(conversation.contact)
    body = {"body": "Template: pedido enviado", "is_template": True}
    assert client.post(url, body, format="json").status_code == 202
    Contact.objects.filter(pk=conversation.contact_id).update(blocked_at=timezone.now())
    error_of(client.post(url, body, format="json"), 409, "send_refused")
    assert Message.objects.count() == 1


def test_an_empty_message_is_a_400(org: Organization) -> None:
    conversation = conversation_of(org, wrote_ago=dt.timedelta(hours=1))
    client = api_client(org, "messages:send")
    response = client.post(messages_url(conversation.contact), {"body": "  "}, format="json")
    assert "body" in error_of(response, 400, "validation_error")["fields"]


# -- a webhook subscriber sees the lifecycle ------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_lead_subscriber_receives_the_lifecycle_of_a_lead_created_through_the_api(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    subscribe(receiver.url("/leads"), ["lead.*"])
    client = api_client(org, *ALL_LEAD_SCOPES)
    seller = staff("seller", organizations=[org])
    lead = client.post(LEADS, {"name": "Via API"}, format="json").json()
    client.patch(lead_url(lead["id"]), {"name": "Via API (renamed)"}, format="json")
    client.post(lead_url(lead["id"], "/stage"), {"stage_id": "proposal"}, format="json")
    client.post(lead_url(lead["id"], "/assign"), {"owner_id": seller.pk}, format="json")
    client.post(lead_url(lead["id"], "/activities"), {"note": "not lead.*"}, format="json")
    client.post(lead_url(lead["id"], "/lost"), {"reason": "price"}, format="json")
    client.delete(lead_url(lead["id"]))
    run_worker()
    received = receiver.on("/leads")
    events = [json.loads(r.body) for r in received]
    assert [e["type"] for e in sorted(events, key=lambda e: e["occurred_at"])] == [
        "lead.created",
        "lead.updated",
        "lead.stage_changed",
        "lead.assigned",
        "lead.lost",
        "lead.deleted",
    ]
    assert {e["entity_id"] for e in events} == {lead["id"]}
    assert [r.headers["x-webhook-event"] for r in received] == [e["type"] for e in events]
