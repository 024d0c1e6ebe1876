"""Ordering keys: an ordered consumer runs one delivery per key at a time, in emit order."""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection

import eventbus
from core.models import Organization
from eventbus.dispatch import claim as claims
from eventbus.dispatch.drain import DrainPump
from eventbus.dispatch.retry import Verdict
from eventbus.store import catalog
from eventbus.store.errors import EventValidationError
from eventbus.store.models import Delivery, DeliveryAttempt, EventLog
from eventbus.store.registry import Consumer, make_consumer, registry
from tests.support.consumers import ORDER_PROBE_TABLES_SQL
from tests.support.processes import Drain, start_drain
from tests.support.waiting import wait_for

ORDERED = "ordered-probe-worker"
UNORDERED = "unordered-probe-worker"
WORKER = "test:1"


@pytest.fixture
def probe_tables(db: None) -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute(ORDER_PROBE_TABLES_SQL)
    yield


def probe(org: Organization, conversation: uuid.UUID, seq: int, **extra: Any) -> EventLog:
    return eventbus.emit(
        "message.order_probe",
        organization=org,
        entity_kind="message",
        payload={"conversation_id": str(conversation), "seq": seq},
        **extra,
    )


def claim_ordered(now: dt.datetime | None = None) -> list[int]:
    batch = claims.claim(consumers=[ORDERED], batch_size=50, worker_id=WORKER, now=now)
    return sorted(e.payload["seq"] for e in batch.events)


def settle(consumer: str = ORDERED) -> claims.Claim:
    return claims.claim(consumers=[consumer], batch_size=50, worker_id=WORKER)


@contextmanager
def one_conversation_pump(
    org: Organization, consumer: Consumer, *, events: int, concurrency: int
) -> Iterator[DrainPump]:
    """`consumer` registered, `events` probes of one conversation emitted, a drain pump for it."""
    conversation = uuid.uuid4()
    with registry.temporarily(consumer):
        for seq in range(events):
            probe(org, conversation, seq)
        pump = DrainPump([consumer], worker_id=WORKER, concurrency=concurrency, batch_size=50)
        try:
            yield pump
        finally:
            pump.close()


def states(consumer: str) -> dict[int, tuple[str, int]]:
    """seq -> (status, attempts) of the consumer's deliveries."""
    rows = Delivery.objects.filter(consumer=consumer).select_related("event")
    return {d.event.payload["seq"]: (d.status, d.attempts) for d in rows}


# -- the key: from the catalog or the emit --------------------------------------------------


def test_message_and_conversation_types_are_keyed_by_their_conversation(org: Organization) -> None:
    conversation = uuid.uuid4()
    message = probe(org, conversation, 1)
    assert message.ordering_key == str(conversation)
    opened = eventbus.emit(
        "conversation.reopened",
        organization=org,
        entity_kind="conversation",
        entity_id=conversation,
        payload={"reopened_by": "agent"},
    )
    assert opened.ordering_key == str(conversation)  # the entity is the conversation
    lead = eventbus.emit(
        "lead.won", organization=org, entity_kind="lead", payload={"value": 1, "won_at": "x"}
    )
    assert lead.ordering_key is None
    assert catalog.ordered_by("message.received") == "conversation_id"


def test_only_ordered_consumers_deliveries_carry_the_key(org: Organization) -> None:
    conversation = uuid.uuid4()
    event = probe(org, conversation, 1)
    keys = dict(Delivery.objects.filter(event_id=event.pk).values_list("consumer", "ordering_key"))
    assert keys == {ORDERED: str(conversation), UNORDERED: None}


def test_an_emit_may_give_its_own_key_and_a_bad_one_writes_nothing(org: Organization) -> None:
    event = probe(org, uuid.uuid4(), 1, ordering_key="order:42")
    assert Delivery.objects.get(event_id=event.pk, consumer=ORDERED).ordering_key == "order:42"
    for bad in ("", 42, "x" * 256):
        with pytest.raises(EventValidationError, match="ordering_key"):
            probe(org, uuid.uuid4(), 2, ordering_key=bad)
    assert EventLog.objects.count() == 1


