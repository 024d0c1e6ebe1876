"""Dead letters made the real way: emit events, then run a worker whose consumer fails."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import eventbus
from core import context
from core.models import Organization
from eventbus.models import Delivery
from eventbus.registry import make_consumer, registry
from eventbus.worker import Worker, WorkerOptions

BROKEN = "broken-worker"  # consumes test.job while `broken_consumer()` is active


def fail_permanently(event: eventbus.Event) -> None:
    raise eventbus.PermanentError(f"record {event.payload['n']} cannot be synced")


@contextmanager
def broken_consumer() -> Iterator[None]:
    """Register `broken-worker` (test.job, fails permanently: dead at the first attempt)."""
    with registry.temporarily(make_consumer(BROKEN, fail_permanently, events=["test.job"])):
        yield


def drain(consumers: list[str]) -> int:
    worker = Worker(WorkerOptions(consumers=consumers, listen=False))
    total = 0
    while claimed := worker.run_once():
        total += claimed
    return total


def make_dead(
    org: Organization,
    n: int = 1,
    *,
    event_type: str = "test.flaky",
    entity_kind: str = "thing",
    entity_id: Any = None,
    request_id: str | None = None,
    payload: dict[str, Any] | None = None,
) -> list[Delivery]:
    """Emit `n` events of `event_type` and let their consumers die on the first attempt."""
    binding = context.bind(request_id=request_id) if request_id else nullcontext()
    with binding:
        ids = eventbus.emit_many(
            [
                {
                    "event_type": event_type,
                    "entity_kind": entity_kind,
                    "entity_id": entity_id,
                    "payload": {"n": i, **(payload or {})},
                }
                for i in range(n)
            ],
            organization=org,
        )
    Delivery.objects.filter(event_id__in=ids).update(max_attempts=1)
    drain([c.name for c in registry.for_event(event_type)])
    return list(Delivery.objects.filter(event_id__in=ids, status="dead").order_by("id"))
