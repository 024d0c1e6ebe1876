"""Provenance and causation depth (eventbus.store.provenance): what a handler emits names its
consumer and its cause, one generation deeper; a chain past EVENTBUS_MAX_CAUSATION_DEPTH is cut,
dead at once; a paginated job's next page stays in its generation."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from django.test import override_settings
from django.utils import timezone

import eventbus
from core.models import Organization
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.store import provenance
from eventbus.store.errors import CausationTooDeep
from eventbus.store.event import Event
from eventbus.store.models import Delivery, EventLog
from eventbus.store.registry import make_consumer, registry

pytestmark = pytest.mark.django_db

LOOP = "loop-worker"


def echo(event: eventbus.Event) -> None:
    """Emits its own type again: a loop only the depth limit stops."""
    eventbus.emit(
        "test.job",
        organization=event.organization_id,
        entity_kind="thing",
        payload={"n": event.payload["n"] + 1},
    )


@pytest.fixture
def loop() -> Iterator[None]:
    with registry.temporarily(make_consumer(LOOP, echo, events=["test.job"], max_attempts=5)):
        yield


def drain(*consumers: str) -> None:
    worker = Worker(WorkerOptions(consumers=list(consumers), listen=False))
    while worker.run_once():
        pass


def test_a_handlers_event_names_its_consumer_cause_and_generation(org: Organization) -> None:
    start = eventbus.emit("test.chain_start", organization=org, entity_kind="t", payload={"n": 1})
    assert "causation_depth" not in start.metadata  # generation 0
    drain("chain-worker")
    following = EventLog.objects.get(event_type="test.chain_next")
    assert following.provenance == {
        "door": "app",
        "producer": "app:tests",
        "component": "consumer:chain-worker",
    }
    assert following.metadata["causation_id"] == str(start.id)
    assert following.metadata["causation_depth"] == 1


@pytest.mark.usefixtures("loop")
def test_a_loop_is_cut_at_the_depth_limit_and_its_last_delivery_dies_at_once(
    org: Organization,
) -> None:
    with override_settings(EVENTBUS={"MAX_CAUSATION_DEPTH": 3}):
        eventbus.emit("test.job", organization=org, entity_kind="thing", payload={"n": 0})
        drain(LOOP)
    depths = sorted(e.metadata.get("causation_depth", 0) for e in EventLog.objects.all())
    assert depths == [0, 1, 2, 3]
    dead = Delivery.objects.get(consumer=LOOP, status="dead")
    assert dead.attempts == 1  # permanent: not retried
    assert "EVENTBUS_MAX_CAUSATION_DEPTH (3)" in (dead.last_error or "")
    assert Delivery.objects.filter(consumer=LOOP, status="done").count() == 3


def test_the_default_depth_leaves_room_for_the_platforms_longest_chain(
    org: Organization,
) -> None:
    deep = _event(org, "nuvemshop.sync_page", depth=3)  # the event a handler runs
    with provenance.handling(deep):
        # The next page of a full sync is the same generation, however many pages.
        depth, _ = provenance.chain(provenance.inferred(None), "nuvemshop.sync_page", limit=8)
        assert depth == 3
        depth, _ = provenance.chain(provenance.inferred(None), "nuvemshop.product_synced", limit=8)
        assert depth == 4
        # Through a door the continuation does not apply: a pipeline's emit is a generation.
        depth, pipelines = provenance.chain(
            provenance.Provenance.pipeline("p1", "x1"), "nuvemshop.sync_page", limit=8
        )
        assert (depth, pipelines) == (4, ("p1",))
    deepest = _event(org, "test.job", depth=8)
    with provenance.handling(deepest), pytest.raises(CausationTooDeep, match="generation 9"):
        provenance.chain(provenance.inferred(None), "test.job", limit=8)


def _event(org: Organization, event_type: str, *, depth: int) -> Event:
    return Event(
        id=uuid.uuid4(),
        organization_id=org.pk,
        event_type=event_type,
        entity_kind="t",
        entity_id=None,
        payload={},
        metadata={"causation_depth": depth},
        created_at=timezone.now(),
    )
