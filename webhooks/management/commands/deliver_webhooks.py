"""`manage.py deliver_webhooks`: send webhook deliveries (thin: parses, calls WebhookWorker.run
and exits with its code)."""

from __future__ import annotations

import sys
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from core.db_timeouts import use_database_timeouts
from core.metrics import start_exporter_if_configured
from eventbus.dispatch.loop_args import add_loop_arguments, loop_options, positive_int
from eventbus.dispatch.runner import freeze_startup_heap
from webhooks.worker import WebhookWorker, WebhookWorkerOptions


class Command(BaseCommand):
    help = "Claim due webhook deliveries and POST them, many in flight, until stopped."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--concurrency",
            type=positive_int,
            default=32,
            help="Requests in flight in this process (default 32).",
        )
        parser.add_argument(
            "--per-subscription",
            type=positive_int,
            default=None,
            help="Requests in flight per subscription (default "
            "WEBHOOKS_MAX_IN_FLIGHT_PER_SUBSCRIPTION).",
        )
        add_loop_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        use_database_timeouts("worker")
        start_exporter_if_configured()
        freeze_startup_heap()
        code = WebhookWorker(
            WebhookWorkerOptions(
                concurrency=options["concurrency"],
                per_subscription=options["per_subscription"],
                **loop_options(options),
            )
        ).run()
        if code:
            sys.exit(code)  # 75: too many abandoned send threads; a fresh process takes over
