"""Slots: the threads that run claimed work, watched so that no job can hold one for good.

A pump submits jobs (one claimed delivery each) and takes back results. Each of `size` slot
threads runs one job at a time, back to back, from a shared queue, optionally at most
`lane_limit` at once per lane (a webhook subscription). The main thread watches them:

- a job running past its own timeout is given up: its slot is abandoned (Python cannot stop a
  thread) and replaced by a fresh thread, and the job is returned to the pump, which records a
  timeout failure; whatever the abandoned thread returns later is dropped;
- when every slot has been busy with the same job for longer than `stuck_after`, the queued
  jobs are handed back (`take_queued`) so the pump can release them to other workers;
- queued jobs of a lost lease are dropped (`drop`): they never start; and a job whose lease the
  pump cannot vouch for (`can_start`: no heartbeat confirmed it lately, e.g. the process was
  stopped past its lease) waits until the heartbeat confirms or drops it.

Any exception a job raises, `BaseException` included, becomes a result through `on_error`: a
slot thread never dies of a job. Per job, a slot takes the lock once (to hand over its result
and take the next job) and wakes the main thread only for the first result waiting, for every
`signal_every` results, when the queue falls to `low_water` (time to claim more) or runs dry;
the runner then gathers results for a few milliseconds more into one settle, unless another
of these wakes it first.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from django.db import connections

from eventbus.store.conf import bus_settings
from eventbus.store.event import Event

logger = logging.getLogger(__name__)

R = TypeVar("R")

RECHECK_SECONDS = 0.1  # how soon a slot looks again at jobs `can_start` held back
DECAY = 0.999  # per run: cpu_share() follows about the last thousand runs
SAMPLE_EVERY = 32  # runs between two readings of a slot's CPU clock (see SlotPool._account)
# A growing pool (`grow_to`) doubles its threads at each submit while its handlers spend less
# than this share of their time on the CPU (they wait on I/O: their database commits, an HTTP
# call) and jobs wait. At a quarter, a plain one-write handler on one thread, once the acks were
# gathered (eventbus.dispatch.drain.SETTLE_GATHER), measured about a quarter and stayed there:
# 3,600 deliveries/s where 8 threads gave 4,700. Half: it grows; a CPU-bound one still does not.
GROW_BELOW_SHARE = 0.5


@dataclass(eq=False, slots=True)
class Job:
    """One claimed delivery to run: its claim's token, the event, its deadline and lane; for a
    batch consumer, the batch's further events in `rest` (same consumer, organization, lane)."""

    token: uuid.UUID
    event: Event
    timeout: float
    lane: str | None = None
    rest: tuple[Event, ...] = ()

    @property
    def events(self) -> tuple[Event, ...]:
        return (self.event, *self.rest)

    def of(self, events: Sequence[Event]) -> Job:
        """A job of some of this job's events (same claim, timeout and lane)."""
        return Job(self.token, events[0], self.timeout, self.lane, tuple(events[1:]))

    def single(self, event: Event) -> Job:
        """The job of one event of this job (how each event's outcome is settled)."""
        return (
            self
            if event is self.event and not self.rest
            else Job(self.token, event, self.timeout, self.lane)
        )


