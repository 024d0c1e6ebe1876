"""`manage.py create_api_key --organization SLUG --name NAME --scopes events:read events:write`.

`--organization system` makes a platform key: the system organization's keys are the only ones
that may read, pause and resume the registered consumers, which every organization shares
(`consumers:read`, `consumers:write`; docs/workers.md "Pause, resume and circuit breakers")."""

from __future__ import annotations

import getpass
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core import scopes, services
from core.models import SYSTEM_ORGANIZATION_ID, SYSTEM_ORGANIZATION_SLUG, Organization

PLATFORM_KEY = (
    f"`{SYSTEM_ORGANIZATION_SLUG}` makes a platform key, the only kind that may read, pause and "
    "resume the registered consumers every organization shares (scopes consumers:read, "
    "consumers:write)"
)


class Command(BaseCommand):
    help = "Create an API key for an organization; prints the key (shown only this once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--organization",
            required=True,
            help=f"the slug of the organization the key acts for; {PLATFORM_KEY}",
        )
        parser.add_argument("--name", required=True, help="what the key is for, e.g. 'ERP sync'")
        parser.add_argument(
            "--scopes",
            nargs="+",
            required=True,
            help="space- or comma-separated; known: " + ", ".join(scopes.declared()),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        organization = organization_of(options["organization"])
        if organization is None:
            raise CommandError(
                f"no organization with slug {options['organization']!r}; "
                f"known slugs: {', '.join(known_slugs()) or '(none yet)'} ({PLATFORM_KEY})"
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
        platform = " (a platform key)" if organization.pk == SYSTEM_ORGANIZATION_ID else ""
        self.stderr.write(
            f"Created {key.display_prefix} ({key.name!r}) for {organization.slug}{platform} with "
            f"scopes {', '.join(key.scopes)}. Store the key now: it is not shown again."
        )
        self.stdout.write(full)


def organization_of(slug: str) -> Organization | None:
    """The organization with `slug`; the system one is made on demand, as everywhere."""
    if slug == SYSTEM_ORGANIZATION_SLUG:
        return Organization.objects.system()
    return Organization.objects.filter(slug=slug).first()


def known_slugs(limit: int = 20) -> list[str]:
    """Slugs to suggest (customer organizations; the system one is not for API keys)."""
    slugs = Organization.objects.exclude(pk=SYSTEM_ORGANIZATION_ID).order_by("slug")
    return list(slugs.values_list("slug", flat=True)[:limit])
