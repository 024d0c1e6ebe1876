"""The webhook API: scopes, tenant from the credential, CRUD, rotate, ping, deliveries, resend.

Requests carry real API keys (`Authorization: Bearer ...`), as integrators' would.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from rest_framework.test import APIClient

import eventbus
from core.models import AuditLog, Organization
from eventbus.store.models import Delivery, EventLog
from tests.support.api import api_client, error_of
from tests.support.network import loopback_only
from tests.support.receiver import Receiver
from tests.webhooks.conftest import run_worker
from webhooks.models import Attempt, Subscription
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
    ("body", "field", "fragment"),
    [
        ({"url": "ftp://x.example.com"}, "url", "http or https"),
        ({"url": "https://10.0.0.1/"}, "url", "private"),
        ({"url": "http://hooks.example.com/"}, "url", "https"),
        ({"url": "https://0177.0.0.1/"}, "url", "'0177.0.0.1' is not a canonical IPv4 address"),
        ({"url": "https://127.1/"}, "url", "'127.1' is not a canonical IPv4 address"),
        ({"url": "https://0x7f.1/"}, "url", "octal, hex, integer and shortened forms"),
        ({"url": "https://2130706433/"}, "url", "not a canonical IPv4 address"),
        ({"url": "https://127.0.0.1/"}, "url", "WEBHOOKS_ALLOW_PRIVATE_TARGETS"),
        ({"url": "https://hooks.example.com:0/"}, "url", "port 0 is outside 1-65535"),
        ({"url": "https://hooks.example.com/\u0001"}, "url", "control or space character"),
        ({"event_types": ["lead.nope"]}, "event_types", "unknown event type"),
        ({"event_types": ["nope.*"]}, "event_types", "no declared event type"),
        ({"event_types": "lead.*"}, "event_types", "list"),
        ({"event_types": []}, "event_types", "empty"),
        ({"description": "x" * 501}, "description", "500"),
        ({"description": 0}, "description", "Not a valid string"),
        ({"url": 1}, "url", "Not a valid string"),
        ({"event_types": [1]}, "event_types.0", "Not a valid string"),
        ({"organization_id": "0b0e5f0c-0000-4000-8000-000000000000"}, "organization_id", "Unknown"),
    ],
)
def test_bad_input_is_a_400_on_its_field_and_writes_nothing(
    org: Organization, body: dict, field: str, fragment: str
) -> None:
    response = client_for(org).post(
        f"{BASE}/subscriptions", {"url": URL, "event_types": ["*"], **body}, format="json"
    )
    error = error_of(response, 400, "validation_error")
    assert fragment in " ".join(error["fields"][field]), error
    assert not Subscription.objects.exists()
    assert not AuditLog.objects.filter(action__startswith="webhook.").exists()


def test_a_bad_change_is_a_400_and_changes_nothing(org: Organization) -> None:
    client = client_for(org)
    created = create(client)
    path = f"{BASE}/subscriptions/{created['id']}"
    for body in ({"url": "https://127.0.0.1/"}, {"event_types": []}, {"enabled": False}):
        error_of(client.patch(path, body, format="json"), 400, "validation_error")
    error_of(client.patch(path, [1], format="json"), 400, "validation_error")
    assert client.get(path).json() == {k: v for k, v in created.items() if k != "secret"}


def test_scopes_are_enforced(org: Organization) -> None:
    reader = client_for(org, "webhooks:read")
    assert reader.get(f"{BASE}/subscriptions").status_code == 200
    post = reader.post(f"{BASE}/subscriptions", {"url": URL, "event_types": ["*"]}, format="json")
    error_of(post, 403, "permission_denied")
    assert client_for(org, "webhooks:write").get(f"{BASE}/deliveries").status_code == 200
    error_of(client_for(org, "outbox:read").get(f"{BASE}/subscriptions"), 403, "permission_denied")
    error_of(APIClient().get(f"{BASE}/subscriptions"), 401, "not_authenticated")
    assert not Subscription.objects.exists()


def test_errors_before_the_view_keep_the_api_shape(org: Organization, settings: Any) -> None:
    client = client_for(org)
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    big = {"url": URL, "event_types": ["*"], "description": "x" * 2000}
    error_of(client.post(f"{BASE}/subscriptions", big, format="json"), 413, "payload_too_large")
    error_of(client.post(f"{BASE}/subscriptions", "url=x", content_type="text/plain"), 415,
             "unsupported_media_type")  # fmt: skip
    error_of(client.options(f"{BASE}/subscriptions"), 405, "method_not_allowed")
    for path in (f"{BASE}/deliveries/{2**64}", f"{BASE}/deliveries/{2**64}/resend",
                 f"{BASE}/subscriptions/not-a-uuid"):  # fmt: skip
        error_of(client.post(path) if path.endswith("resend") else client.get(path), 404,
                 "not_found")  # fmt: skip
    assert not Subscription.objects.exists()


def test_the_tenant_comes_from_the_key_never_the_body(
    org: Organization, org_b: Organization
) -> None:
    created = create(client_for(org))
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
    error_of(client.post(f"{path}/ping"), 409, "invalid_state")  # disabled: no ping
    enabled = client.post(f"{path}/enable").json()
    assert enabled["enabled"] is True and enabled["consecutive_failures"] == 0
    error_of(client.post(f"{path}/explode"), 404, "not_found")
    error_of(client.post(f"{path}/test"), 404, "not_found")  # the ping is `/ping`
    assert client.delete(path).status_code == 204
    assert not Subscription.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_ping_deliveries_attempts_and_resend(
    org: Organization, receiver: Receiver, loopback_ok: object
) -> None:
    client = client_for(org)
    created = create(client, url=receiver.url(), event_types=["lead.*"])
    ping = client.post(f"{BASE}/subscriptions/{created['id']}/ping")
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
    assert detail["attempts"] == 1
    assert [(a["attempt"], a["status_code"]) for a in detail["attempt_log"]] == [(1, 200)]

    resent = client.post(f"{BASE}/deliveries/{delivery['id']}/resend")
    assert resent.status_code == 202 and resent.json()["status"] == "pending"
    error_of(client.post(f"{BASE}/deliveries/{delivery['id']}/resend"), 409, "invalid_state")
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
    for bad in ({"status": "weird"}, {"limit": "0"}, {"limit": "201"}, {"subscription": "x"},
                {"before": "-1"}, {"before": str(2**63)}, {"colour": "red"}):  # fmt: skip
        (field,) = error_of(client.get(f"{BASE}/deliveries", bad), 400, "validation_error")[
            "fields"
        ]
        assert field == next(iter(bad))
    other = client_for(org_b)
    assert other.get(f"{BASE}/deliveries").json()["results"] == []
    assert other.get(f"{BASE}/deliveries/{delivery.pk}").status_code == 404
    assert other.post(f"{BASE}/deliveries/{delivery.pk}/resend").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_a_ping_to_a_public_host_is_only_queued_and_never_leaves_the_machine(
    org: Organization,
) -> None:
    """The API never sends (the worker does); a worker under the loopback guard reaches nothing."""
    client = client_for(org)
    created = create(client)  # https://hooks.example.com/in: a public name, never resolved here
    with loopback_only() as refused:
        ping = client.post(f"{BASE}/subscriptions/{created['id']}/ping")
        assert ping.status_code == 202, ping.content
        delivery = Delivery.objects.get(event_id=ping.json()["event_id"])
        assert (delivery.consumer, delivery.status, delivery.attempts) == (
            f"webhook:{created['id']}", "pending", 0,
        )  # fmt: skip
        assert refused == [] and not Attempt.objects.exists()

        run_worker()
    assert refused == ["socket.getaddrinfo 'hooks.example.com'"]
    (attempt,) = Attempt.objects.all()
    assert (attempt.status_code, attempt.error_class) == (None, "ConnectError")
    assert "cannot resolve hooks.example.com" in attempt.error
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("pending", 1)  # a retry, later
