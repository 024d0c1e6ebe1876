"""Default schedules of the jobs, installed by name into django-celery-beat's tables, and when
each schedule runs next.

`schedules_install()` creates a missing schedule, updates one still exactly as it last installed
it (a new default reaches existing installs), and keeps any schedule an operator changed in the
admin (other times, disabled...): the fingerprint of what was installed, kept in
`DefaultSchedule`, tells the two apart.

`next_run(task)` answers as the scheduler will fire: the schedule's own celery schedule (a
crontab in its own time zone, an interval from the last run) from the last run, or now when it
never ran; a slot already missed is due now (the scheduler fires it on its next tick).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

from jobs.models import DefaultSchedule
from jobs.registry import Job, jobs


@dataclass
class InstallReport:
    """Names per outcome of `schedules_install`."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # changed by an operator: left alone


def schedules_install() -> InstallReport:
    """Install or update every job's default schedule without wiping operator changes."""
    report = InstallReport()
    with transaction.atomic():
        for job in jobs.all():
            outcome = _install(job)
            getattr(report, outcome).append(job.name)
    return report


def fingerprint(task: PeriodicTask) -> str:
    """What an operator may change on a schedule, as comparable text."""
    interval = task.interval
    crontab = task.crontab
    return json.dumps(
        {
            "task": task.task,
            "enabled": task.enabled,
            "interval": [interval.every, interval.period] if interval else None,
            "crontab": (
                [
                    crontab.minute,
                    crontab.hour,
                    crontab.day_of_month,
                    crontab.month_of_year,
                    crontab.day_of_week,
                    str(crontab.timezone),
                ]
                if crontab
                else None
            ),
            "args": task.args,
            "kwargs": task.kwargs,
        },
        sort_keys=True,
    )


def _install(job: Job) -> str:
    task = PeriodicTask.objects.filter(name=job.name).first()
    if task is None:
        task = PeriodicTask(name=job.name)
        _apply_default(task, job)
        _remember(task)
        return "created"
    installed = DefaultSchedule.objects.filter(name=job.name).first()
    if installed is None or installed.fingerprint != fingerprint(task):
        return "kept"
    before = fingerprint(task)
    _apply_default(task, job)
    _remember(task)
    return "unchanged" if fingerprint(task) == before else "updated"


def _apply_default(task: PeriodicTask, job: Job) -> None:
    task.task = job.name
    task.enabled = True
    task.description = job.description
    task.args, task.kwargs = "[]", "{}"
    task.interval, task.crontab = None, None
    if job.every is not None:
        task.interval, _ = IntervalSchedule.objects.get_or_create(
            every=int(job.every.total_seconds()), period=IntervalSchedule.SECONDS
        )
    else:
        assert job.crontab is not None
        minute, hour, day_of_month, month_of_year, day_of_week = job.crontab.split()
        task.crontab, _ = CrontabSchedule.objects.get_or_create(
            minute=minute,
            hour=hour,
            day_of_month=day_of_month,
            month_of_year=month_of_year,
            day_of_week=day_of_week,
            timezone=job.timezone,
        )
    task.save()


def _remember(task: PeriodicTask) -> None:
    DefaultSchedule.objects.update_or_create(
        name=task.name, defaults={"fingerprint": fingerprint(task)}
    )


@dataclass(frozen=True)
class NextRun:
    """When a schedule fires next: `at` (None: it will not, see `why`), `due` when its slot is
    already missed (the scheduler fires it on its next tick), `zone` a crontab's own zone."""

    at: dt.datetime | None
    due: bool = False
    zone: dt.tzinfo | None = None
    why: str = ""


def next_run(task: PeriodicTask, *, now: dt.datetime | None = None) -> NextRun:
    """When `task` fires next (see the module docstring)."""
    now = now or timezone.now()
    if not task.enabled:
        return NextRun(None, why="disabled")
    if task.one_off and task.total_run_count:
        return NextRun(None, why="ran once (one-off)")
    if task.scheduler is None:
        return NextRun(None, why="no schedule")
    zone = task.crontab.timezone if task.crontab is not None else None
    at = _whole_second(now + task.schedule.remaining_estimate(task.last_run_at or now))
    if task.start_time is not None and task.start_time > at:
        at = task.start_time
    return NextRun(max(at, now), due=at <= now, zone=zone)


def _whole_second(moment: dt.datetime) -> dt.datetime:
    """Rounded to the second: celery reads its own clock a moment after ours (03:59:59.998)."""
    return (moment + dt.timedelta(microseconds=500_000)).replace(microsecond=0)
