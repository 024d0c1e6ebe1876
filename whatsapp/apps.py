"""The WhatsApp app: WAHA sessions, the send worker, the inbound webhook, STOP handling, crons."""

from __future__ import annotations

from django.apps import AppConfig


class WhatsappConfig(AppConfig):
    name = "whatsapp"
    label = "whatsapp"
    verbose_name = "WhatsApp (WAHA)"

    def ready(self) -> None:
        from core.crypto import register_encrypted_field
        from core.health import registry as health
        from core.metrics import register_scrape_collector
        from crm.services import register_send_check
        from whatsapp import health as waha_health
        from whatsapp import sending
        from whatsapp.conf import API_KEY_CONTEXT
        from whatsapp.metrics import SessionsCollector

        register_encrypted_field(API_KEY_CONTEXT, "whatsapp.WahaSession", "api_key_encrypted")
        register_encrypted_field(
            API_KEY_CONTEXT, "whatsapp.WahaSession", "webhook_secret_encrypted"
        )
        health.register_family(waha_health.PREFIX, waha_health.session_checks)
        register_scrape_collector(SessionsCollector)
        register_send_check("whatsapp", sending.conversation_blocker)
