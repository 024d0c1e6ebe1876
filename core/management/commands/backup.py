"""`manage.py backup`: pg_dump the database into the backups storage, with row counts."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from core.backup import backup_create
from core.pg_tools import ToolsNotFound


class Command(BaseCommand):
    help = "Dump the database (pg_dump, custom format) into the backups storage (BACKUP_ROOT)."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            name = backup_create()
        except (ToolsNotFound, RuntimeError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"backup written: {name}")
