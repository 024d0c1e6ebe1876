"""webhooks.settle: a delivery that finally fails emits `webhook.delivery_failed` (seed 000 §3),
with ids and the error's class only, once, and never for the failure of that event itself."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test.utils import override_settings

import eventbus
from core.models import Organization
from eventbus.store.models import Delivery, EventLog
from tests.support.receiver import Receiver, Reply
from tests.webhooks.conftest import LOOPBACK_OK, Subscribe, run_worker

pytestmark = pytest.mark.django_db(transaction=True)


def emit_assigned(org: Organization) -> EventLog:
    return eventbus.emit(
        "lead.assigned",
        organization=org,
        entity_kind="lead",
        entity_id=uuid.uuid4(),
        payload={"to_owner_id": 7},
    )


def failures() -> list[dict[str, Any]]:
    rows = EventLog.objects.filter(event_type="webhook.delivery_failed").order_by("created_at")
    return [row.payload for row in rows]


def test_a_dead_delivery_emits_delivery_failed_with_ids_only(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    receiver.replies["/fail"] = Reply(status=500, body=b"secret-ish body of the endpoint")
    subscription, _ = subscribe(receiver.url("/fail"), ["lead.*"])
    subscription.max_attempts = 1
    subscription.save(update_fields=["max_attempts"])
    event = emit_assigned(org)
    run_worker()
    delivery = Delivery.objects.get(consumer=subscription.consumer)
    assert delivery.status == "dead"
    [failed] = failures()
    assert failed == {
        "subscription_id": str(subscription.pk),
        "event_id": str(event.pk),
        "event_type": "lead.assigned",
        "delivery_id": delivery.pk,
        "attempt": 1,
        "error": "HTTPStatus",
        "status_code": 500,
    }
    row = EventLog.objects.get(event_type="webhook.delivery_failed")
    assert row.organization_id == org.pk
    assert row.metadata["causation_id"] == str(event.pk)
    assert "/fail" not in str(row.payload) and "secret" not in str(row.payload)


def test_a_retried_failure_emits_nothing_until_the_delivery_is_dead(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    receiver.replies["/fail"] = Reply(status=503, body=b"busy")
    subscription, _ = subscribe(receiver.url("/fail"), ["lead.*"])
    emit_assigned(org)
    run_worker()
    assert Delivery.objects.get(consumer=subscription.consumer).status == "pending"
    assert failures() == []


def test_a_failing_subscriber_of_everything_does_not_feed_on_its_own_failures(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    receiver.replies["/fail"] = Reply(status=410, body=b"gone")  # dead at once
    with override_settings(WEBHOOKS={**LOOPBACK_OK, "DISABLE_AFTER_FAILURES": 1000}):
        subscription, _ = subscribe(receiver.url("/fail"), ["*"])
        emit_assigned(org)
        run_worker()
        subscription.enabled = True  # 410 disabled it; re-enabled, it gets its failure event
        subscription.save(update_fields=["enabled"])
        run_worker()
    [failed] = failures()
    assert failed["status_code"] == 410
