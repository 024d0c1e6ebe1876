"""Tenant isolation matrix: organization B's key (every scope) against A's objects, per endpoint.

Every endpoint answers 404 or an empty list, and the database is left exactly as it was. A
last test checks that the matrix names every operation of the OpenAPI schema.
"""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator

import eventbus
from core.models import Organization
from crm.models import AnalyticsDaily, Contact, Conversation, Lead
from eventbus.store.models import Delivery, EventLog
from lgpd import services as lgpd_services
from pipelines import services as pipeline_services
from pipelines.models import Execution
from tests.eventbus.test_services import dead_flaky
from tests.support.api import api_client, client_for, issue_key, lead_stage_changed, snapshot
from tests.support.pipelines import seed_example
from tests.webhooks.conftest import settle_as_sent
from webhooks import services as webhook_services

pytestmark = pytest.mark.django_db

WEBHOOKS = "/api/v1/webhooks"


@pytest.fixture
def a_world(org: Organization) -> dict[str, str]:
    """Organization A: a dead delivery (DLQ), a pending event, a cursor of A's list, an enabled
    webhook subscription and a done delivery to it, an LGPD data request for one of A's contacts
    (each action B tries would change them)."""
    (dead,) = dead_flaky(org)
    eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
    page = api_client(org, "events:read").get("/api/v1/events?limit=1").json()
    subscription, _ = webhook_services.subscription_create(
        organization=org, url="https://hooks.a.example/in", event_types=["*"], actor="test"
    )
    eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 2})
    (sent,) = settle_as_sent()
    contact = Contact.objects.create(organization=org, name="A's customer")
    request = lgpd_services.data_request_create(
        organization_id=org.pk, contact_id=contact.pk, kind="access", channel="api", actor="t"
    )
    pipeline = pipeline_services.pipeline_create(
        organization=org,
        name="A's ERP",
        trigger="order.post",
        definition=seed_example("https://erp.a.example/orders"),
        actor="test",
    )
    Execution.objects.create(
        organization=org, pipeline=pipeline, trigger="order.post", started_at=timezone.now()
    )
    conversation = Conversation.objects.create(organization=org, contact=contact)
    lead = Lead.objects.create(organization=org, contact=contact, name="A's deal")
    today = timezone.localdate()
    AnalyticsDaily.objects.create(organization=org, day=today, metric="message.received", count=1)
    return {
        "event_id": str(dead.event_id),
        "cursor": page["next_cursor"],
        "subscription_id": str(subscription.id),
        "consumer": f"webhook:{subscription.id}",  # the subscription as a pausable consumer
        "delivery_id": str(sent),
        "contact": str(contact.pk),
        "contact_id": str(contact.pk),
        "request_id": str(request.pk),
        "pipeline_id": str(pipeline.pk),
        "conversation_id": str(conversation.pk),
        "lead_id": str(lead.pk),
        "since": (today - dt.timedelta(days=6)).isoformat(),
        "until": today.isoformat(),
    }


