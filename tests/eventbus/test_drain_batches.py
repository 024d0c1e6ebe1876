"""Batch consumers (`@eventbus.consumer(..., batch=N)`): one handler call for up to N deliveries
of one claim and one organization, acked in the handler's transaction
(eventbus/dispatch/drain.py)."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager

import pytest
from django.db import connection

import eventbus
from core.models import Organization
from eventbus.dispatch import breaker
from eventbus.dispatch import claim as claims
from eventbus.dispatch.drain import DrainPump
from eventbus.operations import services
from eventbus.store.errors import ConsumerRegistrationError
from eventbus.store.models import ConsumerState, Delivery, DeliveryAttempt
from eventbus.store.registry import Consumer, describe, make_consumer, registry
from tests.eventbus.test_breaker import small_breaker  # noqa: F401  (its fixture)
from tests.support.db import side_effect_rows
from tests.support.waiting import wait_for
from tests.support.wire import traced

NAME = "batch-probe-worker"
Batch = list[eventbus.Event]


def emit(org: Organization, n: int, *, start: int = 0, event_type: str = "test.job") -> None:
    eventbus.emit_many(
        [
            {"event_type": event_type, "entity_kind": "t", "payload": {"n": i}}
            for i in range(start, start + n)
        ],
        organization=org,
    )


def write_all(events: Batch) -> None:
    """The batch's side effects in one statement (one row per event, runs counted)."""
    rows = [(e.id, e.consumer, os.getpid()) for e in events]
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO test_side_effect (event_id, consumer, runs, pid) "
            "SELECT e, c, 1, p FROM unnest(%s::uuid[], %s::text[], %s::int[]) AS t(e, c, p) "
            "ON CONFLICT (event_id, consumer) DO UPDATE SET runs = test_side_effect.runs + 1",
            [[r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]],
        )


def recording(calls: list[list[int]], fail_on: Collection[int] = ()) -> Callable[[Batch], None]:
    def handle(events: Batch) -> None:
        calls.append([e.payload["n"] for e in events])
        write_all(events)
        guilty = [e.payload["n"] for e in events if e.payload["n"] in fail_on]
        if guilty:
            raise RuntimeError(f"cannot handle n={guilty}")

    return handle


def states(consumer: str = NAME) -> dict[int, tuple[str, int]]:
    """n -> (status, attempts)."""
    rows = Delivery.objects.filter(consumer=consumer).select_related("event")
    return {d.event.payload["n"]: (d.status, d.attempts) for d in rows}


def counted_runs() -> dict[str, int]:
    return {event_id: runs for event_id, _, runs in side_effect_rows()}


@contextmanager
def pump_of(consumer: Consumer, **options: int) -> Iterator[DrainPump]:
    with registry.temporarily(consumer):
        pump = DrainPump([consumer], worker_id="w", **options)
        try:
            yield pump
        finally:
            pump.close()


@contextmanager
def warmed_pump(consumer: Consumer, org: Organization) -> Iterator[DrainPump]:
    """A pump (claims of 10) that has run one delivery (event 100) already: its statements are
    prepared and its tenant entered, so a traced run shows only the run's own statements."""
    with pump_of(consumer, batch_size=10) as pump:
        emit(org, 1, start=100)
        pump.run_batch()
        yield pump


def savepoints(statements: list[str]) -> list[str]:
    return [q for q in statements if q.upper().startswith("SAVEPOINT")]


def test_a_batch_must_be_a_sensible_size_on_the_drain() -> None:
    def handle(events: Batch) -> None:
        pass

    for bad in (0, -1, 1001, True, 2.5, "10"):
        with pytest.raises(ConsumerRegistrationError, match="batch must be between"):
            make_consumer(NAME, handle, events=["test.job"], batch=bad)  # type: ignore[arg-type]
    with pytest.raises(ConsumerRegistrationError, match="on the drain only"):
        make_consumer(NAME, handle, events=["test.job"], batch=10, runs_on="broker")
    declared = make_consumer(NAME, handle, events=["test.job"], batch=10)
    assert (declared.batch, declared.atomic) == (10, True)  # acked in the handler's transaction
    assert describe(declared)["batch"] == 10
    assert make_consumer(NAME, handle, events=["test.job"]).batch is None


