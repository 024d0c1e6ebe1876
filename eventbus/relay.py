"""Broker-run consumers: the outbox relay (seed 004) and the run of a published delivery.

Publish side (`Relay`, in `drain_events`): claim due deliveries of consumers declared with
`runs_on="broker"` (the ordinary claim: SKIP LOCKED, lease, attempt counted), publish each to the
dramatiq broker with message id = delivery id and the claim's lease token, and keep the lease. A
broker that cannot be reached stops the batch: every unpublished delivery gets its attempt back, a
publish failure counted, and a backoff; after OUTBOX_MAX_ATTEMPTS failures it is dead.

Run side (`run_published`, in the `rundramatiq` jobs process): adopt the delivery with the token
the message carries (0 rows: the lease was lost, the message is stale and nothing runs), run the
consumer and ack/nack the same row. The database, not the broker, owns retries and the DLQ.
Messages carry ids and the token only: never payloads or personal data.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Sequence

import dramatiq
from dramatiq import Message

from eventbus import claim as claims
from eventbus.alerts import notify_dead
from eventbus.conf import bus_settings
from eventbus.dispatch import Dispatcher
from eventbus.event import Event
from eventbus.registry import Consumer, registry
from eventbus.retry import judge_publish_failure

logger = logging.getLogger(__name__)

# Every broker-run consumer's actor consumes this queue (per-consumer concurrency is a limit in
# the jobs process; fewer queues keep the broker's connections per process low).
BROKER_QUEUE = "eventbus"


def message_id_for(delivery_id: int) -> str:
    """Message id = delivery id, as the UUID dramatiq and its brokers require (reversible)."""
    return str(uuid.UUID(int=delivery_id))


def delivery_message(consumer: str, delivery_id: int, token: uuid.UUID) -> Message[None]:
    """The message for one published delivery: the actor named after the consumer, ids only."""
    return Message(
        queue_name=BROKER_QUEUE,
        actor_name=consumer,
        args=(delivery_id, str(token)),
        kwargs={},
        # The database owns retries; an actor never outlives the lease it runs under.
        options={"max_retries": 0, "time_limit": int(float(bus_settings.LEASE_SECONDS) * 1000)},
        message_id=message_id_for(delivery_id),
    )


class Relay:
    """`run_once()` publishes one batch of due broker deliveries; returns how many it claimed."""

    def __init__(self, *, worker_id: str, broker: dramatiq.Broker | None = None) -> None:
        self.worker_id = f"{claims.RELAY_WORKER_PREFIX}{worker_id}"
        self.names = [c.name for c in registry.running_on("broker")]
        self._broker = broker

    @property
    def broker(self) -> dramatiq.Broker:
        return self._broker or dramatiq.get_broker()

    def run_once(self) -> int:
        batch = claims.claim(
            consumers=self.names,
            batch_size=int(bus_settings.RELAY_BATCH_SIZE),
            worker_id=self.worker_id,
        )
        for index, event in enumerate(batch.events):
            try:
                self.broker.enqueue(
                    delivery_message(event.consumer, event.delivery_id, batch.token)
                )
            except Exception as exc:  # any broker error: the rest of the batch waits too
                self._publish_failed(batch.token, batch.events[index:], exc)
                break
        return len(batch.events)

    def _publish_failed(self, token: uuid.UUID, events: Sequence[Event], exc: Exception) -> None:
        logger.warning(
            "relay could not publish %d deliveries to the job broker (%s: %s); backing off",
            len(events),
            type(exc).__name__,
            exc,
        )
        counts = claims.publish_failure_counts([e.delivery_id for e in events])
        failures = [
            claims.Failure(
                e.delivery_id,
                judge_publish_failure(
                    exc,
                    failures=counts.get(e.delivery_id, 0) + 1,
                    max_failures=int(bus_settings.RELAY_MAX_ATTEMPTS),
                    schedule=bus_settings.RETRY_SCHEDULE,
                    jitter=float(bus_settings.RETRY_JITTER),
                ),
                publish=True,
            )
            for e in events
        ]
        notify_dead(claims.nack(token, failures, worker_id=self.worker_id))


def run_published(delivery_id: int, lease_token: str) -> str:
    """Run a published delivery in the jobs process: "done", "failed" or "stale" (lease lost)."""
    worker_id = f"jobs:{socket.gethostname()}:{os.getpid()}"
    token = uuid.UUID(lease_token)
    event = claims.adopt(delivery_id, token, worker_id=worker_id)
    if event is None:
        logger.info(
            "delivery %s: stale message (lease lost or already settled); nothing to run",
            delivery_id,
            extra={"delivery_id": delivery_id},
        )
        return "stale"
    consumer: Consumer = registry.get(event.consumer)
    dispatcher = Dispatcher([consumer], worker_id=worker_id)
    batch = claims.Claim(token, [event])
    outcome = dispatcher.run(batch)
    dispatcher.settle(token, outcome)
    return "failed" if outcome.failures else "done"
