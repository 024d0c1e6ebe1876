"""The drain pump: claim due deliveries of the Python consumers, run them on slots, settle them.

`step()` never blocks: it settles what the slots finished (one ack, one nack, one release per
claim), gives up runs past their timeout, releases what waits behind stuck slots, and claims
more while the queue is short, so the slots never wait for a settle or a claim. Deliveries
marked `isolate` (their worker died holding them with others) run one at a time with nothing
else in flight: a delivery that kills its worker is then the only one that worker held.
An ordered consumer's claim may bring a run of one key's deliveries (claim.sql): they share a
lane of the slot pool, so they run one at a time in id order whatever the concurrency, and once
one of them fails, times out or is released, the rest of its run are released, never run.
When the database fails, nothing more is started; what finished is kept and settled after the
reconnection, and what had not started is released, never charged. A handler that fails
because the worker's own connection died is released too: the failure was not its own.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from operator import attrgetter
from typing import Literal, NamedTuple, cast

import psycopg
from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction
from prometheus_client import Histogram
from psycopg.pq import TransactionStatus

from core import context, rls
from eventbus.dispatch import breaker, together
from eventbus.dispatch import claim as claims
from eventbus.dispatch.retry import judge_failure
from eventbus.dispatch.settle import Settlement, by_token, settle
from eventbus.dispatch.slots import Job, SlotPool
from eventbus.dispatch.slotted import SlottedPump
from eventbus.dispatch.together import Together, parts
from eventbus.store import metrics, pauses, provenance
from eventbus.store.conf import bus_settings
from eventbus.store.errors import HandlerTimeout, LeaseLost
from eventbus.store.event import Event
from eventbus.store.registry import BatchHandler, Consumer, Handler
from eventbus.store.tenancy import SecurityRefusal

logger = logging.getLogger(__name__)

# How often a busy drain looks for deliveries waiting to run alone (an index probe).
ISOLATION_CHECK_SECONDS = 1.0
# Handlers spending more than this share of their time on the CPU are run batch by batch.
CPU_BOUND_SHARE = 0.5
# Overlapping, finished runs are settled once this many wait, or once the oldest has waited this
# long (or when nothing runs any more): an ack's statement and commit then serve a hundred or
# more deliveries, where settling at every step acked a handful each (plain one-write handlers:
# the loop spent 86% of its time in acks).
SETTLE_GATHER = 200
SETTLE_WITHIN = 0.1
# `drain_events --concurrency auto` (the default): one handler thread, growing up to this many
# while the handlers mostly wait on I/O and work is queued (SlotPool, slots.should_grow); a
# worker with an atomic or batch consumer stays on one.
AUTO_HANDLER_THREADS = 8
# An atomic consumer's group (EVENTBUS["ATOMIC_GROUP"] deliveries of one claim, organization and
# key in one transaction) starts no further delivery once it has run this share of its timeout
# (the rest are released, uncharged), so a group of normal runs never reaches the timeout.
ATOMIC_GROUP_SHARE = 0.25

Kind = Literal["done", "committed", "failed", "released", "set_apart"]


class Finished(NamedTuple):
    """What one run came to; `failure` is set when `kind` is "failed"."""

    job: Job
    kind: Kind
    failure: claims.Failure | None = None


class DrainPump(SlottedPump[Finished]):
    """Runs the drain consumers (`runs_on="drain"`); driven by the runner's loop. What it shares
    with every slotted pump (leases, stop, quiet, close, recovery, pauses) is
    eventbus.dispatch.slotted's; here: claiming (isolation, batch by batch or overlapping), running
    handlers, settling."""

    name = "drain"
    release_when_stuck = True

    def __init__(
        self,
        consumers: Sequence[Consumer],
        *,
        worker_id: str,
        concurrency: int | None = 1,
        batch_size: int = 100,
        max_events: int | None = None,
        wake: Callable[[], None] = lambda: None,
    ) -> None:
        self.consumers = {c.name: c for c in consumers}
        self.names = list(self.consumers)
        batches = any(_group_size(c) for c in consumers)
        # None (auto): one thread, growing to `most` (SlotPool). Only plain handlers get more
        # threads: atomic groups and batches update their events' summary inside their
        # transactions, and more of them at once wait on each other's event rows (measured: no
        # faster, batches slower).
        most = concurrency or (1 if batches else AUTO_HANDLER_THREADS)
        super().__init__(
            worker_id=worker_id,
            concurrency=most,
            batch_size=batch_size,
            max_events=max_events,
            watch=pauses.Watch(names=self.names),
        )
        self._low_water = max(most, batch_size // 2)
        self._alone = False  # an isolated delivery is in flight: claim nothing else
        self._gathering_since: float | None = None  # when the oldest unsettled result came
        self.clock = time.monotonic  # for the settle's gathering (tests move it)
        self._isolated_waiting = False
        self._next_isolation_check = 0.0
        # (claim token, lane) of ordered runs stopped by a delivery that did not succeed: the
        # rest of the run is released (written by the slot threads and, for a timeout, under
        # the pool's lock before the lane opens again; read by the slots before each run).
        self._broken: set[tuple[uuid.UUID, str]] = set()
        # Slot threads add to it while the settle forgets runs no longer held: a set changed in
        # place under this lock, never replaced (a replacement lost a concurrent add, and a key's
        # later delivery then ran after its failed one).
        self._broken_lock = threading.Lock()
        self.batches = batches
        self.together = Together()  # unordered batch consumers' batches share a transaction
        self.pool = SlotPool(
            concurrency or 1,
            self._run,
            on_error=self._failed,
            on_progress=wake,
            signal_every=max(1, batch_size // 2),
            low_water=self._low_water,
            can_start=self.leases.trusted,
            lane_limit=1,  # an ordered key's run, one at a time (unkeyed jobs have no lane)
            on_abandon=self._break_run,
            name="eventbus-handler",
            grow_to=most,
        )

    def idle(self) -> bool:
        """Nothing due was found (nor waiting to run alone) and nothing is in flight."""
        return super().idle() and not self._isolated_waiting

    def _dropped(self, jobs: list[Job], ids: set[int]) -> set[int]:
        """A batch's deliveries that were not lost still run: queued again without the others."""
        kept = [
            job.of(keep)
            for job in jobs
            if (keep := [e for e in job.events if e.delivery_id not in ids])
        ]
        if kept:
            self.pool.submit(kept)
        return super()._dropped(jobs, ids)

    def _released(self, jobs: Sequence[Job]) -> list[Finished]:
        return released(jobs)

    def _may_settle(self) -> bool:
        """Batch by batch: once the batch is done. Overlapping: once SETTLE_GATHER results wait
        or the oldest has waited SETTLE_WITHIN seconds, or nothing runs any more (one ack
        statement and commit per ~100-200 deliveries rather than per handful)."""
        if not self._results:
            self._gathering_since = None
            return False
        if not self._overlapping():
            return self.pool.idle()
        now = self.clock()
        if self._gathering_since is None:
            self._gathering_since = now
        return (
            len(self._results) >= SETTLE_GATHER
            or now - self._gathering_since >= SETTLE_WITHIN
            or self.pool.idle()
            or self._stopping
        )

    # -- running ------------------------------------------------------------------------------

    def _run(self, job: Job) -> Finished | list[Finished]:
        if job.lane is not None and (job.token, job.lane) in self._broken:
            # an earlier delivery of its run did not succeed
            return released([job]) if job.rest else Finished(job, "released")
        consumer = self.consumers[job.event.consumer]
        if together.shared(job):  # several consumers' batches in one transaction
            outcomes = run_batches_together(self.consumers, job, self.interrupted, self.together)
            self._committed(job, outcomes)
            return outcomes
        if _group_size(consumer):
            outcomes = run_batch_job(consumer, job, self.interrupted)
            if any(f.kind != "committed" for f in outcomes):
                self._break_run(job)
            self._committed(job, outcomes)
            return outcomes
        finished = run_job(consumer, job, self.interrupted)
        if finished.kind in ("failed", "released"):
            self._break_run(job)
        self._committed(job, [finished])
        return finished

    def _committed(self, job: Job, outcomes: list[Finished]) -> None:
        """Deliveries acked in their own transaction (atomic, batch) are no longer held: the
        heartbeat would find them gone from the claim (`done`) and take them for lost."""
        ids = [f.job.event.delivery_id for f in outcomes if f.kind == "committed"]
        if ids:
            self.leases.commit(job.token, ids)

    def _failed(self, job: Job, exc: BaseException, elapsed: float) -> Finished | list[Finished]:
        self._break_run(job)
        if job.rest:  # the bus failed around a batch: which event was at fault is unknown
            return [Finished(job.single(e), "set_apart") for e in job.events]
        return failed(job, exc, elapsed, self.interrupted)

    def _break_run(self, job: Job) -> None:
        """The rest of this job's ordered run must not run: its key waits for this one."""
        if job.lane is not None:
            with self._broken_lock:
                self._broken.add((job.token, job.lane))

    def _timed_out(self, job: Job, elapsed: float) -> list[Finished]:
        """A run past its timeout fails; a batch's events, of which any may be the one that
        hangs, are set apart instead (uncharged, each to run alone next)."""
        if together.shared(job):  # the batch that hangs is known: only its events set apart
            hung, backend_pid = self.together.hung(job)
            if backend_pid is not None:
                together.end_transaction(backend_pid)
            metrics.HANDLER_TIMEOUTS.labels(hung).inc()
            logger.error(
                "consumer %s: its batch hung in a shared batch job (%s); its %d events are set "
                "apart, the other %d given back, and it runs its batches alone for %.0fs",
                hung,
                ", ".join(sorted({e.consumer for e in job.events})),
                sum(e.consumer == hung for e in job.events),
                sum(e.consumer != hung for e in job.events),
                together.ALONE_SECONDS,
                extra={"consumer": hung},
            )
            return [
                Finished(job.single(e), "set_apart" if e.consumer == hung else "released")
                for e in job.events
            ]
        metrics.HANDLER_TIMEOUTS.labels(job.event.consumer).inc()
        if job.rest:
            return [Finished(job.single(e), "set_apart") for e in job.events]
        exc = HandlerTimeout(f"handler still running after {elapsed:.1f}s (timeout {job.timeout}s)")
        return [Finished(job, "failed", failure(job.event, exc, elapsed))]

    # -- probes -------------------------------------------------------------------------------

    def _probe(self, paused: dict[str, str]) -> int:
        """The circuit breaker's due probes (not while an isolated delivery runs alone)."""
        if self._alone:
            return 0
        probes = breaker.claim_probes(paused, worker_id=self.worker_id)
        for batch in probes:
            self._submit(batch)
        return len(probes)

    # -- claiming -----------------------------------------------------------------------------

    def _claim(self) -> int:
        if not self.names:
            return 0
        if self._alone:
            if self.in_flight:
                return 0
            self._alone = False
            self._next_isolation_check = 0.0  # the next one may be waiting too
        now = time.monotonic()
        if now >= self._next_isolation_check:
            self._next_isolation_check = now + ISOLATION_CHECK_SECONDS
            self._isolated_waiting = claims.isolated_due(self.names)
        if self._isolated_waiting:
            return self._claim_isolated()
        return self._claim_batch()

    def _claim_isolated(self) -> int:
        if self.in_flight:
            return 0  # let what runs finish first: the isolated one runs alone
        batch = claims.claim_isolated(consumers=self.names, worker_id=self.worker_id)
        self._isolated_waiting = bool(batch.events)
        self._alone = bool(batch.events)
        self._submit(batch)
        return len(batch.events)

    def _overlapping(self) -> bool:
        """Claim ahead and settle while handlers run: only when they mostly wait on I/O (see
        SlotPool.cpu_share); CPU-bound handlers run a batch, then it is settled, then the next
        is claimed, as one thread would."""
        overlapping = self.pool.cpu_share() < CPU_BOUND_SHARE
        self.pool.quiet = not overlapping
        return overlapping

    def _claim_batch(self) -> int:
        if self._overlapping():
            if self.pool.queued > self._low_water:
                return 0
        elif self.in_flight:
            return 0  # CPU-bound: the next batch once this one is settled
        if self.pool.stuck(bus_settings.STUCK_RELEASE_SECONDS):
            return 0  # every slot is stuck: claiming would only hold work from other workers
        size = self._room()
        if size <= 0:
            return 0
        batch = claims.claim(
            consumers=self.names, batch_size=size, worker_id=self.worker_id, per_key=size
        )
        self._claimed(len(batch.events))
        self._submit(batch)
        return len(batch.events)

    def _submit(self, batch: claims.Claim) -> None:
        if batch.events:
            self._enqueue(batch.token, batch.ids, self._jobs(batch))

    def _jobs(self, batch: claims.Claim) -> list[Job]:
        """The claim's jobs, oldest first: one per delivery, and per batch or atomic consumer
        one per (organization, lane) group of up to `batch` (EVENTBUS["ATOMIC_GROUP"]) deliveries (a
        handler call, a transaction, never mixes tenants; an ordered key's deliveries stay on
        their lane, in order)."""
        batch.events.sort(key=_EMIT_ORDER)  # oldest first within the claim
        timeouts = {name: c.timeout_seconds() for name, c in self.consumers.items()}
        token = batch.token
        if not self.batches:
            return [Job(token, e, timeouts[e.consumer], _lane(e)) for e in batch.events]
        jobs: list[Job | None] = []  # a group's place is its first (oldest) delivery's
        groups: dict[tuple[str, object, str | None], tuple[int, list[Event]]] = {}
        for e in batch.events:
            size, lane = _group_size(self.consumers[e.consumer]), _lane(e)
            if size is None:
                jobs.append(Job(token, e, timeouts[e.consumer], lane))
                continue
            key = (e.consumer, e.organization_id, lane)
            place, group = groups.get(key) or groups.setdefault(key, (len(jobs), []))
            if not group:
                jobs.append(None)
            group.append(e)
            if len(group) == size:
                del groups[key]
                jobs[place] = Job(token, group[0], timeouts[e.consumer], lane, tuple(group[1:]))
        for (name, _, lane), (place, group) in groups.items():
            jobs[place] = Job(token, group[0], timeouts[name], lane, tuple(group[1:]))
        alone = self.together.alone()
        return together.join(
            [job for job in jobs if job is not None],
            lambda job: (
                job.lane is None
                and self.consumers[job.event.consumer].batch is not None
                and job.event.consumer not in alone
            ),
        )

    # -- settling -----------------------------------------------------------------------------

    def _settle(self) -> int:
        """Settle the finished runs per claim; on a database error the rest is kept."""
        if not self._results:
            return 0
        with self.settling:
            settled = self._settle_results()
        if not self._results:
            self._gathering_since = None
        return settled

    def _settle_results(self) -> int:
        # A committed result was acked under this claim's lease: never a lost one's.
        lost = self.leases.take_lost(
            r.job.event.delivery_id for r in self._results if r.kind != "committed"
        )
        if lost:
            self._results = [r for r in self._results if r.job.event.delivery_id not in lost]
        left = _by_claim(self._results)
        settled = 0
        try:
            for token, settlement in list(left.items()):
                settle(settlement, worker_id=self.worker_id)
                self.leases.settled(token, settlement.consumer_of)
                self.processed += settlement.processed
                settled += len(settlement.consumer_of)
                del left[token]
        finally:  # on a database error, what was not settled is kept for the next pass
            self._results = [r for r in self._results if r.job.token in left] if left else []
        if self._broken:  # forget the runs of claims no longer held
            held = self.leases.held()
            with self._broken_lock:
                self._broken.difference_update([b for b in self._broken if b[0] not in held])
        return settled

    # -- run_once: one batch inline ---------------------------------------------------------

    def run_batch(self) -> int:
        """Claim one batch (an isolated delivery alone, if one waits) and run it in this thread,
        then settle it. For tests and the fallback drain job: no slot threads, so no timeout
        (the job's own time limit bounds it), and the handlers share the caller's connection
        (each scoped to its tenant, then the connection back to the process's scope)."""
        self._settle()
        batch = None
        if claims.isolated_due(self.names):
            batch = claims.claim_isolated(consumers=self.names, worker_id=self.worker_id)
        if batch is None or not batch.events:
            size = self._room()
            batch = claims.claim(consumers=self.names, batch_size=size, worker_id=self.worker_id)
        try:
            for job in self._jobs(batch):
                outcome = self._run(job)
                self._results.extend(outcome if isinstance(outcome, list) else [outcome])
        finally:
            # The handlers ran inside their tenants on this thread's connection: the settle
            # (and the caller) get the process's default scope back.
            with contextlib.suppress(DatabaseError):
                rls.reset_scope()
        self._settle()
        return len(batch.events)


