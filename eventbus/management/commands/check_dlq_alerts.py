"""`manage.py check_dlq_alerts`: alert ADMINS (and the webhook) when a consumer's DLQ grows."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from eventbus.operations.dlq_alerts import dlq_alerts_check


class Command(BaseCommand):
    help = (
        "Alert when a consumer's deliveries died past EVENTBUS_DLQ_ALERT_THRESHOLD within "
        "EVENTBUS_DLQ_ALERT_INTERVAL (at most once per interval per consumer)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        alerted = dlq_alerts_check()
        if not alerted:
            self.stdout.write("no DLQ alert due")
        for growth in alerted:
            self.stdout.write(
                f"alerted: {growth.consumer} ({growth.died} died in the interval, "
                f"{growth.dlq_size} in the DLQ)"
            )
