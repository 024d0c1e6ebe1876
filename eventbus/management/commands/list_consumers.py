"""`manage.py list_consumers`: the registered consumers, their events and retry policy."""

from __future__ import annotations

import json
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from eventbus.store.registry import describe, registry
from eventbus.store.routes import sync_routes


class Command(BaseCommand):
    help = "List registered consumers (name, events, attempts, delay, timeout, handler)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="Machine-readable output.")
        parser.add_argument(
            "--sync",
            action="store_true",
            help="Also mirror the registry into the table used by emit_event().",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        rows = [describe(c) for c in registry.all()]
        if options["sync"]:
            routes, types = sync_routes()
            self.stderr.write(f"synced {routes} routes and {types} event types")
        if options["json"]:
            self.stdout.write(json.dumps(rows, indent=2))
            return
        if not rows:
            self.stdout.write("no consumers registered")
            return
        for row in rows:
            delay = f"{row['delay_seconds']:g}s" if row["delay_seconds"] else "none"
            self.stdout.write(self.style.SUCCESS(row["name"]))
            self.stdout.write(f"  events:       {', '.join(row['events'])}")
            self.stdout.write(
                f"  max_attempts: {row['max_attempts']}   delay: {delay}   atomic: {row['atomic']}"
                f"   timeout: {row['timeout_seconds']:g}s"
                f"   runs_on: {row['runs_on']}"
                + (f"   batch: {row['batch']}" if row["batch"] else "")
            )
            self.stdout.write(f"  handler:      {row['handler']}")
