"""`manage.py rotate_encryption_key --context NAME`: re-encrypt a context under its current key."""

from __future__ import annotations

import getpass
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from core import crypto
from core.key_rotation import encryption_key_rotate


class Command(BaseCommand):
    help = (
        "Re-encrypt every stored value of an encryption context with its current (first) key. "
        "Configure the new key first and keep the old one after it until this reports 0 left."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--context", required=True, help="Encryption context, e.g. webhook_secrets or cpf."
        )
        parser.add_argument("--batch-size", type=int, default=500, help="Rows per transaction.")

    def handle(self, *args: Any, context: str, batch_size: int, **options: Any) -> None:
        if not crypto.encrypted_fields(context):
            known = ", ".join(crypto.rotatable_contexts())
            raise CommandError(f"unknown encryption context {context!r}; known: {known}")
        if not crypto.configured_keys(context):
            raise CommandError(f"no key is configured for {context}: set it before rotating")
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        report = encryption_key_rotate(
            context=context,
            actor=f"cli:{getpass.getuser()}",
            batch_size=batch_size,
            progress=self.stdout.write,
        )
        self.stdout.write(
            f"{context}: {report.rewritten} re-encrypted, "
            f"{report.already_current} already current, "
            f"{report.remaining} not readable by the current key"
        )
        if report.remaining:
            raise CommandError(f"{report.remaining} value(s) are not under the current key yet")
        self.stdout.write("Done: the old key(s) can now be removed from the configuration.")
