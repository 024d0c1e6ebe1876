"""Schedules and the scheduler: defaults by name, slots, one leader, real scheduler processes."""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import signal
import time
from collections.abc import Iterator

import pytest
from celery import schedules
from django.db import connection
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from core.models import WorkerProcess
from eventbus.store.models import EventLog
from jobs.celery import app
from jobs.models import JobRun
from jobs.registry import Job, jobs
from jobs.scheduler import STANDBY_INTERVAL, LeaderDatabaseScheduler, schedule_slot
from jobs.schedules import schedules_install
from tests.support.processes import Managed, start_jobs
from tests.support.schedules import every_second, fired_slots
from tests.support.waiting import wait_for

UTC = dt.UTC


# -- slots -------------------------------------------------------------------------------------


def test_interval_slots_are_aligned_and_never_shared_by_two_firings() -> None:
    every_minute = schedules.schedule(dt.timedelta(minutes=1))
    at = dt.datetime(2026, 1, 1, 12, 0, 59, 900000, tzinfo=UTC)
    assert schedule_slot(every_minute, at) == "2026-01-01T12:00:00+00:00"
    later = at + dt.timedelta(minutes=1)
    assert schedule_slot(every_minute, later) != schedule_slot(every_minute, at)


def test_crontab_slots_are_the_minute() -> None:
    daily = schedules.crontab(minute="30", hour="3")
    at = dt.datetime(2026, 1, 1, 3, 30, 4, tzinfo=UTC)
    assert schedule_slot(daily, at) == "2026-01-01T03:30:00+00:00"


# -- default schedules ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_every_job_has_a_schedule_and_every_schedule_names_a_job() -> None:
    schedules_install()
    tasks = {t.name: t for t in PeriodicTask.objects.all()}
    assert set(jobs.names()) <= set(tasks), "a job without a schedule"
    assert {t.task for t in tasks.values()} <= set(jobs.names()), "a schedule naming no job"
    assert all(tasks[name].enabled for name in jobs.names())
    assert tasks["event-log-reaper"].interval.every == 60  # type: ignore[union-attr]
    assert tasks["dlq-alert"].interval.every == 300  # type: ignore[union-attr]
    assert tasks["event-log-archive"].crontab is not None


@pytest.mark.django_db
def test_reinstalling_updates_untouched_defaults_and_keeps_operator_edits() -> None:
    assert schedules_install().unchanged == jobs.names()  # migrate installed them already
    reaper = PeriodicTask.objects.get(name="event-log-reaper")
    reaper.interval, _ = IntervalSchedule.objects.get_or_create(every=300, period="seconds")
    reaper.save()
    PeriodicTask.objects.filter(name="dlq-alert").update(enabled=False)
    PeriodicTask.objects.filter(name="process-pending-webhooks").delete()
    drain = jobs.get("event-log-drain")
    new_default = Job(drain.name, drain.fn, every=dt.timedelta(minutes=2))

    with jobs.temporarily(new_default):
        report = schedules_install()

    assert sorted(report.kept) == ["dlq-alert", "event-log-reaper"]
    assert report.updated == ["event-log-drain"]
    assert report.created == ["process-pending-webhooks"]
    assert PeriodicTask.objects.get(name="event-log-reaper").interval.every == 300  # type: ignore[union-attr]
    assert not PeriodicTask.objects.get(name="dlq-alert").enabled
    assert PeriodicTask.objects.get(name="event-log-drain").interval.every == 120  # type: ignore[union-attr]


# -- the scheduler in one process -------------------------------------------------------------


@pytest.fixture
def clean_queue(django_db_blocker: object) -> Iterator[None]:
    """No queued jobs, and only the schedules the test creates (migrate installs the defaults)."""

    def clean() -> None:
        with django_db_blocker.unblock(), connection.cursor() as cursor:  # type: ignore[attr-defined]
            cursor.execute("DELETE FROM dramatiq.queue WHERE queue_name = 'jobs'")
            cursor.execute("DELETE FROM django_celery_beat_periodictask")

    clean()
    yield
    clean()


@pytest.mark.django_db(transaction=True)  # the scheduler commits and closes connections itself
def test_only_the_leader_fires_and_unknown_jobs_are_refused(
    clean_queue: None, caplog: pytest.LogCaptureFixture
) -> None:
    every_second()
    every_second(name="typo", task="no-such-job")
    PeriodicTask.objects.update(last_run_at=dt.datetime(2020, 1, 1, tzinfo=UTC))
    leader = LeaderDatabaseScheduler(app=app, lazy=False)
    standby = LeaderDatabaseScheduler(app=app, lazy=False)
    try:
        with caplog.at_level(logging.INFO):
            for _ in range(4):  # each tick fires at most one due entry
                leader.tick()
            assert standby.tick() == STANDBY_INTERVAL
        assert leader.is_leader and not standby.is_leader
        assert len(fired_slots()) == 1
        assert "names unknown job 'no-such-job'" in caplog.text
    finally:
        leader.close()
        standby.close()


# -- scheduler processes ----------------------------------------------------------------------


