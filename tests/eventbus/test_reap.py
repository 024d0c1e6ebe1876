"""The reaper's charging rule (R-F1): only a delivery its worker held alone is charged."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine

import eventbus
from core.models import Organization
from eventbus.dispatch import claim as claims
from eventbus.store.models import Delivery, DeliveryAttempt

START = dt.datetime(2026, 11, 2, 12, 0, tzinfo=dt.UTC)
PAST_LEASE = dt.timedelta(seconds=31)  # the default lease is 30 s

pytestmark = pytest.mark.django_db


def emit(org: Organization, n: int) -> None:
    eventbus.emit_many(
        [{"event_type": "test.effect", "entity_kind": "t", "payload": {"n": i}} for i in range(n)],
        organization=org,
    )


def rows() -> set[tuple[object, ...]]:
    return set(
        Delivery.objects.filter(consumer="effect-a-worker").values_list(
            "status", "attempts", "isolate", "redelivered"
        )
    )


def test_a_worker_that_died_holding_several_charges_none_and_each_runs_alone(
    org: Organization,
) -> None:
    with time_machine.travel(START, tick=False) as clock:
        emit(org, 3)
        claims.claim(consumers=["effect-a-worker"], batch_size=10, worker_id="host:1")
        clock.shift(PAST_LEASE)
        reaped, dead = claims.reap()
        assert (reaped, dead) == (3, [])
        assert rows() == {("pending", 0, True, True)}  # refunded, marked
        reasons = set(Delivery.objects.values_list("redelivery_reason", flat=True))
        assert any("host:1" in (r or "") and "held 3" in (r or "") for r in reasons)
        assert not DeliveryAttempt.objects.exists()  # no failed attempt recorded
        # Ordinary claims leave them alone; the isolated claim takes one at a time.
        assert claims.claim(consumers=["effect-a-worker"], batch_size=10, worker_id="w").ids == []
        assert claims.isolated_due(["effect-a-worker"])
        alone = claims.claim_isolated(consumers=["effect-a-worker"], worker_id="w")
        assert len(alone.ids) == 1 and alone.events[0].redelivered
        assert alone.events[0].redelivery_reason


def test_a_worker_that_died_holding_one_charges_it(org: Organization) -> None:
    with time_machine.travel(START, tick=False) as clock:
        emit(org, 1)
        claims.claim(consumers=["effect-a-worker"], batch_size=10, worker_id="host:2")
        clock.shift(PAST_LEASE)
        assert claims.reap()[0] == 1
    assert rows() == {("pending", 1, True, True)}  # charged, runs alone next
    [attempt] = DeliveryAttempt.objects.all()
    assert (attempt.outcome, attempt.error_class) == ("retry", "LeaseExpired")


def test_an_isolated_delivery_that_dies_again_with_others_is_charged(
    org: Organization,
) -> None:
    with time_machine.travel(START, tick=False) as clock:
        emit(org, 2)
        Delivery.objects.filter(consumer="effect-a-worker").update(isolate=True)
        claims.claim_isolated(consumers=["effect-a-worker"], batch_size=2, worker_id="jobs:3")
        clock.shift(PAST_LEASE)
        assert claims.reap()[0] == 2
    assert rows() == {("pending", 1, True, True)}


def test_published_deliveries_never_taken_are_refunded_without_a_mark(
    org: Organization,
) -> None:
    eventbus.emit("test.broker", organization=org, entity_kind="t", payload={"n": 1})
    with time_machine.travel(START, tick=False) as clock:
        Delivery.objects.update(next_attempt_at=START)
        relay = f"{claims.RELAY_WORKER_PREFIX}host:4"
        claims.claim(consumers=["broker-effect-worker"], batch_size=10, worker_id=relay)
        clock.shift(PAST_LEASE)
        assert claims.reap()[0] == 1
    delivery = Delivery.objects.get(consumer="broker-effect-worker")
    assert (delivery.status, delivery.attempts) == ("pending", 0)
    assert (delivery.isolate, delivery.redelivered) == (False, False)  # the consumer never ran


def test_reprocess_clears_the_marks(org: Organization) -> None:
    emit(org, 1)
    Delivery.objects.filter(consumer="effect-a-worker").update(
        status="dead", isolate=True, redelivered=True, redelivery_reason="x"
    )
    [delivery] = Delivery.objects.filter(consumer="effect-a-worker")
    assert len(claims.reprocess([delivery.pk])) == 1
    delivery.refresh_from_db()
    assert (delivery.isolate, delivery.redelivered, delivery.redelivery_reason) == (
        False,
        False,
        None,
    )
