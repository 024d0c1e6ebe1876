"""`/api/v1/consumers/<name>`: pause and resume a registered consumer (platform-wide: only a key
of the system organization), with the consumers:* scopes enforced and the change audited."""

from __future__ import annotations

import pytest

import eventbus
from core.models import AuditLog, Organization
from eventbus.models import ConsumerState, Delivery
from eventbus.worker import Worker, WorkerOptions
from tests.support.api import JSON, api_client, error_of

pytestmark = pytest.mark.django_db

BASE = "/api/v1/consumers/effect-a-worker"


@pytest.fixture
def platform() -> Organization:
    return Organization.objects.system()


def test_a_platform_key_pauses_and_resumes_a_consumer(
    platform: Organization, org: Organization, side_effects: None
) -> None:
    client = api_client(platform, "consumers:read", "consumers:write")
    response = client.post(f"{BASE}/pause", {"reason": "CRM API down"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json() | {"since": None} == {
        "consumer": "effect-a-worker",
        "state": "paused",
        "since": None,
        "reason": "CRM API down",
        "changed_by": response.json()["changed_by"],
        "probe_at": None,
        "changed": True,
    }
    assert response.json()["changed_by"].startswith("api_key:")
    again = client.post(f"{BASE}/pause", {"reason": "still down"}, format="json")
    assert (again.status_code, again.json()["changed"]) == (200, False)

    eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
    worker = Worker(WorkerOptions(consumers=["effect-a-worker"], listen=False))
    assert worker.run_once() == 0
    assert client.get(BASE).json()["state"] == "paused"

    resumed = client.post(f"{BASE}/resume", {}, format="json")
    assert (resumed.status_code, resumed.json()["state"]) == (200, "running")
    assert worker.run_once() == 1
    assert Delivery.objects.get(consumer="effect-a-worker").status == "done"
    assert sorted(
        AuditLog.objects.filter(target_id="effect-a-worker").values_list("action", flat=True)
    ) == [
        "consumer.pause",
        "consumer.resume",
    ]


def test_a_tenant_key_may_not_pause_a_platform_wide_consumer(org: Organization) -> None:
    client = api_client(org, "consumers:read", "consumers:write")
    response = client.post(f"{BASE}/pause", {"reason": "mine"}, format="json")
    assert "platform-wide" in error_of(response, 403, "permission_denied")["message"]
    error_of(client.get(BASE), 403, "permission_denied")
    assert not ConsumerState.objects.exists()


def test_the_scopes_are_enforced(platform: Organization) -> None:
    reader = api_client(platform, "consumers:read")
    error_of(reader.post(f"{BASE}/pause", {"reason": "x"}, format="json"), 403, "permission_denied")
    writer = api_client(platform, "consumers:write")
    error_of(writer.get(BASE), 403, "permission_denied")
    assert not ConsumerState.objects.exists()


def test_unknown_consumers_and_missing_reasons(platform: Organization) -> None:
    client = api_client(platform, "consumers:read", "consumers:write")
    error_of(client.get("/api/v1/consumers/no-such-worker"), 404, "not_found")
    response = client.post(f"{BASE}/pause", "{}", content_type=JSON)
    assert "reason" in error_of(response, 400, "validation_error")["fields"]
