"""`manage.py drain_events`: the pull loop that runs consumers (thin: parses, calls Worker.run and
exits with its code)."""

from __future__ import annotations

import sys
from argparse import ArgumentParser
from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.core import checks
from django.core.management.base import BaseCommand, CommandError

from core.checks import worker_check_tags
from core.db_timeouts import use_database_timeouts
from core.metrics import start_exporter_if_configured
from eventbus.dispatch.drain import AUTO_HANDLER_THREADS
from eventbus.dispatch.loop_args import add_loop_arguments, loop_options, threads
from eventbus.dispatch.runner import freeze_startup_heap
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.store.conf import bus_settings
from eventbus.store.errors import ConsumerRegistrationError
from eventbus.store.routes import sync_routes


class Command(BaseCommand):
    help = "Claim due deliveries (FOR UPDATE SKIP LOCKED) and run their consumers until stopped."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--consumer",
            action="append",
            dest="consumers",
            metavar="NAME",
            help="Run only this consumer (repeatable). Default: all registered.",
        )
        parser.add_argument(
            "--concurrency",
            type=threads,
            default=None,
            metavar="N|auto",
            help=(
                "Handler threads per process: N, or auto (the default): one thread, growing up "
                f"to {AUTO_HANDLER_THREADS} while the handlers mostly wait on I/O (their own "
                "commits, HTTP calls) and work is queued; one for a worker with an atomic or "
                "batch consumer. Each thread holds a database connection."
            ),
        )
        add_loop_arguments(parser)

    def check(  # noqa: PLR0917  (BaseCommand.check's own signature)
        self,
        app_configs: Sequence[AppConfig] | None = None,
        tags: Sequence[str] | None = None,
        display_num_errors: bool = False,
        include_deployment_checks: bool = False,
        fail_level: int = checks.ERROR,
        databases: Sequence[str] | None = None,
    ) -> None:
        # Every system check but the web's (core.checks.WEB_ONLY_TAGS: the URLconf, the admin,
        # the templates), which would import the API's and the admin's stack into the worker.
        super().check(
            app_configs,
            worker_check_tags() if tags is None else tags,
            display_num_errors,
            include_deployment_checks,
            fail_level,
            databases,
        )

    def handle(self, *args: Any, **options: Any) -> None:
        use_database_timeouts("worker")
        try:
            worker = Worker(
                WorkerOptions(
                    consumers=options["consumers"],
                    concurrency=options["concurrency"],
                    drain=bus_settings.WORKER_ENABLED,
                    relay=bus_settings.RELAY_ENABLED,
                    **loop_options(options),
                )
            )
        except ConsumerRegistrationError as exc:
            raise CommandError(str(exc)) from None
        if not worker.consumers and not (worker.relay and worker.relay.names):
            self.stderr.write(
                self.style.WARNING(
                    "no drain consumers to run (none registered or WORKER_ENABLED=false) and no "
                    "relay: this worker only reaps expired leases"
                )
            )
        sync_routes()
        start_exporter_if_configured()
        freeze_startup_heap()
        code = worker.run()
        if code:
            sys.exit(code)  # 75: too many abandoned handler threads; a fresh process takes over