@pytest.mark.django_db(transaction=True)
def test_a_failing_event_is_charged_alone_and_the_others_are_done_once(
    org: Organization, side_effects: None
) -> None:
    calls: list[list[int]] = []
    consumer = make_consumer(NAME, recording(calls, fail_on={5}), events=["test.job"], batch=8)
    with pump_of(consumer, batch_size=100) as pump:
        emit(org, 8)
        assert pump.run_batch() == 8
    assert calls[0] == list(range(8))  # one call, in emit order, then split around the failure
    assert [5] in calls and max(len(c) for c in calls[1:]) < 8
    assert states() == {n: ("pending", 1) if n == 5 else ("done", 1) for n in range(8)}
    assert DeliveryAttempt.objects.get().error.startswith("RuntimeError")  # one charge, its own
    assert sorted(counted_runs().values()) == [1] * 7  # the innocent ones: written once
    guilty = Delivery.objects.get(consumer=NAME, status="pending")
    assert str(guilty.event_id) not in counted_runs()  # its write rolled back with its call


@pytest.mark.django_db(transaction=True)
def test_a_batch_never_mixes_organizations_and_each_is_served(
    org: Organization, org_b: Organization, side_effects: None
) -> None:
    tenants: list[set[uuid.UUID]] = []

    def handle(events: Batch) -> None:
        tenants.append({e.organization_id for e in events})
        write_all(events)

    consumer = make_consumer(NAME, handle, events=["test.job"], batch=50)
    with pump_of(consumer, batch_size=20) as pump:
        emit(org, 40)
        emit(org_b, 3, start=100)
        assert pump.run_batch() <= 20  # one claim, fair across the two tenants: both served
    assert all(len(t) == 1 for t in tenants)  # a handler acts inside one organization
    assert {org.pk, org_b.pk} == set().union(*tenants)
    assert {n: s for n, s in states().items() if n >= 100} == {
        100: ("done", 1),
        101: ("done", 1),
        102: ("done", 1),
    }


@pytest.mark.django_db(transaction=True)
def test_an_ordered_batch_keeps_each_keys_order_and_stops_at_its_failure(
    org: Organization,
) -> None:
    calls: list[list[tuple[str, int]]] = []
    first, second = uuid.uuid4(), uuid.uuid4()

    def handle(events: Batch) -> None:
        calls.append([(e.ordering_key or "", e.payload["seq"]) for e in events])
        if any(
            e.payload["conversation_id"] == str(first) and e.payload["seq"] == 2 for e in events
        ):
            raise RuntimeError("the third message cannot be sent yet")

    consumer = make_consumer(NAME, handle, events=["message.order_probe"], ordered=True, batch=10)
    with registry.temporarily(consumer):
        for seq in range(5):
            for conversation in (first, second):
                eventbus.emit(
                    "message.order_probe",
                    organization=org,
                    entity_kind="message",
                    payload={"conversation_id": str(conversation), "seq": seq},
                )
        pump = DrainPump([consumer], worker_id="w", concurrency=2, batch_size=50)
        try:
            assert pump.step() == 10  # one claim: both keys' runs
            wait_for(pump.pool.idle, timeout=10, what="the batches to finish")
            pump.step()  # settles them
        finally:
            pump.close()
    for call in calls:
        assert len({key for key, _ in call}) == 1  # one key per call: keys never interleave
        assert [seq for _, seq in call] == sorted(seq for _, seq in call)
    seqs = {
        (d.event.payload["conversation_id"], d.event.payload["seq"]): (d.status, d.attempts)
        for d in Delivery.objects.filter(consumer=NAME).select_related("event")
    }
    assert {s: seqs[str(second), s] for s in range(5)} == dict.fromkeys(range(5), ("done", 1))
    assert {s: seqs[str(first), s] for s in range(5)} == {
        0: ("done", 1),
        1: ("done", 1),
        2: ("pending", 1),  # charged: it retries first
        3: ("pending", 0),  # released, never run after the failure: not charged
        4: ("pending", 0),
    }
    later = [call for call in calls if (str(first), 3) in call]
    assert all((str(first), 2) in call for call in later)  # 3 only ever ran together with 2


