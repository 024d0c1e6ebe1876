"""The worker registry: every long-running process registers itself and heartbeats, so the
console can show what runs, where, how busy, and which processes stopped answering.

`Presence` is what a process starts: one row in `core_worker_process`, then a heartbeat (in
flight, last claim, leader) every WORKERS["HEARTBEAT_SECONDS"], never on the process's working
connection, so a busy handler or a failed transaction does not silence it. By default it beats
from a daemon thread of its own, on a connection opened for each beat; a process that already
has a thread beating on a connection of its own (the bus's runner: its lease heartbeat) passes
`execute=on_this_threads_connection` and calls `tick()` from that thread: one connection
fewer. A clean exit marks the row stopped; a killed process just stops beating and is shown
stale after WORKERS["STALE_AFTER_BEATS"] missed beats. Rows older than
WORKERS["PURGE_AFTER_HOURS"] are deleted by whoever registers next, and by the `workers-purge`
job (jobs/housekeeping.py), which also deletes rows stopped more than
WORKERS["KEEP_STOPPED_MINUTES"] ago: a stopped process is shown for a while, then goes.

Quiet and stop (`ask`, from the console's workers page, audited): an operator asks a process to
claim nothing more (quiet: what it holds still runs) or to finish and exit (stop: as on SIGTERM).
The request is a column of its row; every beat reads it back, and a process that can obey (the
bus's runner passes `on_command`) acts on it within one heartbeat and reports its `mode`.

It sits in core because every process kind uses it: the bus's runner (drain_events,
deliver_webhooks), the jobs process (jobs.brokers.WorkerPresence, a dramatiq middleware) and the
scheduler (jobs.scheduler); none of them may import another's layer.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from django.db import DatabaseError, connection
from django.utils import timezone

from core import audit
from core.conf import AppSettings
from core.db import conninfo
from core.models import WorkerProcess
from core.version import version

logger = logging.getLogger(__name__)


class WorkerSettings(AppSettings, namespace="WORKERS"):
    """The registry's knobs (settings.WORKERS, from WORKER_* in the environment)."""

    HEARTBEAT_SECONDS: float = 10.0
    STALE_AFTER_BEATS: int = 3
    PURGE_AFTER_HOURS: float = 24.0
    KEEP_STOPPED_MINUTES: float = 60.0


worker_settings = WorkerSettings()

# The upsert keeps the id's row (a restarted process gets a new id: a random suffix).
REGISTER_SQL = """
INSERT INTO core_worker_process
       (id, kind, host, pid, version, pumps, concurrency, threads, in_flight, leader, started_at,
        heartbeat_at, last_claim_at, stopped_at, mode, command, command_by, command_at)
VALUES (%(id)s, %(kind)s, %(host)s, %(pid)s, %(version)s, %(pumps)s, %(concurrency)s,
        %(threads)s::jsonb, 0, false, %(now)s, %(now)s, NULL, NULL, 'running', '', '', NULL)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at, stopped_at = NULL
"""

# worker_heartbeat_idx serves the purge: rows silent for too long (killed processes), and rows
# of processes that stopped cleanly a while ago.
PURGE_SQL = """
DELETE FROM core_worker_process
 WHERE heartbeat_at < %(before)s
    OR stopped_at < %(stopped_before)s
"""

# The beat reads back what an operator asked of the process (nothing: no row, so not registered).
BEAT_SQL = """
UPDATE core_worker_process
   SET heartbeat_at = %(now)s, in_flight = %(in_flight)s, leader = %(leader)s,
       last_claim_at = coalesce(%(last_claim_at)s, last_claim_at), mode = %(mode)s
 WHERE id = %(id)s
RETURNING command
"""

# Asked of a live process only; a stop is never turned back into a quiet.
ASK_SQL = """
UPDATE core_worker_process
   SET command = %(command)s, command_by = %(actor)s, command_at = %(now)s
 WHERE id = %(id)s AND stopped_at IS NULL AND command <> 'stop' AND command <> %(command)s
RETURNING kind, pid
"""