def run_job(consumer: Consumer, job: Job, on_connection_lost: Callable[[], None]) -> Finished:
    """Run one delivery's handler (in the caller's thread) and say what came of it.

    The handler runs inside the delivery's organization: the thread's connection is scoped to
    it (row-level security, core.rls), so a row of another tenant named by the payload is not
    there for it. The thread's connection stays scoped (the next delivery of the same tenant
    costs nothing): only handlers use it; the bus's own statements run on the pump's."""
    started = time.monotonic()
    try:
        rls.enter_tenant(job.event.organization_id)
        with _handling(job.event):
            _call(consumer, job.token, job.event)
    except BaseException as exc:  # recorded too: dramatiq's time limit, a handler's SystemExit
        return failed(job, exc, time.monotonic() - started, on_connection_lost)
    finally:
        _duration(consumer.name, job.event.event_type).observe(time.monotonic() - started)
    return Finished(job, "committed" if consumer.atomic else "done")


def run_batches_together(
    consumers: dict[str, Consumer], job: Job, on_lost: Callable[[], None], state: Together
) -> list[Finished]:
    """Several batch consumers' batches of one claim and organization (together.join) in one
    transaction: each handler called once, one ack of all their deliveries, one commit.
    Optimistic, as an atomic group: should a handler raise, the transaction is rolled back, that
    consumer runs alone from now on (together.Together), and each batch runs again on its own
    (run_batch_job: bisected, so only an event that fails alone is charged)."""
    runs = parts(job, {name: c.timeout_seconds() for name, c in consumers.items()})
    first = job.event
    try:
        rls.enter_tenant(first.organization_id)  # a shared job is of one organization
        with transaction.atomic():
            with connection.cursor() as cursor:  # the backend holding the transaction
                cursor.execute("SELECT pg_backend_pid()")
                backend_pid = cursor.fetchone()[0]
            for run in runs:
                consumer = consumers[run.event.consumer]
                state.running(job, consumer.name, backend_pid)
                started = time.monotonic()
                try:
                    with _handling(run.event):
                        cast(BatchHandler, consumer.handler)([e.upcast() for e in run.events])
                except BaseException as exc:
                    if not (together.conflict(exc) or connection_lost(exc)):
                        state.set_alone(consumer.name)  # its failure, not a passing conflict
                    raise
                finally:
                    _duration(consumer.name, first.event_type).observe(time.monotonic() - started)
            _ack_or_lost(job.token, [e.delivery_id for e in job.events])
    except BaseException as exc:
        if state.over(job) or isinstance(exc, LeaseLost):  # given up on, or taken over: fenced
            return released([job])
        if connection_lost(exc):
            return [failed(job.single(first), exc, 0.0, on_lost), *released([job])[1:]]
        outcomes: list[Finished] = []
        for run in runs:  # each on its own now
            state.running(job, run.event.consumer, None)
            outcomes += run_batch_job(consumers[run.event.consumer], run, on_lost)
        state.over(job)
        return outcomes
    state.over(job)
    return [Finished(job.single(e), "committed") for e in job.events]


