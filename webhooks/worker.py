"""The webhook sender pump: many HTTP requests in flight, one slow endpoint never holding the rest.

It runs on the bus's runner (signals, LISTEN, heartbeats, reaping, database back-off), as a
slotted pump (eventbus/dispatch/slotted.py: leases, stop, quiet, close, recovery, pauses) on slots
(eventbus/dispatch/slots.py): up to `concurrency` requests run at once, each subscription at most
`per_subscription` of them (its lane), and the pump claims again as soon as slots free up: each
claim asks only for the free room, and each subscription for at most its own free in-flight
slots, so a subscription whose endpoint hangs until the timeout holds at most that many threads
while the others keep flowing. Finished attempts are settled in batches (the bus's ack/nack,
then the attempt log, failure counters and auto-disable: webhooks/settle.py). Anything an
attempt raises becomes a recorded failure of that delivery (retried per the table); an attempt
running past the HTTP timeout plus a margin is given up like a handler timeout.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import httpx
from django.utils import timezone

from core import context
from eventbus.dispatch import claim as claims
from eventbus.dispatch import settle as bus_settle
from eventbus.dispatch.drain import log_ids
from eventbus.dispatch.runner import Pump, Runner, RunnerOptions
from eventbus.dispatch.slots import Job, SlotPool
from eventbus.dispatch.slotted import SlottedPump
from eventbus.dispatch.worker import WorkerOptions, worker_id
from eventbus.store import pauses
from eventbus.store.event import Event
from webhooks import outcome, selectors, sender, settle
from webhooks.conf import CONSUMER_PREFIX, webhook_settings
from webhooks.models import subscription_id_of

logger = logging.getLogger(__name__)

# Deliveries claimed per sending slot (the running one and those queued behind it): enough that a
# slot never idles while the loop settles and claims again.
PREFETCH = 4
# An attempt still running this long after twice the HTTP timeout is given up (a bug or a stuck
# DNS lookup; the client's own timeouts normally end it first). Twice: an attempt to a failing
# endpoint may first wait for the probe in flight (webhooks.circuit), then send its own.
TIMEOUT_MARGIN_SECONDS = 5.0


@dataclass
class WebhookWorkerOptions(WorkerOptions):
    concurrency: int = 32  # requests in flight per process
    per_subscription: int | None = None  # None: WEBHOOKS_MAX_IN_FLIGHT_PER_SUBSCRIPTION


@dataclass(eq=False)
class SendJob(Job):
    """One delivery to send: the job plus its subscription's target (None: deleted)."""

    subscription_id: uuid.UUID | None = None
    target: sender.Target | None = None


@dataclass(frozen=True)
class _Released:
    job: Job


