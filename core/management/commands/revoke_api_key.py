"""`manage.py revoke_api_key dck_<prefix> [--reason TEXT]`: the key stops working at once."""

from __future__ import annotations

import getpass
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core import services
from core.models import ApiKey


class Command(BaseCommand):
    help = "Revoke an API key by its prefix (as shown in the admin: dck_xxxxxxxxxxxx)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("prefix", help="dck_<prefix> or just <prefix>")
        parser.add_argument("--reason", default="", help="kept in the audit trail")

    def handle(self, *args: Any, **options: Any) -> None:
        prefix = options["prefix"].removeprefix("dck_")
        key = ApiKey.objects.filter(prefix=prefix).first()
        if key is None:
            raise CommandError(f"no API key with prefix {options['prefix']!r}")
        actor = f"cli:{getpass.getuser()}"
        if services.api_key_revoke(api_key=key, actor=actor, reason=options["reason"]):
            self.stdout.write(f"Revoked {key.display_prefix} ({key.name!r}).")
        else:
            self.stdout.write(f"{key.display_prefix} was already revoked.")