def _group_size(consumer: Consumer) -> int | None:
    """How many deliveries one job of this consumer may hold (None: one, the plain path)."""
    if consumer.batch is not None:
        return consumer.batch
    group = bus_settings.ATOMIC_GROUP
    return group if consumer.atomic and group > 1 else None


def run_batch_job(consumer: Consumer, job: Job, on_lost: Callable[[], None]) -> list[Finished]:
    """Run a batch or atomic consumer's job (in the caller's thread) inside its organization.

    A batch consumer's events go to one handler call in one transaction with their ack. When
    the call fails, the halves are tried again, down to single events, so only an event that
    fails alone is charged. An atomic consumer's events run one by one in one transaction
    (`_AtomicGroup`: no savepoint until one fails, then a savepoint each): one that fails is
    rolled back alone and charged alone, and the others are acked together and committed once.
    Either way an ordered key's later events are released once one of its events did not
    succeed (they must not overtake it)."""
    if consumer.batch is None:
        return _run_atomic_group(consumer, job, on_lost)
    started = time.monotonic()
    outcomes: list[Finished] = []
    broken: set[str | None] = set()  # lanes (ordered keys) with an event that did not succeed
    first = job.event
    try:
        rls.enter_tenant(first.organization_id)  # the whole batch is of one organization
        with _handling(first):
            _run_part(consumer, job, list(job.events), outcomes, broken, on_connection_lost=on_lost)
    except BaseException as exc:  # entering the tenant failed: nothing ran
        done = {f.job.event.delivery_id for f in outcomes}
        left = [e for e in job.events if e.delivery_id not in done]
        outcomes.extend(failed(job.single(e), exc, 0.0, on_lost) for e in left[:1])
        outcomes.extend(Finished(job.single(e), "released") for e in left[1:])
    finally:
        _duration(consumer.name, first.event_type).observe(time.monotonic() - started)
    return outcomes


