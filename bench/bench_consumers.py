"""Benchmark event types and no-op consumers.

Loaded only when `EVENTBUS_HANDLER_MODULES=bench.bench_consumers` (bench/drain.py sets it for its
scratch database and its worker processes); the product never imports this module.

- `bench.single` has one consumer, `bench-noop-1-worker`.
- `bench.fanout` has three, `bench-fanout-1-worker` .. `bench-fanout-3-worker`, so every emit
  writes three deliveries.
- `bench.sleep` has one, `bench-sleep-worker`, which sleeps `payload["ms"]` (bench/isolation.py).
- `bench.ordered` has one consumer declared `ordered=True`, `bench-ordered-worker`: its events
  are keyed by `payload["conversation_id"]` (ORDERED_KEYS conversations, round robin), so the
  drain runs one delivery per conversation at a time (issue #17's ordered-vs-unordered ratio).

- `bench.write_plain`, `bench.write_atomic`, `bench.write_batch` have three consumers each whose
  handler writes (issue 49): one `INSERT ... ON CONFLICT DO UPDATE` into `bench_write` per
  delivery through Django's connection, autocommit (`plain`), inside the ack's transaction
  (`atomic=True`), or one statement for a whole batch (`batch=BATCH`, acked in its transaction).
  Each delivery bumps the row (consumer, seq % WRITE_KEYS); `bench/workers.py insert` runs the
  same statement in a bare loop (the write's floor).

The no-op handlers do nothing: those figures measure the bus (claim, dispatch, ack), not work.
"""

from __future__ import annotations

import time

from django.db import connection

from eventbus.store import catalog
from eventbus.store.catalog import declare
from eventbus.store.event import Event
from eventbus.store.registry import consumer

SINGLE_EVENT = "bench.single"
FANOUT_EVENT = "bench.fanout"
SINGLE_CONSUMERS: tuple[str, ...] = ("bench-noop-1-worker",)
FANOUT_CONSUMERS: tuple[str, ...] = (
    "bench-fanout-1-worker",
    "bench-fanout-2-worker",
    "bench-fanout-3-worker",
)
ENTITY_KIND = "bench_item"

# Open to the integrators' API door (its owner, the benchmark, says so): bench/api_load.py emits
# it through POST /api/v1/events.
declare(
    SINGLE_EVENT,
    required=("seq",),
    description="drain benchmark: one consumer",
    doors=(catalog.API,),
)
declare(FANOUT_EVENT, required=("seq",), description="drain benchmark: three consumers")
ORDERED_EVENT = "bench.ordered"
ORDERED_CONSUMERS: tuple[str, ...] = ("bench-ordered-worker",)
ORDERED_KEYS = 200
declare(
    ORDERED_EVENT,
    required=("seq", "conversation_id"),
    description="drain benchmark: one ordered consumer, keyed by conversation",
    ordered_by="conversation_id",
)
SLEEP_EVENT = "bench.sleep"
SLEEP_CONSUMER = "bench-sleep-worker"
declare(SLEEP_EVENT, required=("seq", "ms"), description="isolation benchmark: timed handlers")


WRITE_TABLE = "bench_write"
WRITE_KEYS = 2000  # rows per consumer: each delivery bumps (consumer, seq % WRITE_KEYS)
BATCH = 500
WRITE_TABLE_SQL = f"""
CREATE TABLE {WRITE_TABLE} (
    consumer text NOT NULL,
    k integer NOT NULL,
    n bigint NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (consumer, k)
)
"""
WRITE_SQL = f"""
INSERT INTO {WRITE_TABLE} (consumer, k, n, updated_at) VALUES (%s, %s, 1, now())
ON CONFLICT (consumer, k) DO UPDATE SET n = {WRITE_TABLE}.n + 1, updated_at = now()
"""
# Rows in key order: two workers' batches that share keys lock them in the same order (without
# ORDER BY they deadlocked now and then, and each deadlock costs the server's deadlock_timeout).
WRITE_MANY_SQL = f"""
INSERT INTO {WRITE_TABLE} (consumer, k, n, updated_at)
SELECT %s, k, count(*), now() FROM unnest(%s::int[]) AS t(k) GROUP BY k ORDER BY k
ON CONFLICT (consumer, k) DO UPDATE SET n = {WRITE_TABLE}.n + EXCLUDED.n, updated_at = now()
"""
WRITE_EVENTS = {
    "plain": "bench.write_plain",
    "atomic": "bench.write_atomic",
    "batch": "bench.write_batch",
}
WRITE_CONSUMERS = {
    mode: tuple(f"bench-{mode}-write-{i}-worker" for i in (1, 2, 3)) for mode in WRITE_EVENTS
}
for _mode, _type in WRITE_EVENTS.items():
    declare(_type, required=("seq",), description=f"drain benchmark: {_mode} one-write handlers")


def write(event: Event) -> None:
    """One INSERT ... ON CONFLICT DO UPDATE through Django's connection."""
    with connection.cursor() as cursor:
        cursor.execute(WRITE_SQL, [event.consumer, event.payload["seq"] % WRITE_KEYS])


def write_many(events: list[Event]) -> None:
    """The batch's rows in one statement."""
    keys = [e.payload["seq"] % WRITE_KEYS for e in events]
    with connection.cursor() as cursor:
        cursor.execute(WRITE_MANY_SQL, [events[0].consumer, keys])


def noop(event: Event) -> None:
    """Accept the delivery and do nothing."""


@consumer(SLEEP_CONSUMER, events=[SLEEP_EVENT])
def sleep(event: Event) -> None:
    """Take `payload["ms"]` milliseconds (simulated I/O)."""
    time.sleep(float(event.payload["ms"]) / 1000)


for _name in SINGLE_CONSUMERS:
    consumer(_name, events=[SINGLE_EVENT])(noop)
for _name in FANOUT_CONSUMERS:
    consumer(_name, events=[FANOUT_EVENT])(noop)
for _name in ORDERED_CONSUMERS:
    consumer(_name, events=[ORDERED_EVENT], ordered=True)(noop)
for _name in WRITE_CONSUMERS["plain"]:
    consumer(_name, events=[WRITE_EVENTS["plain"]])(write)
for _name in WRITE_CONSUMERS["atomic"]:
    consumer(_name, events=[WRITE_EVENTS["atomic"]], atomic=True)(write)
for _name in WRITE_CONSUMERS["batch"]:
    consumer(_name, events=[WRITE_EVENTS["batch"]], batch=BATCH)(write_many)


def consumers_for(event_type: str) -> tuple[str, ...]:
    """The bench consumers subscribed to a bench event type."""
    return {
        SINGLE_EVENT: SINGLE_CONSUMERS,
        FANOUT_EVENT: FANOUT_CONSUMERS,
        ORDERED_EVENT: ORDERED_CONSUMERS,
        **{WRITE_EVENTS[mode]: names for mode, names in WRITE_CONSUMERS.items()},
    }[event_type]
