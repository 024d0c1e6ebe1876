"""`/api/v1/consumers/<name>`: pause and resume a registered consumer (platform-wide: only a key
of the system organization), with the consumers:* scopes enforced and the change audited."""

from __future__ import annotations

import pytest

import eventbus
from core.models import AuditLog, Organization
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.store.models import ConsumerState, Delivery
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


def test_a_key_replays_a_consumer_over_a_window_dry_run_first(
    org: Organization, side_effects: None
) -> None:
    for n in range(3):
        eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": n})
    worker = Worker(WorkerOptions(consumers=["effect-a-worker", "effect-b-worker"], listen=False))
    while worker.run_once():
        pass
    client = api_client(org, "consumers:replay")
    body = {"since": "2020-01-01T00:00:00Z", "reason": "handler bug fixed", "dry_run": True}
    dry = client.post(f"{BASE}/replay", body, format="json")
    assert dry.status_code == 200, dry.content
    assert (dry.json()["matched"], dry.json()["queued"], dry.json()["by_status"]) == (
        3,
        0,
        {"done": 3},
    )
    done = client.post(f"{BASE}/replay", {**body, "dry_run": False}, format="json")
    assert (done.json()["queued"], done.json()["event_types"]) == (3, ["test.effect"])
    replay_id = done.json()["replay_id"]
    assert Delivery.objects.filter(replay_id=replay_id, consumer="effect-a-worker").count() == 3
    assert not Delivery.objects.filter(consumer="effect-b-worker", status="pending").exists()
    again = client.post(
        f"{BASE}/replay", {**body, "dry_run": False, "replay_id": replay_id}, format="json"
    )
    assert again.json()["queued"] == 0
    [entry] = AuditLog.objects.filter(action="consumer.replay")
    assert entry.organization_id == org.pk and entry.actor.startswith("api_key:")


@pytest.mark.parametrize(
    ("path", "body", "status", "message"),
    [
        (f"{BASE}/replay", {"reason": "r"}, 400, "since"),
        (f"{BASE}/replay", {"since": "2020-01-01T00:00:00Z"}, 400, "reason"),
        (
            f"{BASE}/replay",
            {"since": "2020-01-01T00:00:00Z", "reason": "r", "event_type": "lead.created"},
            400,
            "does not consume",
        ),
        ("/api/v1/consumers/nobody/replay", {"since": "2020-01-01T00:00:00Z"}, 404, "consumer"),
    ],
)
def test_replay_mistakes_get_clear_errors_and_change_nothing(
    org: Organization, path: str, body: dict[str, str], status: int, message: str
) -> None:
    eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
    response = api_client(org, "consumers:replay").post(path, body, format="json")
    assert response.status_code == status, response.content
    assert message in str(response.json())
    assert not Delivery.objects.filter(replay_id__isnull=False).exists()


def test_replay_needs_its_own_scope(org: Organization) -> None:
    body = {"since": "2020-01-01T00:00:00Z", "reason": "r"}
    response = api_client(org, "consumers:write").post(f"{BASE}/replay", body, format="json")
    assert response.status_code == 403


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (f"{BASE}/pause", {"reason": 123}),
        (f"{BASE}/resume", {"reason": 123}),
        (f"{BASE}/replay", {"since": "2020-01-01T00:00:00Z", "reason": 123}),
        (f"{BASE}/replay", {"since": "2020-01-01T00:00:00Z", "reason": "r", "event_type": 7}),
        (f"{BASE}/pause", {"reason": "r", "until": "tomorrow"}),  # unknown field: a typo
    ],
    ids=["pause", "resume", "replay", "replay-event-type", "pause-unknown-field"],
)
def test_reasons_are_strings_not_numbers(platform: Organization, path: str, body: dict) -> None:
    client = api_client(platform, "consumers:write", "consumers:replay")
    error = error_of(client.post(path, body, format="json"), 400, "validation_error")
    wrong = [name for name, value in body.items() if not isinstance(value, str)] or ["until"]
    assert set(error["fields"]) == set(wrong), error
    assert not ConsumerState.objects.exists()
    assert not AuditLog.objects.filter(action__startswith="consumer.").exists()
