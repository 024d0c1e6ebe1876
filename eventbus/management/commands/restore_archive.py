"""`manage.py restore_archive`: bring archived days of one organization back into the hot tables."""

from __future__ import annotations

import datetime as dt
import uuid
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from eventbus.history.archive import ArchiveError, restore_day
from eventbus.store.errors import ConsumerRegistrationError

MAX_DAYS = 366


class Command(BaseCommand):
    help = (
        "Restore archived events (with deliveries and attempts) of one organization for a day "
        "or a range, to inspect them or replay them to a consumer. The next archive run removes "
        "them again once their deliveries are finished."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--organization", required=True, help="Organization id (UUID).")
        parser.add_argument("--day", required=True, help="First (or only) day, YYYY-MM-DD (UTC).")
        parser.add_argument("--until", help="Last day of a range, YYYY-MM-DD (inclusive).")
        parser.add_argument("--replay-to", metavar="CONSUMER", help="Deliver them again to it.")

    def handle(self, *args: Any, **options: Any) -> None:
        organization_id = _uuid(options["organization"])
        first = _day(options["day"])
        last = _day(options["until"]) if options["until"] else first
        if last < first or (last - first).days >= MAX_DAYS:
            raise CommandError(f"--until must be on or after --day, at most {MAX_DAYS} days")
        day = first
        while day <= last:
            self._restore(organization_id, day, options["replay_to"])
            day += dt.timedelta(days=1)

    def _restore(self, organization_id: uuid.UUID, day: dt.date, replay_to: str | None) -> None:
        try:
            report = restore_day(organization_id, day, replay_to=replay_to)
        except (ArchiveError, ConsumerRegistrationError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"{day}: restored {report.events} events, {report.deliveries} deliveries, "
            f"{report.attempts} attempts; replayed {report.replayed}"
        )


def _uuid(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise CommandError(f"--organization must be a UUID, got {value!r}") from None


def _day(value: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise CommandError(f"expected a date YYYY-MM-DD, got {value!r}") from None
