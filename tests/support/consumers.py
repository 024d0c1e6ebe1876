"""Consumers and event types used by the tests, also loaded by subprocess workers.

Subprocess drains import this module through `EVENTBUS_HANDLER_MODULES=tests.support.consumers`.
Their side effects go to `test_side_effect` (created by the `side_effects` fixture): a unique key
per (event, consumer) and a counter of runs, so "exactly once" and "happened once" are provable.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import psycopg
from django.db import connection

import eventbus
from core.db import conninfo
from eventbus.store import catalog

# The tests' types are open to every door: the API and pipeline tests emit them there.
OPEN = (catalog.API, catalog.PIPELINE)

catalog.declare(
    "test.effect", required=["n"], description="tests: counted side effects", doors=OPEN
)
catalog.declare("test.slow", required=["n"], description="tests: slow side effects", doors=OPEN)
catalog.declare(
    "test.flaky", required=["n"], description="tests: a consumer that always fails", doors=OPEN
)
catalog.declare("test.job", required=["n"], description="tests: no standing consumer", doors=OPEN)

EFFECT_CONSUMERS = ("effect-a-worker", "effect-b-worker", "effect-c-worker")

RECORD_RUN_SQL = """
INSERT INTO test_side_effect (event_id, consumer, runs, pid)
VALUES (%s, %s, 1, %s)
ON CONFLICT (event_id, consumer) DO UPDATE SET runs = test_side_effect.runs + 1
"""

RECORD_ONCE_SQL = """
INSERT INTO test_side_effect (event_id, consumer, runs, pid)
VALUES (%s, %s, 1, %s)
ON CONFLICT (event_id, consumer) DO NOTHING
"""


def record_run(event: eventbus.Event) -> None:
    """Count every run of (event, consumer): runs > 1 would mean a double run."""
    with connection.cursor() as cursor:
        cursor.execute(RECORD_RUN_SQL, [event.id, event.consumer, os.getpid()])


@eventbus.consumer("effect-a-worker", events=["test.effect"])
def effect_a(event: eventbus.Event) -> None:
    record_run(event)


@eventbus.consumer("effect-b-worker", events=["test.effect"])
def effect_b(event: eventbus.Event) -> None:
    record_run(event)


@eventbus.consumer("effect-c-worker", events=["test.effect"])
def effect_c(event: eventbus.Event) -> None:
    record_run(event)


@eventbus.consumer("slow-effect-worker", events=["test.slow"])
def slow_effect(event: eventbus.Event) -> None:
    """Idempotent side effect first, then slow work: killing the process mid-batch is easy."""
    with connection.cursor() as cursor:
        cursor.execute(RECORD_ONCE_SQL, [event.id, event.consumer, os.getpid()])
    time.sleep(float(event.payload.get("seconds", 0.2)))  # simulated slow I/O


@eventbus.consumer("flaky-worker", events=["test.flaky"])
def flaky(event: eventbus.Event) -> None:
    raise RuntimeError(f"flaky-worker always fails (n={event.payload['n']})")


@eventbus.consumer("notify-probe-worker", events=["message.received"])
def notify_probe(event: eventbus.Event) -> None:
    record_run(event)


catalog.declare(
    "test.broker", required=["n"], description="tests: broker-run consumers", doors=OPEN
)
catalog.declare(
    "test.broker_flaky", required=["n"], description="tests: a failing broker consumer", doors=OPEN
)
BROKER_CONSUMERS = ("broker-effect-worker", "broker-order-effect-worker")


@eventbus.consumer("broker-effect-worker", events=["test.broker"], runs_on="broker")
def broker_effect(event: eventbus.Event) -> None:
    record_run(event)


@eventbus.consumer("broker-order-effect-worker", events=["order.confirmed"], runs_on="broker")
def broker_order_effect(event: eventbus.Event) -> None:
    """Counts runs per order.confirmed event next to seed 004's order-post-worker."""
    record_run(event)


@eventbus.consumer(
    "broker-flaky-worker", events=["test.broker_flaky"], runs_on="broker", max_attempts=2
)
def broker_flaky(event: eventbus.Event) -> None:
    raise RuntimeError(f"broker-flaky-worker always fails (n={event.payload['n']})")


# -- failure isolation (tests/eventbus/test_isolation.py) ------------------------------------

catalog.declare(
    "test.poison", required=["n"], description="tests: one event kills its worker", doors=OPEN
)
catalog.declare(
    "test.hol", required=["n"], description="tests: slow and quick handlers", doors=OPEN
)
catalog.declare(
    "test.hang", required=["n"], description="tests: a handler that never returns", doors=OPEN
)

