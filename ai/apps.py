"""The AI app: model gateway, ai-response-worker, ai-sentiment-worker, budgets and
rag-indexer-worker."""

from __future__ import annotations

from django.apps import AppConfig


class AiConfig(AppConfig):
    name = "ai"
    verbose_name = "AI"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from ai import checks  # noqa: F401  (registers the system checks)
        from ai.conf import PROVIDER_KEY_CONTEXT
        from ai.health import last_ping_probe
        from ai.metrics import MonthCostCollector, ProviderCollector
        from core.crypto import register_encrypted_field
        from core.health import registry as health
        from core.metrics import register_scrape_collector

        register_encrypted_field(PROVIDER_KEY_CONTEXT, "ai.AiAccount", "api_key_encrypted")
        register_scrape_collector(MonthCostCollector)
        register_scrape_collector(ProviderCollector)
        health.register("ai_provider", last_ping_probe, required=False)
