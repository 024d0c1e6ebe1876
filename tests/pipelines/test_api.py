"""`/api/v1/pipelines...`, seed 004's `/api/pipelines/{id}/executions` and `POST /api/v1/orders`."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from core.models import Organization
from crm.models import Order
from eventbus.store.models import EventLog
from pipelines import engine, services
from pipelines.context import order_context
from pipelines.models import Execution, Pipeline
from tests.support.api import api_client, error_of
from tests.support.pipelines import seed_example
from tests.support.receiver import Receiver, Reply

pytestmark = pytest.mark.django_db

ORDER = {
    "number": "P-100",
    "total_cents": 2500,
    "items": [{"sku": "CAM-1", "name": "Camiseta", "qty": 2, "unit_cents": 1250}],
    "customer": {"name": "Maria Silva", "email": "maria@example.com"},
}


def pre_pipeline(org: Organization, nodes: list[dict[str, Any]]) -> Pipeline:
    ids = ["start", *(n["id"] for n in nodes)]
    return services.pipeline_create(
        organization=org,
        name="pre",
        trigger="order.pre",
        definition={
            "nodes": [{"id": "start", "type": "start"}, *nodes],
            "edges": [{"from": a, "to": b} for a, b in itertools.pairwise(ids)],
        },
        actor="test",
    )


def test_an_order_without_order_pre_is_confirmed_with_a_fat_event(org: Organization) -> None:
    response = api_client(org, "orders:write").post("/api/v1/orders", ORDER, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["number"], body["status"], body["pre_execution_id"]) == (
        "P-100",
        "confirmed",
        None,
    )
    order = Order.objects.get(pk=body["id"])
    assert (order.organization_id, order.customer_name) == (org.pk, "Maria Silva")
    (event,) = EventLog.objects.filter(event_type="order.confirmed")
    assert event.payload["items"] == [
        {"sku": "CAM-1", "name": "Camiseta", "qty": 2, "unit_cents": 1250}
    ]
    assert (event.payload["total_cents"], event.payload["total_amount"]) == (2500, "25.00")
    assert "Maria" not in str(event.payload)  # no customer identity in the event


@pytest.mark.usefixtures("loopback_allowed")
def test_a_failing_order_pre_is_a_422_naming_the_step_and_writes_nothing(
    org: Organization, receiver: Receiver
) -> None:
    receiver.replies["/check"] = Reply(status=500, body=b"stock service down")
    pre_pipeline(
        org,
        [
            {"id": "tag", "type": "set-status", "config": {"statusTag": "checking"}},
            {"id": "stock", "type": "http-request", "config": {"url": receiver.url("/check")}},
        ],
    )
    before = EventLog.objects.count()
    response = api_client(org, "orders:write").post("/api/v1/orders", ORDER, format="json")
    error = error_of(response, 422, "pipeline_failed")
    assert "'stock'" in error["message"]
    assert "HTTP 500" in error["fields"]["pipeline.stock"][0]
    assert not Order.objects.exists()
    assert EventLog.objects.count() == before
    assert not Execution.objects.exists()
    assert len(receiver.on("/check")) == 1


def test_order_pre_emits_events_with_the_order_and_sets_its_status(org: Organization) -> None:
    pre_pipeline(
        org,
        [
            {
                "id": "big",
                "type": "emit-event",
                "config": {
                    "eventType": "test.effect",
                    "entityKind": "order",
                    "payload": {"n": "{{ orderNumber }}:{{ order.totalAmount }}"},
                },
            },
            {"id": "tag", "type": "set-status", "config": {"statusTag": "pre_ok", "phase": "pre"}},
        ],
    )
    client = api_client(org)
    response = client.post("/api/v1/orders", ORDER, format="json")
    assert response.status_code == 201, response.content
    order = Order.objects.get(pk=response.json()["id"])
    assert (order.status_tag, order.phase) == ("pre_ok", "pre")
    confirmed = EventLog.objects.get(event_type="order.confirmed")
    emitted = EventLog.objects.get(event_type="test.effect")
    assert emitted.payload == {"n": "P-100:25.00"}
    assert emitted.metadata["causation_id"] == str(confirmed.id)
    assert emitted.entity_id == order.pk
    execution = Execution.objects.get(pk=response.json()["pre_execution_id"])
    assert (execution.status, execution.order_id, execution.trigger) == (
        "SUCCEEDED",
        order.pk,
        "order.pre",
    )
    assert [s.node_id for s in execution.steps.order_by("position")] == ["big", "tag"]
    rows = {r["id"]: r for r in client.get("/api/outbox").json()["results"]}
    assert rows[str(emitted.id)]["causation_id"] == str(confirmed.id)
    assert "correlation_id" in rows[str(emitted.id)]
    assert rows[str(confirmed.id)]["causation_id"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({k: v for k, v in ORDER.items() if k != "number"}, "number"),
        ({**ORDER, "number": "   "}, "number"),
        ({**ORDER, "total_cents": -1}, "total_cents"),
        ({**ORDER, "total_cents": 2499}, "total_cents"),
        ({**ORDER, "currency": "real"}, "currency"),
        ({**ORDER, "items": [{"name": "x", "qty": 0, "unit_cents": 1}]}, "items.0.qty"),
        ({**ORDER, "organization": "00000000-0000-0000-0000-000000000000"}, "organization"),
        ({**ORDER, "customer": {"email": "not-an-email"}}, "customer.email"),
    ],
)
def test_bad_orders_are_400s_on_the_field(
    org: Organization, body: dict[str, Any], field: str
) -> None:
    response = api_client(org).post("/api/v1/orders", body, format="json")
    error = error_of(response, 400, "validation_error")
    assert field in error["fields"], error
    assert not Order.objects.exists()


def test_a_confirmed_number_is_a_409_and_the_scope_is_required(org: Organization) -> None:
    client = api_client(org, "orders:write")
    assert client.post("/api/v1/orders", ORDER, format="json").status_code == 201
    error_of(client.post("/api/v1/orders", ORDER, format="json"), 409, "invalid_state")
    assert EventLog.objects.filter(event_type="order.confirmed").count() == 1
    reader = api_client(org, "pipelines:read")
    error_of(
        reader.post("/api/v1/orders", {**ORDER, "number": "P-2"}, format="json"),
        403,
        "permission_denied",
    )


def test_pipelines_crud_with_validation_errors_by_node(org: Organization) -> None:
    client = api_client(org, "pipelines:write")
    bad = seed_example("https://erp.example.com/orders")
    bad["nodes"][1]["config"].pop("url")
    bad["edges"].append({"from": "ok", "to": "ghost"})
    response = client.post(
        "/api/v1/pipelines",
        {"name": "ERP", "trigger": "order.post", "definition": bad},
        format="json",
    )
    error = error_of(response, 400, "validation_error")
    assert "config.url is required" in error["fields"]["definition.notify"][0]
    assert "not a node" in error["fields"]["definition.ok"][0]
    assert not Pipeline.objects.exists()

    error = error_of(
        client.post(
            "/api/v1/pipelines",
            {"name": "x", "trigger": "order.mid", "definition": seed_example("https://a.example")},
            format="json",
        ),
        400,
        "validation_error",
    )
    assert "trigger" in error["fields"]

    good = {
        "name": "ERP",
        "trigger": "order.post",
        "definition": seed_example("https://erp.example.com/orders"),
    }
    created = client.post("/api/v1/pipelines", good, format="json")
    assert created.status_code == 201, created.content
    pipeline_id = created.json()["id"]
    assert Pipeline.objects.get(pk=pipeline_id).organization_id == org.pk
    error_of(client.post("/api/v1/pipelines", good, format="json"), 409, "invalid_state")

    listed = client.get("/api/v1/pipelines").json()["results"]  # write implies read
    assert [p["id"] for p in listed] == [pipeline_id]

    response = client.patch(f"/api/v1/pipelines/{pipeline_id}", {"definition": bad}, format="json")
    error_of(response, 400, "validation_error")
    assert Pipeline.objects.get(pk=pipeline_id).definition == good["definition"]
    response = client.patch(f"/api/v1/pipelines/{pipeline_id}", {"enabled": False}, format="json")
    assert response.status_code == 200 and response.json()["enabled"] is False
    assert client.post("/api/v1/pipelines", good, format="json").status_code == 201

    reader = api_client(org, "pipelines:read")
    assert reader.get(f"/api/v1/pipelines/{pipeline_id}").status_code == 200
    error_of(reader.post("/api/v1/pipelines", good, format="json"), 403, "permission_denied")
    error_of(
        reader.patch(f"/api/v1/pipelines/{pipeline_id}", {"enabled": True}, format="json"),
        403,
        "permission_denied",
    )


@pytest.mark.usefixtures("loopback_allowed")
def test_executions_with_their_steps_at_both_paths(org: Organization, receiver: Receiver) -> None:
    pipeline = services.pipeline_create(
        organization=org,
        name="ERP",
        trigger="order.post",
        definition=seed_example(receiver.url("/orders")),
        actor="test",
    )
    from crm.services import order_confirm

    order = order_confirm(organization=org, number="E-1", total_cents=990)
    event = EventLog.objects.get(event_type="order.confirmed")
    receiver.replies["/orders"] = Reply(status=502)
    engine.run(pipeline, context=order_context(event.payload), event_id=event.id, order_id=order.pk)
    client = api_client(org, "pipelines:read")
    for path in (
        f"/api/v1/pipelines/{pipeline.pk}/executions",
        f"/api/pipelines/{pipeline.pk}/executions",
    ):
        response = client.get(path)
        assert response.status_code == 200, response.content
        (execution,) = response.json()["results"]
        assert (execution["status"], execution["failed_node"], execution["event_id"]) == (
            "FAILED",
            "notify",
            str(event.id),
        )
        (step,) = execution["steps"]
        assert (step["node_id"], step["status"]) == ("notify", "FAILED")
        assert "HTTP 502" in step["error"] and step["duration_ms"] is not None
    assert client.get(f"/api/v1/pipelines/{pipeline.pk}/executions?status=SUCCEEDED").json() == {
        "results": []
    }
    error_of(
        client.get(f"/api/v1/pipelines/{pipeline.pk}/executions?limit=0"), 400, "validation_error"
    )


def test_an_order_confirmed_while_order_pre_ran_is_a_409(
    org: Organization, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another request confirmed the same number while this one's order.pre ran: 409, and
    this request's order.pre events are not written."""
    from crm.services import order_confirm

    pre_pipeline(
        org,
        [
            {
                "id": "e",
                "type": "emit-event",
                "config": {"eventType": "test.job", "payload": {"n": 1}},
            }
        ],
    )
    real_run = engine.run

    def run_then_lose_the_race(*args: Any, **kwargs: Any) -> engine.Outcome:
        outcome = real_run(*args, **kwargs)
        order_confirm(organization=org, number=ORDER["number"], total_cents=2500)
        return outcome

    monkeypatch.setattr(engine, "run", run_then_lose_the_race)
    error_of(api_client(org).post("/api/v1/orders", ORDER, format="json"), 409, "invalid_state")
    assert EventLog.objects.filter(event_type="order.confirmed").count() == 1
    assert not EventLog.objects.filter(event_type="test.job").exists()
    assert not Execution.objects.exists()


@pytest.mark.usefixtures("loopback_allowed")
def test_an_idempotency_key_replays_success_but_not_a_failed_order_pre(
    org: Organization, receiver: Receiver
) -> None:
    from tests.support.api import client_for, issue_key

    receiver.replies["/check"] = Reply(status=503)
    pre_pipeline(
        org, [{"id": "stock", "type": "http-request", "config": {"url": receiver.url("/check")}}]
    )
    client = client_for(issue_key(org, "orders:write"), HTTP_IDEMPOTENCY_KEY="order-P-100")
    error_of(client.post("/api/v1/orders", ORDER, format="json"), 422, "pipeline_failed")

    receiver.replies["/check"] = Reply(status=200)
    first = client.post("/api/v1/orders", ORDER, format="json")  # the same key runs again
    assert first.status_code == 201, first.content
    again = client.post("/api/v1/orders", ORDER, format="json")
    assert again.status_code == 201 and again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert Order.objects.count() == 1
    assert len(receiver.on("/check")) == 2
    other = client.post("/api/v1/orders", {**ORDER, "number": "P-101"}, format="json")
    error_of(other, 409, "idempotency_conflict")
