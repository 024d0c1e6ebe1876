"""Broker-run consumers: the outbox relay pump (seed 004) and the run of a published delivery.

Publish side (`Relay`, a pump of `drain_events`): claim due deliveries of consumers declared with
`runs_on="broker"` (the ordinary claim: SKIP LOCKED, lease, attempt counted; those waiting to run
alone too, since publishing runs no handler), publish each to the dramatiq broker with message
id = delivery id and the claim's lease token, and keep the lease. A broker that cannot be
reached stops the batch: every unpublished delivery gets its attempt back, a publish failure
counted, and a backoff; after OUTBOX_MAX_ATTEMPTS failures it is dead.

Run side (`run_published`, in the `rundramatiq` jobs process): adopt the delivery with the token
the message carries (0 rows: the lease was lost, the message is stale and nothing runs), run the
consumer and settle the same row. The adoption leases it for the consumer's timeout plus one
lease (the actor's time limit is that timeout), since no heartbeat runs there. The database,
not the broker, owns retries and the DLQ. Messages carry ids and the token only: never payloads
or personal data.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Sequence

import dramatiq
from dramatiq import Message

from eventbus.dispatch import breaker
from eventbus.dispatch import claim as claims
from eventbus.dispatch.drain import run_adopted
from eventbus.dispatch.retry import judge_publish_failure
from eventbus.dispatch.settle import publish_failed
from eventbus.store import pauses
from eventbus.store.conf import bus_settings
from eventbus.store.event import Event
from eventbus.store.registry import Consumer, registry

logger = logging.getLogger(__name__)

# Every broker-run consumer's actor consumes this queue (per-consumer concurrency is a limit in
# the jobs process; fewer queues keep the broker's connections per process low).
BROKER_QUEUE = "eventbus"


def message_id_for(delivery_id: int) -> str:
    """Message id = delivery id, as the UUID dramatiq and its brokers require (reversible)."""
    return str(uuid.UUID(int=delivery_id))


def delivery_message(consumer: Consumer, delivery_id: int, token: uuid.UUID) -> Message[None]:
    """The message for one published delivery: the actor named after the consumer, ids only."""
    return Message(
        queue_name=BROKER_QUEUE,
        actor_name=consumer.name,
        args=(delivery_id, str(token)),
        kwargs={},
        # The database owns retries; the actor's run is bounded by the consumer's timeout.
        options={"max_retries": 0, "time_limit": int(consumer.timeout_seconds() * 1000)},
        message_id=message_id_for(delivery_id),
    )


class Relay:
    """The relay pump: `run_once()` publishes one batch of due broker deliveries.

    A plain `eventbus.dispatch.runner.Pump`, not a `LeaseHolder`: it keeps no delivery after
    publishing it (the jobs process adopts and settles each), so the heartbeat extends nothing of it
    and nothing of it is in flight."""

    name = "relay"
    concurrency = 1  # publishes batch by batch

    def __init__(self, *, worker_id: str, broker: dramatiq.Broker | None = None) -> None:
        self.worker_id = f"{claims.RELAY_WORKER_PREFIX}{worker_id}"
        self.consumers = {c.name: c for c in registry.running_on("broker")}
        self.names = list(self.consumers)
        self.processed = 0
        self._broker = broker
        self._next_due = 0.0
        self._stopping = False
        self._idle = False
        self.pauses = pauses.Watch(names=self.names)

    @property
    def broker(self) -> dramatiq.Broker:
        return self._broker or dramatiq.get_broker()

    def run_once(self) -> int:
        """Claim and publish one batch; returns how many deliveries were claimed."""
        size = bus_settings.RELAY_BATCH_SIZE
        probed = self._probe()
        batch = claims.claim(consumers=self.names, batch_size=size, worker_id=self.worker_id)
        self._publish(batch.token, batch.events)
        claimed = len(batch.events) + probed
        if claimed < size:  # deliveries waiting to run alone: publishing runs no handler
            isolated = claims.claim_isolated(
                consumers=self.names, batch_size=size - claimed, worker_id=self.worker_id
            )
            self._publish(isolated.token, isolated.events)
            claimed += len(isolated.events)
        self._idle = claimed < size
        return claimed

    def _probe(self) -> int:
        """The circuit breaker's due probes of broker-run consumers: one delivery each."""
        paused = self.pauses.check()
        probes = breaker.claim_probes(paused, worker_id=self.worker_id) if paused else []
        for batch in probes:
            self._publish(batch.token, batch.events)
        return len(probes)

    def _publish(self, token: uuid.UUID, events: Sequence[Event]) -> None:
        for index, event in enumerate(events):
            try:
                consumer = self.consumers[event.consumer]
                self.broker.enqueue(delivery_message(consumer, event.delivery_id, token))
            except Exception as exc:  # any broker error: the rest of the batch waits too
                self._publish_failed(token, events[index:], exc)
                return

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
                    max_failures=bus_settings.RELAY_MAX_ATTEMPTS,
                    schedule=bus_settings.RETRY_SCHEDULE,
                    jitter=bus_settings.RETRY_JITTER,
                ),
                publish=True,
            )
            for e in events
        ]
        publish_failed(token, failures, events, worker_id=self.worker_id)

    # -- the runner's interface ---------------------------------------------------------------

    def step(self) -> int:
        """Publish a batch when due: at once after a full one, else every poll interval."""
        now = time.monotonic()
        if self._stopping or not self.names or now < self._next_due:
            return 0
        claimed = self.run_once()
        poll = bus_settings.RELAY_POLL_INTERVAL_MS / 1000
        self._next_due = now if not self._idle else now + poll
        return claimed

    def idle(self) -> bool:
        return self._idle or not self.names

    def poke(self) -> None:
        self._next_due = 0.0

    def interrupted(self) -> None:
        self._next_due = 0.0

    def stop(self) -> None:
        self._stopping = True

    def quiet(self) -> None:
        """Publish nothing more (the relay holds nothing between two batches)."""
        self._stopping = True

    def close(self) -> None:
        self.stop()

    def wait_hint(self, poll_interval: float) -> float:
        return max(0.0, self._next_due - time.monotonic()) if self.names else poll_interval


def run_published(delivery_id: int, lease_token: str, consumer: str | None = None) -> str:
    """Run a published delivery in the jobs process: "done", "failed", "released" (the
    database connection failed: not charged), "stale" (lease lost, nothing ran) or "held back"
    (its consumer was paused after the relay published it: pending again, not charged)."""
    worker_id = f"jobs:{socket.gethostname()}:{os.getpid()}"
    token = uuid.UUID(lease_token)
    name = consumer or claims.consumer_of(delivery_id)
    declared = registry.find(name)
    lease = declared.timeout_seconds() if declared else 0.0
    try:
        event = claims.adopt(delivery_id, token, worker_id=worker_id, extra_lease=lease)
    except claims.HeldBack:
        logger.info(
            "delivery %s: consumer %s is paused; given back uncharged, not run",
            delivery_id,
            name,
            extra={"delivery_id": delivery_id, "consumer": name},
        )
        return "held back"
    if event is None or declared is None:
        logger.info(
            "delivery %s: stale message (lease lost or already settled); nothing to run",
            delivery_id,
            extra={"delivery_id": delivery_id},
        )
        return "stale"
    return run_adopted(declared, token, event, worker_id=worker_id)
