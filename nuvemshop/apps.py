"""The Nuvemshop (Tiendanube) integration: install, webhooks, sync worker, LGPD webhooks."""

from __future__ import annotations

from django.apps import AppConfig


class NuvemshopConfig(AppConfig):
    name = "nuvemshop"
    verbose_name = "Nuvemshop"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core import crypto
        from core.health import registry as health
        from core.metrics import register_scrape_collector
        from nuvemshop import checks  # noqa: F401  (registers the system checks)
        from nuvemshop import health as store_health
        from nuvemshop.metrics import SyncLagCollector
        from nuvemshop.models import OAUTH_CONTEXT

        crypto.register_encrypted_field(OAUTH_CONTEXT, "nuvemshop.Store", "access_token_encrypted")
        # Optional: a failing shop degrades the answer's detail, not the service's status.
        health.register("nuvemshop", store_health.last_results_probe, required=False)
        register_scrape_collector(SyncLagCollector)
