"""The slotted pump: the lifecycle every pump running claimed work on slots shares, written once.

The drain (eventbus/dispatch/drain.py) and the webhook sender (webhooks/worker.py) differ in how
they claim, what a job runs and how its results settle; everything else is here. Each `step()`
takes what the slots finished, settles it, recovers after a database failure, gives up runs
past their timeout, gives back the unstarted deliveries of consumers paused meanwhile, and
claims for the free room, never blocking. Around it, the runner's calls
(eventbus/dispatch/runner.py, `Pump` and `LeaseHolder`): the heartbeat's `held()` / `renewed()` /
`lost()` (a lost delivery never starts and its result is dropped), `interrupted()` (start nothing
until a settle works again, then release what waited), `stop()` / `quiet()` (claim nothing more),
`close()` (let running jobs finish, release the rest, settle everything).

A subclass provides `_claim` (claim and `_enqueue` jobs), `_settle` (settle `_results`),
`_released` (the results of jobs given back unstarted) and `_timed_out` (the results of a job
given up); the slot pool (`pool`, built with `can_start=self.leases.trusted`) runs its jobs.
"""

from __future__ import annotations

import logging
import math
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from typing import Generic, TypeVar

from eventbus.dispatch.slots import Job, Leases, SlotPool, log_lost
from eventbus.store import metrics, pauses
from eventbus.store.conf import bus_settings

logger = logging.getLogger(__name__)

R = TypeVar("R")

# How long an idle wait may last while jobs run: the watchdog's tick.
IN_FLIGHT_WAIT = 0.1
# After a claim that found work the idle wait starts here and doubles with each empty claim up
# to the poll interval: a worker that was just busy looks again soon (events arriving at a steady
# rate without NOTIFY are picked up in about this long, not a whole poll interval later), and one
# left idle settles at a claim per poll after a handful more.
FIRST_IDLE_WAIT = 0.05