# (method, path template, body): every endpoint that takes an id.
OBJECT_ENDPOINTS = [
    ("get", "/api/v1/events/{event_id}", None),
    ("post", "/api/v1/events/{event_id}/reprocess", {}),
    ("post", "/api/v1/events/{event_id}/reprocess", {"consumer": "flaky-worker"}),
    ("post", "/api/v1/events/{event_id}/discard", {"reason": "not yours"}),
    ("post", "/api/outbox/{event_id}/reprocess", None),
    ("get", f"{WEBHOOKS}/subscriptions/{{subscription_id}}", None),
    ("patch", f"{WEBHOOKS}/subscriptions/{{subscription_id}}", {"event_types": ["lead.*"]}),
    ("patch", f"{WEBHOOKS}/subscriptions/{{subscription_id}}", {"url": "https://b.example/"}),
    ("delete", f"{WEBHOOKS}/subscriptions/{{subscription_id}}", None),
    ("post", f"{WEBHOOKS}/subscriptions/{{subscription_id}}/rotate-secret", None),
    ("post", f"{WEBHOOKS}/subscriptions/{{subscription_id}}/enable", None),
    ("post", f"{WEBHOOKS}/subscriptions/{{subscription_id}}/disable", None),
    ("post", f"{WEBHOOKS}/subscriptions/{{subscription_id}}/ping", None),
    ("get", f"{WEBHOOKS}/deliveries/{{delivery_id}}", None),
    ("post", f"{WEBHOOKS}/deliveries/{{delivery_id}}/resend", None),
    ("get", "/api/v1/consumers/{consumer}", None),
    ("post", "/api/v1/consumers/{consumer}/pause", {"reason": "not yours"}),
    ("post", "/api/v1/consumers/{consumer}/resume", None),
    (
        "post",
        "/api/v1/consumers/{consumer}/replay",
        {"since": "2020-01-01T00:00:00Z", "reason": "not yours"},
    ),
    ("get", "/api/v1/lgpd/data-requests/{request_id}", None),
    ("get", "/api/v1/lgpd/data-requests/{request_id}/export", None),
    ("get", "/api/v1/pipelines/{pipeline_id}", None),
    ("patch", "/api/v1/pipelines/{pipeline_id}", {"enabled": False}),
    ("patch", "/api/v1/pipelines/{pipeline_id}", {"name": "B's now"}),
    ("get", "/api/v1/pipelines/{pipeline_id}/executions", None),
    ("get", "/api/pipelines/{pipeline_id}/executions", None),
    ("get", "/api/v1/conversations/{conversation_id}", None),
    ("post", "/api/v1/conversations/{conversation_id}/assign", {"user_id": 1}),
    ("post", "/api/v1/conversations/{conversation_id}/resolve", {}),
    ("post", "/api/v1/conversations/{conversation_id}/reopen", {}),
    ("get", "/api/v1/contacts/{contact_id}", None),
    ("patch", "/api/v1/contacts/{contact_id}", {"name": "B's now"}),
    ("post", "/api/v1/contacts/{contact_id}/block", {}),
    ("post", "/api/v1/contacts/{contact_id}/unblock", None),
    ("post", "/api/v1/contacts/{contact_id}/merge", {"from_contact_id": str(uuid.uuid4())}),
    ("get", "/api/v1/leads/{lead_id}", None),
    ("patch", "/api/v1/leads/{lead_id}", {"name": "B's now"}),
    ("delete", "/api/v1/leads/{lead_id}", None),
    ("post", "/api/v1/leads/{lead_id}/stage", {"stage_id": "won"}),
    ("post", "/api/v1/leads/{lead_id}/assign", {"owner_id": None}),
    ("post", "/api/v1/leads/{lead_id}/won", {}),
    ("post", "/api/v1/leads/{lead_id}/lost", {"reason": "not yours"}),
    ("get", "/api/v1/leads/{lead_id}/activities", None),
    ("post", "/api/v1/leads/{lead_id}/activities", {"note": "B was here"}),
    ("post", "/api/v1/contacts/{contact_id}/messages", {"body": "oi", "is_template": True}),
    ("get", "/api/v1/contacts/{contact_id}/consents", None),
    ("post", "/api/v1/contacts/{contact_id}/consents", {"consent_type": "x", "granted": True}),
]
# Every endpoint that lists things, with the filters that could name A's objects.
LIST_ENDPOINTS = [
    "/api/v1/events",
    "/api/v1/events?status=dead",
    "/api/v1/events?consumer=flaky-worker",
    "/api/v1/events?event_type=test.flaky",
    "/api/v1/events?cursor={cursor}",
    "/api/outbox",
    "/api/outbox?status=FAILED",
    "/api/outbox?status=PENDING",
    f"{WEBHOOKS}/subscriptions",
    f"{WEBHOOKS}/deliveries",
    f"{WEBHOOKS}/deliveries?subscription={{subscription_id}}",
    f"{WEBHOOKS}/deliveries?status=done",
    f"{WEBHOOKS}/deliveries?before=9223372036854775807",
    "/api/v1/lgpd/data-requests",
    "/api/v1/lgpd/data-requests?contact_id={contact}",
    "/api/v1/pipelines",
    "/api/v1/contacts",
    "/api/v1/contacts?include_merged=true",
    "/api/v1/conversations",
    "/api/v1/conversations?status=open",
    "/api/v1/analytics/daily?since={since}&until={until}",
    "/api/v1/leads",
    "/api/v1/leads?contact_id={contact_id}",
]
# Operations that name no existing object: they act in the key's own organization.
OWN_ORGANIZATION_ONLY = {
    ("post", "/api/v1/events"),  # see test_idempotency_keys_are_per_organization
    ("post", f"{WEBHOOKS}/subscriptions"),  # see tests/webhooks/test_api.py (tenant from key)
    ("post", "/api/v1/lgpd/data-requests"),  # see tests/lgpd/test_api.py (another's contact)
    ("post", "/api/v1/pipelines"),  # see tests/pipelines/test_api.py (tenant from the key)
    ("post", "/api/v1/orders"),  # see test_orders_are_written_in_the_keys_organization
    ("post", "/api/v1/contacts"),  # see tests/crm/api/test_contacts.py (tenant from the key)
    ("post", "/api/v1/leads"),  # see tests/crm/test_api.py (another's contact is a 400)
    # The platform's catalog, no tenant's rows (tests/eventbus/test_ownership.py).
    ("get", "/api/v1/event-types"),
}


@pytest.mark.parametrize(("method", "template", "body"), OBJECT_ENDPOINTS)
def test_other_tenants_objects_are_404_and_untouched(
    a_world: dict[str, str],
    org_b: Organization,
    method: str,
    template: str,
    body: dict[str, str] | None,
) -> None:
    before = snapshot()
    client = api_client(org_b)
    response = getattr(client, method)(template.format(**a_world), body, format="json")
    assert response.status_code == 404, response.content
    assert response.json()["error"]["code"] == "not_found"
    assert snapshot() == before