class Leases:
    """The claims a pump holds, for the heartbeat and for deciding what may still start.

    The heartbeat extends `held()`; what it found taken over is `lose()`-ed: those deliveries'
    results are dropped as they come (`take_lost`). A job starts only while its claim's lease
    was confirmed (claimed or extended) less than 80% of a lease ago (`trusted`): a process
    stopped past its lease (SIGSTOP, a VM pause) starts nothing more until the heartbeat has
    checked the claim again, and then only what is still its own. Thread-safe.
    """

    SHARE = 0.8

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[uuid.UUID, set[int]] = {}
        self._committed: dict[uuid.UUID, set[int]] = {}  # see commit()
        self._lost: set[int] = set()
        self._until: dict[uuid.UUID, float] = {}
        # The earliest of those deadlines: before it, every held claim is trusted, and a job
        # starts without looking its claim up (the common case, checked per job).
        self._all_until = 0.0

    def hold(self, token: uuid.UUID, ids: Iterable[int]) -> None:
        with self._lock:
            self._held[token] = set(ids)
        self.renew(token)

    def renew(self, token: uuid.UUID) -> None:
        lease = bus_settings.LEASE_SECONDS
        with self._lock:
            if token not in self._held:
                return  # settled meanwhile (the heartbeat read it just before)
            self._until[token] = time.monotonic() + lease * self.SHARE
            self._all_until = min(self._until.values())

    def trusted(self, job: Job) -> bool:
        now = time.monotonic()
        return now < self._all_until or now < self._until.get(job.token, 0.0)

    def held(self) -> dict[uuid.UUID, list[int]]:
        with self._lock:
            return {token: list(ids) for token, ids in self._held.items() if ids}

    def commit(self, token: uuid.UUID, ids: Iterable[int]) -> None:
        """Acked in their own job's transaction (an atomic group, a batch): no longer held (the
        heartbeat must not extend them, nor take them for lost), still counted until settled."""
        with self._lock:
            held = self._held.get(token)
            if held is None:
                return
            done = held.intersection(ids)
            held.difference_update(done)
            self._committed.setdefault(token, set()).update(done)

    def count(self) -> int:
        """How many deliveries are claimed and not settled yet, over every claim."""
        with self._lock:
            held = sum(len(ids) for ids in self._held.values())
            return held + sum(len(ids) for ids in self._committed.values())

    def still_held(self, token: uuid.UUID, ids: set[int]) -> set[int]:
        """Which of these are still held (not settled, nor committed by their own job)."""
        with self._lock:
            return ids & self._held.get(token, set())

    def lose(self, token: uuid.UUID, ids: set[int], *, never_started: set[int]) -> None:
        """Taken over: no longer held; the results of those that did start are to be dropped."""
        with self._lock:
            self._lost.update(ids - never_started)
        self.settled(token, ids)

    def take_lost(self, ids: Iterable[int]) -> set[int]:
        """Which of these results belong to lost deliveries (each reported once)."""
        with self._lock:
            seen = set(ids) & self._lost
            self._lost -= seen
        return seen

    def settled(self, token: uuid.UUID, ids: Iterable[int]) -> None:
        ids = set(ids)
        with self._lock:
            committed = self._committed.get(token)
            if committed is not None:
                committed.difference_update(ids)
                if not committed:
                    del self._committed[token]
            held = self._held.get(token)
            if held is None:
                return
            held.difference_update(ids)
            if not held:  # the claim is over: its deadline no longer bounds the others
                del self._held[token]
                self._until.pop(token, None)
                self._all_until = min(self._until.values(), default=0.0)


def _holds(job: Job, ids: Collection[int]) -> bool:
    """Whether any of the job's deliveries is among `ids`."""
    return job.event.delivery_id in ids or any(e.delivery_id in ids for e in job.rest)


def log_lost(pump: str, token: uuid.UUID, ids: set[int], never_started: int) -> None:
    logger.error(
        "%s: lost the lease of %d deliveries (another worker took them over after this one "
        "stalled past its lease): %d not started, the results of the others dropped",
        pump,
        len(ids),
        never_started,
        extra={"lease_token": str(token), "lost": len(ids)},
    )


def should_grow(cpu_share: float | None, *, queued: int, threads: int) -> bool:
    """Whether a growing pool adds threads: its handlers' measured CPU share (None: not measured
    yet) is under GROW_BELOW_SHARE, so they mostly wait and more of them can wait at once, and
    more jobs are queued than it has threads. Handlers that use the CPU (or do nothing) would
    only share the interpreter's lock with more threads: such a pool stays at its size."""
    return cpu_share is not None and cpu_share < GROW_BELOW_SHARE and queued > threads


