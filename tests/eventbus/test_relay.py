"""Broker-run consumers in one process: the relay's publish, the actor's run, publish failures."""

from __future__ import annotations

import datetime as dt
import json
import threading
import uuid
from typing import Any

import pytest
import time_machine
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.models import F
from django.utils import timezone

import eventbus
from core.models import Organization, WorkerProcess
from eventbus.dispatch import claim as claims
from eventbus.dispatch.drain import DrainPump
from eventbus.dispatch.relay import Relay, message_id_for, run_published
from eventbus.dispatch.runner import LeaseHolder, Runner, RunnerOptions
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.operations.services import consumer_pause, consumer_resume
from eventbus.store.errors import ConsumerRegistrationError
from eventbus.store.models import Delivery, DeliveryAttempt, EventLog
from eventbus.store.registry import make_consumer, registry
from jobs.brokers import PostgresBroker
from tests.support.db import side_effect_rows
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db

CLOSED_BROKER_URL = "postgresql://postgres@127.0.0.1:1/nowhere"


def queued_messages(actor: str) -> list[dict[str, object]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT message_id::text, message FROM dramatiq.queue"
            " WHERE message->>'actor_name' = %s",
            [actor],
        )
        return [{"id": mid, **json.loads(body)} for mid, body in cursor.fetchall()]


def emit_broker(org: Organization, n: int = 1, event_type: str = "test.broker") -> list[int]:
    ids = eventbus.emit_many(
        [{"event_type": event_type, "entity_kind": "thing", "payload": {"n": i}} for i in range(n)],
        organization=org,
    )
    return list(
        Delivery.objects.filter(event_id__in=ids, consumer__startswith="broker-")
        .order_by("id")
        .values_list("id", flat=True)
    )


def test_runs_on_is_validated_and_listed() -> None:
    with pytest.raises(ConsumerRegistrationError, match="runs_on"):
        make_consumer("x-worker", lambda e: None, events=["test.broker"], runs_on="kafka")  # type: ignore[arg-type]
    assert registry.get("broker-effect-worker").runs_on == "broker"
    assert registry.get("order-post-worker").runs_on == "broker"


def test_the_drain_skips_broker_consumers_and_refuses_to_run_one() -> None:
    names = Worker(WorkerOptions()).names
    assert "effect-a-worker" in names
    assert not {"broker-effect-worker", "order-post-worker"} & set(names)
    with pytest.raises(CommandError, match="run on the job broker"):
        call_command("drain_events", "--consumer", "broker-effect-worker", "--once")


def test_relay_publishes_ids_and_token_only_with_message_id_equal_to_delivery_id(
    org: Organization,
) -> None:
    [delivery_id] = emit_broker(org)
    assert Relay(worker_id="t").run_once() == 1

    delivery = Delivery.objects.get(pk=delivery_id)
    assert delivery.status == "processing"  # the relay keeps the lease
    assert delivery.attempts == 1
    assert delivery.locked_by == "relay:t"
    [message] = queued_messages("broker-effect-worker")
    assert message["id"] == message_id_for(delivery_id)
    assert uuid.UUID(str(message["id"])).int == delivery_id
    assert message["actor_name"] == "broker-effect-worker"
    assert message["args"] == [delivery_id, str(delivery.lease_token)]
    assert message["kwargs"] == {}
    assert '"n"' not in json.dumps(message)  # no payload in the broker


def test_the_actor_runs_the_consumer_and_acks_the_same_row(
    org: Organization, side_effects: None
) -> None:
    [delivery_id] = emit_broker(org)
    Relay(worker_id="t").run_once()
    [message] = queued_messages("broker-effect-worker")
    args = message["args"]
    assert isinstance(args, list)

    assert run_published(*args) == "done"
    assert run_published(*args) == "stale"  # a redelivered message runs nothing

    delivery = Delivery.objects.get(pk=delivery_id)
    assert (delivery.status, delivery.attempts, delivery.lease_token) == ("done", 1, None)
    assert [runs for _, _, runs in side_effect_rows()] == [1]
    assert EventLog.objects.get(pk=delivery.event_id).consumed_by == ["broker-effect-worker"]


