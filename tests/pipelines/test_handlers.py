"""order-post-worker and pipeline-event-worker through the real broker path: `drain_events`
(the relay) and `rundramatiq` (the jobs process) in real subprocesses, the ERP a loopback
receiver. Seed 004's example end to end: FAILED, retried with backoff, dead after
ORDER_POST_ATTEMPTS, reprocessed through POST /api/outbox/{id}/reprocess, then SUCCEEDED."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

import eventbus
from core.models import Organization
from crm.models import Order
from crm.services import order_confirm
from eventbus.store.models import Delivery
from pipelines import services
from pipelines.models import AllowedHost, Execution
from tests.eventbus.test_broker_processes import FAST_RELAY, Backend, postgres_port
from tests.support.api import api_client
from tests.support.pipelines import emit_definition, seed_example
from tests.support.processes import Managed, start_jobs
from tests.support.receiver import Receiver, Reply
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ATTEMPTS = 3
RETRY_SCHEDULE = (1.0, 2.0)  # seconds before the 2nd and the 3rd attempt (no jitter)
PIPELINE_ENV = {
    **FAST_RELAY,
    "EVENTBUS_RETRY_SCHEDULE": ",".join(str(s) for s in RETRY_SCHEDULE),
    "ORDER_POST_ATTEMPTS": str(ATTEMPTS),
    "PIPELINES_ALLOW_PRIVATE_TARGETS": "true",
    "PIPELINES_EVENT_TYPES": "test.effect",
}


@pytest.fixture
def workers(managed: list[Managed], settings: Any) -> list[Managed]:
    """The jobs process and the relay on the Postgres broker; attempts as the workers see them."""
    settings.EVENTBUS = {
        **settings.EVENTBUS,
        "CONSUMER_MAX_ATTEMPTS": {"order-post-worker": ATTEMPTS},
    }
    backend = Backend("postgres", postgres_port())
    backend.purge()
    managed.append(start_jobs(**backend.env(), **PIPELINE_ENV))
    managed.append(Managed("drain_events", **backend.env(), **PIPELINE_ENV))
    return managed


def logs(managed: list[Managed]) -> str:
    return "\n".join(p.output() for p in managed)


def test_the_seed_example_fails_retries_dies_and_is_reprocessed_to_success(
    org: Organization, side_effects: None, receiver: Receiver, workers: list[Managed]
) -> None:
    AllowedHost.objects.create(organization=org, host="127.0.0.1")
    pipeline = services.pipeline_create(
        organization=org,
        name="ERP",
        trigger="order.post",
        definition=seed_example(receiver.url("/orders")),
        actor="test",
    )
    receiver.replies["/orders"] = Reply(status=503, body=b"ERP down")
    order = order_confirm(organization=org, number="S-1", total_cents=4990)
    delivery = Delivery.objects.get(event__entity_id=order.pk, consumer="order-post-worker")
    assert delivery.max_attempts == ATTEMPTS

    wait_for(
        lambda: Delivery.objects.get(pk=delivery.pk).status == "dead",
        timeout=120,
        what=lambda: f"order-post-worker dead after {ATTEMPTS} attempts; logs:\n{logs(workers)}",
    )
    dead = Delivery.objects.get(pk=delivery.pk)
    assert dead.attempts == ATTEMPTS
    calls = receiver.on("/orders")
    assert len(calls) == ATTEMPTS
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(calls)]
    assert all(gap >= wait * 0.9 for gap, wait in zip(gaps, RETRY_SCHEDULE, strict=True)), gaps
    execution = Execution.objects.get(pipeline=pipeline)
    assert (execution.status, execution.attempts, execution.failed_node) == (
        "FAILED",
        ATTEMPTS,
        "notify",
    )
    assert {c.headers["idempotency-key"] for c in calls} == {f"{execution.id}:notify"}
    order.refresh_from_db()
    assert (order.status, order.status_tag, order.post_processed_at) == ("confirmed", "", None)

    client = api_client(org)
    (row,) = client.get("/api/outbox?status=FAILED").json()["results"]
    assert row["id"] == str(dead.event_id)
    assert "notify" in row["last_error"] and "503" in row["last_error"]

    receiver.replies["/orders"] = Reply(status=200, body=b"accepted")
    response = client.post(f"/api/outbox/{dead.event_id}/reprocess", {}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["moved"] == 1
    wait_for(
        lambda: Delivery.objects.get(pk=delivery.pk).status == "done",
        timeout=90,
        what=lambda: f"the reprocessed delivery done; logs:\n{logs(workers)}",
    )
    execution.refresh_from_db()
    assert (execution.status, execution.attempts) == ("SUCCEEDED", ATTEMPTS + 1)
    assert [(s.node_id, s.status) for s in execution.steps.order_by("position")] == [
        ("notify", "SUCCEEDED"),
        ("ok", "SUCCEEDED"),
    ]
    order.refresh_from_db()
    assert (order.status_tag, order.status_name, order.phase) == (
        "success",
        "Integrado ao ERP",
        "order.post",
    )
    assert order.post_processed_at is not None
    assert len(receiver.on("/orders")) == ATTEMPTS + 1
    (published,) = [
        r for r in client.get("/api/outbox").json()["results"] if r["id"] == str(dead.event_id)
    ]
    assert published["status"] == "PUBLISHED"


def test_without_a_pipeline_order_post_only_stamps_the_order(
    org: Organization, side_effects: None, workers: list[Managed]
) -> None:
    order = order_confirm(organization=org, number="N-1", total_cents=100)
    wait_for(
        lambda: Order.objects.get(pk=order.pk).post_processed_at is not None,
        timeout=60,
        what=lambda: f"the order post-processed; logs:\n{logs(workers)}",
    )
    assert not Execution.objects.exists()
    assert Order.objects.get(pk=order.pk).status_tag == ""


def test_an_event_type_pipeline_runs_in_pipeline_event_worker(
    org: Organization, side_effects: None, workers: list[Managed]
) -> None:
    """PIPELINES_EVENT_TYPES=test.effect in the workers: its event.test.effect pipeline runs."""
    from eventbus.store.registry import make_consumer, registry
    from pipelines.handlers import run_event_pipeline

    worker = make_consumer(
        "pipeline-event-worker", run_event_pipeline, events=["test.effect"], runs_on="broker"
    )
    with registry.temporarily(worker):  # this (emitting) process subscribes it as the workers do
        services.pipeline_create(
            organization=org,
            name="relay effects",
            trigger="event.test.effect",
            definition=emit_definition("test.job"),
            actor="test",
        )
        trigger = eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 7})
    wait_for(
        lambda: Execution.objects.filter(event_id=trigger.id, status="SUCCEEDED").exists(),
        timeout=60,
        what=lambda: f"the event.test.effect execution; logs:\n{logs(workers)}",
    )
    from eventbus.store.models import EventLog

    (emitted,) = EventLog.objects.filter(event_type="test.job")
    assert emitted.metadata["causation_id"] == str(trigger.id)
    assert emitted.payload == {"n": "7"}
