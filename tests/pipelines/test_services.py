"""Pipeline services: triggers need their consumer, updates validate as a whole, re-runs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.test.utils import override_settings

import eventbus
from core.models import AuditLog, Organization
from eventbus.store.models import EventLog
from eventbus.store.registry import registry
from pipelines import engine, selectors, services
from pipelines.context import event_context
from pipelines.definition import EVENT_WORKER, DefinitionError
from pipelines.handlers import event_pipeline_consumer, register_event_pipeline_consumer
from pipelines.models import Execution, Pipeline
from tests.support.pipelines import seed_example

pytestmark = pytest.mark.django_db

EMIT_JOB = {
    "nodes": [
        {"id": "start", "type": "start"},
        {"id": "c", "type": "condition", "config": {"expression": "payload.n > 5"}},
        {
            "id": "job",
            "type": "emit-event",
            "config": {"eventType": "test.job", "payload": {"n": "{{ payload.n }}"}},
        },
    ],
    "edges": [{"from": "start", "to": "c"}, {"from": "c", "to": "job", "branch": "true"}],
}


@pytest.fixture
def event_worker() -> Iterator[None]:
    listed = {**getattr(settings, "PIPELINES", {}), "EVENT_TYPES": ["test.effect"]}
    with override_settings(PIPELINES=listed), registry.temporarily():
        register_event_pipeline_consumer()
        yield


def test_an_event_trigger_needs_pipeline_event_worker_to_consume_the_type(
    org: Organization,
) -> None:
    with pytest.raises(ValueError, match="PIPELINES_EVENT_TYPES"):
        services.pipeline_create(
            organization=org, name="x", trigger="event.test.effect", definition=EMIT_JOB, actor="t"
        )
    assert not Pipeline.objects.exists()


@pytest.mark.usefixtures("event_worker")
def test_event_pipelines_run_their_condition_and_re_run_after_a_failure(
    org: Organization,
) -> None:
    pipeline = services.pipeline_create(
        organization=org, name="x", trigger="event.test.effect", definition=EMIT_JOB, actor="t"
    )
    small = eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
    big = eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 9})
    for event in (small, big):
        stored = EventLog.objects.get(pk=event.pk)
        engine.run(pipeline, context=event_context(services._as_event(stored)), event_id=event.id)
    (job,) = EventLog.objects.filter(event_type="test.job")
    assert job.metadata["causation_id"] == str(big.id)

    Pipeline.objects.filter(pk=pipeline.pk).update(
        definition={
            **EMIT_JOB,
            "nodes": [
                *EMIT_JOB["nodes"][:1],
                {**EMIT_JOB["nodes"][1], "config": {"expression": "payload.missing > 5"}},
                EMIT_JOB["nodes"][2],
            ],
        }
    )
    pipeline.refresh_from_db()
    third = eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 7})
    stored = EventLog.objects.get(pk=third.pk)
    failed = engine.run(
        pipeline, context=event_context(services._as_event(stored)), event_id=third.id
    )
    assert failed.failed and failed.execution.failed_node == "c"

    services.pipeline_update(pipeline, definition=EMIT_JOB, actor="ops")
    rerun = services.execution_rerun(failed.execution, actor="ops")
    assert (rerun.status, rerun.attempts) == ("SUCCEEDED", 2)
    assert EventLog.objects.filter(event_type="test.job").count() == 2
    assert AuditLog.objects.filter(action="pipeline.execution_rerun").count() == 1
    with pytest.raises(ValueError, match="only a FAILED execution"):
        services.execution_rerun(rerun, actor="ops")


def test_an_order_pre_execution_cannot_be_re_run(org: Organization) -> None:
    pipeline = services.pipeline_create(
        organization=org, name="pre", trigger="order.pre", definition=EMIT_JOB, actor="t"
    )
    execution = Execution.objects.create(
        organization=org,
        pipeline=pipeline,
        trigger="order.pre",
        status="FAILED",
        started_at=pipeline.created_at,
    )
    with pytest.raises(ValueError, match="no trigger event"):
        services.execution_rerun(execution, actor="ops")


def test_updates_are_validated_and_audited(org: Organization) -> None:
    pipeline = services.pipeline_create(
        organization=org,
        name="ERP",
        trigger="order.post",
        definition=seed_example("https://erp.example.com/orders"),
        actor="t",
    )
    with pytest.raises(DefinitionError):
        services.pipeline_update(pipeline, definition={"nodes": []}, actor="ops")
    with pytest.raises(ValueError, match="unknown field"):
        services.pipeline_update(pipeline, organization_id=org.pk, actor="ops")
    pipeline.refresh_from_db()
    assert pipeline.definition["nodes"][0]["id"] == "start"
    services.pipeline_update(pipeline, enabled=False, actor="ops")
    assert list(
        AuditLog.objects.filter(target_id=str(pipeline.pk))
        .order_by("id")  # written in this order; without it, whatever order the heap returns
        .values_list("action", flat=True)
    ) == ["pipeline.create", "pipeline.update"]


def test_the_tenants_pipelines_flag_pauses_every_trigger_and_resumes_them(
    org: Organization,
) -> None:
    pipeline = services.pipeline_create(
        organization=org, name="pre", trigger="order.pre", definition=EMIT_JOB, actor="t"
    )
    assert selectors.enabled_pipeline(org.pk, "order.pre") == pipeline
    Organization.objects.filter(pk=org.pk).update(feature_flags={"pipelines": False})
    assert selectors.enabled_pipeline(org.pk, "order.pre") is None
    assert Pipeline.objects.get(pk=pipeline.pk).enabled  # paused by the flag, not disabled
    Organization.objects.filter(pk=org.pk).update(feature_flags={"pipelines": True})
    assert selectors.enabled_pipeline(org.pk, "order.pre") == pipeline


def test_pipeline_event_worker_subscribes_to_the_types_set_when_it_is_registered() -> None:
    """PIPELINES_EVENT_TYPES is read at registration, not frozen when the module was imported."""
    base = getattr(settings, "PIPELINES", {})
    listed = ["test.effect", "order.confirmed"]  # order.confirmed is order-post-worker's
    with registry.temporarily(), override_settings(PIPELINES={**base, "EVENT_TYPES": listed}):
        register_event_pipeline_consumer()
        assert registry.get(EVENT_WORKER).events == ("test.effect",)
        assert EVENT_WORKER in {c.name for c in registry.for_event("test.effect")}
        with override_settings(PIPELINES={**base, "EVENT_TYPES": []}):
            assert event_pipeline_consumer() is None
            register_event_pipeline_consumer()
            assert EVENT_WORKER not in {c.name for c in registry.for_event("test.effect")}
