"""The core app's scheduled jobs (declared with `deskcomm.cron.job`)."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from deskcomm import services
from deskcomm.api.conf import api_settings
from deskcomm.cron import job


@job("idempotency-keys-purge", crontab="45 4 * * *")
def purge_idempotency_keys() -> int:
    """Delete stored Idempotency-Key responses older than API_IDEMPOTENCY_TTL_SECONDS."""
    return services.idempotency_keys_purge(older_than=expiry_cutoff())


def expiry_cutoff() -> dt.datetime:
    return timezone.now() - dt.timedelta(seconds=float(api_settings.IDEMPOTENCY_TTL_SECONDS))
