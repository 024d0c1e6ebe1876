"""The webhook API: scopes, tenant from the credential, CRUD, rotate, ping, deliveries, resend.

Requests carry real API keys (`Authorization: Bearer ...`), as integrators' would.
"""

from __future__ import annotations

import uuid

import pytest
from rest_framework.test import APIClient

import eventbus
from deskcomm.models import Organization
from eventbus.models import Delivery, EventLog
from tests.support.api import api_client
from tests.support.receiver import Receiver
from tests.webhooks.conftest import run_worker
from webhooks.models import Subscription
from webhooks.signing import delivery_id

pytestmark = pytest.mark.django_db
BASE = "/api/v1/webhooks"
URL = "https://hooks.example.com/in"


def client_for(org: Organization, *scopes: str) -> APIClient:
    return api_client(org, *(scopes or ("webhooks:read", "webhooks:write")))


def create(client: APIClient, **body: object) -> dict:
    response = client.post(
        f"{BASE}/subscriptions", {"url": URL, "event_types": ["lead.*"], **body}, format="json"
    )
    assert response.status_code == 201, response.content
    return response.json()


def test_create_shows_the_secret_once(org: Organization, loopback_ok: object) -> None:
    client = client_for(org)
    created = create(client, description="CRM sync")
    assert created["secret"].startswith("whsec_")
    assert created["event_types"] == ["lead.*"] and created["enabled"] is True
    shown = client.get(f"{BASE}/subscriptions/{created['id']}").json()
    assert "secret" not in shown and shown["description"] == "CRM sync"
    listed = client.get(f"{BASE}/subscriptions").json()["results"]
    assert [s["id"] for s in listed] == [created["id"]] and "secret" not in listed[0]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"url": "ftp://x.example.com"}, "http or https"),
        ({"event_types": ["lead.nope"]}, "unknown event type"),
        ({"event_types": "lead.*"}, "event_types"),
        ({"url": "https://10.0.0.1/"}, "private"),
    ],
)
def test_bad_input_is_a_400_and_writes_nothing(
    org: Organization, body: dict, fragment: str
) -> None:
    response = client_for(org).post(
        f"{BASE}/subscriptions", {"url": URL, "event_types": ["*"], **body}, format="json"
    )
    assert response.status_code == 400
    assert fragment in response.content.decode()
    assert not Subscription.objects.exists()


def test_scopes_are_enforced(org: Organization) -> None:
    reader = client_for(org, "webhooks:read")
    assert reader.get(f"{BASE}/subscriptions").status_code == 200
    post = reader.post(f"{BASE}/subscriptions", {"url": URL, "event_types": ["*"]}, format="json")
    assert post.status_code == 403
    assert client_for(org, "outbox:read").get(f"{BASE}/subscriptions").status_code == 403
    assert APIClient().get(f"{BASE}/subscriptions").status_code in (401, 403)
    assert not Subscription.objects.exists()


def test_the_tenant_comes_from_the_key_never_the_body(
    org: Organization, org_b: Organization
) -> None:
    created = create(client_for(org), organization_id=str(org_b.id))
    assert Subscription.objects.get().organization_id == org.id
    other = client_for(org_b)
    assert other.get(f"{BASE}/subscriptions/{created['id']}").status_code == 404
    assert other.delete(f"{BASE}/subscriptions/{created['id']}").status_code == 404
    assert other.get(f"{BASE}/subscriptions").json()["results"] == []
    assert Subscription.objects.count() == 1


def test_update_rotate_disable_enable_delete(org: Organization) -> None:
    client = client_for(org)
    created = create(client)
    path = f"{BASE}/subscriptions/{created['id']}"
    patched = client.patch(path, {"event_types": ["*"]}, format="json").json()
    assert patched["event_types"] == ["*"] and patched["url"] == URL
    rotated = client.post(f"{path}/rotate-secret").json()
    assert rotated["secret"] != created["secret"] and rotated["secret_rotation_ends_at"]
    assert client.post(f"{path}/disable").json()["enabled"] is False
    assert EventLog.objects.filter(event_type="webhook.subscription_disabled").count() == 1
    assert client.post(f"{path}/test").status_code == 400  # disabled: no ping
    enabled = client.post(f"{path}/enable").json()
    assert enabled["enabled"] is True and enabled["consecutive_failures"] == 0
    assert client.post(f"{path}/explode").status_code == 404
    assert client.delete(path).status_code == 204
    assert not Subscription.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_ping_deliveries_attempts_and_resend(
    org: Organization, receiver: Receiver, loopback_ok: object
) -> None:
    client = client_for(org)
    created = create(client, url=receiver.url(), event_types=["lead.*"])
    ping = client.post(f"{BASE}/subscriptions/{created['id']}/test")
    assert ping.status_code == 202
    run_worker()
    assert receiver.requests[0].headers["x-webhook-event"] == "webhook.ping"

    listed = client.get(f"{BASE}/deliveries", {"subscription": created["id"]}).json()["results"]
    [delivery] = listed
    event_id = uuid.UUID(delivery["event_id"])
    expected_id = str(delivery_id(event_id, uuid.UUID(created["id"])))
    assert delivery["webhook_id"] == expected_id == receiver.requests[0].headers["webhook-id"]
    assert delivery["status"] == "done" and delivery["event_type"] == "webhook.ping"

    detail = client.get(f"{BASE}/deliveries/{delivery['id']}").json()
    assert [(a["attempt"], a["status_code"]) for a in detail["attempts"]] == [(1, 200)]

    resent = client.post(f"{BASE}/deliveries/{delivery['id']}/resend")
    assert resent.status_code == 202 and resent.json()["status"] == "pending"
    assert client.post(f"{BASE}/deliveries/{delivery['id']}/resend").status_code == 409
    run_worker()
    assert [r.headers["webhook-id"] for r in receiver.requests] == [expected_id, expected_id]


def test_delivery_filters_and_tenant_scoping(org: Organization, org_b: Organization) -> None:
    create(client_for(org))
    eventbus.emit(
        "lead.won", organization=org, entity_kind="lead", payload={"value": 1, "won_at": "x"}
    )
    delivery = Delivery.objects.get()
    client = client_for(org)
    assert len(client.get(f"{BASE}/deliveries", {"status": "pending"}).json()["results"]) == 1
    assert client.get(f"{BASE}/deliveries", {"status": "dead"}).json()["results"] == []
    assert client.get(f"{BASE}/deliveries", {"status": "weird"}).status_code == 400
    assert client.get(f"{BASE}/deliveries", {"limit": "0"}).status_code == 400
    assert client.get(f"{BASE}/deliveries", {"subscription": "x"}).status_code == 400
    other = client_for(org_b)
    assert other.get(f"{BASE}/deliveries").json()["results"] == []
    assert other.get(f"{BASE}/deliveries/{delivery.pk}").status_code == 404
    assert other.post(f"{BASE}/deliveries/{delivery.pk}/resend").status_code == 404
