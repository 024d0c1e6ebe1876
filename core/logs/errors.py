"""Counting ERROR log records for Prometheus (seed 001 A2: an error spike, > 50 an hour).

Sentry reports each error as an event when SENTRY_DSN is set; this counter sees the same records
in every deployment. Loaded by settings.LOGGING before the apps, so it imports nothing of ours.
"""

from __future__ import annotations

import logging
from functools import cache

from django.conf import settings
from prometheus_client import Counter

ERRORS_LOGGED = Counter(
    "deskcomm_errors_logged_total",
    "Log records at ERROR or above, by top-level logger (our apps, django, other).",
    ["logger"],
)


class ErrorCounter(logging.Handler):
    """A logging handler (level ERROR) counting records by top-level logger: one of ours, a
    framework's, or `other` (bounded labels)."""

    def emit(self, record: logging.LogRecord) -> None:
        top = record.name.split(".", 1)[0]
        ERRORS_LOGGED.labels(top if top in known_loggers() else "other").inc()


@cache
def known_loggers() -> frozenset[str]:
    apps = {name for name in settings.INSTALLED_APPS if "." not in name}
    return frozenset(apps | {"django", "gunicorn", "dramatiq"})