@pytest.mark.django_db(transaction=True)
def test_the_handler_sees_each_events_redelivered_flag(org: Organization) -> None:
    seen: dict[int, tuple[bool, str | None]] = {}

    def handle(events: Batch) -> None:
        seen.update({e.payload["n"]: (e.redelivered, e.redelivery_reason) for e in events})

    consumer = make_consumer(NAME, handle, events=["test.job"], batch=10)
    with pump_of(consumer, batch_size=10) as pump:
        emit(org, 4)
        Delivery.objects.filter(consumer=NAME, event__payload__n=2).update(
            redelivered=True, redelivery_reason="worker died"
        )
        assert pump.run_batch() == 4
    assert seen == {0: (False, None), 1: (False, None), 2: (True, "worker died"), 3: (False, None)}


@pytest.mark.django_db(transaction=True)
def test_a_paused_batch_consumers_claimed_deliveries_are_released_uncharged(
    org: Organization,
) -> None:
    calls: list[list[int]] = []
    consumer = make_consumer(NAME, recording(calls), events=["test.job"], batch=3)
    with pump_of(consumer, concurrency=1, batch_size=10) as pump:
        emit(org, 7)
        pump.pool.pause()  # claimed, not started yet
        pump._submit(claims.claim(consumers=[NAME], batch_size=10, worker_id="w"))
        assert pump.pool.queued == 3  # 3 + 3 + 1
        assert set(states().values()) == {("processing", 1)}
        services.consumer_pause(consumer=NAME, actor="ops", reason="maintenance")
        pump.poke()
        pump.step()  # the queued batches come back released
        pump.step()  # settled
        assert set(states().values()) == {("pending", 0)}
        assert calls == []
        pump.pool.resume()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("small_breaker")
def test_the_breaker_counts_each_event_of_a_failing_batch_and_opens(
    org: Organization, side_effects: None
) -> None:
    calls: list[list[int]] = []
    consumer = make_consumer(
        NAME, recording(calls, fail_on=set(range(6))), events=["test.job"], batch=6
    )
    with pump_of(consumer, batch_size=10) as pump:
        emit(org, 6)
        assert pump.run_batch() == 6
        breaker.flush(force=True)
        assert ConsumerState.objects.get(pk=NAME).state == "open"
        assert "6 of 6 deliveries failed" in ConsumerState.objects.get(pk=NAME).reason
        emit(org, 2, start=10)
        assert pump.run_batch() == 0  # open: nothing claimed, nothing charged
    assert set(states().values()) == {("pending", 1), ("pending", 0)}
    assert side_effect_rows() == []


@pytest.mark.django_db(transaction=True)
def test_a_batch_that_times_out_is_set_apart_and_only_the_hanging_event_is_charged(
    org: Organization, side_effects: None
) -> None:
    unblock = threading.Event()
    calls: list[list[int]] = []

    def hang_on_one(events: Batch) -> None:
        calls.append([e.payload["n"] for e in events])
        if any(e.payload["n"] == 1 for e in events):
            unblock.wait(30)  # past its timeout: the slot is abandoned
        write_all(events)

    # Events 0 and 2 then run alone and must finish within the timeout: 0.3 s was too short for
    # their INSERT and ack on a loaded machine (a fresh-clone run beside busy loops charged them).
    consumer = make_consumer(NAME, hang_on_one, events=["test.job"], batch=3, timeout=2.0)
    try:
        with pump_of(consumer, concurrency=1, batch_size=10) as pump:
            emit(org, 3)

            def settled() -> bool:
                pump.step()
                return states().get(1, ("", 0))[1] == 1 and {
                    states()[0][0],
                    states()[2][0],
                } == {"done"}

            wait_for(settled, timeout=30, what="the set-apart events to run alone")
            unblock.set()
            wait_for(lambda: pump.pool.orphans == 0, timeout=10, what="the hung calls to end")
    finally:
        unblock.set()
    assert calls[0] == [0, 1, 2]
    assert sorted(calls[1:]) == [[0], [1], [2]]  # then each alone
    assert states() == {0: ("done", 1), 1: ("pending", 1), 2: ("done", 1)}
    assert DeliveryAttempt.objects.get().error.startswith("HandlerTimeout")
    rows = Delivery.objects.filter(consumer=NAME)
    assert all(d.redelivered for d in rows)  # each may have run in the batch that hung
    # The abandoned calls' writes never commit: their ack found the lease gone.
    assert sorted(counted_runs().values()) == [1, 1]


