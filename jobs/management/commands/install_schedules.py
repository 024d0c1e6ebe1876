"""`manage.py install_schedules`: install/update the jobs' default schedules by name."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from jobs.schedules import schedules_install


class Command(BaseCommand):
    help = (
        "Install the default schedule of every job (django-celery-beat tables); update those "
        "still as installed, keep those an operator changed."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        report = schedules_install()
        for outcome in ("created", "updated", "unchanged", "kept"):
            names = getattr(report, outcome)
            if names:
                label = "kept (changed by an operator)" if outcome == "kept" else outcome
                self.stdout.write(f"{label}: {', '.join(names)}")
