"""`/api/v1/lgpd/data-requests`: scopes, validation, the event, and tenant isolation."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import connection

from core.models import AuditLog, Organization
from crm.models import Contact
from eventbus.store.models import EventLog
from lgpd.models import DataRequest
from tests.support.api import api_client, error_of

pytestmark = pytest.mark.django_db

URL = "/api/v1/lgpd/data-requests"


@pytest.fixture
def contact(org: Organization) -> Contact:
    return Contact.objects.create(organization=org, name="Ana Lima", phone="+55 11 91111-2222")


def test_create_records_the_request_and_emits_the_event(
    org: Organization, contact: Contact
) -> None:
    client = api_client(org, "lgpd:write")
    response = client.post(URL, {"contact_id": str(contact.pk), "kind": "access"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["kind"], body["status"], body["channel"]) == ("access", "received", "api")
    assert body["export_url"] is None and body["completed_at"] is None
    request = DataRequest.objects.get()
    assert request.requested_by.startswith("api_key:")
    event = EventLog.objects.get(event_type="lgpd.data_request_received")
    assert event.payload == {
        "request_id": body["id"],
        "request_type": "access",
        "contact_id": str(contact.pk),
        "channel": "api",
    }
    assert AuditLog.objects.filter(action="lgpd.data_request.create").count() == 1


def test_list_and_detail_need_lgpd_read(org: Organization, contact: Contact) -> None:
    api_client(org, "lgpd:write").post(
        URL, {"contact_id": str(contact.pk), "kind": "redact"}, format="json"
    )
    reader = api_client(org, "lgpd:read")
    page = reader.get(URL).json()
    [row] = page["results"]
    assert row["kind"] == "redact" and page["next_cursor"] is None
    assert reader.get(f"{URL}/{row['id']}").json()["id"] == row["id"]
    assert reader.get(f"{URL}?contact_id={uuid.uuid4()}").json()["results"] == []
    error_of(
        reader.post(URL, {"contact_id": str(contact.pk), "kind": "access"}),
        403,
        "permission_denied",
    )
    error_of(api_client(org, "events:read").get(URL), 403, "permission_denied")


def test_pages_follow_the_cursor(org: Organization, contact: Contact) -> None:
    writer = api_client(org, "lgpd:write", "lgpd:read")
    for kind in ("access", "redact", "access"):
        writer.post(URL, {"contact_id": str(contact.pk), "kind": kind}, format="json")
    first = writer.get(f"{URL}?limit=2").json()
    second = writer.get(f"{URL}?limit=2&cursor={first['next_cursor']}").json()
    ids = [r["id"] for r in first["results"] + second["results"]]
    assert len(set(ids)) == 3 and second["next_cursor"] is None


@pytest.mark.parametrize(
    "body",
    [
        {"kind": "access"},
        {"contact_id": "not-a-uuid", "kind": "access"},
        {"contact_id": str(uuid.uuid4()), "kind": "delete-everything"},
        {"contact_id": str(uuid.uuid4()), "kind": "access", "organization": "x"},
    ],
)
def test_bad_input_is_a_400_and_writes_nothing(org: Organization, body: dict[str, Any]) -> None:
    error_of(api_client(org).post(URL, body, format="json"), 400, "validation_error")
    assert not DataRequest.objects.exists() and not EventLog.objects.exists()


# -- tenant isolation: organization B's key (every scope) against A's objects -----------------


def snapshot() -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'r', id::text, status FROM lgpd_datarequest UNION ALL "
            "SELECT 'e', id::text, status FROM event_log ORDER BY 1, 2"
        )
        return list(cursor.fetchall())


@pytest.fixture
def a_request(org: Organization, contact: Contact) -> dict[str, str]:
    response = api_client(org, "lgpd:write").post(
        URL, {"contact_id": str(contact.pk), "kind": "access"}, format="json"
    )
    return {"request": response.json()["id"], "contact": str(contact.pk)}


def test_another_tenants_request_is_404(a_request: dict[str, str], org_b: Organization) -> None:
    before = snapshot()
    response = api_client(org_b).get(f"{URL}/{a_request['request']}")
    error_of(response, 404, "not_found")
    assert snapshot() == before


@pytest.mark.parametrize("query", ["", "?contact_id={contact}", "?limit=1"])
def test_another_tenants_requests_never_list(
    a_request: dict[str, str], org_b: Organization, query: str
) -> None:
    response = api_client(org_b).get(URL + query.format(**a_request))
    assert response.status_code == 200
    assert response.json()["results"] == []


def test_another_tenants_contact_cannot_be_targeted(
    a_request: dict[str, str], org_b: Organization
) -> None:
    before = snapshot()
    body = {"contact_id": a_request["contact"], "kind": "redact"}
    error = error_of(api_client(org_b).post(URL, body, format="json"), 400, "validation_error")
    assert "contact_id" in error["fields"]
    assert snapshot() == before
