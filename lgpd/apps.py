"""LGPD app: data-subject requests, their export and their redaction."""

from __future__ import annotations

from django.apps import AppConfig


class LgpdConfig(AppConfig):
    name = "lgpd"
    verbose_name = "LGPD data-subject requests"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core.lgpd_registry import TOMBSTONES
        from core.metrics import register_scrape_collector
        from lgpd import (
            scopes,  # noqa: F401  (declares lgpd:read / lgpd:write)
            tombstones,
        )
        from lgpd.metrics import OverdueRequestsCollector

        register_scrape_collector(OverdueRequestsCollector)
        TOMBSTONES.register(tombstones.redacted)
