"""`manage.py purge_idempotency_keys`: delete stored idempotent responses past their TTL."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from core import services


class Command(BaseCommand):
    help = "Delete Idempotency-Key records older than API_IDEMPOTENCY_TTL_SECONDS (run daily)."

    def handle(self, *args: Any, **options: Any) -> None:
        deleted = services.idempotency_keys_purge(older_than=services.idempotency_expiry_cutoff())
        self.stdout.write(f"Deleted {deleted} expired idempotency key(s).")
