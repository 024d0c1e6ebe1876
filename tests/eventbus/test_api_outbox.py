"""Seed 004's /api/outbox over the event log: status mapping, limit, FAILED -> PENDING."""

from __future__ import annotations

import pytest

import eventbus
from core.models import AuditLog, Organization
from eventbus.store.models import Delivery
from tests.eventbus.test_services import dead_flaky
from tests.support.api import api_client, error_of

pytestmark = pytest.mark.django_db

OUTBOX = "/api/outbox"


def statuses(client: object, query: str = "") -> dict[str, str]:
    response = client.get(f"{OUTBOX}{query}")  # type: ignore[attr-defined]
    assert response.status_code == 200, response.content
    return {row["id"]: row["status"] for row in response.json()["results"]}


def test_rows_are_events_with_seed_statuses(org: Organization) -> None:
    (dead,) = dead_flaky(org)
    pending = eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
    published = eventbus.emit(
        "lead.won", organization=org, entity_kind="lead", payload={"value": 1, "won_at": 1}
    )
    client = api_client(org, "outbox:read")
    assert statuses(client) == {
        str(dead.event_id): "FAILED",
        str(pending.id): "PENDING",
        str(published.id): "PUBLISHED",
    }
    assert statuses(client, "?status=FAILED") == {str(dead.event_id): "FAILED"}
    assert statuses(client, "?status=PENDING") == {str(pending.id): "PENDING"}
    assert statuses(client, "?status=PUBLISHED") == {str(published.id): "PUBLISHED"}


def test_row_carries_the_seed_envelope(org: Organization) -> None:
    event = eventbus.emit(
        "lead.won",
        organization=org,
        entity_kind="lead",
        entity_id="00000000-0000-0000-0000-000000000009",
        payload={"value": 1, "won_at": 1},
        metadata={"trace_id": "trace-1"},
    )
    (row,) = api_client(org, "outbox:read").get(OUTBOX).json()["results"]
    assert row == {
        "id": str(event.id),
        "event_type": "lead.won",
        "event_version": 1,
        "organization_id": str(org.pk),
        "aggregate_type": "lead",
        "aggregate_id": "00000000-0000-0000-0000-000000000009",
        "correlation_id": "trace-1",
        "causation_id": None,
        "payload": {"value": 1, "won_at": 1},
        "status": "PUBLISHED",
        "attempts": 0,
        "last_error": None,
        "available_at": None,
        "occurred_at": row["occurred_at"],
    }


def test_limit_and_next_cursor(org: Organization) -> None:
    eventbus.emit_many(
        [{"event_type": "test.job", "entity_kind": "t", "payload": {"n": i}} for i in range(5)],
        organization=org,
    )
    client = api_client(org, "outbox:read")
    first = client.get(f"{OUTBOX}?limit=3").json()
    assert len(first["results"]) == 3
    rest = client.get(first["next"]).json()
    assert len(rest["results"]) == 2
    assert rest["next"] is None
    ids = [r["id"] for r in first["results"] + rest["results"]]
    assert len(set(ids)) == 5


def test_lowercase_or_unknown_status_is_a_400(org: Organization) -> None:
    client = api_client(org, "outbox:read")
    for value in ("failed", "DONE"):
        error = error_of(client.get(f"{OUTBOX}?status={value}"), 400, "validation_error")
        assert set(error["fields"]) == {"status"}


def test_reprocess_moves_a_failed_row_back_to_pending(org: Organization) -> None:
    (dead,) = dead_flaky(org)
    client = api_client(org, "outbox:reprocess")
    response = client.post(f"{OUTBOX}/{dead.event_id}/reprocess")
    assert response.status_code == 200, response.content
    assert response.json()["moved"] == 1
    assert response.json()["row"]["status"] == "PENDING"
    assert Delivery.objects.get(pk=dead.pk).status == "pending"
    assert AuditLog.objects.filter(action="delivery.reprocess").count() == 1


def test_reprocess_of_a_row_that_is_not_failed_is_a_409(org: Organization) -> None:
    event = eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
    client = api_client(org, "outbox:reprocess")
    error = error_of(client.post(f"{OUTBOX}/{event.id}/reprocess"), 409, "invalid_state")
    assert "PENDING" in error["message"]
    assert set(Delivery.objects.values_list("status", flat=True)) == {"pending"}
    assert not AuditLog.objects.filter(action="delivery.reprocess").exists()
