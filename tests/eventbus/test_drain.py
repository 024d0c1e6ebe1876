"""The drain pump: handler slots, atomic consumers, lease heartbeats, dead-letter hooks."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest
from django.db.models import Count
from django.test.utils import override_settings

import eventbus
from core.models import Organization
from eventbus.dispatch import claim as claims
from eventbus.dispatch import drain
from eventbus.dispatch.claim import DeadDelivery
from eventbus.dispatch.drain import DrainPump
from eventbus.dispatch.slotted import FIRST_IDLE_WAIT, IN_FLIGHT_WAIT
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.store import metrics
from eventbus.store.models import Delivery, DeliveryAttempt, EventLog
from eventbus.store.registry import make_consumer, registry
from tests.support.consumers import record_run
from tests.support.db import raw_connection, side_effect_rows
from tests.support.waiting import wait_for

HOOK_CALLS: list[list[DeadDelivery]] = []


def record_dead(dead: Sequence[DeadDelivery]) -> None:
    HOOK_CALLS.append(list(dead))


def broken_hook(dead: Sequence[DeadDelivery]) -> None:
    raise RuntimeError("slack is down")


def emit_jobs(org: Organization, n: int, event_type: str = "test.job") -> None:
    eventbus.emit_many(
        [{"event_type": event_type, "entity_kind": "t", "payload": {"n": i}} for i in range(n)],
        organization=org,
    )


@pytest.mark.django_db(transaction=True)
def test_thread_pool_runs_handlers_concurrently(org: Organization) -> None:
    barrier = threading.Barrier(4, timeout=10)

    def meet(event: eventbus.Event) -> None:
        barrier.wait()  # only returns when four handlers run at the same time

    with registry.temporarily(make_consumer("pool-worker", meet, events=["test.job"])):
        emit_jobs(org, 8)
        worker = Worker(
            WorkerOptions(consumers=["pool-worker"], concurrency=4, once=True, listen=False)
        )
        worker.run()
    assert set(Delivery.objects.values_list("status", flat=True)) == {"done"}
    assert worker.processed == 8


@pytest.mark.django_db(transaction=True)
def test_atomic_consumer_commits_its_writes_with_the_ack(
    org: Organization, side_effects: None
) -> None:
    with registry.temporarily(
        make_consumer("atomic-worker", record_run, events=["test.job"], atomic=True)
    ):
        emit_jobs(org, 3)
        Worker(WorkerOptions(consumers=["atomic-worker"], once=True, listen=False)).run()
    assert len(side_effect_rows()) == 3
    assert set(Delivery.objects.values_list("status", flat=True)) == {"done"}
    assert set(EventLog.objects.values_list("status", flat=True)) == {"done"}


@pytest.mark.django_db(transaction=True)
def test_atomic_consumer_rolls_back_when_its_lease_was_lost(
    org: Organization, side_effects: None
) -> None:
    def write_then_lose_lease(event: eventbus.Event) -> None:
        record_run(event)
        with raw_connection() as other:  # another worker took the delivery over meanwhile
            other.execute(
                "UPDATE eventbus_delivery SET lease_token = gen_random_uuid() WHERE id = %s",
                [event.delivery_id],
            )

    consumer = make_consumer(
        "atomic-lost-worker", write_then_lose_lease, events=["test.job"], atomic=True
    )
    with registry.temporarily(consumer):
        emit_jobs(org, 1)
        pump = DrainPump([consumer], worker_id="w")
        assert pump.run_batch() == 1
    assert side_effect_rows() == []  # the handler's write was rolled back with the lost ack
    assert not DeliveryAttempt.objects.exists()  # the LeaseLost nack is fenced out as well
    assert Delivery.objects.get().status == "processing"  # still the other worker's


@pytest.mark.django_db(transaction=True)
@override_settings(EVENTBUS={"LEASE_SECONDS": 0.6})
def test_heartbeat_keeps_the_lease_of_a_long_handler(org: Organization) -> None:
    reaped: list[int] = []

    def slow(event: eventbus.Event) -> None:
        threading.Event().wait(1.5)  # simulated work, 2.5 leases long
        reaped.append(claims.reap()[0])  # a reaper elsewhere finds the lease still alive

    with registry.temporarily(make_consumer("long-worker", slow, events=["test.job"])):
        emit_jobs(org, 1)
        Worker(
            WorkerOptions(consumers=["long-worker"], once=True, listen=False, startup_jitter=0)
        ).run()
    assert reaped == [0]
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("done", 1)


@pytest.mark.django_db
def test_dead_letter_hooks_are_called_and_a_broken_one_is_contained(
    org: Organization, caplog: pytest.LogCaptureFixture
) -> None:
    HOOK_CALLS.clear()
    hooks = [f"{__name__}.broken_hook", f"{__name__}.record_dead"]
    with override_settings(EVENTBUS={"DEAD_LETTER_HOOKS": hooks, "MAX_ATTEMPTS": 1}):
        emit_jobs(org, 2, "test.flaky")
        worker = Worker(WorkerOptions(consumers=["flaky-worker"], listen=False))
        while worker.run_once():
            pass
    assert [len(call) for call in HOOK_CALLS] == [2]
    assert {d.consumer for d in HOOK_CALLS[0]} == {"flaky-worker"}
    assert "dead-letter hook" in caplog.text and "broken_hook failed" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_idle_waits_start_short_after_work_and_double_back_to_the_poll_interval(
    org: Organization,
) -> None:
    """Without NOTIFY, a worker that just found work looks again within a tenth of a second, not
    a whole poll interval later; each empty claim doubles the wait until the poll interval."""
    poll = 1.0
    consumer = make_consumer("idle-wait-worker", lambda event: None, events=["test.job"])

    def ran_all(pump: DrainPump) -> bool:  # every handler returned; not settled yet
        return pump.pool.queued == 0 and pump.pool.running == 0

    with registry.temporarily(consumer):
        pump = DrainPump([consumer], worker_id="w", concurrency=1, batch_size=10)
        pump.step()  # an empty claim, never busy: a whole poll interval
        assert pump.wait_hint(poll) == poll
        for found in (3, 1):
            emit_jobs(org, found)
            assert pump.step() == found
            assert pump.wait_hint(poll) == IN_FLIGHT_WAIT  # handlers run: the watchdog's tick
            wait_for(lambda: ran_all(pump), timeout=30, what="the handlers")
            assert pump.step() == found  # settled, and the same step's claim found nothing
            hints = [pump.wait_hint(poll)]
            while hints[-1] < poll:
                pump.step()  # one more empty claim each
                hints.append(pump.wait_hint(poll))
            assert hints == [min(FIRST_IDLE_WAIT * 2**n, poll) for n in range(1, len(hints) + 1)]
    assert set(Delivery.objects.values_list("status", flat=True)) == {"done"}


def _write_many(events: list[eventbus.Event]) -> None:
    for event in events:
        record_run(event)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["atomic", "batch"])
def test_a_heartbeat_between_a_group_s_commit_and_its_settle_loses_nothing(
    org: Organization, side_effects: None, kind: str
) -> None:
    """An atomic group or a batch acks inside its own transaction; until the runner settles it,
    a heartbeat must neither find those deliveries lost (the lost-lease counter, an error in
    the log) nor drop their results (the processed count)."""
    consumer = (
        make_consumer("committed-worker", record_run, events=["test.job"], atomic=True)
        if kind == "atomic"
        else make_consumer("committed-worker", _write_many, events=["test.job"], batch=10)
    )
    lost_before = metrics.LEASES_LOST._value.get()
    with registry.temporarily(consumer):
        pump = DrainPump([consumer], worker_id="w", concurrency=1, batch_size=10)
        emit_jobs(org, 4)
        assert pump.step() == 4
        wait_for(pump.pool.idle, timeout=30, what="the group to commit")
        assert Delivery.objects.filter(status="done").count() == 4  # committed, not settled
        for token, ids in pump.held().items():  # the runner's heartbeat (Runner._beat)
            lost = set(ids) - claims.extend(token, ids)
            pump.renewed(token)
            if lost:
                pump.lost(token, lost)
        assert pump.step() == 4  # settled
    assert pump.processed == 4
    assert metrics.LEASES_LOST._value.get() == lost_before
    assert len(side_effect_rows()) == 4


def _claimed_beyond(events: list[eventbus.Event], limit: int) -> bool:
    """The worker holds more than these events, or has claimed all that `limit` allows."""
    rows = dict(Delivery.objects.values_list("status").annotate(n=Count("id")))
    processing = rows.get("processing", 0)
    return processing > len(events) or processing + rows.get("done", 0) >= limit


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("batch", [None, 10], ids=["plain", "batch"])
def test_max_events_stops_after_that_many_deliveries(org: Organization, batch: int | None) -> None:
    """`--max-events N` counts deliveries, a batch consumer's included: the worker claims no more
    than N minus what it holds (a batch job holds several), and exits after N."""
    ran: list[int] = []

    def hold_until_claimed_more(events: list[eventbus.Event]) -> None:
        # Wait (bounded) until the worker has claimed beyond this job, so a claim made while
        # it runs is seen: the one that overshot when held jobs were counted, not deliveries.
        wait_for(lambda: _claimed_beyond(events, 7), timeout=10, what="a second claim")
        ran.extend(e.delivery_id for e in events)

    handler: Any = (
        hold_until_claimed_more if batch else lambda event: hold_until_claimed_more([event])
    )
    consumer = make_consumer("max-events-worker", handler, events=["test.job"], batch=batch)
    with registry.temporarily(consumer):
        emit_jobs(org, 30)
        worker = Worker(
            WorkerOptions(
                consumers=["max-events-worker"],
                concurrency=1 if batch else 4,
                batch_size=5,
                max_events=7,
                listen=False,
                startup_jitter=0,
            )
        )
        assert worker.run() == 0
    assert worker.processed == 7
    assert len(ran) == 7
    statuses = dict(Delivery.objects.values_list("status").annotate(n=Count("id")))
    assert statuses == {"done": 7, "pending": 23}
    assert set(Delivery.objects.filter(status="pending").values_list("attempts", flat=True)) == {0}


def gated_pump(gate: threading.Event) -> tuple[DrainPump, list[float]]:
    """A pump of 2 threads whose handler waits on `gate` for event n=4 only, and its clock."""

    def handle(event: eventbus.Event) -> None:
        if event.payload["n"] == 4:
            gate.wait(10)

    consumer = make_consumer("gather-worker", handle, events=["test.job"])
    pump = DrainPump([consumer], worker_id="w", concurrency=2, batch_size=10)
    now = [0.0]
    pump.clock = lambda: now[0]
    return pump, now


def statuses() -> dict[int, str]:
    rows = Delivery.objects.filter(consumer="gather-worker").select_related("event")
    return {d.event.payload["n"]: d.status for d in rows}


@pytest.mark.django_db(transaction=True)
def test_finished_runs_are_gathered_into_one_ack_until_they_have_waited_long_enough(
    org: Organization,
) -> None:
    gate = threading.Event()
    pump, now = gated_pump(gate)
    try:
        with registry.temporarily(*pump.consumers.values()):
            emit_jobs(org, 5)

            def four_finished() -> bool:
                pump.step()
                return len(pump._results) == 4

            wait_for(four_finished, timeout=10, what="four runs to finish")
            pump.step()
            assert set(statuses().values()) == {"processing"}  # gathering: no ack yet
            now[0] += drain.SETTLE_WITHIN  # the oldest has waited long enough
            assert pump.step() >= 4
            assert statuses() == {0: "done", 1: "done", 2: "done", 3: "done", 4: "processing"}
            gate.set()
            wait_for(lambda: (pump.step(), statuses()[4])[1] == "done", timeout=10, what="n=4")
    finally:
        gate.set()
        pump.close()


@pytest.mark.django_db(transaction=True)
def test_enough_finished_runs_are_settled_at_once(
    org: Organization, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(drain, "SETTLE_GATHER", 4)
    gate = threading.Event()
    pump, _ = gated_pump(gate)  # its clock never moves
    try:
        with registry.temporarily(*pump.consumers.values()):
            emit_jobs(org, 5)

            def four_done() -> bool:
                pump.step()
                return list(statuses().values()).count("done") == 4

            wait_for(four_done, timeout=10, what="four runs to be settled together")
            assert statuses()[4] == "processing"
    finally:
        gate.set()
        pump.close()
