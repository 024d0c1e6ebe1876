"""Batch consumers' batches of one claim and organization run as one job: one transaction.

A claim of deliveries for three `batch=` consumers of the same events would otherwise be three
jobs, three transactions and three commits, each updating the same events' summary rows
(`event_log.consumed_by`). Run together they cost one commit and one summary update per event:
the batch drain then runs at about nine tenths of the no-op drain instead of two thirds
(docs/handlers-that-write.md). The run itself is eventbus.dispatch.drain.run_batches_together.

What joins: unordered batch consumers' jobs of one organization in one claim (an ordered
consumer's batch keeps its lane and runs on its own). What keeps them apart: a consumer whose
batch raised or hung inside a shared job runs its batches on its own for `ALONE_SECONDS`
(`Together.alone`), so one failing or slow consumer does not keep rolling back, or holding up,
the others'. Thread-safe: slot threads record which consumer runs; the loop thread reads it.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping

import psycopg
from django.db import DatabaseError, connection

from eventbus.dispatch.slots import Job
from eventbus.store.event import Event

logger = logging.getLogger(__name__)

# How long a consumer whose batch raised or timed out in a shared job runs on its own.
ALONE_SECONDS = 300.0


def shared(job: Job) -> bool:
    """Whether `job` holds several consumers' batches (`join`)."""
    return bool(job.rest) and job.rest[-1].consumer != job.event.consumer


def join(jobs: list[Job], joins: Callable[[Job], bool]) -> list[Job]:
    """The jobs `joins` accepts merged per organization, one batch per consumer in each merged
    job (a consumer's next batch starts or joins another), in the place of the first of them;
    a merged job's timeout is the sum of its parts' (each batch gets its own time)."""
    merged: list[Job] = []
    open_jobs: dict[uuid.UUID, list[tuple[int, set[str]]]] = {}  # organization -> merged jobs
    for job in jobs:
        if not joins(job):
            merged.append(job)
            continue
        name, of_org = job.event.consumer, open_jobs.setdefault(job.event.organization_id, [])
        target = next((entry for entry in of_org if name not in entry[1]), None)
        if target is None:
            of_org.append((len(merged), {name}))
            merged.append(job)
            continue
        place, names = target
        names.add(name)
        into = merged[place]
        merged[place] = Job(
            into.token, into.event, into.timeout + job.timeout, None, (*into.rest, *job.events)
        )
    return merged


def parts(job: Job, timeouts: Mapping[str, float]) -> list[Job]:
    """A shared job split back into one job per consumer, each with its consumer's timeout, in
    consumer name order: every worker's shared transactions then take the consumers' row locks
    in the same order (two workers running the same consumers in opposite orders deadlocked on
    each other's rows, and the server takes `deadlock_timeout`, a second, to say so)."""
    runs: dict[str, list[Event]] = {}
    for event in job.events:
        runs.setdefault(event.consumer, []).append(event)
    return [
        Job(job.token, run[0], timeouts[name], None, tuple(run[1:]))
        for name, run in sorted(runs.items())
    ]


def conflict(exc: BaseException) -> bool:
    """Whether `exc` is a transient conflict with another transaction (a deadlock or a
    serialization failure), no fault of the handler that met it."""
    return any(
        isinstance(e, psycopg.Error) and (e.sqlstate or "").startswith("40")  # SQLSTATE class 40
        for e in (exc, exc.__cause__)
    )


class Together:
    """Which consumer and server backend each shared job is running, which jobs were given up
    on (timed out), and which consumers run on their own."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        # job -> the consumer it runs, and the backend of its transaction (None: its own)
        self._running: dict[tuple[uuid.UUID, int], tuple[str, int | None]] = {}
        self._given_up: set[tuple[uuid.UUID, int]] = set()
        self._alone_until: dict[str, float] = {}

    @staticmethod
    def _key(job: Job) -> tuple[uuid.UUID, int]:
        return (job.token, job.event.delivery_id)

    def running(self, job: Job, consumer: str, backend_pid: int | None) -> None:
        """`job` now runs `consumer`'s batch, in the shared transaction of server backend
        `backend_pid` (None: in the batch's own, after the shared one failed)."""
        with self._lock:
            self._running[self._key(job)] = (consumer, backend_pid)

    def over(self, job: Job) -> bool:
        """`job`'s thread is done with it; True when it had been given up on (`hung`)."""
        key = self._key(job)
        with self._lock:
            self._running.pop(key, None)
            given_up = key in self._given_up
            self._given_up.discard(key)
        return given_up

    def hung(self, job: Job) -> tuple[str, int | None]:
        """`job` timed out: the consumer it was running (it runs alone from now on) and the
        backend whose shared transaction holds the writes of the batches before it (None: none
        to end)."""
        key = self._key(job)
        with self._lock:
            consumer, pid = self._running.pop(key, (job.event.consumer, None))
            self._given_up.add(key)
        self.set_alone(consumer)
        return consumer, pid

    def set_alone(self, consumer: str) -> None:
        """`consumer`'s batches run on their own for ALONE_SECONDS."""
        with self._lock:
            self._alone_until[consumer] = self._clock() + ALONE_SECONDS

    def alone(self) -> set[str]:
        """The consumers whose batches do not join others' now."""
        now = self._clock()
        with self._lock:
            for name in [n for n, until in self._alone_until.items() if until <= now]:
                del self._alone_until[name]
            return set(self._alone_until)


def end_transaction(backend_pid: int) -> None:
    """End a given-up job's server backend, so its open transaction (the writes of the batches
    that ran before the one that hung) is rolled back and their rows unlocked: those batches run
    again at once, and would otherwise wait on those locks (up to `DB_LOCK_TIMEOUT`) and be
    charged for it. A failure is logged: the idle-in-transaction timeout ends it later."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [backend_pid])
    except DatabaseError:
        logger.warning("could not end backend %s of a timed-out batch job", backend_pid)