class WebhookPump(SlottedPump[settle.Finished | _Released]):
    """Claims webhook deliveries for the free slots, sends them, settles what finished. What it
    shares with every slotted pump (leases, stop, quiet, close, recovery, pauses) is
    eventbus.dispatch.slotted's; here: the per-subscription claim, the attempt, the webhook
    settle."""

    name = "webhooks"

    def __init__(
        self,
        options: WebhookWorkerOptions,
        *,
        worker_id: str,
        client: httpx.Client | None = None,
        wake: threading.Event,
    ) -> None:
        super().__init__(
            worker_id=worker_id,
            concurrency=options.concurrency,
            batch_size=options.batch_size,
            max_events=options.max_events,
            watch=pauses.Watch(prefix=CONSUMER_PREFIX),  # paused subscriptions
        )
        self.options = options
        self.per_subscription = options.per_subscription or int(
            webhook_settings.MAX_IN_FLIGHT_PER_SUBSCRIPTION
        )
        self._client = client or sender.build_client(max_connections=options.concurrency)
        self.pool = SlotPool(
            options.concurrency,
            self._attempt,
            on_error=self._crashed,
            on_progress=wake.set,
            lane_limit=self.per_subscription,
            signal_every=max(1, options.concurrency // 4),
            can_start=self.leases.trusted,
            name="webhook-sender",
        )
        self._lock = threading.Lock()  # _lost_jobs (the heartbeat thread adds to it)
        self._lost_jobs: list[Job] = []  # queued jobs of a lost lease
        self._per_consumer: Counter[str] = Counter()  # claimed, not settled, per consumer

    @property
    def in_flight(self) -> int:
        """Deliveries claimed by this worker and not settled yet (running, queued, finished)."""
        return sum(self._per_consumer.values())

    def close(self) -> None:
        """On exit: let running requests finish, release the unstarted, settle everything."""
        try:
            super().close()
        finally:
            self._client.close()

    def _dropped(self, jobs: list[Job], ids: set[int]) -> set[int]:
        """Their consumers' share is freed on the main thread, at the next settle."""
        with self._lock:
            self._lost_jobs.extend(jobs)
        return super()._dropped(jobs, ids)

    def _released(self, jobs: Sequence[Job]) -> list[settle.Finished | _Released]:
        return [_Released(job) for job in jobs]

    # -- claiming -----------------------------------------------------------------------------

    def _claim(self) -> int:
        free = min(PREFETCH * self.options.concurrency - self.in_flight, self._room())
        if free <= 0:
            return 0
        held_cap = PREFETCH * self.per_subscription
        batch = claims.claim_prefixed(
            prefix=CONSUMER_PREFIX,
            batch_size=free,
            worker_id=self.worker_id,
            cap=held_cap,
            busy={c: held_cap - n for c, n in self._per_consumer.items() if n},
        )
        self._claimed(len(batch.events))
        if batch.events:
            self._launch(batch)
        return len(batch.events)

    def _launch(self, batch: claims.Claim) -> None:
        sub_ids = {subscription_id_of(e.consumer) for e in batch.events}
        targets = selectors.targets_for({s for s in sub_ids if s}, now=timezone.now())
        timeout = 2 * webhook_settings.TIMEOUT + TIMEOUT_MARGIN_SECONDS
        jobs = []
        for event in batch.events:
            self._per_consumer[event.consumer] += 1
            sub_id = subscription_id_of(event.consumer)
            target = targets.get(sub_id) if sub_id else None
            lane = event.consumer
            jobs.append(
                SendJob(batch.token, event, timeout, lane, subscription_id=sub_id, target=target)
            )
        self._enqueue(batch.token, batch.ids, jobs)

    # -- sending ------------------------------------------------------------------------------

    def _attempt(self, job: Job) -> settle.Finished:
        assert isinstance(job, SendJob)
        event, target = job.event, job.target
        if target is None or not target.enabled:
            decision = outcome.disabled_subscription()
            return settle.Finished(job.token, event, job.subscription_id, None, decision)
        with context.bind_log(**log_ids(event)):
            result = sender.send(self._client, target, event)
        decision = outcome.judge(
            result, attempt=event.attempt, max_attempts=event.max_attempts, policy=settle.policy()
        )
        return settle.Finished(job.token, event, job.subscription_id, result, decision)

    def _crashed(self, job: Job, exc: BaseException, elapsed: float) -> settle.Finished:
        """An attempt raised (a bug, not the endpoint): a transient failure of that delivery."""
        logger.error(
            "webhook delivery %s: the attempt raised %s: %s",
            job.event.delivery_id,
            type(exc).__name__,
            exc,
            exc_info=exc,
            extra=log_ids(job.event),
        )
        return self._failure(job, type(exc).__name__, f"{type(exc).__name__}: {exc}")

    def _timed_out(self, job: Job, elapsed: float) -> list[settle.Finished | _Released]:
        error = f"HandlerTimeout: the attempt was still running after {elapsed:.1f}s"
        return [self._failure(job, "HandlerTimeout", error)]

    def _failure(self, job: Job, error_class: str, error: str) -> settle.Finished:
        event = job.event
        decision = outcome.failed_attempt(
            error_class,
            error,
            attempt=event.attempt,
            max_attempts=event.max_attempts,
            policy=settle.policy(),
        )
        sub_id = job.subscription_id if isinstance(job, SendJob) else None
        return settle.Finished(job.token, event, sub_id, None, decision)

    # -- settling -----------------------------------------------------------------------------

    def _settle(self) -> int:
        with self._lock:
            dropped, self._lost_jobs = self._lost_jobs, []
        self._forget([_Released(job) for job in dropped], held=False)
        seen = self.leases.take_lost(_event(w).delivery_id for w in self._results)
        if not self._results:
            return 0
        batch = [w for w in self._results if _event(w).delivery_id not in seen]
        finished = [w for w in batch if isinstance(w, settle.Finished)]
        with self.settling:
            # On a database error the results stay in _results and are settled again next pass
            # (the fenced ack/nack are safe to repeat).
            _release([w.job for w in batch if isinstance(w, _Released)], worker_id=self.worker_id)
            if finished:
                settle.settle(finished, worker_id=self.worker_id)
        self._forget(self._results, held=True)
        self._results = []
        self.processed += len(finished)
        return len(batch)

    def _forget(self, items: list[settle.Finished | _Released], *, held: bool) -> None:
        """No longer in flight: free the consumer's share (and the lease, once settled)."""
        for item in items:
            event = _event(item)
            self._per_consumer[event.consumer] -= 1
            if self._per_consumer[event.consumer] <= 0:
                del self._per_consumer[event.consumer]
            if held:
                self.leases.settled(_token(item), [event.delivery_id])


def _event(item: settle.Finished | _Released) -> Event:
    return item.job.event if isinstance(item, _Released) else item.event


def _token(item: settle.Finished | _Released) -> uuid.UUID:
    return item.job.token if isinstance(item, _Released) else item.token


def _release(jobs: list[Job], *, worker_id: str) -> None:
    """Deliveries never sent (the worker is stopping): pending again, attempt refunded."""
    for settlement in bus_settle.by_token((job.token, job.event) for job in jobs).values():
        settlement.released = list(settlement.consumer_of)
        bus_settle.settle(settlement, worker_id=worker_id)


class WebhookWorker:
    """`deliver_webhooks`' worker: the runner driving the webhook pump."""

    def __init__(
        self, options: WebhookWorkerOptions | None = None, *, client: httpx.Client | None = None
    ) -> None:
        self.options = options = options or WebhookWorkerOptions()
        self.worker_id = worker_id()
        wake = threading.Event()
        self.pump = WebhookPump(options, worker_id=self.worker_id, client=client, wake=wake)
        pumps: list[Pump] = [self.pump]
        self.runner = Runner(
            pumps,
            RunnerOptions.of(options),
            worker_id=self.worker_id,
            wake=wake,
            kind="deliver_webhooks",
        )
        self.wake = wake

    @property
    def processed(self) -> int:
        return self.pump.processed

    @property
    def in_flight(self) -> int:
        return self.pump.in_flight

    def run(self) -> int:
        return self.runner.run()

    def run_once(self) -> int:
        """One pass: reap when due, settle what finished, claim for the free slots."""
        return self.runner.step()

    def request_stop(self) -> None:
        self.runner.request_stop()

    def close(self) -> None:
        self.pump.close()