class SlottedPump(ABC, Generic[R]):
    """A pump whose slots run claimed jobs; results of type R wait in `_results` to settle."""

    name: str
    # What a job returns: one result, or a list of them (a batch consumer's job).
    pool: SlotPool[R | list[R]]
    # When every slot is stuck on one job past EVENTBUS_STUCK_RELEASE_SECONDS, give the queue
    # back to other workers (the drain). A webhook subscription's hanging endpoint holds only
    # its own lane, so the sender keeps its queue.
    release_when_stuck = False
    # Whether a job may return a list of results (the drain's batch consumers); else the
    # results are taken as they come, without looking at each.
    batches = False

    def __init__(
        self,
        *,
        worker_id: str,
        concurrency: int,
        batch_size: int,
        max_events: int | None,
        watch: pauses.Watch,
    ) -> None:
        self.worker_id = worker_id
        self.concurrency = concurrency
        self.batch_size = batch_size
        self.max_events = max_events
        self.processed = 0
        self.settling = threading.Lock()  # the runner's heartbeat never extends mid-settle
        self.leases = Leases()
        self.pauses = watch
        self._results: list[R] = []  # finished, not settled yet
        self._stopping = False
        self._quiet = False  # asked from the console: claim nothing more, finish what is held
        self._interrupted = threading.Event()  # the database failed: start nothing
        self._drained = False  # the last claim found nothing due
        self._idle_wait = math.inf  # the next idle wait, capped by the poll interval

    # -- the runner's interface ---------------------------------------------------------------

    def step(self) -> int:
        """Settle, watch, claim: returns how many deliveries were settled, given back or claimed."""
        self._collect()
        progress = self._settle() if self._may_settle() else 0
        if self._interrupted.is_set():
            self._recover()
        progress += self._watch() + self._check_pauses()
        return progress + (self._claim() if self._claiming() else 0)

    @property
    def in_flight(self) -> int:
        """Claimed by this worker and not settled yet (queued, running, finished)."""
        return self.pool.outstanding + len(self._results)

    def idle(self) -> bool:
        """Nothing due was found and nothing is in flight (`--once` may exit)."""
        return self._drained and self.in_flight == 0

    @property
    def degraded(self) -> bool:
        """Too many abandoned slot threads: the process should be replaced."""
        return self.pool.orphans >= bus_settings.MAX_ABANDONED_THREADS

    @property
    def gathering(self) -> bool:
        """Results come one by one (overlapping); batch by batch there is nothing to gather."""
        return not self.pool.quiet

    def wait_hint(self, poll_interval: float) -> float:
        """How long the runner may sleep: short while jobs run (the watchdog's tick), and after
        work found, growing back to the poll interval claim by empty claim."""
        if self.in_flight:
            return IN_FLIGHT_WAIT
        return min(self._idle_wait, poll_interval)

    def held(self) -> dict[uuid.UUID, list[int]]:
        return self.leases.held()

    def renewed(self, token: uuid.UUID) -> None:
        self.leases.renew(token)

    def lost(self, token: uuid.UUID, ids: set[int]) -> None:
        """The heartbeat found these taken over: start none of them, drop their results.
        Those no longer held were settled, or committed with their ack by their own job (an
        atomic group, a batch), since the heartbeat read them: not lost."""
        ids = self.leases.still_held(token, ids)
        if not ids:
            return
        metrics.LEASES_LOST.inc(len(ids))
        never_started = self._dropped(self.pool.drop(ids), ids)
        self.leases.lose(token, ids, never_started=never_started)
        log_lost(self.name, token, ids, len(never_started))

    def poke(self) -> None:
        """A NOTIFY arrived (the runner steps at once): perhaps a pause, re-read them."""
        self.pauses.poke()

    def interrupted(self) -> None:
        """The database failed: start nothing more until a settle succeeds again."""
        self._interrupted.set()
        self.pool.pause()

    def stop(self) -> None:
        self._stopping = True
        self.pool.pause()

    def quiet(self) -> None:
        """Claim nothing more (probes included); what is claimed still runs and settles."""
        self._quiet = True

    def close(self) -> None:
        """Let running jobs finish (each within its timeout), release the rest, settle."""
        self.stop()
        never_started = self.pool.wind_down(self._tick)
        self._collect()
        self._results.extend(self._released(never_started))
        self._settle()

    # -- what the subclass decides ------------------------------------------------------------

    @abstractmethod
    def _claim(self) -> int:
        """Claim for the free room and `_enqueue` the jobs; returns how many were claimed."""

    @abstractmethod
    def _settle(self) -> int:
        """Settle `_results` (keeping them on a database error); returns how many."""

    @abstractmethod
    def _released(self, jobs: Sequence[Job]) -> list[R]:
        """The results of jobs given back unstarted (pending again, not charged)."""

    @abstractmethod
    def _timed_out(self, job: Job, elapsed: float) -> list[R]:
        """The results of a job given up past its timeout."""

    def _dropped(self, jobs: list[Job], ids: set[int]) -> set[int]:
        """Queued jobs holding lost deliveries were taken off the queue: which deliveries never
        started (called on the heartbeat's thread)."""
        return {e.delivery_id for job in jobs for e in job.events if e.delivery_id in ids}

    def _may_settle(self) -> bool:
        """Whether to settle in this step (a pump running batch by batch waits for the batch)."""
        return True

    def _probe(self, paused: dict[str, str]) -> int:
        """Claim the circuit breaker's due probes among `paused`; returns how many."""
        return 0

    # -- the lifecycle ------------------------------------------------------------------------

    def _claiming(self) -> bool:
        return not (self._stopping or self._quiet or self._interrupted.is_set())

    def _claimed(self, found: int) -> None:
        """Note what a claim found: work restarts the short idle waits, nothing doubles them."""
        self._drained = not found
        self._idle_wait = FIRST_IDLE_WAIT if found else self._idle_wait * 2

    def _enqueue(self, token: uuid.UUID, ids: Collection[int], jobs: Sequence[Job]) -> None:
        """Hold the claim's lease (the heartbeat extends it) and queue its jobs."""
        self.leases.hold(token, ids)
        self.pool.submit(jobs)

    def _room(self) -> int:
        """How many deliveries the next claim may take: `max_events` counts the deliveries
        claimed and not settled yet (a batch consumer's job holds many; `in_flight` counts
        jobs)."""
        if self.max_events is None:
            return self.batch_size
        unsettled = self.leases.count()
        return max(0, min(self.batch_size, self.max_events - self.processed - unsettled))

    def _collect(self) -> None:
        if not self.batches:
            self._results.extend(self.pool.take())  # type: ignore[arg-type]  # no lists
            return
        for result in self.pool.take():
            if isinstance(result, list):
                self._results.extend(result)
            else:
                self._results.append(result)

    def _tick(self) -> None:
        self._collect()
        self._watch()

    def _watch(self) -> int:
        """Timeouts and stuck slots: returns how many results that produced."""
        found = [r for job, elapsed in self.pool.expired() for r in self._timed_out(job, elapsed)]
        stuck_after = bus_settings.STUCK_RELEASE_SECONDS
        if self.release_when_stuck and self.pool.queued and self.pool.stuck(stuck_after):
            waiting = self.pool.take_queued()
            logger.info(
                "every slot busy for over %.1fs: releasing %d claimed deliveries to other workers",
                stuck_after,
                len(waiting),
            )
            found.extend(self._released(waiting))
        self._results.extend(found)
        return len(found)

    def _check_pauses(self) -> int:
        """About once a second: release the unstarted deliveries of consumers paused since they
        were claimed (refunded) and claim the circuit breaker's due probes."""
        paused = self.pauses.check()
        if not paused:
            return 0
        given_back = self._released(self.pool.take_queued_of(pauses.held(paused)))
        self._results.extend(given_back)
        if given_back:
            logger.info("released %d claimed deliveries of paused consumers", len(given_back))
        return len(given_back) + (self._probe(paused) if self._claiming() else 0)

    def _recover(self) -> None:
        """The database is back: release what waited (never started, not charged), settle,
        start again."""
        waiting = self.pool.take_queued()
        self._results.extend(self._released(waiting))
        self._settle()
        self._interrupted.clear()
        if not self._stopping:
            self.pool.resume()
        if waiting:
            logger.info("database back: released %d deliveries that had not started", len(waiting))