def test_emit_many_keys_each_item(org: Organization) -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    items = [
        {
            "event_type": "message.order_probe",
            "entity_kind": "message",
            "payload": {"conversation_id": str(conv), "seq": n},
        }
        for n, conv in enumerate([a, b, a])
    ]
    items[2]["ordering_key"] = "own"
    ids = eventbus.emit_many(items, organization=org)
    keys = [Delivery.objects.get(event_id=i, consumer=ORDERED).ordering_key for i in ids]
    assert keys == [str(a), str(b), "own"]


def test_the_sql_emit_event_function_keys_like_emit(org: Organization) -> None:
    conversation = uuid.uuid4()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT emit_event('message.order_probe', 'message', NULL, %s::jsonb, '{}', %s)",
            [f'{{"conversation_id": "{conversation}", "seq": 1}}', org.pk],
        )
        [event_id] = cursor.fetchone()
        cursor.execute(
            "SELECT emit_event('message.order_probe', 'message', NULL, %s::jsonb, '{}', %s,"
            " p_ordering_key => 'given')",
            ['{"conversation_id": "c", "seq": 2}', org.pk],
        )
        [given_id] = cursor.fetchone()
    assert Delivery.objects.get(event_id=event_id, consumer=ORDERED).ordering_key == str(
        conversation
    )
    assert Delivery.objects.get(event_id=given_id, consumer=ORDERED).ordering_key == "given"
    assert Delivery.objects.get(event_id=given_id, consumer=UNORDERED).ordering_key is None


# -- the claim ------------------------------------------------------------------------------


def test_one_delivery_per_key_is_claimed_at_a_time_in_emit_order(org: Organization) -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    for seq in range(3):
        probe(org, a, seq)
        probe(org, b, 10 + seq)
    first = settle()
    assert sorted(e.payload["seq"] for e in first.events) == [0, 10]  # each key's first
    assert claim_ordered() == []  # both keys are running
    claims.ack(first.token, [e.delivery_id for e in first.events if e.payload["seq"] == 0])
    assert claim_ordered() == [1]  # a's next; b still running
    # The unordered consumer of the same events is not held back by any of it.
    assert len(settle(UNORDERED).events) == 6


def test_a_retrying_delivery_holds_back_its_key_until_it_dies(org: Organization) -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    probe(org, a, 0)
    probe(org, a, 1)
    probe(org, b, 10)
    first = settle()
    head = next(e for e in first.events if e.payload["seq"] == 0)
    retry = Verdict(dead=False, delay=600, error_class="RuntimeError", error="down")
    claims.nack(first.token, [claims.Failure(head.delivery_id, retry)])
    claims.ack(first.token, [e.delivery_id for e in first.events if e.payload["seq"] == 10])
    # a/0 waits ten minutes for its retry: a/1 waits with it (b has nothing left).
    assert claim_ordered() == []
    later = claims.claim(
        consumers=[ORDERED],
        batch_size=50,
        worker_id=WORKER,
        now=dt.datetime.now(dt.UTC) + dt.timedelta(minutes=11),
    )
    assert [e.payload["seq"] for e in later.events] == [0]  # the retry first, still alone
    dead = Verdict(dead=True, delay=0, error_class="PermanentError", error="gone")
    claims.nack(later.token, [claims.Failure(later.events[0].delivery_id, dead)])
    assert claim_ordered() == [1]  # the dead letter released the key


def test_a_reprocessed_dead_letter_waits_while_its_key_runs(org: Organization) -> None:
    a = uuid.uuid4()
    probe(org, a, 0)
    probe(org, a, 1)
    first = settle()
    dead = Verdict(dead=True, delay=0, error_class="PermanentError", error="bad")
    claims.nack(first.token, [claims.Failure(first.events[0].delivery_id, dead)])
    running = settle()
    assert [e.payload["seq"] for e in running.events] == [1]
    claims.reprocess([first.events[0].delivery_id])  # the operator fixes and re-runs seq 0
    assert claim_ordered() == []  # seq 1 is running: never two of a key at once
    claims.ack(running.token, running.ids)
    assert claim_ordered() == [0]


