"""Upcasters (eventbus.store.catalog.upcaster, Event.upcast): a delivery stored under an old payload
version reaches its handler in the version the deploy's upcasters lead to; the stored event
stays as written; an upcast that cannot be done dead-letters with its reason."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import eventbus
from core.models import Organization
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.operations import services
from eventbus.store import catalog
from eventbus.store.errors import EventValidationError, UpcastError
from eventbus.store.models import Delivery, DeliveryAttempt, EventLog
from tests.support.consumers import VERSIONED_SEEN

TODAY = dt.date(2026, 12, 1)


@pytest.fixture
def deploy_v2() -> Iterator[None]:
    """The "next deploy": test.versioned v2 (amount_cents) is declared; undone afterwards."""
    catalog.declare("test.versioned", version=2, required=["amount_cents"])
    VERSIONED_SEEN.clear()
    yield
    catalog._schemas["test.versioned"].pop(2, None)
    catalog._upcasters.pop("test.versioned", None)
    VERSIONED_SEEN.clear()


def to_cents(payload: dict[str, Any]) -> dict[str, Any]:
    return {"amount_cents": round(float(payload.pop("amount")) * 100), **payload}


def drain() -> None:
    worker = Worker(WorkerOptions(consumers=["versioned-worker"], listen=False))
    while worker.run_once():
        pass


def dead_letter_under_v1(org: Organization) -> EventLog:
    """Emitted as v1 (the version then current); its v2-expecting handler fails: dead."""
    event = eventbus.emit(
        "test.versioned",
        organization=org,
        entity_kind="t",
        payload={"amount": "12.34", "note": "kept"},
        metadata={"schema_version": 1},
    )
    drain()
    assert Delivery.objects.get(event=event, consumer="versioned-worker").status == "dead"
    return event


def reprocess(org: Organization, event: EventLog) -> None:
    moved = services.event_reprocess(
        organization_id=org.pk, event_id=event.pk, actor="user:ops", reason="deployed v2"
    )
    assert moved == 1


@pytest.mark.django_db
@pytest.mark.usefixtures("deploy_v2")
def test_a_v1_dead_letter_reprocessed_after_the_deploy_reaches_the_v2_handler_upcast(
    org: Organization,
) -> None:
    event = dead_letter_under_v1(org)
    catalog.upcaster("test.versioned", from_version=1)(to_cents)
    reprocess(org, event)
    drain()
    assert Delivery.objects.get(event=event, consumer="versioned-worker").status == "done"
    assert VERSIONED_SEEN[-1] == {"payload": {"amount_cents": 1234, "note": "kept"}, "version": 2}
    stored = EventLog.objects.get(pk=event.pk)  # the log keeps what was written
    assert stored.payload == {"amount": "12.34", "note": "kept"}
    assert stored.metadata["schema_version"] == 1


@pytest.mark.django_db
@pytest.mark.usefixtures("deploy_v2")
def test_a_broken_upcaster_dead_letters_at_once_with_its_reason(org: Organization) -> None:
    event = dead_letter_under_v1(org)

    @catalog.upcaster("test.versioned", from_version=1)
    def broken(payload: dict[str, Any]) -> dict[str, Any]:
        return {"amount_in_cents": payload["amount"]}  # not v2's required field

    reprocess(org, event)
    VERSIONED_SEEN.clear()
    drain()
    delivery = Delivery.objects.get(event=event, consumer="versioned-worker")
    assert (delivery.status, delivery.attempts) == ("dead", 1)
    assert delivery.error_class == "UpcastError"
    assert "upcasting test.versioned v1 to v2 failed" in (delivery.last_error or "")
    assert "amount_cents" in (delivery.last_error or "")
    assert VERSIONED_SEEN == []  # the handler never saw a payload it cannot read
    attempt = DeliveryAttempt.objects.filter(delivery=delivery).order_by("-id").first()
    assert attempt is not None and attempt.outcome == "dead"


def test_upcasting_steps_through_versions_and_checks_each_result() -> None:
    catalog.declare("steps.thing", version=1, required=["a"])
    catalog.declare("steps.thing", version=2, required=["b"])
    catalog.declare("steps.thing", version=3, required=["c"])
    catalog.upcaster("steps.thing", from_version=1)(lambda p: {"b": p["a"] + 1})
    catalog.upcaster("steps.thing", from_version=2)(lambda p: {"c": p["b"] * 10})
    assert catalog.upcast("steps.thing", 1, {"a": 1}, TODAY) == (3, {"c": 20})
    assert catalog.upcast("steps.thing", 3, {"c": 5}, TODAY) == (3, {"c": 5})
    with pytest.raises(UpcastError, match=r"steps.thing v7 is not declared .*v1, v2, v3"):
        catalog.upcast("steps.thing", 7, {}, TODAY)
    with pytest.raises(UpcastError, match="v1 to v2 failed: KeyError"):
        catalog.upcast("steps.thing", 1, {"z": 1}, TODAY)


def test_an_old_version_without_an_upcaster_is_refused_once_its_support_is_over() -> None:
    catalog.declare("gap.thing", version=1, required=["a"])
    catalog.declare("gap.thing", version=2, required=["a"], superseded_on=dt.date(2026, 1, 1))
    catalog.declare("gap.thing", version=3, required=["a", "b"])
    catalog.upcaster("gap.thing", from_version=1)(lambda p: p)
    assert catalog.upcast("gap.thing", 1, {"a": 1}, dt.date(2026, 1, 15)) == (2, {"a": 1})
    with pytest.raises(UpcastError, match="no upcaster from v2 to v3"):
        catalog.upcast("gap.thing", 1, {"a": 1}, dt.date(2026, 3, 1))


def test_an_upcaster_needs_both_versions_declared_and_only_one_per_step() -> None:
    catalog.declare("lonely.thing", version=1, required=["a"])
    with pytest.raises(EventValidationError, match="declare v1 and v2 first"):
        catalog.upcaster("lonely.thing", from_version=1)(lambda p: p)
    catalog.declare("lonely.thing", version=2, required=["a"])
    catalog.upcaster("lonely.thing", from_version=1)(to_cents)
    with pytest.raises(EventValidationError, match="already has an upcaster from v1"):
        catalog.upcaster("lonely.thing", from_version=1)(lambda p: p)


def test_a_type_without_upcasters_is_handed_over_as_stored() -> None:
    event = eventbus.Event(
        id=uuid.uuid4(),
        organization_id=uuid.uuid4(),
        event_type="test.effect",
        entity_kind="t",
        entity_id=None,
        payload='{"n": 1}',
        metadata="{}",
        created_at=dt.datetime(2026, 12, 1, tzinfo=dt.UTC),
    )
    assert event.upcast() is event
    assert isinstance(event._payload, str)  # not even decoded
