"""The webhook worker: many HTTP requests in flight, one slow endpoint never holding the rest.

Unlike the generic drain (claim a batch, run it all, settle, claim again), this loop keeps up to
`concurrency` requests running on a thread pool and claims again as soon as slots free up:
each claim asks only for the free slots, and each subscription for at most its own free
in-flight slots (`per_subscription`), so a subscription whose endpoint hangs until the timeout
holds at most that many threads while the others keep flowing. Finished attempts are settled in
batches (ack, nack, attempt log, failure counters). Signals, the LISTEN wake-up, the lease
heartbeat, reaping and database back-off are the bus worker's (this class extends it).
"""

from __future__ import annotations

import logging
import queue
import threading
import uuid
from collections import Counter, deque
from dataclasses import dataclass

import httpx
from django.db import DatabaseError
from django.utils import timezone

from deskcomm import context
from eventbus import claim as claims
from eventbus.dispatch import HandlerPool, log_ids
from eventbus.event import Event
from eventbus.worker import Worker, WorkerOptions
from webhooks import outcome, selectors, sender, settle
from webhooks.conf import CONSUMER_PREFIX, webhook_settings
from webhooks.transport import build_client

logger = logging.getLogger(__name__)

# Deliveries claimed per sending slot (the running one and those queued behind it): enough that a
# slot never idles while the loop settles and claims again.
PREFETCH = 4
# After a completion wakes the loop, how long to let others finish before settling and claiming:
# amortises the settle/claim statements over several deliveries at a bounded latency cost.
GATHER_SECONDS = 0.002


@dataclass
class WebhookWorkerOptions(WorkerOptions):
    concurrency: int = 32  # requests in flight per process
    per_subscription: int | None = None  # None: WEBHOOKS_MAX_IN_FLIGHT_PER_SUBSCRIPTION


@dataclass(frozen=True)
class _Job:
    token: uuid.UUID
    event: Event
    sub_id: uuid.UUID | None
    target: sender.Target | None


@dataclass(frozen=True)
class _Unstarted:
    token: uuid.UUID
    event: Event


