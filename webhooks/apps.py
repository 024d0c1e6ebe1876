"""Webhooks app configuration."""

from __future__ import annotations

from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    verbose_name = "Outbound webhooks"

    def ready(self) -> None:
        from core import crypto, restore_scope
        from eventbus.store import consumer_labels, pauses
        from webhooks import scopes  # noqa: F401  (declares webhooks:read / webhooks:write)
        from webhooks.conf import CONSUMER_PREFIX
        from webhooks.consumer_labels import SubscriptionLabels
        from webhooks.selectors import subscription_organization

        pauses.register_owner(CONSUMER_PREFIX, subscription_organization)

        for field in ("secret_encrypted", "previous_secret_encrypted"):
            crypto.register_encrypted_field("webhook_secrets", "webhooks.Subscription", field)
        consumer_labels.register(SubscriptionLabels())
        restore_scope.count_after_restore(self.label)  # subscriptions, checked after a restore