def test_a_keys_backlog_does_not_block_other_keys(org: Organization) -> None:
    busy, others = uuid.uuid4(), [uuid.uuid4() for _ in range(5)]
    for seq in range(200):
        probe(org, busy, seq)
    for n, conversation in enumerate(others):
        probe(org, conversation, 1000 + n)
    assert claim_ordered() == [0, 1000, 1001, 1002, 1003, 1004]
    assert claim_ordered() == []


def test_a_claim_may_take_each_keys_run_in_id_order(org: Organization) -> None:
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    for seq in range(4):
        probe(org, a, seq)
        probe(org, b, 10 + seq)
    probe(org, c, 20)
    probe(org, c, 21)
    # c's second is waiting to run alone (its worker died): c's run stops before it.
    Delivery.objects.filter(consumer=ORDERED, event__payload__seq=21).update(isolate=True)
    batch = claims.claim(consumers=[ORDERED], batch_size=50, worker_id=WORKER, per_key=3)
    by_key: dict[str | None, list[int]] = {}
    for event in sorted(batch.events, key=lambda e: e.delivery_id):
        by_key.setdefault(event.ordering_key, []).append(event.payload["seq"])
    assert by_key == {str(a): [0, 1, 2], str(b): [10, 11, 12], str(c): [20]}
    assert claim_ordered() == []  # every key has deliveries running
    claims.ack(batch.token, batch.ids)
    assert claim_ordered() == [3, 13]  # the rest of each run, one per key again


def test_a_runs_length_is_the_batch_spread_over_its_keys(org: Organization) -> None:
    keys = [uuid.uuid4() for _ in range(4)]
    for seq in range(40):
        probe(org, keys[seq % 4], seq)
    batch = claims.claim(consumers=[ORDERED], batch_size=10, worker_id=WORKER, per_key=50)
    counts = sorted(sum(1 for e in batch.events if e.ordering_key == str(k)) for k in keys)
    assert len(batch.events) == 10 and counts in ([2, 2, 3, 3], [3, 3, 2, 2])


@pytest.mark.django_db(transaction=True)
def test_a_drained_run_stops_at_its_first_failure_and_releases_the_rest(
    org: Organization,
) -> None:
    ran: list[int] = []

    def fail_on_one(event: eventbus.Event) -> None:
        ran.append(event.payload["seq"])
        if event.payload["seq"] == 1:
            raise RuntimeError("the second message cannot be sent yet")

    consumer = make_consumer(
        "run-probe-worker", fail_on_one, events=["message.order_probe"], ordered=True
    )
    with one_conversation_pump(org, consumer, events=4, concurrency=4) as pump:
        assert pump.step() == 4  # one claim: the whole run of the conversation
        wait_for(pump.pool.idle, timeout=10, what="the run to finish")
        pump.step()  # settles it
    assert ran == [0, 1]  # in order, one at a time, nothing after the failure
    rows = states("run-probe-worker")
    assert rows[0] == ("done", 1)
    assert rows[1][0] == "pending" and rows[1][1] == 1  # charged: it retries first
    assert rows[2] == rows[3] == ("pending", 0)  # released, never run, not charged


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_head_times_out_releases_the_rest(org: Organization) -> None:
    ran: list[int] = []
    unblock = threading.Event()

    def hang_on_zero(event: eventbus.Event) -> None:
        ran.append(event.payload["seq"])
        if event.payload["seq"] == 0:
            unblock.wait(30)  # past its timeout: the slot is abandoned

    consumer = make_consumer(
        "hang-probe-worker",
        hang_on_zero,
        events=["message.order_probe"],
        ordered=True,
        timeout=0.2,
    )
    try:
        with one_conversation_pump(org, consumer, events=3, concurrency=2) as pump:
            pump.step()

            def settled() -> bool:
                pump.step()
                return "processing" not in {s for s, _ in states("hang-probe-worker").values()}

            wait_for(settled, timeout=20, what="the timed-out run to be settled")
    finally:
        unblock.set()
    assert ran == [0]  # the rest of the run never started
    rows = states("hang-probe-worker")
    assert rows[0] == ("pending", 1)  # the timeout is its failure: retried first
    assert rows[1] == rows[2] == ("pending", 0)