def _run_part(
    consumer: Consumer,
    job: Job,
    events: list[Event],
    outcomes: list[Finished],
    broken: set[str | None],
    *,
    on_connection_lost: Callable[[], None],
) -> None:
    """One handler call for `events` (those whose key is not broken), bisected on failure."""
    if None in broken:  # the connection died: nothing more runs
        outcomes.extend(Finished(job.single(e), "released") for e in events)
        return
    runnable = events
    if broken:
        runnable = [e for e in events if e.ordering_key is None or _lane(e) not in broken]
        held_back = [e for e in events if e.ordering_key is not None and _lane(e) in broken]
        outcomes.extend(Finished(job.single(e), "released") for e in held_back)
        if not runnable:
            return
    started = time.monotonic()
    try:
        _call_batch(consumer, job.token, runnable)
    except BaseException as exc:
        if len(runnable) == 1:
            outcome = failed(job.single(runnable[0]), exc, time.monotonic() - started, lambda: None)
            outcomes.append(outcome)
            if outcome.kind == "released":  # the connection died, not the handler
                broken.add(None)
                on_connection_lost()
            elif runnable[0].ordering_key is not None:
                broken.add(_lane(runnable[0]))
            return
        if isinstance(exc, LeaseLost):  # taken over (this run was given up on, or stalled):
            outcomes.extend(Finished(job.single(e), "released") for e in runnable)  # fenced
            return
        if connection_lost(exc):
            outcomes.append(failed(job.single(runnable[0]), exc, 0.0, lambda: None))
            outcomes.extend(Finished(job.single(e), "released") for e in runnable[1:])
            broken.add(None)
            on_connection_lost()
            return
        half = len(runnable) // 2
        for part in (runnable[:half], runnable[half:]):
            _run_part(consumer, job, part, outcomes, broken, on_connection_lost=on_connection_lost)
        return
    outcomes.extend(Finished(job.single(e), "committed") for e in runnable)


