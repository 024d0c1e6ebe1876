"""The pipeline consumers act only inside their organization, and an event.<type> pipeline
never runs for an event its own chain produced (issue 38). In-process: the consumers are
registered to run on the drain for these tests (the broker path is tests/pipelines/
test_handlers.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.utils import timezone

import eventbus
from core.models import Organization
from crm.models import Order
from eventbus.store.models import EventLog
from eventbus.store.registry import make_consumer, registry
from pipelines import metrics, services
from pipelines.handlers import order_post, run_event_pipeline
from pipelines.models import Execution
from tests.support.factories import OrderFactory
from tests.support.pipelines import emit_definition
from tests.support.tenancy import assert_refused, drain

pytestmark = pytest.mark.django_db

ORDER_POST = "order-post-worker"
EVENT_WORKER = "pipeline-event-worker"


@pytest.fixture
def in_process() -> Iterator[None]:
    with registry.temporarily(
        make_consumer(ORDER_POST, order_post, events=["order.confirmed"], max_attempts=2),
        make_consumer(EVENT_WORKER, run_event_pipeline, events=["test.effect"], max_attempts=2),
    ):
        yield


@pytest.mark.usefixtures("in_process", "enforced")
def test_order_confirmed_naming_another_tenants_order_is_refused(
    org: Organization, org_b: Organization
) -> None:
    order = OrderFactory(organization=org, status=Order.Status.CONFIRMED)
    attack = eventbus.emit(
        "order.confirmed",
        organization=org_b,
        entity_kind="order",
        entity_id=order.pk,
        payload={
            "order_id": str(order.pk),
            "number": order.number,
            "total_cents": 1,
            "currency": "BRL",
            "confirmed_at": timezone.now().isoformat(),
        },
    )
    drain(ORDER_POST)
    assert_refused(attack, ORDER_POST, org_b)
    order.refresh_from_db()
    assert order.post_processed_at is None


@pytest.mark.usefixtures("in_process", "side_effects")
def test_a_pipeline_that_emits_its_own_trigger_runs_once(org: Organization) -> None:
    pipeline = services.pipeline_create(
        organization=org,
        name="echo",
        trigger="event.test.effect",
        definition=emit_definition("test.effect"),
        actor="test",
    )
    refused_before = metrics.LOOPS_REFUSED._value.get()
    first = eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
    drain(EVENT_WORKER)
    assert Execution.objects.filter(pipeline=pipeline).count() == 1
    echoed = EventLog.objects.exclude(pk=first.pk).get(event_type="test.effect")
    assert echoed.provenance is not None
    assert echoed.provenance["producer"] == f"pipeline:{pipeline.pk}"
    assert echoed.metadata["pipelines"] == [str(pipeline.pk)]
    assert echoed.metadata["causation_depth"] == 1
    assert metrics.LOOPS_REFUSED._value.get() == refused_before + 1
