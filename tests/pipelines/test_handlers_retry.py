"""order-post-worker's retries under controlled time, in process: the relay publishes, the jobs
actor's code runs the delivery (`run_published`), time-machine jumps to each retry's due time.
Each failure is backed off by the retry table; the last one dead-letters; reprocessing resumes."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from core.models import Organization
from crm.services import order_confirm
from eventbus.dispatch.relay import Relay, run_published
from eventbus.store.models import Delivery
from pipelines import services
from pipelines.models import Execution
from tests.support.api import api_client
from tests.support.pipelines import seed_example
from tests.support.receiver import Receiver, Reply

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("loopback_allowed")]

SCHEDULE = (30.0, 120.0)  # seconds: after the 1st failure, after the 2nd


def attempt(delivery_id: int, at: dt.datetime) -> str:
    with time_machine.travel(at, tick=False):
        assert Relay(worker_id="t").run_once() >= 1
        delivery = Delivery.objects.get(pk=delivery_id)
        return run_published(delivery_id, str(delivery.lease_token))


def test_backoff_then_dead_after_order_post_attempts_then_reprocessed(
    org: Organization, receiver: Receiver, settings: Any, side_effects: None
) -> None:
    settings.EVENTBUS = {
        **settings.EVENTBUS,
        "CONSUMER_MAX_ATTEMPTS": {"order-post-worker": 3},
        "RETRY_SCHEDULE": SCHEDULE,
        "RETRY_JITTER": 0.0,
    }
    services.pipeline_create(
        organization=org,
        name="ERP",
        trigger="order.post",
        definition=seed_example(receiver.url("/orders")),
        actor="test",
    )
    receiver.replies["/orders"] = Reply(status=503)
    order = order_confirm(organization=org, number="T-1", total_cents=100)
    delivery = Delivery.objects.get(event__entity_id=order.pk, consumer="order-post-worker")
    start = timezone.now() + dt.timedelta(seconds=1)

    assert attempt(delivery.pk, start) == "failed"
    after_first = Delivery.objects.get(pk=delivery.pk)
    assert (after_first.status, after_first.attempts) == ("pending", 1)
    assert after_first.next_attempt_at == start + dt.timedelta(seconds=SCHEDULE[0])

    early = start + dt.timedelta(seconds=SCHEDULE[0] - 1)
    with time_machine.travel(early, tick=False):
        Relay(worker_id="t").run_once()
    assert Delivery.objects.get(pk=delivery.pk).status == "pending"  # not due yet: not run
    assert len(receiver.on("/orders")) == 1

    second = after_first.next_attempt_at
    assert attempt(delivery.pk, second) == "failed"
    assert Delivery.objects.get(pk=delivery.pk).next_attempt_at == second + dt.timedelta(
        seconds=SCHEDULE[1]
    )
    assert attempt(delivery.pk, second + dt.timedelta(seconds=SCHEDULE[1])) == "failed"
    dead = Delivery.objects.get(pk=delivery.pk)
    assert (dead.status, dead.attempts) == ("dead", 3)
    execution = Execution.objects.get()
    assert (execution.status, execution.attempts) == ("FAILED", 3)

    receiver.replies["/orders"] = Reply(status=200)
    response = api_client(org).post(f"/api/outbox/{dead.event_id}/reprocess", {}, format="json")
    assert response.status_code == 200, response.content
    assert attempt(delivery.pk, timezone.now() + dt.timedelta(seconds=1)) == "done"
    execution.refresh_from_db()
    assert (execution.status, execution.attempts) == ("SUCCEEDED", 4)
    assert len({r.headers["idempotency-key"] for r in receiver.on("/orders")}) == 1
