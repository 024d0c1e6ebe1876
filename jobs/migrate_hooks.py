"""Steps every `migrate` ends with, so each install path (README, compose, a bare migrate) ends
in the same state: the jobs' default schedules (operator edits kept, see jobs.schedules).

A step runs only when the tables it writes exist: `migrate <app> zero` (or a partial migrate)
finishes without them and must not crash in its post-migrate signal.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import connections

logger = logging.getLogger(__name__)

SCHEDULE_TABLES = ("django_celery_beat_periodictask", "deskcomm_defaultschedule")


def tables_exist(using: str, *names: str) -> bool:
    """Whether every named table exists in database `using`."""
    with connections[using].cursor() as cursor:
        present = set(connections[using].introspection.table_names(cursor))
    return set(names) <= present


def install_schedules_after_migrate(using: str = "default", **kwargs: Any) -> None:
    """post_migrate receiver: install the default schedules (missing ones, untouched defaults)."""
    if not tables_exist(using, *SCHEDULE_TABLES):
        logger.info("migrate: schedule tables absent, default schedules not installed")
        return
    from jobs.schedules import schedules_install

    report = schedules_install()
    if report.created or report.updated:
        logger.info("migrate: schedules created %s, updated %s", report.created, report.updated)
