"""Scheduled jobs: the registry, one recorded run per schedule slot, the hand-off to dramatiq.

A job is a named function returning the number of rows it processed, declared with `@cron.job`
in an app's `jobs.py` (imported at start-up) together with its default schedule. Each job is a
dramatiq actor of the same name (`jobs/actors.py`), fired by the scheduler and reachable as
`POST /api/v1/cron/<name>`. Every run tells the run listeners (`on_run`) `cron.started` and
then `cron.completed` or `cron.failed` (with `duration_ms` and `rows_processed`): the bus
records them in the event log of the system organization (`eventbus/operations/job_runs.py`); a
failure also alerts. A run for a schedule slot that already ran (or is running)
does nothing, so a slot fired twice runs once; a failed slot may be retried.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import dramatiq
from django.conf import settings
from django.db import connection
from django.utils import timezone
from dramatiq import Message

from core import context
from core.alerts import alert

logger = logging.getLogger(__name__)

JobFunction = Callable[[], int]

# Every job's actor consumes this queue (few queues: each holds a broker connection per process).
JOBS_QUEUE = "jobs"

# Claim a slot: a new run, or a retry of a failed one; nothing when the slot already ran or is
# running (a second firing of the same slot). Runs without a slot (HTTP, by hand) always start.
START_RUN_SQL = """
INSERT INTO deskcomm_jobrun (id, job, slot, trigger, status, attempt, error, started_at)
VALUES (%(id)s, %(job)s, %(slot)s, %(trigger)s, 'running', 1, '', %(now)s)
ON CONFLICT (job, slot) WHERE slot IS NOT NULL DO UPDATE
   SET status = 'running', attempt = deskcomm_jobrun.attempt + 1, error = '',
       trigger = EXCLUDED.trigger, started_at = EXCLUDED.started_at, finished_at = NULL
 WHERE deskcomm_jobrun.status = 'failed'
RETURNING id
"""

FINISH_RUN_SQL = """
UPDATE deskcomm_jobrun
   SET status = %(status)s, rows_processed = %(rows)s, duration_ms = %(duration_ms)s,
       error = %(error)s, finished_at = %(now)s
 WHERE id = %(id)s