class _FirstFailure(Exception):
    """A handler of a group run without savepoints raised: its transaction is rolled back, and the
    group runs again with a savepoint each, the failed delivery set apart with its error."""


class _AtomicGroup:
    """An atomic consumer's deliveries of one claim, organization and key, in one transaction.

    Optimistic: the first pass runs every handler without a savepoint (a savepoint and its
    release are two more round trips per delivery). Should one raise, that transaction is rolled
    back and a second pass runs the rest with a savepoint each, the failed delivery kept out of
    it with its error (it ran once, as any failure). So the handlers before it run twice, their
    first writes rolled back: the documented risk of a group that does not commit."""

    def __init__(self, consumer: Consumer, job: Job) -> None:
        self.consumer = consumer
        self.job = job
        self.started = time.monotonic()
        self.ran: list[Event] = []  # succeeded inside the transaction (committed if it commits)
        self.raised: list[tuple[Event, BaseException, float]] = []
        self.unstarted: list[Event] = []

    def run(self, *, savepoints: bool) -> None:
        """One pass: the handlers, then one ack of those that succeeded, then the commit."""
        handler = cast(Handler, self.consumer.handler)
        budget = self.job.timeout * ATOMIC_GROUP_SHARE
        kept_out = {e.delivery_id for e, _, _ in self.raised}  # failed in the first pass
        self.ran, self.unstarted = [], []
        broken = False  # a delivery before this one failed: a keyed one waits for its retry
        with transaction.atomic():
            for event in self.job.events:
                if event.delivery_id in kept_out:
                    broken = True
                    continue
                if (broken and event.ordering_key is not None) or (
                    event is not self.job.event and time.monotonic() - self.started > budget
                ):
                    self.unstarted.append(event)  # after its key's failure, or past the budget
                    continue
                began = time.monotonic()
                try:
                    with (
                        _handling(event),
                        transaction.atomic() if savepoints else contextlib.nullcontext(),
                    ):
                        handler(event.upcast())
                except BaseException as exc:  # recorded too, as a single run's (run_job)
                    if connection_lost(exc):
                        raise
                    self.raised.append((event, exc, time.monotonic() - began))
                    broken = True
                    if not savepoints:
                        raise _FirstFailure from exc  # rolls this pass back
                else:
                    self.ran.append(event)
                finally:
                    _duration(self.consumer.name, event.event_type).observe(
                        time.monotonic() - began
                    )
            ids = [e.delivery_id for e in self.ran]
            if ids:
                _ack_or_lost(self.job.token, ids)