def test_events_without_a_key_run_unordered_for_an_ordered_consumer(org: Organization) -> None:
    # emit_event() with a payload whose conversation_id is not a scalar: no key.
    with connection.cursor() as cursor:
        for seq in range(3):
            cursor.execute(
                "SELECT emit_event('message.order_probe', 'message', NULL, %s::jsonb, '{}', %s)",
                [f'{{"conversation_id": {{"nested": true}}, "seq": {seq}}}', org.pk],
            )
    assert claim_ordered() == [0, 1, 2]


# -- many processes -------------------------------------------------------------------------

CONVERSATIONS = 50
EVENTS = 2000


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_three_workers_handle_every_conversation_in_emit_order_never_two_at_once(
    org: Organization, probe_tables: None, processes: list[Drain]
) -> None:
    conversations = [uuid.uuid4() for _ in range(CONVERSATIONS)]
    items = [
        {
            "event_type": "message.order_probe",
            "entity_kind": "message",
            "payload": {"conversation_id": str(conversations[n % CONVERSATIONS]), "seq": n},
        }
        for n in range(EVENTS)
    ]
    eventbus.emit_many(items, organization=org)
    env = {"EVENTBUS_RETRY_SCHEDULE": "0.05", "EVENTBUS_RETRY_JITTER": "0"}
    args = ["--consumer", ORDERED, "--consumer", UNORDERED, "--concurrency", "8"]
    for _ in range(3):
        processes.append(start_drain(*args, "--poll-interval", "0.05", "--no-listen", **env))

    def unfinished() -> int:
        deliveries = Delivery.objects.filter(consumer__in=[ORDERED, UNORDERED])
        return deliveries.exclude(status__in=["done", "dead"]).count()

    wait_for(
        lambda: unfinished() == 0,
        timeout=240,
        what=lambda: f"{unfinished()} deliveries unfinished; " + processes[0].output()[-2000:],
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, seq, other_seq FROM test_order_violation")
        assert cursor.fetchall() == []  # never two deliveries of a key at once
        cursor.execute(
            "SELECT key, array_agg(seq ORDER BY id) FROM test_order_log WHERE consumer = %s"
            " GROUP BY key",
            [ORDERED],
        )
        handled = dict(cursor.fetchall())
    assert len(handled) == CONVERSATIONS
    for n, conversation in enumerate(conversations):
        expected = list(range(n, EVENTS, CONVERSATIONS))
        assert handled[str(conversation)] == expected, f"conversation {n} out of order"
    failed = DeliveryAttempt.objects.filter(delivery__consumer=ORDERED, outcome="retry").count()
    assert failed == 2 * len([n for n in range(EVENTS) if n % 7 == 3])  # retries happened
    assert Delivery.objects.filter(consumer=UNORDERED, status="done").count() == EVENTS


def test_an_ordered_consumer_of_a_type_without_a_key_is_warned_about() -> None:
    from eventbus.operations.checks import check_ordered_consumers
    from eventbus.store.registry import make_consumer, registry

    assert check_ordered_consumers() == []  # the project's ordered consumers all have keys
    unkeyed = make_consumer(
        "unkeyed-probe-worker", lambda event: None, events=["lead.won"], ordered=True
    )
    with registry.temporarily(unkeyed):
        [warning] = check_ordered_consumers()
    assert warning.id == "eventbus.W001"
    assert "lead.won" in warning.msg


def test_a_delivery_waiting_to_run_alone_also_waits_for_its_keys_turn(org: Organization) -> None:
    a = uuid.uuid4()
    probe(org, a, 0)
    probe(org, a, 1)
    running = settle()
    assert [e.payload["seq"] for e in running.events] == [0]
    # seq 1 was claimed with others by a worker that died: it runs alone next, after seq 0.
    Delivery.objects.filter(consumer=ORDERED, status="pending").update(isolate=True)
    assert not claims.isolated_due([ORDERED])  # its key is busy: not due (the drain claims on)
    assert claims.claim_isolated(consumers=[ORDERED], worker_id=WORKER).events == []
    claims.ack(running.token, running.ids)
    assert claims.isolated_due([ORDERED])
    alone = claims.claim_isolated(consumers=[ORDERED], worker_id=WORKER)
    assert [e.payload["seq"] for e in alone.events] == [1]