def test_a_lost_lease_makes_the_message_stale(org: Organization, side_effects: None) -> None:
    [delivery_id] = emit_broker(org)
    Relay(worker_id="t").run_once()
    [message] = queued_messages("broker-effect-worker")
    with time_machine.travel(timezone.now() + dt.timedelta(minutes=6)):
        claims.reap()  # the lease expired before the jobs process picked the message up
    assert run_published(*message["args"]) == "stale"  # type: ignore[misc]
    assert side_effect_rows() == []
    delivery = Delivery.objects.get(pk=delivery_id)
    # Published but never started: back to pending without costing an attempt.
    assert (delivery.status, delivery.attempts) == ("pending", 0)


def test_a_consumer_paused_after_publishing_gets_its_delivery_back_uncharged(
    org: Organization, side_effects: None
) -> None:
    """The relay published the delivery, then an operator paused the consumer: the jobs process
    must not run it. It goes back to pending with its attempt refunded and runs after resume."""
    [delivery_id] = emit_broker(org)
    Relay(worker_id="t").run_once()
    [message] = queued_messages("broker-effect-worker")
    assert consumer_pause(consumer="broker-effect-worker", actor="ops", reason="ERP down")
    assert run_published(*message["args"]) == "held back"  # type: ignore[misc]
    assert side_effect_rows() == []
    delivery = Delivery.objects.get(pk=delivery_id)
    assert (delivery.status, delivery.attempts, delivery.lease_token) == ("pending", 0, None)
    assert Relay(worker_id="t").run_once() == 0  # paused: not published again

    assert consumer_resume(consumer="broker-effect-worker", actor="ops", reason="ERP back")
    assert Relay(worker_id="t").run_once() == 1
    delivery = Delivery.objects.get(pk=delivery_id)
    assert run_published(delivery_id, str(delivery.lease_token)) == "done"
    assert [runs for _, _, runs in side_effect_rows()] == [1]


def test_a_failing_broker_consumer_is_retried_and_dead_lettered_by_the_database(
    org: Organization,
) -> None:
    [delivery_id] = emit_broker(org, event_type="test.broker_flaky")
    now = timezone.now()
    for attempt in (1, 2):
        with time_machine.travel(now + dt.timedelta(hours=attempt * 3)):
            assert Relay(worker_id="t").run_once() == 1
            delivery = Delivery.objects.get(pk=delivery_id)
            assert run_published(delivery_id, str(delivery.lease_token)) == "failed"
    delivery = Delivery.objects.get(pk=delivery_id)
    assert (delivery.status, delivery.attempts) == ("dead", 2)  # max_attempts=2, as declared
    assert "broker-flaky-worker always fails" in (delivery.last_error or "")
    outcomes = DeliveryAttempt.objects.filter(delivery_id=delivery_id).values_list(
        "attempt", "outcome"
    )
    assert list(outcomes) == [(1, "retry"), (2, "dead")]


def test_broker_down_keeps_rows_pending_backs_off_and_dies_after_max_publish_failures(
    org: Organization, settings: object
) -> None:
    settings.EVENTBUS = {**settings.EVENTBUS, "RELAY_MAX_ATTEMPTS": 3}  # type: ignore[attr-defined]
    delivery_ids = emit_broker(org, 2)
    relay = Relay(worker_id="t", broker=PostgresBroker(url=CLOSED_BROKER_URL, pool_timeout=0.3))
    start = timezone.now()
    assert relay.run_once() == 2

    for delivery in Delivery.objects.filter(pk__in=delivery_ids):
        assert (delivery.status, delivery.attempts, delivery.publish_failures) == ("pending", 0, 1)
        assert delivery.next_attempt_at >= start + dt.timedelta(seconds=30)  # backed off
        assert delivery.error_class == "PublishFailed"
    assert relay.run_once() == 0  # nothing is due before the backoff

    for hours in (3, 6):
        with time_machine.travel(start + dt.timedelta(hours=hours)):
            assert relay.run_once() == 2
    for delivery in Delivery.objects.filter(pk__in=delivery_ids):
        assert (delivery.status, delivery.attempts, delivery.publish_failures) == ("dead", 0, 3)
        assert "could not publish to the job broker 3 times (OUTBOX_MAX_ATTEMPTS=3)" in (
            delivery.last_error or ""
        )
    assert queued_messages("broker-effect-worker") == []


