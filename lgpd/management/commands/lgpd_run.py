"""`manage.py lgpd_run REQUEST_ID`: run a stuck data request now (the manual fallback; audited)."""

from __future__ import annotations

import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from lgpd import services
from lgpd.models import DataRequest


class Command(BaseCommand):
    help = "Run a data request's export or redaction now (audited as a manual fallback)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("request_id", type=uuid.UUID)
        parser.add_argument("--actor", default="command:lgpd_run", help="Who runs it (audit).")
        parser.add_argument("--reason", default="", help="Why it is run by hand (audit).")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            done = services.data_request_run(
                request_id=options["request_id"], actor=options["actor"], reason=options["reason"]
            )
        except DataRequest.DoesNotExist as exc:
            raise CommandError(str(exc)) from None
        state = "done" if done else "already done, nothing changed"
        self.stdout.write(f"data request {options['request_id']}: {state}")
