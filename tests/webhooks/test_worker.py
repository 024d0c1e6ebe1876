"""The webhook pump: nothing an attempt raises can leak a slot, strand a row or hang `--once`."""

from __future__ import annotations

import uuid

import pytest

import eventbus
from core.models import Organization
from eventbus.store.models import Delivery, DeliveryAttempt
from tests.support.receiver import Receiver
from tests.webhooks.conftest import Subscribe, run_worker
from webhooks import worker as webhook_worker
from webhooks.models import Subscription

pytestmark = pytest.mark.django_db(transaction=True)


def emit_leads(org: Organization, n: int) -> None:
    eventbus.emit_many(
        [
            {"event_type": "lead.assigned", "entity_kind": "lead", "entity_id": uuid.uuid4(),
             "payload": {"to_owner_id": f"u{i}"}}
            for i in range(n)
        ],
        organization=org,
    )  # fmt: skip


def test_an_exception_in_an_attempt_is_a_recorded_failure_and_once_returns(
    org: Organization, receiver: Receiver, subscribe: Subscribe, monkeypatch: pytest.MonkeyPatch
) -> None:
    subscribe(receiver.url())
    emit_leads(org, 3)

    def broken(*args: object, **kwargs: object) -> object:
        raise ZeroDivisionError("a bug in judging the answer")

    monkeypatch.setattr(webhook_worker.outcome, "judge", broken)
    worker = run_worker()  # --once: returns although every attempt raised

    assert worker.in_flight == 0
    # The webhook deliveries (lead.assigned also has a drain consumer: notification-worker).
    deliveries = Delivery.objects.filter(consumer__startswith="webhook:")
    assert set(deliveries.values_list("status", "attempts", "error_class")) == {
        ("pending", 1, "ZeroDivisionError")
    }  # retried per the table, not stuck in processing
    assert {a.error for a in DeliveryAttempt.objects.all()} == {
        "ZeroDivisionError: a bug in judging the answer"
    }
    assert len(receiver.requests) == 3  # the requests went out; the failure was ours


def test_a_subscription_whose_secret_cannot_be_decrypted_stops_no_other(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    broken, _ = subscribe(receiver.url("/broken"))
    healthy, _ = subscribe(receiver.url("/healthy"))
    corrupt = "not-a-fernet-token"  # pragma: allowlist secret
    Subscription.objects.filter(pk=broken.pk).update(secret_encrypted=corrupt)
    emit_leads(org, 2)
    worker = run_worker()
    assert worker.in_flight == 0
    assert len(receiver.on("/healthy")) == 2 and receiver.on("/broken") == []
    assert set(
        Delivery.objects.filter(consumer=healthy.consumer).values_list("status", flat=True)
    ) == {"done"}
    failed = Delivery.objects.filter(consumer=broken.consumer)
    assert set(failed.values_list("status", "error_class")) == {("pending", "SecretUnavailable")}
