"""`manage.py replay`: re-run one consumer over a time window of the hot log
(eventbus.history.replays)."""

from __future__ import annotations

import datetime as dt
import getpass
import uuid
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_datetime

from core.audit import system_actor
from core.models import Organization
from eventbus.history import replays


class Command(BaseCommand):
    help = (
        "Replay one consumer over a time window: its deliveries of the events emitted in "
        "[--since, --until) run again (new attempts, flagged as this replay); no other consumer "
        "is touched. Pending or running deliveries are left alone. Re-run with --replay-id to "
        "continue a replay that was cut off (nothing is queued twice). Audited."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--consumer", required=True, help="Registered consumer name.")
        parser.add_argument(
            "--since", required=True, help="Start, ISO 8601 with a zone (2026-12-01T10:00-03:00)."
        )
        parser.add_argument("--until", help="End (exclusive), ISO 8601 with a zone; default now.")
        parser.add_argument("--organization", help="Only this organization (slug or UUID).")
        parser.add_argument("--event-type", help="Only this event type (one the consumer takes).")
        parser.add_argument("--dry-run", action="store_true", help="Count, change nothing.")
        parser.add_argument("--replay-id", help="Continue the replay with this id (UUID).")
        parser.add_argument("--reason", default="", help="Why (audited); default: who ran it.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            target = replays.window(
                consumer=options["consumer"],
                since=_moment(options["since"], "--since"),
                until=_moment(options["until"], "--until") if options["until"] else None,
                organization_id=_organization(options["organization"]),
                event_type=options["event_type"],
            )
        except replays.ReplayError as exc:
            raise CommandError(str(exc)) from None
        replay_id = _replay_id(options["replay_id"])
        actor = system_actor(f"manage.py replay ({getpass.getuser()})")
        reason = options["reason"] or f"manage.py replay run by {getpass.getuser()}"
        self.stderr.write(
            f"replaying {target.consumer} over {target.since.isoformat()} .. "
            f"{target.until.isoformat()}" + (" (dry run)" if options["dry_run"] else "")
        )
        report = replays.replay(
            target,
            actor=actor,
            reason=reason,
            replay_id=replay_id,
            dry_run=options["dry_run"],
            progress=lambda r: self.stderr.write(f"  {r.matched} events read, {r.queued} queued"),
        )
        if report.dry_run:
            shown = ", ".join(f"{n} {status}" for status, n in sorted(report.by_status.items()))
            self.stdout.write(
                f"dry run: {report.matched} events of {', '.join(report.event_types)} in the "
                f"window; {target.consumer}'s deliveries of them: {shown or 'none'}. Done, dead, "
                "discarded and missing ones would be queued; pending and processing ones left."
            )
            return
        self.stdout.write(
            f"replay {report.replay_id}: {report.matched} events in the window, "
            f"{report.queued} deliveries of {target.consumer} queued, {report.left} left "
            "(pending, running, or already replayed under this id)"
        )


def _moment(value: str, flag: str) -> dt.datetime:
    parsed = parse_datetime(value)
    if parsed is None:
        raise CommandError(f"{flag} must be an ISO 8601 date and time, got {value!r}")
    return parsed


def _organization(value: str | None) -> uuid.UUID | None:
    if not value:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        pass
    found = Organization.objects.filter(slug=value).values_list("pk", flat=True).first()
    if found is None:
        raise CommandError(f"no organization with the slug or id {value!r}")
    return found


def _replay_id(value: str | None) -> uuid.UUID | None:
    if not value:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        raise CommandError(f"--replay-id must be a UUID, got {value!r}") from None
