"""`manage.py create_api_key --organization SLUG --name NAME --scopes events:read events:write`."""

from __future__ import annotations

import getpass
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core import scopes, services
from core.models import SYSTEM_ORGANIZATION_ID, Organization


class Command(BaseCommand):
    help = "Create an API key for an organization; prints the key (shown only this once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--organization", required=True, help="organization slug")
        parser.add_argument("--name", required=True, help="what the key is for, e.g. 'ERP sync'")
        parser.add_argument(
            "--scopes",
            nargs="+",
            required=True,
            help="space- or comma-separated; known: " + ", ".join(scopes.declared()),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        organization = Organization.objects.filter(slug=options["organization"]).first()
        if organization is None:
            raise CommandError(
                f"no organization with slug {options['organization']!r}; "
                f"known slugs: {', '.join(known_slugs()) or '(none yet)'}"
            )
        wanted = [s for item in options["scopes"] for s in item.split(",") if s.strip()]
        try:
            key, full = services.api_key_create(
                organization=organization,
                name=options["name"],
                scopes_granted=[s.strip() for s in wanted],
                actor=f"cli:{getpass.getuser()}",
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stderr.write(
            f"Created {key.display_prefix} ({key.name!r}) for {organization.slug} with scopes "
            f"{', '.join(key.scopes)}. Store the key now: it is not shown again."
        )
        self.stdout.write(full)


def known_slugs(limit: int = 20) -> list[str]:
    """Slugs to suggest (customer organizations; the system one is not for API keys)."""
    slugs = Organization.objects.exclude(pk=SYSTEM_ORGANIZATION_ID).order_by("slug")
    return list(slugs.values_list("slug", flat=True)[:limit])
