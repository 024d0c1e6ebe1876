"""Default schedules of the jobs, installed by name into django-celery-beat's tables.

`schedules_install()` creates a missing schedule, updates one still exactly as it last installed
it (a new default reaches existing installs), and keeps any schedule an operator changed in the
admin (other times, disabled...): the fingerprint of what was installed, kept in
`DefaultSchedule`, tells the two apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from django.db import transaction
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
