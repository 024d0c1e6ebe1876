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

The handlers do nothing: the benchmark measures the bus (claim, dispatch, ack), not the work.
"""

from __future__ import annotations

import time

from eventbus import catalog
from eventbus.catalog import declare
from eventbus.event import Event
from eventbus.registry import consumer

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


def consumers_for(event_type: str) -> tuple[str, ...]:
    """The bench consumers subscribed to a bench event type."""
    return {
        SINGLE_EVENT: SINGLE_CONSUMERS,
        FANOUT_EVENT: FANOUT_CONSUMERS,
        ORDERED_EVENT: ORDERED_CONSUMERS,
    }[event_type]