def _run_atomic_group(consumer: Consumer, job: Job, on_lost: Callable[[], None]) -> list[Finished]:
    group = _AtomicGroup(consumer, job)
    try:
        rls.enter_tenant(job.event.organization_id)  # the whole group is of one organization
        try:
            group.run(savepoints=False)
        except _FirstFailure:
            group.run(savepoints=True)
    except BaseException as exc:  # nothing committed: what ran is given back uncharged
        if isinstance(exc, LeaseLost):
            pass  # taken over: the release is fenced, as the failures' nack
        elif connection_lost(exc):
            failed(job.single(job.event), exc, 0.0, on_lost)  # logs, reconnects, tells the pump
        else:
            logger.warning(
                "an atomic group of %d deliveries did not commit: %s", len(group.ran), exc
            )
        done = {e.delivery_id for e, _, _ in group.raised}
        return [
            *(failed(job.single(e), x, t, on_lost) for e, x, t in group.raised),
            *(Finished(job.single(e), "released") for e in job.events if e.delivery_id not in done),
        ]
    return [
        *(Finished(job.single(e), "committed") for e in group.ran),
        *(failed(job.single(e), x, t, on_lost) for e, x, t in group.raised),
        *(Finished(job.single(e), "released") for e in group.unstarted),
    ]


