"""The console's names for webhook consumers: a subscription's description and URL host, linked."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from urllib.parse import urlsplit

from django.urls import reverse

from eventbus.store.consumer_labels import ConsumerLabel
from webhooks import services
from webhooks.models import Subscription, subscription_id_of

ENABLE_PERMISSION = "webhooks.change_subscription"  # as the subscription admin's Enable action


class SubscriptionLabels:
    """`webhook:<id>` consumers: labelled from their subscription (one query per page)."""

    def labels(self, names: Collection[str]) -> dict[str, ConsumerLabel]:
        ids = {name: sid for name in names if (sid := subscription_id_of(name)) is not None}
        found = Subscription.objects.in_bulk(list(ids.values()))
        return {name: _label(name, sid, found.get(sid)) for name, sid in ids.items()}

    def enable(self, name: str, *, actor: str) -> bool:
        subscription_id = subscription_id_of(name)
        if subscription_id is None:
            return False
        subscription = Subscription.objects.filter(pk=subscription_id).first()
        if subscription is None or subscription.enabled:
            return False
        services.subscription_enable(subscription=subscription, actor=actor)
        return True


def _label(
    name: str, subscription_id: uuid.UUID, subscription: Subscription | None
) -> ConsumerLabel:
    if subscription is None:
        return ConsumerLabel(
            name, "deleted webhook", detail=str(subscription_id)[:8], disabled=True
        )
    host = urlsplit(subscription.url).hostname or subscription.url
    return ConsumerLabel(
        name,
        subscription.description or host,
        detail=host if subscription.description else "webhook",
        url=reverse("admin:webhooks_subscription_change", args=[subscription.pk]),
        disabled=not subscription.enabled,
        enable_permission=ENABLE_PERMISSION,
    )