STARTED_SQL = """
INSERT INTO test_side_effect (event_id, consumer, runs, pid)
VALUES (%s, %s, 0, %s)
ON CONFLICT (event_id, consumer) DO NOTHING
"""


@eventbus.consumer("poison-worker", events=["test.poison"], atomic=True, max_attempts=3)
def poison(event: eventbus.Event) -> None:
    """SIGKILLs its own worker on `{"poison": true}`; otherwise counts the run (committed with
    the ack, so a counted run is a finished one)."""
    if event.payload.get("poison"):
        os.kill(os.getpid(), signal.SIGKILL)
    record_run(event)


@eventbus.consumer("hol-worker", events=["test.hol"])
def head_of_line(event: eventbus.Event) -> None:
    """Marks its start, takes `seconds`, then counts the run."""
    with connection.cursor() as cursor:
        cursor.execute(STARTED_SQL, [event.id, event.consumer, os.getpid()])
    time.sleep(float(event.payload.get("seconds", 0)))  # simulated slow I/O
    record_run(event)


HANG = threading.Event()  # in-process tests set it to let abandoned handler threads end


@eventbus.consumer("hang-worker", events=["test.hang"], timeout=1.0, max_attempts=2)
def hang(event: eventbus.Event) -> None:
    """Does not return on `{"hang": true}` (a stuck socket read); otherwise counts the run."""
    if event.payload.get("hang"):
        HANG.wait(600)
    record_run(event)


catalog.declare(
    "test.idle_lock", required=["lead_id"], description="tests: stuck in a transaction", doors=OPEN
)

# Busy (a running statement, so not idle yet) until another backend waits on a lock: the
# server's idle-in-transaction timer starts only once someone is blocked behind this handler.
WAIT_FOR_A_LOCK_WAITER_SQL = """
DO $$ BEGIN  -- idle-lock-worker: waiting for a waiter
    WHILE NOT EXISTS (SELECT FROM pg_stat_activity
                       WHERE wait_event_type = 'Lock' AND datname = current_database()) LOOP
        PERFORM pg_sleep(0.02);
        PERFORM pg_stat_clear_snapshot();
    END LOOP;
END $$
"""


@eventbus.consumer("idle-lock-worker", events=["test.idle_lock"], atomic=True, max_attempts=1)
def idle_lock(event: eventbus.Event) -> None:
    """Writes a lead, then sits idle in its transaction holding that row lock (as a handler
    stuck on a network call would) until the server ends its session; then touches the database
    again, which fails."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE deskcomm_lead SET name = 'written by the stuck handler' WHERE id = %s",
            [event.payload["lead_id"]],
        )
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
        cursor.execute(WAIT_FOR_A_LOCK_WAITER_SQL)
    _wait_until_the_server_ends(pid)
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _wait_until_the_server_ends(pid: int, timeout: float = 60.0) -> None:
    """Poll (from another connection, so this session stays idle) until backend `pid` is gone."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(conninfo(), autocommit=True) as watcher:
        while watcher.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not end backend {pid} within {timeout}s")
            time.sleep(0.05)


# -- pause and circuit breaker (tests/eventbus/test_pauses.py, test_breaker.py) -------------

catalog.declare(
    "test.recovering", required=["n"], description="tests: fails until switched", doors=OPEN
)

SWITCH_TABLE_SQL = """
CREATE TABLE IF NOT EXISTS test_consumer_switch (consumer text PRIMARY KEY, failing boolean)
"""


def set_failing(consumer: str, failing: bool) -> None:
    """Make `consumer` (recovering-worker) fail or succeed, in this and every worker process."""
    with connection.cursor() as cursor:
        cursor.execute(SWITCH_TABLE_SQL)
        cursor.execute(
            "INSERT INTO test_consumer_switch VALUES (%s, %s) "
            "ON CONFLICT (consumer) DO UPDATE SET failing = EXCLUDED.failing",
            [consumer, failing],
        )