@pytest.mark.parametrize("template", LIST_ENDPOINTS)
def test_other_tenants_objects_never_appear_in_lists(
    a_world: dict[str, str], org_b: Organization, template: str
) -> None:
    before = snapshot()
    response = api_client(org_b).get(template.format(**a_world))
    assert response.status_code == 200, response.content
    assert response.json()["results"] == []
    assert snapshot() == before


def test_a_sees_its_own_objects_where_b_sees_nothing(
    a_world: dict[str, str], org: Organization
) -> None:
    """The matrix's 404s and empty lists are about the tenant, not about missing objects."""
    client = api_client(org)
    for method, template, _ in OBJECT_ENDPOINTS:
        if method == "get":
            # A's data request has no export yet: A is told so (410) where B gets a 404.
            expected = 410 if template.endswith("/export") else 200
            assert client.get(template.format(**a_world)).status_code == expected, template
    for template in LIST_ENDPOINTS:
        if "cursor" not in template and "status=" not in template:
            assert client.get(template.format(**a_world)).json()["results"], template


def test_the_matrix_covers_every_operation_of_the_schema() -> None:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    operations = {
        (method, path)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if operation.get("security") != []  # the health probes: no API key, no tenant
    }
    covered = {(method, template) for method, template, _ in OBJECT_ENDPOINTS}
    covered |= {("get", template.split("?")[0]) for template in LIST_ENDPOINTS}
    assert operations - covered == OWN_ORGANIZATION_ONLY


def test_idempotency_keys_are_per_organization(org: Organization, org_b: Organization) -> None:
    headers = {"HTTP_IDEMPOTENCY_KEY": "shared-key-1"}
    body = lead_stage_changed()
    a = client_for(issue_key(org), **headers).post("/api/v1/events", body, format="json")
    b = client_for(issue_key(org_b), **headers).post("/api/v1/events", body, format="json")
    assert (a.status_code, b.status_code) == (201, 201)
    assert "Idempotent-Replayed" not in b
    assert a.json()["id"] != b.json()["id"]
    owners = dict(EventLog.objects.values_list("id", "organization_id"))
    assert owners == {uuid.UUID(a.json()["id"]): org.pk, uuid.UUID(b.json()["id"]): org_b.pk}


def test_event_idempotency_keys_are_per_organization(
    org: Organization, org_b: Organization
) -> None:
    body = lead_stage_changed(metadata={"idempotency_key": "erp-1"})
    a = api_client(org).post("/api/v1/events", body, format="json").json()
    b = api_client(org_b).post("/api/v1/events", body, format="json").json()
    assert a["id"] != b["id"]


def test_b_acting_on_its_own_event_leaves_as_dlq_alone(
    a_world: dict[str, str], org_b: Organization
) -> None:
    (b_dead,) = [d for d in dead_flaky(org_b) if d.organization_id == org_b.pk]
    response = api_client(org_b).post(f"/api/v1/events/{b_dead.event_id}/reprocess")
    assert response.status_code == 200
    assert response.json()["moved"] == 1
    a_delivery = Delivery.objects.get(event_id=a_world["event_id"])
    assert a_delivery.status == "dead"


def test_b_replaying_a_shared_consumer_replays_its_own_events_only(
    a_world: dict[str, str], org_b: Organization
) -> None:
    (b_dead,) = [d for d in dead_flaky(org_b) if d.organization_id == org_b.pk]
    client = api_client(org_b)
    body = {"since": "2020-01-01T00:00:00Z", "reason": "retry ours"}
    response = client.post("/api/v1/consumers/flaky-worker/replay", body, format="json")
    assert response.status_code == 200, response.content
    assert (response.json()["organization_id"], response.json()["queued"]) == (str(org_b.pk), 1)
    assert Delivery.objects.get(pk=b_dead.pk).status == "pending"
    assert Delivery.objects.get(event_id=a_world["event_id"]).status == "dead"
    named = client.post(
        "/api/v1/consumers/flaky-worker/replay",
        {**body, "organization_id": a_world["subscription_id"]},
        format="json",
    )
    assert named.status_code == 400  # the tenant comes from the key, never the body
    assert "system organization" in str(named.json())


def test_orders_are_written_in_the_keys_organization(
    a_world: dict[str, str], org: Organization, org_b: Organization
) -> None:
    """B's order lands in B, whatever the body says, and A's order.pre never runs for it."""
    from crm.models import Order

    body = {"number": "X-1", "total_cents": 100}
    response = api_client(org_b).post("/api/v1/orders", body, format="json")
    assert response.status_code == 201, response.content
    assert Order.objects.get(pk=response.json()["id"]).organization_id == org_b.pk
    smuggled = {**body, "number": "X-2", "organization": str(org.pk)}
    assert api_client(org_b).post("/api/v1/orders", smuggled, format="json").status_code == 400
    assert not Order.objects.filter(organization=org).exists()