"""


class JobFailed(Exception):
    """A job run failed (raised by its actor so dramatiq retries it, up to the job's attempts)."""


@dataclass(frozen=True)
class Job:
    """A named job and its default schedule (exactly one of `every` and `crontab`)."""

    name: str
    fn: JobFunction
    every: dt.timedelta | None = None
    crontab: str | None = None  # "minute hour day-of-month month day-of-week", in `timezone`
    description: str = ""
    timezone: str = "UTC"  # the crontab's own time zone field (e.g. "America/Sao_Paulo")


class JobRegistry:
    """Name -> Job."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}

    def register(self, job_: Job) -> None:
        if (job_.every is None) == (job_.crontab is None):
            raise ValueError(f"job {job_.name}: give exactly one of every= and crontab=")
        self._jobs[job_.name] = job_

    def get(self, name: str) -> Job:
        try:
            return self._jobs[name]
        except KeyError:
            raise KeyError(f"unknown job {name!r} (known: {', '.join(self.names())})") from None

    def names(self) -> list[str]:
        return sorted(self._jobs)

    def all(self) -> list[Job]:
        return [self._jobs[name] for name in self.names()]

    @contextmanager
    def temporarily(self, *extra: Job) -> Iterator[None]:
        """Register (or replace) jobs for the duration of a block (tests, one-off scripts)."""
        saved = dict(self._jobs)
        try:
            for job_ in extra:
                self.register(job_)
            yield
        finally:
            self._jobs = saved


jobs = JobRegistry()


def job(
    name: str,
    *,
    every: dt.timedelta | None = None,
    crontab: str | None = None,
    timezone: str = "UTC",
) -> Callable[[JobFunction], JobFunction]:
    """Declare `fn() -> rows_processed` as job `name` with its default schedule (a crontab is
    read in `timezone`, stored on the crontab's own time zone field)."""

    def decorate(fn: JobFunction) -> JobFunction:
        summary = (fn.__doc__ or "").strip().split("\n")[0]
        jobs.register(Job(name, fn, every, crontab, summary, timezone))
        return fn

    return decorate


_integration_checks: dict[str, JobFunction] = {}


def integration_check(name: str) -> Callable[[JobFunction], JobFunction]:
    """Declare `fn() -> things_checked` as one integration's part of the
    `health-check-integrations` job (each integration registers its own from its `jobs` module,
    so the job needs to import none of them)."""

    def decorate(fn: JobFunction) -> JobFunction:
        _integration_checks[name] = fn
        return fn

    return decorate


def run_integration_checks() -> int:
    """Every registered integration check, each even when another failed (the first error is
    raised after the others ran); the number of things checked."""
    checked, errors = 0, []
    for check in _integration_checks.values():
        try:
            checked += check()
        except Exception as exc:  # the other integrations are still checked
            errors.append(exc)
    if errors:
        raise errors[0]
    return checked


def job_setting(name: str, key: str, default: Any) -> Any:
    """A per-job knob from settings.JOBS (seed 004 §5: attempts, concurrency), at call time."""
    return getattr(settings, "JOBS", {}).get(name, {}).get(key, default)


_semaphores: dict[str, threading.BoundedSemaphore] = {}
_semaphores_lock = threading.Lock()


@contextmanager
def concurrency_slot(name: str) -> Iterator[None]:
    """Hold one of the job's CONCURRENCY slots in this process (no setting: no limit)."""
    limit = job_setting(name, "CONCURRENCY", None)
    if not limit:
        yield
        return
    with _semaphores_lock:
        semaphore = _semaphores.setdefault(name, threading.BoundedSemaphore(int(limit)))
    with semaphore:
        yield


@dataclass(frozen=True)
class RunResult:
    """The outcome of `job_run`; `status` is completed, failed or skipped (slot already run)."""

    job: str
    status: str
    run_id: uuid.UUID | None = None
    rows_processed: int = 0
    duration_ms: int = 0
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "status": self.status,
            "run_id": str(self.run_id) if self.run_id else None,
            "rows_processed": self.rows_processed,
            "duration_ms": self.duration_ms,
        }


def job_run(*, name: str, trigger: str, slot: str | None = None) -> RunResult:
    """Run job `name` once and record it (see the module docstring). Never raises for a job's
    own failure: the result says `failed` (and the failure was alerted)."""
    job_ = jobs.get(name)
    run_id = _start_run(name, trigger, slot)
    if run_id is None:
        logger.info("job %s slot %s already ran or is running: skipped", name, slot)
        return RunResult(name, "skipped")
    base = {"job": name, "run_id": str(run_id), "trigger": trigger, "slot": slot}
    with context.bind(source=f"cron:{name}"):
        _record("cron.started", run_id, base)
        started = time.monotonic()
        try:
            rows = int(job_.fn())
        except Exception as exc:
            return _failed(name, run_id, base, exc, _elapsed_ms(started))
        duration_ms = _elapsed_ms(started)
        _finish_run(run_id, "completed", rows, duration_ms, "")
        _record(
            "cron.completed", run_id, {**base, "duration_ms": duration_ms, "rows_processed": rows}
        )
    logger.info("job %s completed: %d rows in %d ms", name, rows, duration_ms)
    return RunResult(name, "completed", run_id, rows, duration_ms)


def job_enqueue(*, name: str, slot: str | None, trigger: str = "schedule") -> Message[Any]:
    """Hand a run of job `name` to the job broker (its dramatiq actor; attempts at call time)."""
    jobs.get(name)
    message: Message[Any] = Message(
        queue_name=JOBS_QUEUE,
        actor_name=name,
        args=(),
        kwargs={"slot": slot, "trigger": trigger},
        options={"max_retries": max(0, int(job_setting(name, "ATTEMPTS", 1)) - 1)},
    )
    enqueued: Message[Any] = dramatiq.get_broker().enqueue(message)
    return enqueued


def _failed(
    name: str, run_id: uuid.UUID, base: dict[str, Any], exc: Exception, duration_ms: int
) -> RunResult:
    error = f"{type(exc).__name__}: {exc}"[:2000]
    logger.exception("job %s failed after %d ms", name, duration_ms)
    _finish_run(run_id, "failed", 0, duration_ms, error)
    _record(
        "cron.failed",
        run_id,
        {**base, "duration_ms": duration_ms, "rows_processed": 0, "error": error},
    )
    alert(f"cron job {name} failed", job=name, run_id=str(run_id), error=error)
    return RunResult(name, "failed", run_id, 0, duration_ms, error)


def _start_run(name: str, trigger: str, slot: str | None) -> uuid.UUID | None:
    params: dict[str, Any] = {"id": uuid.uuid4(), "job": name, "slot": slot, "trigger": trigger}
    with connection.cursor() as cursor:
        cursor.execute(START_RUN_SQL, {**params, "now": timezone.now()})
        row = cursor.fetchone()
    return row[0] if row else None


def _finish_run(run_id: uuid.UUID, status: str, rows: int, duration_ms: int, error: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            FINISH_RUN_SQL,
            {
                "id": run_id,
                "status": status,
                "rows": rows,
                "duration_ms": duration_ms,
                "error": error,
                "now": timezone.now(),
            },
        )


#: Called as `listener(event_type, run_id, payload)` when a run starts and ends ("cron.started",
#: "cron.completed", "cron.failed"). The bus registers the one that records them as events.
RunListener = Callable[[str, uuid.UUID, dict[str, Any]], None]
_run_listeners: list[RunListener] = []


def on_run(listener: RunListener) -> None:
    """Call `listener` at each run's start and end, in the run's transaction and context."""
    if listener not in _run_listeners:
        _run_listeners.append(listener)


def _record(event_type: str, run_id: uuid.UUID, payload: dict[str, Any]) -> None:
    for listener in _run_listeners:
        listener(event_type, run_id, payload)


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def declare_actor(
    name: str, fn: Callable[..., None], *, queue_name: str, **options: Any
) -> dramatiq.Actor[Any, Any]:
    """Declare `fn` as the dramatiq actor `name`, run within the job's concurrency limit."""

    def run(*args: Any, **kwargs: Any) -> None:
        with concurrency_slot(name):
            fn(*args, **kwargs)

    run.__name__ = run.__qualname__ = name.replace("-", "_")
    run.__module__ = fn.__module__
    return dramatiq.actor(actor_name=name, queue_name=queue_name, **options)(run)


def run_scheduled(name: str, slot: str | None = None, trigger: str = "schedule") -> None:
    """The body of a job's actor: run it once for its slot; a failure raises so dramatiq retries
    it (up to the job's ATTEMPTS; the slot's record lets a failed slot run again)."""
    result = job_run(name=name, trigger=trigger, slot=slot)
    if result.status == "failed":
        raise JobFailed(f"job {name} failed: {result.error}")