STOPPED_SQL = """
UPDATE core_worker_process SET stopped_at = %(now)s, in_flight = 0, leader = false
 WHERE id = %(id)s
"""


Rows = list[tuple[Any, ...]]
Execute = Callable[[str, dict[str, Any]], Rows]
COMMANDS = ("quiet", "stop")


def on_a_new_connection(sql: str, params: dict[str, Any]) -> Rows:
    """Run one statement on a connection of its own, opened for it (the default); its rows."""
    with psycopg.connect(conninfo(), autocommit=True, connect_timeout=5) as conn:
        cursor = conn.execute(sql, _adapted(params))
        return cursor.fetchall() if cursor.description else []


def on_this_threads_connection(sql: str, params: dict[str, Any]) -> Rows:
    """Run one statement on the calling thread's Django connection (autocommit); its rows."""
    with connection.cursor() as cursor:
        cursor.execute(sql, _adapted(params))
        return list(cursor.fetchall()) if cursor.description else []


def _adapted(params: dict[str, Any]) -> dict[str, Any]:
    """The threads map as JSON text (a jsonb column) for either connection."""
    if isinstance(params.get("threads"), dict):
        return {**params, "threads": json.dumps(params["threads"], sort_keys=True)}
    return params


@dataclass(frozen=True)
class Sample:
    """What a heartbeat reports about the process right now."""

    in_flight: int = 0
    last_claim_at: dt.datetime | None = None
    leader: bool = False
    mode: str = "running"  # or "quiet": claims nothing more (as an operator asked)


