"""Run claimed deliveries through their consumers and settle the results in batches.

`Dispatcher.run(claim)` runs each delivery's handler outside the claim transaction (inline or on a
thread pool), skips what was not started when a stop was requested, and then acks the successes
in one statement, nacks the failures in one statement and releases the unstarted ones.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from django.db import close_old_connections, connections, transaction
from prometheus_client import Histogram

from deskcomm import context
from eventbus import claim as claims
from eventbus import metrics
from eventbus.alerts import notify_dead
from eventbus.conf import bus_settings
from eventbus.event import Event
from eventbus.registry import Consumer
from eventbus.retry import judge_failure

logger = logging.getLogger(__name__)


class LeaseLost(Exception):
    """An atomic consumer's ack changed nothing: roll its writes back."""


@dataclass
class Outcome:
    """What happened to the deliveries of one claim."""

    done: list[int] = field(default_factory=list)  # to ack
    committed: list[int] = field(default_factory=list)  # atomic consumers: acked already
    failures: list[claims.Failure] = field(default_factory=list)
    unstarted: list[int] = field(default_factory=list)
    consumer_of: dict[int, str] = field(default_factory=dict)  # delivery id -> consumer (metrics)

    @property
    def processed(self) -> int:
        return len(self.done) + len(self.committed) + len(self.failures)


class HandlerPool:
    """A fixed set of threads for I/O-bound handlers; each closes its DB connections on exit."""

    def __init__(self, size: int) -> None:
        self._tasks: queue.SimpleQueue[tuple[Callable[[], None], Future[None]] | None] = (
            queue.SimpleQueue()
        )
        self._threads = [
            threading.Thread(target=self._serve, name=f"eventbus-handler-{i}", daemon=True)
            for i in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[[], None]) -> Future[None]:
        future: Future[None] = Future()
        self._tasks.put((fn, future))
        return future

    def shutdown(self) -> None:
        for _ in self._threads:
            self._tasks.put(None)
        for thread in self._threads:
            thread.join()

    def _serve(self) -> None:
        try:
            while (task := self._tasks.get()) is not None:
                fn, future = task
                if future.set_running_or_notify_cancel():
                    try:
                        fn()
                        future.set_result(None)
                    except BaseException as exc:  # reported through the future
                        future.set_exception(exc)
        finally:
            connections.close_all()


class Dispatcher:
    """Runs claims for a set of consumers; `stopping` says whether to start new handlers."""

    def __init__(
        self,
        consumers: Sequence[Consumer],
        *,
        worker_id: str,
        concurrency: int = 1,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.consumers = {c.name: c for c in consumers}
        self.worker_id = worker_id
        self.stopping = stopping
        self._pool = HandlerPool(concurrency) if concurrency > 1 else None
        self._lock = threading.Lock()
        self._durations: dict[str, Histogram] = {}

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()

    def run(self, claim: claims.Claim) -> Outcome:
        """Run every delivery of the claim (or skip it when stopping); nothing is settled yet."""
        outcome = Outcome(consumer_of={e.delivery_id: e.consumer for e in claim.events})
        if self._pool is None:
            for event in claim.events:
                self._run_one(claim.token, event, outcome)
        else:
            futures = [self._pool.submit(self._bind(claim.token, e, outcome)) for e in claim.events]
            for future in futures:
                future.result()
        return outcome

    def settle(self, token: uuid.UUID, outcome: Outcome) -> None:
        """Ack, nack and release in three statements (fenced by the claim's token)."""
        claims.ack(token, outcome.done)
        dead = claims.nack(token, outcome.failures, worker_id=self.worker_id)
        claims.release(token, outcome.unstarted)
        metrics.count_settled(
            outcome.consumer_of,
            done=[*outcome.done, *outcome.committed],
            failed=[f.delivery_id for f in outcome.failures],
            dead=[d.delivery_id for d in dead],
        )
        notify_dead(dead)

    def _bind(self, token: uuid.UUID, event: Event, outcome: Outcome) -> Callable[[], None]:
        def task() -> None:
            try:
                self._run_one(token, event, outcome)
            finally:
                close_old_connections()

        return task

    def _run_one(self, token: uuid.UUID, event: Event, outcome: Outcome) -> None:
        if self.stopping():
            with self._lock:
                outcome.unstarted.append(event.delivery_id)
            return
        consumer = self.consumers[event.consumer]
        started = time.monotonic()
        try:
            with context.run_scope(_correlation(event), log_ids(event)):
                self._call(consumer, token, event)
        except Exception as exc:
            self._record_failure(event, exc, started, outcome)
            return
        finally:
            self._duration(event.consumer).observe(time.monotonic() - started)
        with self._lock:
            (outcome.committed if consumer.atomic else outcome.done).append(event.delivery_id)

    def _duration(self, consumer: str) -> Histogram:
        """The consumer's handler-duration histogram (the labelled child, looked up once)."""
        child = self._durations.get(consumer)
        if child is None:
            child = self._durations[consumer] = metrics.HANDLER_DURATION.labels(consumer)
        return child

    def _call(self, consumer: Consumer, token: uuid.UUID, event: Event) -> None:
        if not consumer.atomic:
            consumer.handler(event)
            return
        with transaction.atomic():
            consumer.handler(event)
            if claims.ack(token, [event.delivery_id]) != 1:
                raise LeaseLost(f"delivery {event.delivery_id} lease lost before commit")

    def _record_failure(
        self, event: Event, exc: Exception, started: float, outcome: Outcome
    ) -> None:
        verdict = judge_failure(
            exc,
            attempt=event.attempt,
            max_attempts=event.max_attempts,
            schedule=bus_settings.RETRY_SCHEDULE,
            jitter=float(bus_settings.RETRY_JITTER),
        )
        log = logger.warning if not verdict.dead else logger.error
        log(
            "consumer %s failed on event %s (attempt %d/%d): %s",
            event.consumer,
            event.id,
            event.attempt,
            event.max_attempts,
            verdict.error,
            extra={
                "event_id": str(event.id),
                "delivery_id": event.delivery_id,
                "consumer": event.consumer,
                "attempt": event.attempt,
                "organization_id": str(event.organization_id),
            },
        )
        failure = claims.Failure(
            event.delivery_id, verdict, int((time.monotonic() - started) * 1000)
        )
        with self._lock:
            outcome.failures.append(failure)


def _correlation(event: Event) -> dict[str, str]:
    return {**event.correlation, "source": f"consumer:{event.consumer}"}


def log_ids(event: Event) -> dict[str, object]:
    """The ids a handler run's log records carry (deskcomm.context.bind_log / run_scope)."""
    return {
        "organization_id": event.organization_id,
        "event_id": event.id,
        "delivery_id": event.delivery_id,
        "consumer": event.consumer,
    }
