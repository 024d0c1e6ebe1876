"""Schedules for scheduler tests, and the slots the scheduler fired into the job queue."""

from __future__ import annotations

from django.db import connection
from django_celery_beat.models import IntervalSchedule, PeriodicTask


def every_second(name: str = "fast-dlq-alert", task: str = "dlq-alert") -> PeriodicTask:
    interval, _ = IntervalSchedule.objects.get_or_create(every=1, period="seconds")
    return PeriodicTask.objects.create(name=name, task=task, interval=interval)


def fired_slots() -> list[str]:
    """The slots of the `dlq-alert` jobs the scheduler enqueued (the Postgres job broker)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT message->'kwargs'->>'slot' FROM dramatiq.queue"
            " WHERE queue_name = 'jobs' AND message->>'actor_name' = 'dlq-alert'"
        )
        return [row[0] for row in cursor.fetchall()]