class Presence:
    """This process in the registry: `start()` registers it and starts the heartbeat thread (or
    the owner calls `tick()` every `interval()` from a thread of its own), `stop()` marks it
    stopped. `sample()` is called on every beat; `on_command(command)` (for a process that obeys
    quiet and stop) once for each new command an operator asked of it."""

    def __init__(
        self,
        *,
        kind: str,
        concurrency: int = 1,
        pumps: str = "",
        threads: dict[str, int] | None = None,
        sample: Callable[[], Sample] = Sample,
        execute: Execute = on_a_new_connection,
        on_command: Callable[[str], None] | None = None,
    ) -> None:
        self.kind = kind
        self.concurrency = concurrency
        self.pumps = pumps
        self.threads = threads or {}
        self.sample = sample
        self.on_command = on_command
        self.id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.version = version()
        self._execute = execute
        self._registered = False
        self._command = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def interval() -> float:
        """Seconds between two beats (WORKERS["HEARTBEAT_SECONDS"], read at call time)."""
        return worker_settings.HEARTBEAT_SECONDS

    def start(self) -> None:
        """Register (purging very old rows) and beat, both from a daemon thread: the process's
        start-up does not wait for it."""
        self._thread = threading.Thread(target=self._beat_loop, name="worker-presence", daemon=True)
        self._thread.start()

    def register(self) -> None:
        """The row of this process, and the purge of old rows (one connection)."""
        self._execute(REGISTER_SQL, self._row())
        self._execute(PURGE_SQL, purge_bounds(timezone.now()))

    def stop(self) -> None:
        """A clean exit: stop beating and say so."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self._execute(STOPPED_SQL, {"id": self.id, "now": timezone.now()})
        except (psycopg.Error, DatabaseError) as exc:
            logger.warning("worker %s could not mark itself stopped (%s)", self.id, exc)

    def beat(self) -> None:
        """One heartbeat (the thread's; tests call it directly), then what was asked of it."""
        now = self.sample()
        params = {"id": self.id, "now": timezone.now(), **now.__dict__}
        rows = self._execute(BEAT_SQL, params)
        if not rows:  # not registered yet, or purged while stalled
            self.register()
            rows = self._execute(BEAT_SQL, params)
        self._obey(str(rows[0][0]) if rows else "")

    def _obey(self, command: str) -> None:
        if command == self._command or command not in COMMANDS:
            return
        self._command = command
        logger.info("worker %s: asked to %s from the console", self.id, command)
        if self.on_command is not None:
            self.on_command(command)

    def tick(self) -> None:
        """The registration first, then a beat each call; a database error is logged, and the
        next call tries again."""
        try:
            if self._registered:
                self.beat()
            else:
                self.register()
                self._registered = True
        except (psycopg.Error, DatabaseError) as exc:
            logger.warning("worker %s heartbeat failed (%s)", self.id, exc)

    def _beat_loop(self) -> None:
        while True:
            self.tick()
            if self._stop.wait(self.interval()):
                return

    def _row(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "host": self.id.rsplit(":", 2)[0],
            "pid": os.getpid(),
            "version": self.version,
            "pumps": self.pumps,
            "concurrency": self.concurrency,
            "threads": self.threads,
            "now": timezone.now(),
        }


def purge_bounds(now: dt.datetime) -> dict[str, dt.datetime]:
    """PURGE_SQL's bounds: silent for WORKERS["PURGE_AFTER_HOURS"], or stopped for
    WORKERS["KEEP_STOPPED_MINUTES"]."""
    return {
        "before": now - dt.timedelta(hours=worker_settings.PURGE_AFTER_HOURS),
        "stopped_before": now - dt.timedelta(minutes=worker_settings.KEEP_STOPPED_MINUTES),
    }


def purge(*, now: dt.datetime | None = None) -> int:
    """Delete the rows of processes stopped a while ago or silent for too long (the
    `workers-purge` job); returns how many."""
    with connection.cursor() as cursor:
        cursor.execute(PURGE_SQL, purge_bounds(now or timezone.now()))
        return cursor.rowcount


class NotAsked(ValueError):
    """The command was not recorded: no such live process, or it was asked already."""


def ask(worker_id: str, command: str, *, actor: str, reason: str = "") -> WorkerProcess:
    """Ask a live process to be quiet (claim nothing more) or to stop (finish and exit), audited.
    The process acts on it within one heartbeat. Raises NotAsked."""
    if command not in COMMANDS:
        raise NotAsked(f"unknown command {command!r}: quiet or stop")
    with connection.cursor() as cursor:
        cursor.execute(
            ASK_SQL, {"id": worker_id, "command": command, "actor": actor, "now": timezone.now()}
        )
        row = cursor.fetchone()
    if row is None:
        raise NotAsked(
            f"{worker_id}: no such live process, or it was asked to {command} (or stop) already"
        )
    audit.record(
        actor=actor,
        action=f"worker.{command}",
        target_type="core.workerprocess",
        target_id=worker_id[:100],
        reason=reason,
        details={"kind": row[0], "pid": row[1]},
    )
    return WorkerProcess.objects.get(pk=worker_id)


@dataclass(frozen=True)
class WorkerRow:
    """A registered process as the console shows it."""

    process: WorkerProcess
    state: str  # "alive", "stale" (missed beats) or "stopped" (exited cleanly)
    silent_seconds: float


def workers(*, now: dt.datetime | None = None) -> list[WorkerRow]:
    """Every registered process, alive first, then by kind and start."""
    now = now or timezone.now()
    stale_after = worker_settings.HEARTBEAT_SECONDS * worker_settings.STALE_AFTER_BEATS
    processes = WorkerProcess.objects.order_by("kind", "started_at")
    rows = [_row_of(p, now, stale_after) for p in processes]
    order = {"alive": 0, "stale": 1, "stopped": 2}
    return sorted(rows, key=lambda r: order[r.state])


def _row_of(process: WorkerProcess, now: dt.datetime, stale_after: float) -> WorkerRow:
    silent = (now - process.heartbeat_at).total_seconds()
    if process.stopped_at is not None:
        state = "stopped"
    else:
        state = "stale" if silent > stale_after else "alive"
    return WorkerRow(process, state, max(0.0, silent))
