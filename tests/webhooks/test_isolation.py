"""A slow endpoint (answers after the timeout) must not delay deliveries to a healthy one."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.db import connections
from django.test.utils import override_settings

import eventbus
from core.models import Organization
from eventbus.store.models import Delivery
from tests.support.receiver import Receiver, Reply
from tests.webhooks.conftest import LOOPBACK_OK, Subscribe
from webhooks.worker import WebhookWorker, WebhookWorkerOptions

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT = 1.5
PER_SUBSCRIPTION = 2


def test_a_slow_endpoint_does_not_hold_back_a_healthy_one(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    receiver.replies["/slow"] = Reply(delay=TIMEOUT * 4)  # sleeps well past the timeout
    slow, _ = subscribe(receiver.url("/slow"))
    healthy, _ = subscribe(receiver.url("/healthy"))
    eventbus.emit_many(
        [
            {"event_type": "lead.assigned", "entity_kind": "lead", "entity_id": uuid.uuid4(),
             "payload": {"to_owner_id": f"u{i}"}}
            for i in range(20)
        ],
        organization=org,
    )  # fmt: skip
    with override_settings(WEBHOOKS={**LOOPBACK_OK, "TIMEOUT": TIMEOUT}):
        worker = WebhookWorker(
            WebhookWorkerOptions(
                concurrency=8, per_subscription=PER_SUBSCRIPTION, listen=False,
                poll_interval=0.05, startup_jitter=0,
            )
        )  # fmt: skip
        thread = threading.Thread(target=_run, args=(worker,))
        thread.start()
        try:
            receiver.wait_for(
                lambda: len(receiver.on("/healthy")) == 20, timeout=30, what="healthy deliveries"
            )
        finally:
            worker.request_stop()
            thread.join(timeout=30)
    first_slow = min(r.at for r in receiver.on("/slow"))
    last_healthy = max(r.at for r in receiver.on("/healthy"))
    # Every healthy delivery arrived before the slow endpoint's first request even timed out...
    assert last_healthy - first_slow < TIMEOUT
    # ...while the slow endpoint never had more than its share of requests in flight.
    assert len([r for r in receiver.on("/slow") if r.at <= last_healthy]) <= PER_SUBSCRIPTION
    assert set(
        Delivery.objects.filter(consumer=healthy.consumer).values_list("status", flat=True)
    ) == {"done"}
    timed_out = Delivery.objects.filter(consumer=slow.consumer, error_class="Timeout")
    assert timed_out.count() >= 1  # the slow ones failed by timeout and will be retried


def _run(worker: WebhookWorker) -> None:
    try:
        worker.run()
    finally:
        connections.close_all()