class WebhookWorker(Worker):
    """`run()` until stopped; `run_once()` settles what finished and claims for free slots."""

    def __init__(
        self, options: WebhookWorkerOptions | None = None, *, client: httpx.Client | None = None
    ) -> None:
        options = options or WebhookWorkerOptions()
        # The base class's own dispatcher stays inline and unused: this worker has its pool.
        super().__init__(
            WorkerOptions(listen=options.listen, startup_jitter=options.startup_jitter)
        )
        self.options = options
        self.names = [f"{CONSUMER_PREFIX}*"]
        self.per_subscription = options.per_subscription or int(
            webhook_settings.MAX_IN_FLIGHT_PER_SUBSCRIPTION
        )
        self._client = client or build_client(max_connections=options.concurrency)
        self._pool = HandlerPool(options.concurrency)
        self._results: queue.SimpleQueue[settle.Finished | _Unstarted] = queue.SimpleQueue()
        # Claimed and not yet collected, per consumer: requests running plus those queued
        # behind them (PREFETCH rounds per slot, so a finished request starts the next one at
        # once instead of waiting for the loop to claim).
        self._held: Counter[str] = Counter()
        self._lock = threading.Lock()  # guards _queued and _serving (pool threads use them)
        self._queued: dict[str, deque[_Job]] = {}
        self._serving: Counter[str] = Counter()  # consumer -> threads sending for it
        self._waiting: list[settle.Finished] = []  # finished, not settled yet (DB trouble)

    def run_once(self) -> int:
        """Settle finished attempts, then claim deliveries for the free slots; returns claimed."""
        self._maybe_reap()
        self._collect()
        self._settle_waiting()
        free = min(PREFETCH * self.options.concurrency - self.in_flight, self._batch_size())
        if self._stop.is_set() or free <= 0:
            return 0
        held_cap = PREFETCH * self.per_subscription
        batch = claims.claim_prefixed(
            prefix=CONSUMER_PREFIX,
            batch_size=free,
            worker_id=self.worker_id,
            cap=held_cap,
            busy={c: held_cap - n for c, n in self._held.items() if n},
        )
        if batch.events:
            self._launch(batch)
        return len(batch.events)

    @property
    def in_flight(self) -> int:
        """Deliveries claimed by this worker and not collected yet (running or queued)."""
        return sum(self._held.values())

    # -- running ----------------------------------------------------------------------------

    def _launch(self, batch: claims.Claim) -> None:
        sub_ids = {selectors.subscription_id_of(e.consumer) for e in batch.events}
        targets = selectors.targets_for({s for s in sub_ids if s}, now=timezone.now())
        with self._inflight_lock:
            self._inflight[batch.token] = list(batch.ids)
        for event in batch.events:
            self._held[event.consumer] += 1
            sub_id = selectors.subscription_id_of(event.consumer)
            job = _Job(batch.token, event, sub_id, targets.get(sub_id) if sub_id else None)
            self._enqueue(job)

    def _enqueue(self, job: _Job) -> None:
        """Queue behind the consumer's requests; start a sender while under the bound."""
        consumer = job.event.consumer
        with self._lock:
            self._queued.setdefault(consumer, deque()).append(job)
            if self._serving[consumer] >= self.per_subscription:
                return
            self._serving[consumer] += 1
        self._pool.submit(lambda: self._serve(consumer))

    def _serve(self, consumer: str) -> None:
        """Send the consumer's queued deliveries one after another (one of its bounded slots)."""
        while True:
            with self._lock:
                jobs = self._queued.get(consumer)
                if not jobs:
                    self._serving[consumer] -= 1
                    if self._serving[consumer] <= 0:
                        del self._serving[consumer]
                        self._queued.pop(consumer, None)
                    return
                job = jobs.popleft()
            try:
                self._results.put(self._attempt(job.token, job.event, job.sub_id, job.target))
            finally:
                self._wakeup.set()  # the loop settles it and claims for the freed slot

    def _attempt(
        self,
        token: uuid.UUID,
        event: Event,
        sub_id: uuid.UUID | None,
        target: sender.Target | None,
    ) -> settle.Finished | _Unstarted:
        if self._stop.is_set():
            return _Unstarted(token, event)
        if target is None or not target.enabled:
            return settle.Finished(token, event, sub_id, None, outcome.disabled_subscription())
        with context.bind_log(**log_ids(event)):
            result = sender.send(self._client, target, event)
        decision = outcome.judge(
            result, attempt=event.attempt, max_attempts=event.max_attempts, policy=settle.policy()
        )
        return settle.Finished(token, event, sub_id, result, decision)

    # -- settling ---------------------------------------------------------------------------

    def _collect(self) -> None:
        """Take finished work off the queue: free its slots, release what never started."""
        unstarted: dict[uuid.UUID, list[int]] = {}
        while True:
            try:
                item = self._results.get_nowait()
            except queue.Empty:
                break
            self._forget(item.token, item.event)
            if isinstance(item, _Unstarted):
                unstarted.setdefault(item.token, []).append(item.event.delivery_id)
            else:
                self._waiting.append(item)
        for token, ids in unstarted.items():
            claims.release(token, ids)

    def _forget(self, token: uuid.UUID, event: Event) -> None:
        self._held[event.consumer] -= 1
        if self._held[event.consumer] <= 0:
            del self._held[event.consumer]
        with self._inflight_lock:
            ids = self._inflight.get(token, [])
            if event.delivery_id in ids:
                ids.remove(event.delivery_id)
            if not ids:
                self._inflight.pop(token, None)

    def _settle_waiting(self) -> None:
        if not self._waiting:
            return
        batch = self._waiting
        # On a database error the results stay in _waiting and are settled again next pass
        # (the fenced ack/nack are safe to repeat).
        settle.settle(batch, worker_id=self.worker_id)
        self._waiting = []
        self.processed += len(batch)

    # -- loop overrides ---------------------------------------------------------------------

    def _idle_wait(self) -> None:
        """Wait for a completion (or the poll interval); then let a few more finish so one
        settle and one claim serve several deliveries instead of one each."""
        super()._idle_wait()
        if self.in_flight:
            self._stop.wait(GATHER_SECONDS)

    def _finished(self, claimed: int) -> bool:
        limit = self.options.max_events
        if limit is not None and self.processed >= limit:
            return True
        return self.options.once and claimed == 0 and self.in_flight == 0 and not self._waiting

    def _batch_size(self) -> int:
        if self.options.max_events is None:
            return self.options.batch_size
        left = self.options.max_events - self.processed - self.in_flight
        return max(0, min(self.options.batch_size, left))

    def _settle_leftovers(self) -> None:
        """On exit: let running requests finish, release the unstarted, settle everything."""
        self._pool.shutdown()
        try:
            self._collect()
            self._settle_waiting()
        except DatabaseError:
            logger.error(
                "could not settle %d webhook attempt(s) before exit; their leases will expire",
                len(self._waiting),
            )
        finally:
            self._client.close()
