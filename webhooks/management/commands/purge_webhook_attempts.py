"""`manage.py purge_webhook_attempts`: drop attempt-log rows past their retention."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from webhooks.services import attempts_purge


class Command(BaseCommand):
    help = "Delete webhook attempt-log rows older than WEBHOOKS_ATTEMPT_RETENTION_DAYS."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"deleted {attempts_purge()} webhook attempt(s)")
