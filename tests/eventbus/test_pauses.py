"""Pausing a consumer: its deliveries stay pending with no attempt charged, what a worker claimed
concurrently is released (refunded), resuming drains them; the claims' cost stays O(batch)."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import eventbus
from core.db import conninfo
from core.models import AuditLog, Organization
from eventbus.dispatch import claim as claims
from eventbus.dispatch.drain import DrainPump
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.operations import services
from eventbus.store.emitter import WAKEUP_CHANNEL
from eventbus.store.models import Delivery
from eventbus.store.registry import registry
from tests.support.consumers import EFFECT_CONSUMERS
from tests.support.db import claim_plan

A, B, C = EFFECT_CONSUMERS


def emit(org: Organization, n: int) -> None:
    eventbus.emit_many(
        [{"event_type": "test.effect", "entity_kind": "t", "payload": {"n": i}} for i in range(n)],
        organization=org,
    )


def states(consumer: str) -> list[tuple[str, int]]:
    rows = Delivery.objects.filter(consumer=consumer).values_list("status", "attempts")
    return sorted(set(rows))


@pytest.mark.django_db
def test_paused_consumer_keeps_its_deliveries_pending_uncharged_until_resumed(
    org: Organization, side_effects: None
) -> None:
    emit(org, 5)
    assert services.consumer_pause(consumer=A, actor="ops", reason="downstream API down")
    worker = Worker(WorkerOptions(consumers=list(EFFECT_CONSUMERS), listen=False))
    while worker.run_once():
        pass
    assert states(A) == [("pending", 0)]
    assert states(B) == states(C) == [("done", 1)]

    assert services.consumer_resume(consumer=A, actor="ops", reason="API back")
    while worker.run_once():
        pass
    assert states(A) == [("done", 1)]
    actions = AuditLog.objects.filter(target_id=A).values_list("action", "actor", "reason")
    assert sorted(actions) == [
        ("consumer.pause", "ops", "downstream API down"),
        ("consumer.resume", "ops", "API back"),
    ]


@pytest.mark.django_db
def test_pausing_twice_or_resuming_a_running_consumer_changes_nothing(org: Organization) -> None:
    assert not services.consumer_resume(consumer=A, actor="ops")
    assert services.consumer_pause(consumer=A, actor="ops", reason="maintenance")
    assert not services.consumer_pause(consumer=A, actor="ops", reason="again")
    assert AuditLog.objects.filter(target_id=A).count() == 1
    with pytest.raises(services.UnknownConsumerError):
        services.consumer_pause(consumer="no-such-worker", actor="ops", reason="x")
    with pytest.raises(ValueError, match="reason"):
        services.consumer_pause(consumer=B, actor="ops", reason=" ")


@pytest.mark.django_db
def test_deliveries_claimed_before_the_pause_are_released_without_charge(
    org: Organization, side_effects: None
) -> None:
    emit(org, 4)
    pump = DrainPump([registry.get(A)], worker_id="w", concurrency=1, batch_size=10)
    pump.pool.pause()  # claimed, not started yet
    pump._submit(claims.claim(consumers=[A], batch_size=10, worker_id="w"))
    assert states(A) == [("processing", 1)]
    services.consumer_pause(consumer=A, actor="ops", reason="maintenance")
    pump.poke()  # the NOTIFY the pause sent
    pump.step()  # re-reads the pauses: the queued jobs come back as released
    pump.step()  # settles them
    assert states(A) == [("pending", 0)]
    pump.pool.resume()
    pump.close()


@pytest.mark.django_db
def test_a_paused_webhook_style_consumer_is_skipped_by_the_prefixed_claim(
    org: Organization,
) -> None:
    sub = "webhook:00000000-0000-0000-0000-00000000abcd"
    other = "webhook:00000000-0000-0000-0000-00000000abce"
    event = eventbus.emit("test.job", organization=org, entity_kind="t", payload={"n": 1})
    for consumer in (sub, other):
        Delivery.objects.create(
            event_id=event.id,
            organization=org,
            consumer=consumer,
            max_attempts=3,
            event_type="test.job",
            next_attempt_at=event.created_at,
            created_at=event.created_at,
            updated_at=event.created_at,
        )
    services.consumer_pause(consumer=sub, actor="ops", reason="endpoint down")
    batch = claims.claim_prefixed(prefix="webhook:", batch_size=10, worker_id="w", cap=10)
    assert [e.consumer for e in batch.events] == [other]


@pytest.mark.django_db
def test_the_pause_check_costs_one_probe_per_consumer_not_a_scan(org: Organization) -> None:
    emit(org, 3000)
    services.consumer_pause(consumer=A, actor="ops", reason="maintenance")
    plan = claim_plan(start=org.pk, consumers=list(EFFECT_CONSUMERS), now=org.created_at)
    assert "Seq Scan on eventbus_delivery" not in plan
    with CaptureQueriesContext(connection) as queries:
        batch = claims.claim(consumers=list(EFFECT_CONSUMERS), batch_size=100, worker_id="w")
    assert len(queries) == 1
    assert {e.consumer for e in batch.events} == {B, C}


@pytest.mark.django_db(transaction=True)  # NOTIFY is delivered at commit
def test_pause_and_resume_wake_the_workers(org: Organization) -> None:
    with psycopg.connect(conninfo(), autocommit=True) as listener:
        listener.execute(f"LISTEN {WAKEUP_CHANNEL}")
        services.consumer_pause(consumer=A, actor="ops", reason="maintenance")
        services.consumer_resume(consumer=A, actor="ops")
        got = [n.payload for n in listener.notifies(timeout=5, stop_after=2)]
    assert got == ["consumers", "consumers"]