@eventbus.consumer("recovering-worker", events=["test.recovering"], max_attempts=10)
def recovering(event: eventbus.Event) -> None:
    """Fails while test_consumer_switch says so (a downstream API that is down), then counts."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT failing FROM test_consumer_switch WHERE consumer = %s", [event.consumer]
        )
        row = cursor.fetchone()
    if row and row[0]:
        raise ConnectionRefusedError(f"downstream API down (n={event.payload['n']})")
    record_run(event)


# Upcasting (eventbus.store.catalog.upcaster): the handler of a "v2 deploy" that needs amount_cents.
catalog.declare(
    "test.versioned", required=["amount"], description="tests: payload versions", doors=OPEN
)
VERSIONED_SEEN: list[dict[str, object]] = []  # (in-process workers) what the handler was given


@eventbus.consumer("versioned-worker", events=["test.versioned"], max_attempts=1)
def versioned(event: eventbus.Event) -> None:
    """Expects the v2 payload: a v1 one (no amount_cents) fails with a KeyError."""
    VERSIONED_SEEN.append(
        {"payload": dict(event.payload), "version": event.metadata.get("schema_version")}
    )
    int(event.payload["amount_cents"])


# Causation (tests/eventbus/test_causation.py): a handler that emits the next event of a chain.
catalog.declare(
    "test.chain_start", required=["n"], description="tests: a chain's first event", doors=OPEN
)
catalog.declare(
    "test.chain_next", required=["n"], description="tests: emitted by a handler", doors=OPEN
)


@eventbus.consumer("chain-worker", events=["test.chain_start"], atomic=True)
def chain(event: eventbus.Event) -> None:
    """Emits test.chain_next for the same entity (its cause: the event handled)."""
    eventbus.emit(
        "test.chain_next",
        organization=event.organization_id,
        entity_kind=event.entity_kind,
        entity_id=event.entity_id,
        payload={"n": event.payload["n"] + 1},
        idempotency_key=f"chain:{event.id}",
    )


# Ordering keys (tests/eventbus/test_ordering.py): a `message.*` type, so the catalog keys it by
# its conversation. The ordered handler proves "one at a time per key" with a unique row held
# while it runs, logs each success in completion order, and fails some first attempts.
catalog.declare(
    "message.order_probe",
    required=["conversation_id", "seq"],
    description="tests: messages of one conversation, numbered in emit order",
)
ORDER_PROBE_TABLES_SQL = """
CREATE TABLE IF NOT EXISTS test_key_running (key text PRIMARY KEY, seq int);
CREATE TABLE IF NOT EXISTS test_order_log (
    id bigserial PRIMARY KEY, consumer text, key text, seq int, pid int, clock timestamptz
);
CREATE TABLE IF NOT EXISTS test_order_violation (key text, seq int, other_seq int);
TRUNCATE test_key_running, test_order_log, test_order_violation;
"""
ORDER_PROBE_FAIL_EVERY = 7  # seq % 7 == 3 fails its first two attempts


def _order_probe_log(event: eventbus.Event, key: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO test_order_log (consumer, key, seq, pid, clock)"
            " VALUES (%s, %s, %s, %s, clock_timestamp())",
            [event.consumer, key, event.payload["seq"], os.getpid()],
        )


@eventbus.consumer(
    "ordered-probe-worker", events=["message.order_probe"], ordered=True, max_attempts=10
)
def ordered_probe(event: eventbus.Event) -> None:
    key = str(event.payload["conversation_id"])
    seq = int(event.payload["seq"])
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO test_key_running (key, seq) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING"
            " RETURNING key",
            [key, seq],
        )
        if cursor.fetchone() is None:  # another delivery of this key is running right now
            cursor.execute(
                "INSERT INTO test_order_violation (key, seq, other_seq)"
                " SELECT %s, %s, seq FROM test_key_running WHERE key = %s",
                [key, seq, key],
            )
            return
    try:
        time.sleep(0.001 * (seq % 3))  # simulated I/O, so runs of different keys overlap
        if seq % ORDER_PROBE_FAIL_EVERY == 3 and event.attempt <= 2:
            raise ConnectionError(f"order probe: simulated failure of seq {seq}")
        _order_probe_log(event, key)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM test_key_running WHERE key = %s AND seq = %s", [key, seq])


@eventbus.consumer("unordered-probe-worker", events=["message.order_probe"], max_attempts=10)
def unordered_probe(event: eventbus.Event) -> None:
    _order_probe_log(event, str(event.payload["conversation_id"]))


# Priorities (tests/eventbus/test_priority.py): completion order of a backlog and urgent events.
catalog.declare(
    "test.priority", required=["n"], description="tests: a backlog and urgent work", doors=OPEN
)


@eventbus.consumer("priority-probe-worker", events=["test.priority"])
def priority_probe(event: eventbus.Event) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO test_order_log (consumer, key, seq, pid, clock)"
            " VALUES (%s, %s, %s, %s, clock_timestamp())",
            [event.consumer, str(event.organization_id), event.payload["n"], os.getpid()],
        )
