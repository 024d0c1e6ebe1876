"""Webhook subscriptions and the attempt log.

Deliveries themselves are `eventbus_delivery` rows whose consumer is `webhook:<subscription id>`
(one per event x subscription); `WebhookDelivery` is a proxy of them for the admin.
"""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from eventbus.store.models import Delivery
from webhooks import signing
from webhooks.conf import CONSUMER_PREFIX


class Subscription(models.Model):
    """An organization's endpoint: which events it receives, how to sign them, and its health."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(
        "core.Organization", on_delete=models.CASCADE, related_name="webhook_subscriptions"
    )
    url = models.URLField(max_length=2000)
    description = models.CharField(max_length=500, blank=True, default="")
    # Exact names ("lead.created"), entity wildcards ("lead.*") or everything ("*").
    event_types = ArrayField(models.TextField())
    enabled = models.BooleanField(default=True)
    # Standard Webhooks secret ("whsec_" + base64), encrypted (core.crypto "webhook_secrets").
    secret_encrypted = models.TextField()
    # After a rotation the previous secret also signs until `previous_secret_expires_at`.
    previous_secret_encrypted = models.TextField(null=True, blank=True)
    previous_secret_expires_at = models.DateTimeField(null=True, blank=True)
    max_attempts = models.SmallIntegerField(default=8)  # copied from settings at creation
    consecutive_failures = models.IntegerField(default=0)
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [
            # Emit fan-out (eventbus_org_routes): the enabled subscriptions of one organization.
            models.Index(
                fields=["organization"], condition=Q(enabled=True), name="webhook_sub_fanout_idx"
            ),
        ]

    def __str__(self) -> str:
        return self.url

    @property
    def consumer(self) -> str:
        """The name its deliveries carry in `eventbus_delivery.consumer`."""
        return consumer_name(self.id)


class WebhookDelivery(Delivery):
    """The bus deliveries of webhook subscriptions (admin/API view of `eventbus_delivery`)."""

    class Meta:
        proxy = True
        verbose_name = "webhook delivery"
        verbose_name_plural = "webhook deliveries"

    @property
    def subscription_id(self) -> uuid.UUID | None:
        return subscription_id_of(self.consumer)

    @property
    def webhook_id(self) -> uuid.UUID | None:
        """The id receivers see (`X-Webhook-Delivery`, `webhook-id`), the same on every attempt."""
        subscription_id = self.subscription_id
        return signing.delivery_id(self.event_id, subscription_id) if subscription_id else None


class Attempt(models.Model):
    """One HTTP attempt of a webhook delivery (successes too): what the receiver answered."""

    # Receivers echo what they were sent; the LGPD redaction scrubs the subject's data here too.
    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ("response_excerpt", "error")

    id = models.BigAutoField(primary_key=True)
    # No database constraint: a partitioned delivery table (eventbus/history/partitions.py) has the
    # primary key (id, event_created_at). The attempt log has its own, shorter retention
    # (WEBHOOKS_ATTEMPT_RETENTION_DAYS, 30, under the event archive's 90 hot days): the purge
    # removes these rows, the archive never needs to.
    delivery = models.ForeignKey(
        Delivery, on_delete=models.CASCADE, related_name="webhook_attempts", db_constraint=False
    )
    # No database constraint: a subscription deleted while one of its requests was in flight
    # must not make the worker's attempt-log insert fail (the ORM still cascades on delete).
    subscription = models.ForeignKey(
        Subscription,
        on_delete=models.CASCADE,
        related_name="attempts",
        db_index=False,
        db_constraint=False,
    )
    organization = models.ForeignKey(
        "core.Organization", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    attempt = models.SmallIntegerField()
    webhook_id = models.UUIDField()  # X-Webhook-Delivery / webhook-id sent
    url = models.TextField()
    status_code = models.SmallIntegerField(null=True, blank=True)
    duration_ms = models.IntegerField()
    response_excerpt = models.TextField(blank=True, default="")  # at most 2 KiB of the body
    error_class = models.TextField(blank=True, default="")
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["delivery_id", "created_at"]
        indexes = [
            # Retention purge by age.
            models.Index(fields=["created_at"], name="webhook_attempt_created_idx"),
            # A subscription's recent attempts (admin/API).
            models.Index(fields=["subscription", "-created_at"], name="webhook_attempt_sub_idx"),
        ]

    def __str__(self) -> str:
        return f"attempt {self.attempt} of delivery {self.delivery_id}"


def consumer_name(subscription_id: uuid.UUID) -> str:
    """The consumer name a subscription's deliveries carry: `webhook:<subscription id>`."""
    return f"{CONSUMER_PREFIX}{subscription_id}"


def subscription_id_of(consumer: str) -> uuid.UUID | None:
    """The subscription a delivery consumer name belongs to (None: not a webhook consumer)."""
    if not consumer.startswith(CONSUMER_PREFIX):
        return None
    try:
        return uuid.UUID(consumer.removeprefix(CONSUMER_PREFIX))
    except ValueError:
        return None