def _call_batch(consumer: Consumer, token: uuid.UUID, events: list[Event]) -> None:
    handler = cast(BatchHandler, consumer.handler)
    ids = [e.delivery_id for e in events]
    with transaction.atomic():
        handler([e.upcast() for e in events])
        _ack_or_lost(token, ids)


def released(jobs: Sequence[Job]) -> list[Finished]:
    """Each event of these jobs given back unstarted."""
    return [Finished(job.single(e), "released") for job in jobs for e in job.events]


def run_adopted(consumer: Consumer, token: uuid.UUID, event: Event, *, worker_id: str) -> str:
    """Run and settle one delivery the jobs process adopted: "done", "failed" or "released"."""
    finished = run_job(consumer, Job(token, event, consumer.timeout_seconds()), lambda: None)
    # The jobs process's thread runs platform jobs too: back to its own (unscoped) default.
    with contextlib.suppress(DatabaseError):  # a failed reset closed the connection: default again
        rls.reset_scope()
    for settlement in _by_claim([finished]).values():
        settle(settlement, worker_id=worker_id)
    breaker.flush()  # when due: the jobs process has no runner to do it
    return {"committed": "done"}.get(finished.kind, finished.kind)


def failed(
    job: Job, exc: BaseException, elapsed: float, on_connection_lost: Callable[[], None]
) -> Finished:
    """A run that raised: released when the worker's own connection died, else a failure (a
    cross-tenant refusal is audited first, its handler's transaction already rolled back)."""
    if isinstance(exc, SecurityRefusal):
        record_refusal(exc)
    if connection_lost(exc):
        logger.warning(
            "delivery %s: the worker's database connection failed during the run (%s); "
            "released, not charged",
            job.event.delivery_id,
            exc,
            extra=log_ids(job.event),
        )
        with contextlib.suppress(Exception):
            connection.close()  # this thread reconnects on its next query
        on_connection_lost()
        return Finished(job, "released")
    return Finished(job, "failed", failure(job.event, exc, elapsed))


def record_refusal(refused: SecurityRefusal) -> None:
    """Audit a handler's security refusal (eventbus.store.tenancy); a failure to audit is logged,
    never the run's outcome."""
    logger.warning(
        "%s", refused, extra={"event_id": refused.event_id, "consumer": refused.consumer}
    )
    try:
        refused.record()
    except DatabaseError:
        logger.exception("could not audit a security refusal (%s)", refused)