def start_scheduler() -> Managed:
    return Managed("run_scheduler", "--max-interval", "0.5")


def leaders(processes: list[Managed]) -> list[Managed]:
    return [p for p in processes if "is now the leader" in p.output()]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_schedulers_fire_each_slot_once_and_the_standby_takes_over(
    clean_queue: None, managed: list[Managed]
) -> None:
    every_second()
    managed.extend([start_scheduler(), start_scheduler()])
    wait_for(lambda: len(fired_slots()) >= 3, timeout=30, what=managed[0].output)
    [leader] = leaders(managed)
    [standby] = [p for p in managed if p is not leader]

    leader.signal_group(signal.SIGKILL)
    leader.wait()
    killed_at = dt.datetime.now(UTC)
    wait_for(lambda: leaders([standby]) == [standby], timeout=15, what=standby.output)
    wait_for(
        lambda: any(dt.datetime.fromisoformat(s) > killed_at for s in fired_slots()),
        timeout=15,
        what=lambda: f"a slot fired by the standby\n{standby.output()}",
    )
    slots = fired_slots()
    # The one double firing the design allows (jobs/scheduler.py): the leader enqueued a slot
    # and was killed before saving its last run time, so the standby fires that slot again (the
    # job still runs once per slot: test_cron's test_a_slot_runs_once...). Anything else fired
    # twice, or twice by the same scheduler, is a bug.
    repeated = {s for s in slots if slots.count(s) > 1}
    assert len(repeated) <= 1, f"slots fired twice: {sorted(slots)}"
    assert all(slots.count(s) == 2 for s in repeated), f"a slot fired 3+ times: {sorted(slots)}"
    assert all(dt.datetime.fromisoformat(s) <= killed_at for s in repeated), (
        f"a slot after the takeover fired twice: {sorted(slots)}"
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_admin_edit_takes_effect_on_the_next_tick(
    clean_queue: None, managed: list[Managed]
) -> None:
    task = every_second()
    managed.append(start_scheduler())
    wait_for(lambda: len(fired_slots()) >= 2, timeout=30, what=managed[0].output)

    task.enabled = False  # what saving the admin's change form does
    task.save()
    wait_for(lambda: "Schedule changed" in managed[0].output(), timeout=30, what=managed[0].output)
    fired = len(fired_slots())
    # The scheduler's own bookkeeping never re-enables the task (RunRecordingEntry) ...
    task.refresh_from_db()
    assert not task.enabled
    # ... so nothing fires after it reread the schedule, however slowly its ticks come: over two
    # periods of the old schedule at most a firing already under way lands.
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        assert len(fired_slots()) <= fired + 1
        time.sleep(0.1)


@pytest.mark.django_db(transaction=True)
def test_the_schedulers_bookkeeping_never_undoes_a_concurrent_edit(clean_queue: None) -> None:
    task = every_second()
    entry = LeaderDatabaseScheduler.Entry(task, app=app)
    PeriodicTask.objects.filter(pk=task.pk).update(enabled=False, description="edited")
    next(entry).save()  # the scheduler records a firing it read before the edit
    task.refresh_from_db()
    assert not task.enabled and task.description == "edited"

    PeriodicTask.objects.filter(pk=task.pk).update(enabled=True)
    fired = next(entry)
    fired.save()
    task.refresh_from_db()
    assert task.total_run_count == fired.model.total_run_count and task.last_run_at is not None


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_scheduled_jobs_run_in_the_jobs_process_and_record_their_runs(
    clean_queue: None, managed: list[Managed]
) -> None:
    every_second()
    managed.extend([start_scheduler(), start_jobs()])

    def completed() -> list[EventLog]:
        return list(EventLog.objects.filter(event_type="cron.completed"))

    wait_for(
        lambda: len(completed()) >= 2,
        timeout=45,
        what=lambda: f"cron.completed events\n{managed[0].output()}\n{managed[1].output()}",
    )
    runs = JobRun.objects.filter(job="dlq-alert", trigger="schedule")
    assert runs.count() >= 2
    assert all(re.match(r"\d{4}-\d\d-\d\dT", run.slot or "") for run in runs)
    payload = completed()[0].payload
    assert payload["job"] == "dlq-alert" and "duration_ms" in payload
    assert json.dumps(payload)  # plain JSON, no secrets or objects


@pytest.mark.django_db(transaction=True)
def test_schedulers_register_as_workers_and_the_leader_is_marked(clean_queue: None) -> None:
    leader = LeaderDatabaseScheduler(app=app, lazy=False)
    standby = LeaderDatabaseScheduler(app=app, lazy=False)
    try:
        leader.tick()
        standby.tick()
        for scheduler in (leader, standby):
            assert scheduler.presence is not None
            scheduler.presence.beat()
        rows = dict(WorkerProcess.objects.filter(kind="run_scheduler").values_list("id", "leader"))
        assert leader.presence is not None and standby.presence is not None
        assert rows == {leader.presence.id: True, standby.presence.id: False}
    finally:
        leader.close()
        standby.close()
    assert not WorkerProcess.objects.filter(kind="run_scheduler", stopped_at=None).exists()
