"""The scheduler: django-celery-beat's `DatabaseScheduler` firing jobs into dramatiq, one leader.

Schedules live in django-celery-beat's tables (editable in the admin; an edit takes effect on the
next tick). Each `PeriodicTask.task` names a job (`jobs.registry`); firing it enqueues that job's
dramatiq actor with the schedule slot, never a Celery message.

Several schedulers may run: only the holder of a PostgreSQL advisory lock (taken on its own
connection) fires. Standbys retry the lock every STANDBY_INTERVAL seconds; when the leader dies its
connection closes, the lock is released and a standby takes over within seconds, rereading the
schedule (last run times are saved after every firing). Jobs are idempotent per slot as well, so
the rare slot fired twice around a takeover still runs once.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
from typing import Any

import psycopg
from celery import schedules
from django.utils import timezone
from django_celery_beat.models import PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler, ModelEntry

from core.db import conninfo
from core.workers import Presence, Sample
from jobs.registry import job_enqueue, jobs

logger = logging.getLogger(__name__)

# pg_try_advisory_lock key of the scheduler leader (any constant shared by all schedulers).
LEADER_LOCK_KEY = 0x44_43_53_43  # "DCSC"
STANDBY_INTERVAL = 1.0


def schedule_slot(schedule: Any, now: dt.datetime) -> str:
    """The slot a firing belongs to, the same whichever scheduler fires it.

    Intervals: `now` rounded down to a multiple of the period since the epoch (two firings of one
    interval schedule are at least a period apart, so they never share a slot). Crontab and other
    schedules (minute resolution): `now` rounded down to the minute.
    """
    now = now.astimezone(dt.UTC)
    if isinstance(schedule, schedules.schedule) and not isinstance(schedule, schedules.crontab):
        period = max(1, int(schedule.run_every.total_seconds()))
        start = int(now.timestamp()) // period * period
        return dt.datetime.fromtimestamp(start, dt.UTC).isoformat()
    return now.replace(second=0, microsecond=0).isoformat()


class RunRecordingEntry(ModelEntry):
    """A schedule entry whose save writes only its run bookkeeping.

    django-celery-beat's entry reads the whole row and saves it back, so an admin edit committed
    between that read and that write (say, disabling the task) was silently undone and the task
    kept firing. One UPDATE of the two columns the scheduler owns leaves every other column, and
    a task disabled meanwhile, as the operator left it.
    """

    def save(self) -> None:
        PeriodicTask.objects.filter(pk=self.model.pk, enabled=True).update(
            last_run_at=self.model.last_run_at, total_run_count=self.model.total_run_count
        )


class LeaderDatabaseScheduler(DatabaseScheduler):
    """DatabaseScheduler that fires only while it holds the leader lock, into dramatiq."""

    Entry = RunRecordingEntry

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.identity = f"{socket.gethostname()}:{os.getpid()}"
        self._lock_conn: psycopg.Connection[Any] | None = None
        self.is_leader = False
        self.presence: Presence | None = None
        super().__init__(*args, **kwargs)

    def tick(self, *args: Any, **kwargs: Any) -> float:
        if self.presence is None:  # in the worker registry from the first tick on
            self.presence = Presence(kind="run_scheduler", pumps="scheduler", sample=self._sample)
            self.presence.start()
        if not self._hold_leadership():
            return STANDBY_INTERVAL
        interval: float = super().tick(*args, **kwargs)
        return interval

    def apply_async(
        self, entry: Any, producer: Any = None, advance: bool = True, **kwargs: Any
    ) -> None:
        entry = self.reserve(entry) if advance else entry
        try:
            self._fire(entry)
        finally:
            self._tasks_since_sync += 1
            if self.should_sync():
                self._do_sync()

    def close(self) -> None:
        super().close()
        self._drop_lock_connection()
        if self.presence is not None:
            self.presence.stop()

    def _sample(self) -> Sample:
        return Sample(leader=self.is_leader)

    def _fire(self, entry: Any) -> None:
        if entry.task not in jobs.names():
            logger.error(
                "schedule %r names unknown job %r (known: %s): not fired",
                entry.name,
                entry.task,
                ", ".join(jobs.names()),
            )
            return
        slot = schedule_slot(entry.schedule, timezone.now())
        job_enqueue(name=entry.task, slot=slot)
        logger.info("scheduler %s fired %s slot %s", self.identity, entry.task, slot)

    def _hold_leadership(self) -> bool:
        try:
            if self._lock_conn is None or self._lock_conn.closed:
                self._lock_conn = psycopg.connect(conninfo(), autocommit=True)
            if self.is_leader:
                self._lock_conn.execute("SELECT 1")  # still connected, so still holding the lock
                return True
            row = self._lock_conn.execute(
                "SELECT pg_try_advisory_lock(%s)", [LEADER_LOCK_KEY]
            ).fetchone()
        except psycopg.Error as exc:
            if self.is_leader:
                logger.warning("scheduler %s lost its leader connection (%s)", self.identity, exc)
            self._drop_lock_connection()
            return False
        if not (row and row[0]):
            return False
        self._become_leader()
        return True

    def _become_leader(self) -> None:
        logger.info("scheduler %s is now the leader", self.identity)
        self.is_leader = True
        # Start from the database: the previous leader saved what it fired in last_run_at.
        self._initial_read = True
        self._heap = None

    def _drop_lock_connection(self) -> None:
        self.is_leader = False
        if self._lock_conn is not None:
            try:
                self._lock_conn.close()
            except psycopg.Error:
                logger.debug("closing the leader lock connection failed", exc_info=True)
        self._lock_conn = None
