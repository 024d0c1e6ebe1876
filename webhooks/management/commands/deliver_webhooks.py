"""`manage.py deliver_webhooks`: send webhook deliveries (thin: parses, calls WebhookWorker.run)."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from eventbus.management.commands.drain_events import _positive_float, _positive_int
from webhooks.worker import WebhookWorker, WebhookWorkerOptions


class Command(BaseCommand):
    help = "Claim due webhook deliveries and POST them, many in flight, until stopped."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--concurrency",
            type=_positive_int,
            default=32,
            help="Requests in flight in this process (default 32).",
        )
        parser.add_argument(
            "--per-subscription",
            type=_positive_int,
            default=None,
            help="Requests in flight per subscription (default "
            "WEBHOOKS_MAX_IN_FLIGHT_PER_SUBSCRIPTION).",
        )
        parser.add_argument(
            "--batch-size",
            type=_positive_int,
            default=100,
            help="Most deliveries claimed per statement (default 100).",
        )
        parser.add_argument(
            "--poll-interval",
            type=_positive_float,
            default=1.0,
            help="Seconds to wait when idle (default 1).",
        )
        parser.add_argument("--once", action="store_true", help="Send what is due now, then exit.")
        parser.add_argument(
            "--max-events",
            type=_positive_int,
            default=None,
            help="Exit after this many attempts.",
        )
        parser.add_argument(
            "--no-listen", action="store_true", help="Do not LISTEN for wake-ups; poll only."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        WebhookWorker(
            WebhookWorkerOptions(
                concurrency=options["concurrency"],
                per_subscription=options["per_subscription"],
                batch_size=options["batch_size"],
                poll_interval=options["poll_interval"],
                once=options["once"],
                max_events=options["max_events"],
                listen=not options["no_listen"],
            )
        ).run()
