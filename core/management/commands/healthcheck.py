"""`manage.py healthcheck`: the health checks from the command line (container healthchecks)."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from core.health.registry import run_checks


class Command(BaseCommand):
    help = "Run the health checks (database, storage, broker, integrations); exit 1 if one fails."
    requires_system_checks: list[str] = []  # a probe every few seconds: keep it fast

    def handle(self, *args: Any, **options: Any) -> None:
        report = run_checks()
        self.stdout.write(json.dumps(report))
        if report["status"] != "ok":
            raise CommandError("unhealthy")