@dataclass(eq=False)
class _Slot:
    job: Job | None = None
    started: float = 0.0
    abandoned: bool = False
    thread: threading.Thread | None = field(default=None, repr=False)
    # CPU-share accounting (SlotPool._account): the clocks when the current window opened (0
    # while the slot is idle) and the runs finished since
    sampled_wall: float = 0.0
    sampled_cpu: float = 0.0
    unsampled: int = 0


class SlotPool(Generic[R]):
    """`size` threads running jobs; `take()` the results; the main thread calls the watchers."""

    def __init__(
        self,
        size: int,
        run: Callable[[Job], R],
        *,
        on_error: Callable[[Job, BaseException, float], R],
        on_progress: Callable[[], None],
        lane_limit: int | None = None,
        signal_every: int = 1,
        low_water: int = 0,
        can_start: Callable[[Job], bool] = lambda job: True,
        on_abandon: Callable[[Job], None] = lambda job: None,
        name: str = "eventbus-slot",
        grow_to: int | None = None,
    ) -> None:
        self._run = run
        self._on_abandon = on_abandon
        self._can_start = can_start
        self._on_error = on_error
        self._on_progress = on_progress
        self._lane_limit = lane_limit
        self._signal_every = max(1, signal_every)
        self._low_water = low_water
        self._name = name
        # Taken directly (a C-level `with`); `_cond` waits and notifies on the same lock.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._queue: deque[Job] = deque()
        self._results: list[R] = []
        self._lanes: Counter[str] = Counter()
        self._slots: list[_Slot] = []
        self._paused = False
        self._closing = False
        self._size = max(1, size)
        # Up to how many threads the pool may grow (`should_grow`); its size when it does not.
        self._grow_to = max(self._size, grow_to or 0)
        self._started = 0
        # Slot time spent on the CPU (holding the GIL) and in all while busy, decayed per run:
        # see cpu_share(). Updated by the slots under the lock.
        self._cpu_seconds = 0.0
        self._wall_seconds = 0.0
        # Set by the pump: wake it only when everything submitted has finished (CPU-bound work
        # is settled batch by batch; an earlier wake-up would only take the GIL from a slot).
        self.quiet = False
        self.orphans = 0  # abandoned threads still running a job that timed out

    # -- the pump's side ---------------------------------------------------------------------

    def submit(self, jobs: Iterable[Job]) -> None:
        """Queue jobs (the slot threads start with the first ones)."""
        with self._lock:
            self._queue.extend(jobs)
            if self._size < self._grow_to and should_grow(
                self.cpu_share() if self._wall_seconds else None,
                queued=len(self._queue),
                threads=self._size,
            ):
                self._size = min(self._grow_to, self._size * 2)  # 1, 2, 4, 8: up in 3 claims
            while len(self._slots) < self._size:  # live slots (an abandoned one was replaced)
                self._add_slot()
            self._cond.notify_all()

    @property
    def size(self) -> int:
        """How many threads run jobs now (a growing pool's grow as its handlers wait)."""
        return self._size

    def take(self) -> list[R]:
        """The results collected since the last call."""
        with self._lock:
            results, self._results = self._results, []
        return results

    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def running(self) -> int:
        return sum(1 for slot in self._slots if slot.job is not None)

    @property
    def outstanding(self) -> int:
        """Jobs submitted and not yet returned by `take` (queued, running, finished)."""
        with self._lock:
            running = sum(1 for slot in self._slots if slot.job is not None)
            return len(self._queue) + running + len(self._results)

    def held(self) -> list[Job]:
        """Jobs queued or running (not abandoned): their leases must stay alive."""
        with self._lock:
            return [*self._queue, *(s.job for s in self._slots if s.job is not None)]

    def running_since(self) -> list[tuple[Job, float]]:
        with self._lock:
            return [(s.job, s.started) for s in self._slots if s.job is not None]

    def take_queued(self) -> list[Job]:
        """Every job not started yet (to release them)."""
        with self._lock:
            jobs = list(self._queue)
            self._queue.clear()
        return jobs

    def take_queued_of(self, consumers: Collection[str]) -> list[Job]:
        """The jobs not started yet of these consumers (paused meanwhile: to release them). A job
        holding several consumers' events (batches sharing a transaction) gives up theirs and
        keeps its place with the others'."""
        with self._lock:
            taken: list[Job] = []
            kept: deque[Job] = deque()
            for job in self._queue:
                theirs = [e for e in job.events if e.consumer in consumers]
                if not theirs:
                    kept.append(job)
                elif len(theirs) == len(job.events):
                    taken.append(job)
                else:
                    taken.append(job.of(theirs))
                    kept.append(job.of([e for e in job.events if e.consumer not in consumers]))
            if taken:
                self._queue = kept
        return taken

    def stuck(self, after: float, now: float | None = None) -> bool:
        """Whether every slot has been running its current job for longer than `after`."""
        now = time.monotonic() if now is None else now
        with self._lock:
            busy = [s for s in self._slots if s.job is not None and now - s.started > after]
            return bool(self._slots) and len(busy) == len(self._slots)

    def expired(self, now: float | None = None) -> list[tuple[Job, float]]:
        """Jobs running past their timeout: their slots are abandoned and replaced."""
        now = time.monotonic() if now is None else now
        given_up: list[tuple[Job, float]] = []
        with self._lock:
            for slot in list(self._slots):
                job = slot.job
                if job is None or now - slot.started <= job.timeout:
                    continue
                given_up.append((job, now - slot.started))
                self._abandon(slot, job)
        for job, elapsed in given_up:
            logger.error(
                "consumer %s: delivery %s still running after %.1fs (timeout %.1fs): giving up "
                "on it; its thread is abandoned and a new one takes its slot",
                job.event.consumer,
                job.event.delivery_id,
                elapsed,
                job.timeout,
                extra={"delivery_id": job.event.delivery_id, "consumer": job.event.consumer},
            )
        return given_up

    def drop(self, ids: set[int]) -> list[Job]:
        """Take the queued jobs of these deliveries off the queue (their lease was lost): they
        never start. Returns them; running ones finish and their results come back as usual."""
        with self._lock:
            dropped = [job for job in self._queue if _holds(job, ids)]
            self._queue = deque(job for job in self._queue if not _holds(job, ids))
        return dropped

    def wait_idle(self, timeout: float) -> bool:
        """Wait until nothing is queued or running (or `timeout`); True when idle."""
        with self._lock:
            return self._cond.wait_for(self._idle, timeout)

    def idle(self) -> bool:
        """Nothing queued or running (results may be waiting to be taken)."""
        with self._lock:
            return self._idle()

    def _idle(self) -> bool:
        return not self._queue and all(s.job is None for s in self._slots)

    def wind_down(self, tick: Callable[[], None]) -> list[Job]:
        """Start nothing more and let running jobs finish, calling `tick` (the pump's watchdog:
        timeouts) about every tenth of a second; returns the jobs that never started."""
        self.pause()
        while self.running:
            self.wait_idle(0.1)
            tick()
        self.close(0)
        return self.take_queued()

    def pause(self) -> None:
        """Start no further job (the database is unreachable); running ones finish."""
        with self._lock:
            self._paused = True

    def resume(self) -> None:
        with self._lock:
            self._paused = False
            self._cond.notify_all()

    def close(self, timeout: float) -> None:
        """Let running jobs finish (up to `timeout` seconds in all); queued ones stay queued."""
        with self._lock:
            self._closing = True
            self._cond.notify_all()
            threads = [s.thread for s in self._slots if s.thread is not None]
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    # -- the slots' side ----------------------------------------------------------------------

    def _add_slot(self) -> None:
        slot = _Slot()
        self._started += 1
        slot.thread = threading.Thread(
            target=self._serve, args=(slot,), name=f"{self._name}-{self._started}", daemon=True
        )
        self._slots.append(slot)
        slot.thread.start()

    def _abandon(self, slot: _Slot, job: Job) -> None:
        self._on_abandon(job)  # under the lock: before the job's lane lets the next one start
        slot.abandoned = True
        self._slots.remove(slot)
        self.orphans += 1
        if job.lane is not None:
            self._lanes[job.lane] -= 1
        if not self._closing:
            self._add_slot()
        self._cond.notify_all()

    def _serve(self, slot: _Slot) -> None:
        try:
            job = self._next(slot, None)
            while job is not None:
                try:
                    result = self._run(job)
                except BaseException as exc:  # a slot never dies of a job
                    result = self._on_error(job, exc, time.monotonic() - slot.started)
                job = self._next(slot, (job, result))
        finally:
            connections.close_all()

    def _next(self, slot: _Slot, done: tuple[Job, R] | None) -> Job | None:
        """Hand over the result of the job `done` (if any) and take the next job, under one
        lock: a job costs the slot one acquisition. None when the slot is to exit (closing, or
        this thread was abandoned)."""
        with self._lock:
            if done is not None and not self._finish(slot, *done):
                return None
            while True:
                if self._closing:
                    return None
                job = None if self._paused else self._pop_runnable()
                if job is not None:
                    slot.job, slot.started = job, time.monotonic()
                    if job.lane is not None:
                        self._lanes[job.lane] += 1
                    if not slot.sampled_wall:
                        self._account(slot, reopen=True)  # busy again: open a window
                    return job
                self._account(slot, reopen=False)  # going idle: close the window
                # Jobs held back by `can_start` (an unconfirmed lease) are looked at again soon.
                self._cond.wait(RECHECK_SECONDS if self._queue else None)

    def _pop_runnable(self) -> Job | None:
        if not self._queue:
            return None
        first = self._queue[0]
        if (first.lane is None or self._lane_limit is None) and self._can_start(first):
            return self._queue.popleft()  # the usual case: no lane to wait for
        for index, job in enumerate(self._queue):
            if self._lane_open(job) and self._can_start(job):
                del self._queue[index]
                return job
        return None

    def _lane_open(self, job: Job) -> bool:
        if job.lane is None or self._lane_limit is None:
            return True
        return self._lanes[job.lane] < self._lane_limit

    def cpu_share(self) -> float:
        """How much of the recent handler time was spent on the CPU (0: all waiting on I/O).
        Work that waits on I/O gains from claiming and settling while it runs; CPU-bound work
        would only compete for the GIL with the claim and the ack."""
        return self._cpu_seconds / self._wall_seconds if self._wall_seconds else 0.0

    def _account(self, slot: _Slot, *, reopen: bool) -> None:
        """Add the slot's CPU and wall time since its window opened to the decayed totals, and
        open the next window (`reopen`) or leave it closed while the slot waits idle. Done
        every `SAMPLE_EVERY` runs and around idle waits, not per run: reading a thread's CPU
        clock costs a system call."""
        wall, cpu = time.monotonic(), time.thread_time()
        if slot.sampled_wall:
            decay = DECAY**slot.unsampled
            self._wall_seconds = self._wall_seconds * decay + (wall - slot.sampled_wall)
            self._cpu_seconds = self._cpu_seconds * decay + (cpu - slot.sampled_cpu)
        slot.sampled_wall, slot.sampled_cpu = (wall, cpu) if reopen else (0.0, 0.0)
        slot.unsampled = 0

    def _finish(self, slot: _Slot, job: Job, result: R) -> bool:
        """Hand the result over (under the lock); False when this thread was abandoned."""
        if slot.abandoned:
            self.orphans -= 1
            return False
        slot.job = None
        slot.unsampled += 1
        if slot.unsampled >= SAMPLE_EVERY:
            self._account(slot, reopen=True)
        if job.lane is not None:
            self._lanes[job.lane] -= 1
            self._cond.notify_all()  # a job of that lane may now run
        self._results.append(result)
        waiting = len(self._results)
        idle = not self._queue and self._idle()
        if idle:
            self._cond.notify_all()  # wait_idle
        if self.quiet:
            wake = idle
        else:
            queued = len(self._queue)
            wake = waiting in (1, self._signal_every) or queued in (0, self._low_water)
        if wake:
            self._on_progress()
        return True
