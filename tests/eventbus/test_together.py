"""Batch consumers' batches of one claim and organization in one transaction
(eventbus/dispatch/together.py, eventbus.dispatch.drain.run_batches_together)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager

import psycopg
import pytest
from django.db import OperationalError, connection

import eventbus
from core.models import Organization
from eventbus.dispatch import claim as claims
from eventbus.dispatch import drain, together
from eventbus.dispatch.drain import DrainPump
from eventbus.dispatch.together import Together
from eventbus.operations import services
from eventbus.store.models import DeliveryAttempt, EventLog
from eventbus.store.registry import Consumer, make_consumer, registry
from tests.eventbus.test_drain_batches import emit, states, write_all
from tests.support.db import side_effect_rows
from tests.support.waiting import wait_for
from tests.support.wire import traced

NAMES = ("batch-a-worker", "batch-b-worker", "batch-c-worker")
Batch = list[eventbus.Event]
# (consumer, transaction id, organizations, n of the events) per handler call
Calls = list[tuple[str, int, set[uuid.UUID], list[int]]]


def recording(
    calls: Calls,
    *,
    fail_on: Collection[int] = (),
    hang_on: Collection[int] = (),
    unblock: threading.Event | None = None,
) -> Callable[[Batch], None]:
    def handle(events: Batch) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT txid_current()")
            txid = cursor.fetchone()[0]
        ns = [e.payload["n"] for e in events]
        calls.append((events[0].consumer, txid, {e.organization_id for e in events}, ns))
        write_all(events)
        if unblock is not None and set(ns) & set(hang_on):
            unblock.wait(30)  # past its timeout: the slot is abandoned
        if set(ns) & set(fail_on):
            raise RuntimeError(f"cannot handle {sorted(set(ns) & set(fail_on))}")

    return handle


def consumers(calls: Calls, **special: Callable[[Batch], None]) -> list[Consumer]:
    """The three batch consumers of test.job, recording into `calls` (or as `special` says,
    by the letter of their name)."""
    return [
        make_consumer(
            name,
            special.get(name[6], recording(calls)),
            events=["test.job"],
            batch=50,
            timeout=2.0,
        )
        for name in NAMES
    ]


@contextmanager
def pump_of(declared: list[Consumer], **options: int) -> Iterator[DrainPump]:
    with registry.temporarily(*declared):
        pump = DrainPump(declared, worker_id="w", **options)
        try:
            yield pump
        finally:
            pump.close()


def runs() -> list[int]:
    """How often each (event, consumer) row was written, in a committed transaction."""
    return sorted(n for _, _, n in side_effect_rows())


def transactions(calls: Calls) -> dict[int, set[str]]:
    """Transaction id -> the consumers whose handlers ran in it."""
    seen: dict[int, set[str]] = {}
    for name, txid, _, _ in calls:
        seen.setdefault(txid, set()).add(name)
    return seen


@pytest.mark.django_db(transaction=True)
def test_three_batch_consumers_of_one_claim_commit_together_with_one_ack(
    org: Organization, side_effects: None
) -> None:
    calls: Calls = []
    with pump_of(consumers(calls), batch_size=100) as pump:
        emit(org, 2, start=100)
        pump.run_batch()  # warm: prepares the statements, enters the tenant
        emit(org, 6)
        with traced() as wire:
            assert pump.run_batch() == 18
    ran = [c for c in calls if c[3][0] < 100]
    assert sorted(name for name, *_ in ran) == list(NAMES)  # each handler once, all six events
    assert all(ns == list(range(6)) for *_, ns in ran)
    assert list(transactions(ran).values()) == [set(NAMES)]  # one transaction for the three
    assert wire.named().count("ack") == 1  # one ack, one summary update per event
    assert {n: s for n, s in states(NAMES[1]).items() if n < 100} == dict.fromkeys(
        range(6), ("done", 1)
    )
    events = EventLog.objects.filter(payload__n__lt=100)
    assert {(e.status, tuple(e.consumed_by)) for e in events} == {("done", NAMES)}
    assert runs() == [1] * 24  # each event written once per consumer


@pytest.mark.django_db(transaction=True)
def test_each_organization_has_its_own_shared_transaction(
    org: Organization, org_b: Organization, side_effects: None
) -> None:
    calls: Calls = []
    with pump_of(consumers(calls), batch_size=100) as pump:
        emit(org, 3)
        emit(org_b, 3, start=10)
        assert pump.run_batch() == 18
    assert all(len(tenants) == 1 for _, _, tenants, _ in calls)  # a call never mixes tenants
    by_tx = {
        txid: set().union(*(t for _, x, t, _ in calls if x == txid)) for _, txid, _, _ in calls
    }
    assert sorted(len(t) for t in by_tx.values()) == [1, 1]  # two transactions, one tenant each
    assert list(transactions(calls).values()) == [set(NAMES), set(NAMES)]


@pytest.mark.django_db(transaction=True)
def test_a_failing_consumer_rolls_back_alone_is_charged_alone_then_runs_on_its_own(
    org: Organization, side_effects: None
) -> None:
    calls: Calls = []
    now = [0.0]
    declared = consumers(calls, b=recording(calls, fail_on={2}))
    with pump_of(declared, batch_size=100) as pump:
        pump.together = Together(clock=lambda: now[0])
        emit(org, 4)
        assert pump.run_batch() == 12
        # The shared try rolled back; then each batch on its own: b's split around event 2.
        assert states(NAMES[0]) == states(NAMES[2]) == dict.fromkeys(range(4), ("done", 1))
        assert states(NAMES[1]) == {
            0: ("done", 1),
            1: ("done", 1),
            2: ("pending", 1),
            3: ("done", 1),
        }
        assert DeliveryAttempt.objects.get().error.startswith("RuntimeError")  # its own charge
        assert runs() == [1] * 11  # the shared writes rolled back: once each
        assert pump.together.alone() == {NAMES[1]}

        del calls[:]
        emit(org, 2, start=10)
        assert pump.run_batch() == 6
        assert sorted(map(sorted, transactions(calls).values())) == [
            [NAMES[0], NAMES[2]],  # a and c still share one
            [NAMES[1]],  # b alone
        ]

        now[0] = together.ALONE_SECONDS + 1  # b has been alone long enough
        del calls[:]
        emit(org, 2, start=20)
        pump.run_batch()
        assert list(transactions([c for c in calls if c[3] != [2]]).values()) == [set(NAMES)]


@pytest.mark.django_db(transaction=True)
def test_an_ordered_batch_consumer_keeps_its_own_transaction(
    org: Organization, side_effects: None
) -> None:
    calls: Calls = []
    declared = [
        *consumers(calls)[:2],
        make_consumer(
            "batch-ordered-worker",
            recording(calls),
            events=["message.order_probe"],
            ordered=True,
            batch=50,
        ),
    ]
    with pump_of(declared, batch_size=100) as pump:
        emit(org, 2)
        eventbus.emit(
            "message.order_probe",
            organization=org,
            entity_kind="message",
            payload={"conversation_id": str(uuid.uuid4()), "seq": 0, "n": 0},
        )
        pump.run_batch()
    grouped = sorted(map(sorted, transactions(calls).values()))
    assert grouped == [[NAMES[0], NAMES[1]], ["batch-ordered-worker"]]


@pytest.mark.django_db(transaction=True)
def test_a_hanging_batch_sets_apart_only_its_own_events_and_ends_the_shared_transaction(
    org: Organization, side_effects: None, caplog: pytest.LogCaptureFixture
) -> None:
    calls: Calls = []
    unblock = threading.Event()
    declared = consumers(calls, b=recording(calls, hang_on={1}, unblock=unblock))
    try:
        with pump_of(declared, concurrency=1, batch_size=100) as pump:
            emit(org, 3)

            def others_done() -> bool:
                pump.step()
                return all(
                    s == ("done", 1) for name in (NAMES[0], NAMES[2]) for s in states(name).values()
                )

            # a's rows, written in the shared transaction before b hung, are unlocked at once
            # (its backend ended), so a runs again and commits while b's call still hangs.
            wait_for(others_done, timeout=25, what="a and c to be done while b hangs")
            assert pump.together.alone() == {NAMES[1]}

            def b_settled() -> bool:  # set apart: each runs alone; 1 hangs again and is charged
                pump.step()
                b = states(NAMES[1])
                return (b[0], b[2]) == (("done", 1), ("done", 1)) and b[1][1] == 1

            wait_for(b_settled, timeout=25, what="b's events to run alone")
            assert not unblock.is_set()
            unblock.set()
            wait_for(lambda: pump.pool.orphans == 0, timeout=10, what="the hung calls to end")
    finally:
        unblock.set()
    assert states(NAMES[0]) == states(NAMES[2]) == dict.fromkeys(range(3), ("done", 1))
    b = states(NAMES[1])
    assert (b[0], b[2]) == (("done", 1), ("done", 1))  # set apart, then run alone: done
    assert b[1][1] == 1  # the one that hangs: charged once, for its own timeout
    errors = [a.error for a in DeliveryAttempt.objects.all()]
    assert len(errors) == 1 and errors[0].startswith("HandlerTimeout")
    assert "consumer batch-b-worker: its batch hung in a shared batch job" in caplog.text
    # The ended transaction's writes never committed; the reruns wrote each row once.
    assert runs() == [1] * 8


@pytest.mark.django_db(transaction=True)
def test_pausing_one_consumer_of_a_shared_job_gives_back_only_its_events(
    org: Organization, side_effects: None
) -> None:
    calls: Calls = []
    with pump_of(consumers(calls), concurrency=1, batch_size=100) as pump:
        emit(org, 3)
        pump.pool.pause()  # claimed, not started yet
        pump._submit(claims.claim(consumers=list(NAMES), batch_size=100, worker_id="w"))
        assert pump.pool.queued == 1  # one shared job of the three batches
        services.consumer_pause(consumer=NAMES[1], actor="ops", reason="maintenance")
        now = [0.0]
        pump.clock = lambda: now[0]
        pump.poke()
        pump.step()  # b's queued events come back released; a's and c's stay queued
        pump.step()  # gathering: not settled yet
        now[0] += drain.SETTLE_WITHIN  # the release is settled with the next gathered ack
        pump.step()
        assert states(NAMES[1]) == dict.fromkeys(range(3), ("pending", 0))  # refunded
        assert pump.pool.queued == 1
        pump.pool.resume()
        wait_for(lambda: (pump.step(), pump.pool.idle())[1], timeout=10, what="a and c to run")
        pump.step()
    assert sorted(name for name, *_ in calls) == [NAMES[0], NAMES[2]]  # b never ran
    assert list(transactions(calls).values()) == [{NAMES[0], NAMES[2]}]
    assert states(NAMES[0]) == states(NAMES[2]) == dict.fromkeys(range(3), ("done", 1))
    assert states(NAMES[1]) == dict.fromkeys(range(3), ("pending", 0))


def test_a_deadlock_or_serialization_failure_is_a_conflict_not_a_handlers_fault() -> None:
    deadlock = psycopg.errors.DeadlockDetected("deadlock detected")
    wrapped = OperationalError("deadlock detected")
    wrapped.__cause__ = deadlock
    assert together.conflict(deadlock)
    assert together.conflict(wrapped)
    assert together.conflict(psycopg.errors.SerializationFailure("could not serialize"))
    assert not together.conflict(RuntimeError("the handler's own bug"))
    assert not together.conflict(psycopg.errors.UniqueViolation("duplicate key"))
