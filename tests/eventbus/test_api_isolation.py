"""Tenant isolation matrix: organization B's key (every scope) against A's objects, per endpoint.

Every endpoint answers 404 or an empty list, and the database is left exactly as it was.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import connection

import eventbus
from deskcomm.models import Contact, Organization
from eventbus.models import Delivery, EventLog
from lgpd import services as lgpd_services
from tests.eventbus.test_services import dead_flaky
from tests.support.api import api_client, client_for, issue_key, lead_stage_changed

pytestmark = pytest.mark.django_db

SNAPSHOT_SQL = {
    "events": "SELECT id, status, consumed_by, fanout, updated_at FROM event_log ORDER BY id",
    "deliveries": "SELECT id, status, attempts, updated_at FROM eventbus_delivery ORDER BY id",
    "audit": "SELECT id FROM deskcomm_auditlog WHERE action NOT LIKE 'api_key.%%' ORDER BY id",
    "idempotency": "SELECT id, response::text FROM deskcomm_idempotencykey ORDER BY id",
    "data_requests": "SELECT id, status FROM lgpd_datarequest ORDER BY id",
}


def snapshot() -> dict[str, list[tuple[Any, ...]]]:
    with connection.cursor() as cursor:
        out = {}
        for name, sql in SNAPSHOT_SQL.items():
            cursor.execute(sql)
            out[name] = cursor.fetchall()
        return out


@pytest.fixture
def a_world(org: Organization) -> dict[str, str]:
    """Organization A: a dead delivery (DLQ), a pending event, a cursor of A's list, an LGPD
    data request for one of A's contacts."""
    (dead,) = dead_flaky(org)
    eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
    page = api_client(org, "events:read").get("/api/v1/events?limit=1").json()
    contact = Contact.objects.create(organization=org, name="A's customer")
    request = lgpd_services.data_request_create(
        organization_id=org.pk, contact_id=contact.pk, kind="access", channel="api", actor="t"
    )
    return {
        "event": str(dead.event_id),
        "cursor": page["next_cursor"],
        "contact": str(contact.pk),
        "data_request": str(request.pk),
    }


# (method, path template, body): every endpoint that takes an id or lists things.
OBJECT_ENDPOINTS = [
    ("get", "/api/v1/events/{event}", None),
    ("post", "/api/v1/events/{event}/reprocess", {}),
    ("post", "/api/v1/events/{event}/reprocess", {"consumer": "flaky-worker"}),
    ("post", "/api/v1/events/{event}/discard", {"reason": "not yours"}),
    ("post", "/api/outbox/{event}/reprocess", None),
    ("get", "/api/v1/lgpd/data-requests/{data_request}", None),
]
LIST_ENDPOINTS = [
    "/api/v1/events",
    "/api/v1/events?status=dead",
    "/api/v1/events?consumer=flaky-worker",
    "/api/v1/events?event_type=test.flaky",
    "/api/v1/events?cursor={cursor}",
    "/api/outbox",
    "/api/outbox?status=FAILED",
    "/api/outbox?status=PENDING",
    "/api/v1/lgpd/data-requests",
    "/api/v1/lgpd/data-requests?contact_id={contact}",
]


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
def test_other_tenants_events_never_appear_in_lists(
    a_world: dict[str, str], org_b: Organization, template: str
) -> None:
    before = snapshot()
    response = api_client(org_b).get(template.format(**a_world))
    assert response.status_code == 200, response.content
    assert response.json()["results"] == []
    assert snapshot() == before


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
    a_delivery = Delivery.objects.get(event_id=a_world["event"])
    assert a_delivery.status == "dead"
