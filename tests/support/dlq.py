"""Dead letters made the real way: emit events, then run a worker whose consumer fails."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from django.utils import timezone

import eventbus
from core import context
from core.models import Organization
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.store.models import Delivery
from eventbus.store.registry import make_consumer, registry

BROKEN = "broken-worker"  # consumes test.job while `broken_consumer()` is active


def fail_permanently(event: eventbus.Event) -> None:
    raise eventbus.PermanentError(f"record {event.payload['n']} cannot be synced")


@contextmanager
def broken_consumer() -> Iterator[None]:
    """Register `broken-worker` (test.job, fails permanently: dead at the first attempt)."""
    with registry.temporarily(make_consumer(BROKEN, fail_permanently, events=["test.job"])):
        yield


TRACED = "traced-worker"  # consumes test.job while `traced_consumer()` is active
TRACED_SECRET = "sk_live_abcdef1234567890"  # pragma: allowlist secret
TRACED_EMAIL = "ana.silva@example.com"


def call_the_crm(event: eventbus.Event) -> None:
    raise ConnectionError(
        f"crm refused {TRACED_SECRET} for {TRACED_EMAIL} (n={event.payload['n']})"
    )


def sync_order(event: eventbus.Event) -> None:
    """Fails two frames deep (a traceback with a known innermost frame), or with a huge message."""
    if event.payload.get("huge"):
        raise ValueError("x" * 50_000)
    call_the_crm(event)


TRACED_RAISE_LINE = call_the_crm.__code__.co_firstlineno + 1


@contextmanager
def traced_consumer() -> Iterator[None]:
    """Register `traced-worker` (test.job, fails in `call_the_crm` with a secret and an e-mail)."""
    with registry.temporarily(make_consumer(TRACED, sync_order, events=["test.job"])):
        yield


def fail_traced(org: Organization, *, attempts: int, **payload: Any) -> Delivery:
    """Emit one test.job and run `traced-worker` on it `attempts` times (each fails)."""
    event = eventbus.emit(
        "test.job", organization=org, entity_kind="thing", payload={"n": 7, **payload}
    )
    Delivery.objects.filter(event_id=event.pk).update(max_attempts=attempts)
    for _ in range(attempts):
        Delivery.objects.filter(event_id=event.pk).update(next_attempt_at=timezone.now())
        drain([TRACED])
    return Delivery.objects.get(event_id=event.pk, consumer=TRACED)


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


def make_retrying(org: Organization, n: int = 1, *, max_attempts: int = 8) -> list[Delivery]:
    """Emit `n` test.flaky events and let their consumer fail once: each delivery is pending
    again, waiting for its next attempt (the retry table's first step, 30 s or more away)."""
    ids = eventbus.emit_many(
        [
            {"event_type": "test.flaky", "entity_kind": "thing", "payload": {"n": i}}
            for i in range(n)
        ],
        organization=org,
    )
    Delivery.objects.filter(event_id__in=ids).update(max_attempts=max_attempts)
    drain([c.name for c in registry.for_event("test.flaky")])
    return list(Delivery.objects.filter(event_id__in=ids).order_by("id"))


def webhook_dead_letter(
    org: Organization,
    *,
    description: str = "Order sync",
    url: str = "https://hooks.example.com/deskcomm",
    enabled: bool = False,
) -> tuple[Any, Delivery]:
    """A subscription (disabled by default) and a dead letter of its consumer whose attempts
    failed with HTTP 500 and, once the subscription was disabled, with SubscriptionDisabled."""
    from webhooks import signing
    from webhooks.models import Subscription

    subscription = Subscription.objects.create(
        organization=org,
        url=url,
        description=description,
        event_types=["lead.created"],  # not test.flaky: no fan-out to it at emit
        enabled=enabled,
        secret_encrypted=signing.encrypt_secret(signing.generate_secret()),
    )
    (dead,) = make_dead(org, 1)
    final = "SubscriptionDisabled: the subscription is disabled or deleted; nothing was sent"
    Delivery.objects.filter(pk=dead.pk).update(
        consumer=subscription.consumer, error_class="SubscriptionDisabled", last_error=final
    )
    dead.attempt_log.all().delete()
    moments = [timezone.now() - dt.timedelta(minutes=m) for m in (30, 20, 10)]
    for n, (when, error) in enumerate(
        zip(moments, ["HTTP 500: upstream exploded", "HTTP 500: upstream exploded", final]),
        start=1,
    ):
        dead.attempt_log.create(
            attempt=n,
            outcome="retry" if n < 3 else "dead",
            error_class="HTTPStatus" if n < 3 else "SubscriptionDisabled",
            error=error,
            created_at=when,
        )
    dead.refresh_from_db()
    return subscription, dead
