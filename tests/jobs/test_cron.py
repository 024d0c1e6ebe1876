"""Cron jobs: run records in the event log, slot idempotency, alerts, the hand-off to dramatiq."""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from collections.abc import Mapping

import pytest
from django.db import connection, transaction

from core.models import SYSTEM_ORGANIZATION_ID
from eventbus.store.models import EventLog
from jobs import registry as cron
from jobs.models import JobRun
from jobs.registry import Job, JobFailed, job_enqueue, job_run, jobs, run_scheduled

pytestmark = pytest.mark.django_db

ALERTS: list[tuple[str, Mapping[str, object]]] = []


def record_alert(subject: str, details: Mapping[str, object]) -> None:
    ALERTS.append((subject, details))


def counting_job(rows: int = 7) -> tuple[Job, list[int]]:
    calls: list[int] = []

    def fn() -> int:
        calls.append(1)
        return rows

    return Job("test-count", fn, every=dt.timedelta(minutes=1)), calls


def failing(_: int = 0) -> int:
    raise RuntimeError("disk full")


def cron_events(run_id: object) -> dict[str, dict[str, object]]:
    events = EventLog.objects.filter(entity_kind="cron_job", entity_id=run_id)
    assert {e.organization_id for e in events} <= {SYSTEM_ORGANIZATION_ID}
    return {e.event_type: e.payload for e in events}


def test_a_run_records_start_and_completion_with_duration_and_rows() -> None:
    job, calls = counting_job(7)
    with jobs.temporarily(job):
        result = job_run(name="test-count", trigger="http")
    assert (result.status, result.rows_processed, len(calls)) == ("completed", 7, 1)
    events = cron_events(result.run_id)
    assert set(events) == {"cron.started", "cron.completed"}
    completed = events["cron.completed"]
    assert completed["job"] == "test-count" and completed["rows_processed"] == 7
    assert isinstance(completed["duration_ms"], int) and completed["duration_ms"] >= 0
    run = JobRun.objects.get(pk=result.run_id)
    assert (run.status, run.rows_processed, run.trigger) == ("completed", 7, "http")


def test_a_failed_run_is_recorded_and_alerted(
    settings: object, caplog: pytest.LogCaptureFixture
) -> None:
    settings.ALERT_HOOKS = ["tests.jobs.test_cron.record_alert"]  # type: ignore[attr-defined]
    ALERTS.clear()
    with (
        jobs.temporarily(Job("test-fail", failing, every=dt.timedelta(minutes=1))),
        caplog.at_level(logging.ERROR),
    ):
        result = job_run(name="test-fail", trigger="schedule", slot="s1")
    assert result.status == "failed"
    failed = cron_events(result.run_id)["cron.failed"]
    assert failed["error"] == "RuntimeError: disk full"
    assert failed["rows_processed"] == 0 and isinstance(failed["duration_ms"], int)
    assert ALERTS and ALERTS[0][0] == "cron job test-fail failed"
    assert any("ALERT: cron job test-fail failed" in r.getMessage() for r in caplog.records)
    assert JobRun.objects.get(pk=result.run_id).status == "failed"


def test_a_slot_runs_once_and_a_failed_slot_may_run_again() -> None:
    job, calls = counting_job()
    with jobs.temporarily(job):
        assert job_run(name="test-count", trigger="schedule", slot="t1").status == "completed"
        assert job_run(name="test-count", trigger="schedule", slot="t1").status == "skipped"
        assert job_run(name="test-count", trigger="schedule", slot="t2").status == "completed"
    assert len(calls) == 2
    with jobs.temporarily(Job("test-count", failing, every=dt.timedelta(minutes=1))):
        assert job_run(name="test-count", trigger="schedule", slot="t3").status == "failed"
    with jobs.temporarily(job):
        assert job_run(name="test-count", trigger="schedule", slot="t3").status == "completed"
    assert JobRun.objects.get(job="test-count", slot="t3").attempt == 2


def test_the_actor_raises_on_failure_so_dramatiq_retries() -> None:
    with (
        jobs.temporarily(Job("test-fail", failing, every=dt.timedelta(minutes=1))),
        pytest.raises(JobFailed, match="disk full"),
    ):
        run_scheduled("test-fail", slot="x")


def test_enqueue_hands_the_named_actor_the_slot_and_the_attempts(settings: object) -> None:
    settings.JOBS = {"dlq-alert": {"ATTEMPTS": 3}}  # type: ignore[attr-defined]
    slot = f"{dt.datetime.now(dt.UTC).isoformat()}-test"
    job_enqueue(name="dlq-alert", slot=slot)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT queue_name, message FROM dramatiq.queue WHERE message->'kwargs'->>'slot' = %s",
            [slot],
        )
        [(queue, body)] = cursor.fetchall()
    message = json.loads(body)
    assert queue == "jobs"
    assert message["actor_name"] == "dlq-alert"
    assert message["kwargs"] == {"slot": slot, "trigger": "schedule"}
    assert message["options"]["max_retries"] == 2
    with pytest.raises(KeyError, match="unknown job"):
        job_enqueue(name="no-such-job", slot=None)


@pytest.mark.django_db(transaction=True)
def test_enqueue_is_transactional_on_the_postgres_broker() -> None:
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM dramatiq.queue WHERE queue_name = 'jobs'")

    class Rollback(Exception):
        pass

    with pytest.raises(Rollback), transaction.atomic():
        job_enqueue(name="dlq-alert", slot="rolled-back")
        raise Rollback
    with transaction.atomic():
        job_enqueue(name="dlq-alert", slot="committed")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT message->'kwargs'->>'slot' FROM dramatiq.queue WHERE queue_name = 'jobs'"
        )
        assert [row[0] for row in cursor.fetchall()] == ["committed"]


def test_concurrency_limits_runs_per_process(settings: object) -> None:
    settings.JOBS = {"test-count": {"CONCURRENCY": 2}}  # type: ignore[attr-defined]
    cron._semaphores.pop("test-count", None)
    inside, peak, lock = [0], [0], threading.Lock()
    release = threading.Event()

    def hold() -> None:
        with cron.concurrency_slot("test-count"):
            with lock:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            release.wait(2)
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=hold) for _ in range(4)]
    for thread in threads:
        thread.start()
    release.set()
    for thread in threads:
        thread.join()
    assert peak[0] == 2
