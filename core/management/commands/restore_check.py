"""`manage.py restore_check`: restore the newest dump into a scratch database and compare."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from core.backup import latest_dump, restore_check_run
from core.pg_tools import ToolsNotFound


class Command(BaseCommand):
    help = (
        "Restore the newest backup into a scratch database, compare the core tables' row counts "
        "with the backup's manifest, drop the scratch database, and print a verdict."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        dump = latest_dump()
        if dump is None:
            raise CommandError("no backup found in the backups storage: run `manage.py backup`")
        try:
            verdict = restore_check_run(dump)
        except (ToolsNotFound, RuntimeError) as exc:
            raise CommandError(f"restore of {dump} failed: {exc}") from None
        for table, count in sorted(verdict.expected.items()):
            restored = verdict.restored.get(table)
            mark = "ok" if restored == count else "MISMATCH"
            self.stdout.write(f"{table}: dump {count}, restored {restored} {mark}")
        if not verdict.ok:
            raise CommandError(
                f"RESTORE CHECK FAILED for {dump}: {len(verdict.mismatches)} table(s)"
            )
        self.stdout.write(f"RESTORE CHECK PASSED: {dump} restores with matching row counts")
