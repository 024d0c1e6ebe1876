"""`manage.py run_scheduler`: the scheduler process (celery beat with our leader scheduler)."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Fire the schedules in django-celery-beat's tables into dramatiq (only the leader of "
        "several schedulers fires)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--max-interval",
            type=float,
            default=None,
            help="Longest sleep between ticks, seconds (default SCHEDULER_MAX_INTERVAL, 5).",
        )
        parser.add_argument("--loglevel", default="INFO", help="Log level (default INFO).")

    def handle(self, *args: Any, **options: Any) -> None:
        from jobs.celery import app

        max_interval = options["max_interval"] or settings.CELERY_BEAT_MAX_LOOP_INTERVAL
        app.Beat(
            scheduler="jobs.scheduler:LeaderDatabaseScheduler",
            max_interval=max_interval,
            loglevel=options["loglevel"],
            quiet=True,
        ).run()
