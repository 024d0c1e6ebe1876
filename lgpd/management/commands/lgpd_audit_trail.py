"""`manage.py lgpd_audit_trail CONTACT_ID`: a CSV of every operation on a data subject, and its
SHA-256 (printed, for the auditor to check). The extraction itself is audited."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from lgpd import trail


class Command(BaseCommand):
    help = "Write the audit trail of a contact as CSV and print its SHA-256."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("contact_id", type=uuid.UUID)
        parser.add_argument("--output", type=Path, help="CSV path (default: ./audit-<id>.csv).")
        parser.add_argument("--actor", default="command:lgpd_audit_trail")

    def handle(self, *args: Any, **options: Any) -> None:
        contact_id: uuid.UUID = options["contact_id"]
        output: Path = options["output"] or Path(f"audit-{contact_id}.csv")
        try:
            rows, digest = trail.write_csv(
                contact_id=contact_id, path=output, actor=options["actor"]
            )
        except trail.UnknownContact as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{rows} operation(s) written to {output}")
        self.stdout.write(f"SHA-256 {digest}")
