"""`manage.py reap_events`: return deliveries whose worker died (lease expired) to pending."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from eventbus.dispatch.settle import reap


class Command(BaseCommand):
    help = "Return expired leases (killed workers) to pending, or dead when out of attempts."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--limit",
            type=int,
            default=1000,
            help="Most deliveries per statement (repeats until none are left).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        total = dead_total = 0
        while True:
            reaped, dead = reap(worker_id="manage:reap_events", limit=options["limit"])
            total += reaped
            dead_total += len(dead)
            if reaped < options["limit"]:
                break
        self.stdout.write(f"reaped {total} expired deliveries ({dead_total} dead)")
