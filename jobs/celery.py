"""The Celery app behind the scheduler process (celery beat). It never sends a Celery message:
the broker is `memory://` and our scheduler class enqueues dramatiq actors instead.

    python manage.py run_scheduler
    # or: celery -A jobs.celery beat -S jobs.scheduler:LeaderDatabaseScheduler
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deskcomm.settings")

app = Celery("deskcomm")
app.config_from_object("django.conf:settings", namespace="CELERY")