_DURATIONS: dict[tuple[str, str], Histogram] = {}


def _duration(consumer: str, event_type: str) -> Histogram:
    """The handler-duration histogram child of (consumer, event type), looked up once."""
    child = _DURATIONS.get((consumer, event_type))
    if child is None:
        label = metrics.processed_event_type(event_type)
        child = _DURATIONS[consumer, event_type] = metrics.HANDLER_DURATION.labels(consumer, label)
    return child


def _by_claim(results: Sequence[Finished]) -> dict[uuid.UUID, Settlement]:
    settlements = by_token((r.job.token, r.job.event) for r in results)
    s: Settlement | None = None
    lists: dict[str, list[int]] = {}
    for job, kind, failure_ in results:
        if s is None or s.token is not job.token:  # a claim's results mostly come together
            s = settlements[job.token]
            lists = {
                "done": s.done,
                "committed": s.committed,
                "released": s.released,
                "set_apart": s.set_apart,
            }
        if failure_ is not None:
            s.failures.append(failure_)
        else:
            lists[kind].append(job.event.delivery_id)
    return settlements


def _call(consumer: Consumer, token: uuid.UUID, event: Event) -> None:
    event = event.upcast()  # the latest payload version the catalog's upcasters reach
    handler = cast(Handler, consumer.handler)
    if not consumer.atomic:
        handler(event)
        return
    with transaction.atomic():
        handler(event)
        _ack_or_lost(token, [event.delivery_id])


def _ack_or_lost(token: uuid.UUID, ids: list[int]) -> None:
    """Ack deliveries inside the caller's transaction (atomic, batch): a lost lease raises, so
    the transaction rolls back with nothing committed."""
    if claims.ack(token, ids) != len(ids):
        raise LeaseLost(f"deliveries {ids}: lease lost before commit")


@contextlib.contextmanager
def _handling(event: Event) -> Iterator[None]:
    """What a handler run of `event` is bound to: its correlation ids and log fields, and the
    event as the cause of whatever the handler emits."""
    with context.run_scope(_correlation(event), log_ids(event)), provenance.handling(event):
        yield


def failure(event: Event, exc: BaseException, elapsed: float) -> claims.Failure:
    """A failed run as the nack records it (retry per the table, or dead), logged."""
    verdict = judge_failure(
        exc,
        attempt=event.attempt,
        max_attempts=event.max_attempts,
        schedule=bus_settings.RETRY_SCHEDULE,
        jitter=bus_settings.RETRY_JITTER,
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
    return claims.Failure(event.delivery_id, verdict, int(elapsed * 1000))


def connection_lost(exc: BaseException) -> bool:
    """Whether `exc` came from this thread's database connection dying, not from the handler's
    own statement (a statement timeout or a constraint leaves the connection usable)."""
    if not isinstance(exc, InterfaceError | OperationalError | psycopg.Error):
        return False
    raw = connection.connection
    if raw is None or raw.closed or raw.broken:
        return True
    if raw.info.transaction_status == TransactionStatus.INERROR:
        return False  # inside a caller's failed transaction (tests): the handler's error
    try:
        raw.execute("SELECT 1")
    except psycopg.Error:
        return True
    return False


# Deliveries are numbered as they are emitted: oldest first, with a C-level sort key.
_EMIT_ORDER = attrgetter("delivery_id")


def _lane(event: Event) -> str | None:
    """The slot pool's lane of an ordered consumer's delivery: its (consumer, organization,
    key); None (no lane) for the rest."""
    if event.ordering_key is None:
        return None
    return f"{event.consumer}\x1f{event.organization_id}\x1f{event.ordering_key}"


def _correlation(event: Event) -> dict[str, str]:
    """What a handler run binds: the event's correlation ids, the consumer as the source, and
    the event as the cause of whatever the handler emits (R-S3)."""
    return {
        **event.correlation,
        "source": f"consumer:{event.consumer}",
        "causation_id": str(event.id),
    }


def log_ids(event: Event) -> dict[str, object]:
    """The ids a handler run's log records carry (core.context.bind_log / run_scope)."""
    return {
        "organization_id": event.organization_id,
        "event_id": event.id,
        "delivery_id": event.delivery_id,
        "consumer": event.consumer,
    }
