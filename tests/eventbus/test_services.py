"""Operator services: reprocess and discard dead deliveries, with the audit trail."""

from __future__ import annotations

import pytest

import eventbus
from core import context
from core.models import AuditLog, Organization
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.operations import services
from eventbus.store.models import Delivery, EventLog

pytestmark = pytest.mark.django_db


def dead_flaky(org: Organization, n: int = 1) -> list[Delivery]:
    eventbus.emit_many(
        [{"event_type": "test.flaky", "entity_kind": "t", "payload": {"n": i}} for i in range(n)],
        organization=org,
    )
    Delivery.objects.update(max_attempts=1)
    worker = Worker(WorkerOptions(consumers=["flaky-worker"], listen=False))
    while worker.run_once():
        pass
    return list(Delivery.objects.filter(status="dead"))


def test_discard_removes_from_dlq_audits_and_finishes_the_event(org: Organization) -> None:
    (dead,) = dead_flaky(org)
    with context.bind(request_id="req-42"):
        moved = services.deliveries_discard(
            delivery_ids=[dead.pk], actor="user:ops", reason="customer deleted"
        )
    assert moved == 1
    dead.refresh_from_db()
    assert dead.status == "discarded"
    event = EventLog.objects.get(pk=dead.event_id)
    assert (event.status, event.fanout) == ("done", 0)
    entry = AuditLog.objects.get()
    assert (entry.actor, entry.action, entry.target_id) == (
        "user:ops",
        "delivery.discard",
        str(dead.pk),
    )
    assert (entry.reason, entry.request_id, entry.organization_id) == (
        "customer deleted",
        "req-42",
        org.pk,
    )
    assert entry.details == {"event_id": str(dead.event_id), "consumer": "flaky-worker"}
    # Discarded is final: neither reprocess nor a second discard moves it.
    assert services.deliveries_reprocess(delivery_ids=[dead.pk], actor="user:ops") == 0
    assert services.deliveries_discard(delivery_ids=[dead.pk], actor="user:ops", reason="x") == 0


def test_discard_requires_a_reason(org: Organization) -> None:
    (dead,) = dead_flaky(org)
    with pytest.raises(ValueError, match="reason is required"):
        services.deliveries_discard(delivery_ids=[dead.pk], actor="user:ops", reason="  ")
    dead.refresh_from_db()
    assert dead.status == "dead"
    assert not AuditLog.objects.exists()


def test_reprocess_is_audited_per_delivery(org: Organization) -> None:
    dead = dead_flaky(org, 3)
    moved = services.deliveries_reprocess(delivery_ids=[d.pk for d in dead], actor="user:ops")
    assert moved == 3
    assert set(Delivery.objects.values_list("status", "attempts")) == {("pending", 0)}
    assert AuditLog.objects.filter(action="delivery.reprocess").count() == 3
    assert set(EventLog.objects.values_list("status", flat=True)) == {"processing"}
