"""System checks of the Nuvemshop configuration (stable ids; `manage.py check`)."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Warning, register

from core.checks import PROJECT_TAG
from nuvemshop.conf import nuvemshop_settings


@register(PROJECT_TAG)
def check_nuvemshop_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Once the app id is set, the secret and an https webhook base must be too."""
    if not nuvemshop_settings.APP_ID:
        return []  # the integration is not configured: nothing to say
    messages: list[CheckMessage] = []
    if not nuvemshop_settings.CLIENT_SECRET:
        messages.append(
            Warning(
                "NUVEMSHOP_CLIENT_SECRET is empty: the install cannot exchange codes and every "
                "store webhook is refused (401)",
                id="nuvemshop.W001",
            )
        )
    if not nuvemshop_settings.WEBHOOK_BASE_URL.startswith("https://"):
        messages.append(
            Warning(
                "NUVEMSHOP_WEBHOOK_BASE_URL is not an https URL: Nuvemshop only delivers "
                "webhooks to https, so none are registered on install",
                hint="Set it to this service's public base, e.g. https://crm.example.com",
                id="nuvemshop.W002",
            )
        )
    return messages