def test_reprocess_of_a_publish_dead_delivery_starts_afresh(org: Organization) -> None:
    [delivery_id] = emit_broker(org)
    Delivery.objects.filter(pk=delivery_id).update(status="dead", publish_failures=10)
    assert [m.delivery_id for m in claims.reprocess([delivery_id])] == [delivery_id]
    delivery = Delivery.objects.get(pk=delivery_id)
    assert (delivery.status, delivery.publish_failures) == ("pending", 0)


def test_order_post_attempts_come_from_the_setting(org: Organization, settings: object) -> None:
    settings.EVENTBUS = {  # type: ignore[attr-defined]
        **settings.EVENTBUS,  # type: ignore[attr-defined]
        "CONSUMER_MAX_ATTEMPTS": {"order-post-worker": 7},
    }
    assert registry.get("order-post-worker").effective_max_attempts() == 7


class KeepingBroker:
    """A broker that keeps the messages it is given (nothing reaches the dramatiq queue)."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    def enqueue(self, message: Any, *, delay: int | None = None) -> Any:
        self.messages.append(message)
        return message


def test_the_relay_is_a_plain_pump_and_the_drain_a_lease_holder() -> None:
    drain, relay = DrainPump([], worker_id="t"), Relay(worker_id="t")
    runner = Runner([drain, relay], RunnerOptions(), worker_id="t", wake=threading.Event())
    assert isinstance(drain, LeaseHolder)
    assert not isinstance(relay, LeaseHolder)
    assert not hasattr(relay, "held") and not hasattr(relay, "in_flight")
    assert runner.holders == [drain]


@pytest.mark.django_db(transaction=True)  # the runner's threads write on their own connections
def test_the_relay_runs_alone_on_the_runner_heartbeat_and_registry_included(
    org: Organization, settings: Any
) -> None:
    # A lease heartbeat every 0.2 s and a registry beat every 0.1 s: both run many times while
    # the relay is the only pump (no lease hook to call); one publish, then nothing is due.
    settings.EVENTBUS = {
        **settings.EVENTBUS,
        "LEASE_SECONDS": 0.6,
        "RELAY_POLL_INTERVAL_MS": 60_000,
    }
    settings.WORKERS = {**settings.WORKERS, "HEARTBEAT_SECONDS": 0.1}
    [delivery_id] = emit_broker(org)
    broker = KeepingBroker()
    options = RunnerOptions(listen=False, startup_jitter=0)
    runner = Runner(
        [Relay(worker_id="t", broker=broker)], options, worker_id="t", wake=threading.Event()
    )
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(runner.run()))
    thread.start()
    try:
        wait_for(
            lambda: WorkerProcess.objects.filter(
                kind="relay", heartbeat_at__gt=F("started_at") + dt.timedelta(seconds=0.8)
            ).exists(),
            timeout=20,
            what="the runner's heartbeat to beat for 0.8 s",
        )
    finally:
        runner.request_stop()
        thread.join(10)
    assert codes == [0]
    assert [m.args[0] for m in broker.messages] == [delivery_id]
    row = WorkerProcess.objects.get(kind="relay")
    assert (row.pumps, row.in_flight, row.stopped_at is not None) == ("relay", 0, True)