@pytest.mark.django_db
def test_a_batch_claim_and_settle_is_one_claim_and_one_ack_per_batch(
    org: Organization, side_effects: None
) -> None:
    consumer = make_consumer(NAME, write_all, events=["test.job"], batch=5)
    with pump_of(consumer, batch_size=10) as pump:
        emit(org, 10)
        pump.run_batch()  # warm: prepares the statements, enters the tenant
        emit(org, 10, start=10)
        with traced() as wire:
            assert pump.run_batch() == 10
    assert wire.named().count("claim") == 1
    assert wire.named().count("ack") == 2  # one per batch of 5, in the handler's transaction
    writes = [s for s in wire.statements if "test_side_effect" in s]
    assert len(writes) == 2  # the handler's one statement per batch
    assert sorted(counted_runs().values()) == [1] * 20


@pytest.mark.django_db
def test_an_atomic_consumers_claim_commits_as_one_group_and_a_failure_is_its_own(
    org: Organization, side_effects: None
) -> None:
    from tests.support.consumers import record_run

    def fail_on_three(event: eventbus.Event) -> None:
        record_run(event)  # rolled back with its savepoint when it then fails
        if event.payload["n"] == 3:
            raise RuntimeError("three is refused")

    consumer = make_consumer(NAME, fail_on_three, events=["test.job"], atomic=True)
    with warmed_pump(consumer, org) as pump:
        emit(org, 6)
        with traced() as wire:
            assert pump.run_batch() == 6
    assert wire.named().count("ack") == 1  # one ack (and one commit) for the five that ran
    assert wire.named().count("nack") == 1
    assert {n: s for n, s in states().items() if n < 100} == {
        n: ("pending", 1) if n == 3 else ("done", 1) for n in range(6)
    }
    assert sorted(counted_runs().values()) == [1] * 6  # 100 and the five; three's rolled back
    guilty = Delivery.objects.get(consumer=NAME, status="pending")
    assert str(guilty.event_id) not in counted_runs()


@pytest.mark.django_db
def test_an_atomic_group_takes_no_savepoint_until_a_handler_fails(
    org: Organization, side_effects: None
) -> None:
    """The first pass has no savepoints; a failure rolls it back and the second pass runs the
    others with a savepoint each, the failed delivery once only (its error kept)."""
    from tests.support.consumers import record_run

    calls: list[int] = []
    refused: set[int] = set()

    def handle(event: eventbus.Event) -> None:
        calls.append(event.payload["n"])
        record_run(event)
        if event.payload["n"] in refused:
            raise RuntimeError("refused")

    consumer = make_consumer(NAME, handle, events=["test.job"], atomic=True)
    with warmed_pump(consumer, org) as pump:
        emit(org, 4)
        calls.clear()
        with traced() as wire:
            assert pump.run_batch() == 4
        # One: the group's transaction, a savepoint itself inside the test's transaction.
        assert len(savepoints(wire.statements)) == 1
        assert calls == [0, 1, 2, 3]

        refused.add(12)
        emit(org, 4, start=10)
        calls.clear()
        with traced() as wire:
            assert pump.run_batch() == 4
        taken = savepoints(wire.statements)
    assert calls == [10, 11, 12, 10, 11, 13]  # 12 once; 10 and 11 again after the rollback
    assert len(taken) == 2 + 3  # each pass's own, then one for each of 10, 11 and 13
    assert wire.named().count("ack") == 1
    assert wire.named().count("nack") == 1
    assert {n: s for n, s in states().items() if n >= 10 and n < 100} == {
        n: ("pending", 1) if n == 12 else ("done", 1) for n in range(10, 14)
    }
    assert sorted(counted_runs().values()) == [1] * 8  # 100, 0-3, 10, 11, 13: once each
