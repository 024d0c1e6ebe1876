"""`manage.py purge_idempotency_keys`: delete stored idempotent responses past their TTL."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.core.management.base import BaseCommand
from django.utils import timezone

from deskcomm import services
from deskcomm.api.conf import api_settings


class Command(BaseCommand):
    help = "Delete Idempotency-Key records older than API_IDEMPOTENCY_TTL_SECONDS (run daily)."

    def handle(self, *args: Any, **options: Any) -> None:
        ttl = dt.timedelta(seconds=float(api_settings.IDEMPOTENCY_TTL_SECONDS))
        deleted = services.idempotency_keys_purge(older_than=timezone.now() - ttl)
        self.stdout.write(f"Deleted {deleted} expired idempotency key(s).")
