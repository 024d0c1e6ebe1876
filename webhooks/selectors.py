"""Webhook reads: what the worker sends with, and what the API and admin list."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial

from django.db.models import Prefetch, QuerySet

from core.crypto import DecryptionError
from core.models import Organization
from webhooks import circuit, signing
from webhooks.circuit import Gate
from webhooks.conf import CONSUMER_PREFIX
from webhooks.models import (
    Attempt,
    Subscription,
    WebhookDelivery,
    consumer_name,
    subscription_id_of,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Target:
    """What the worker needs to send to one subscription (secrets decrypted, current first)."""

    subscription_id: uuid.UUID
    organization_id: uuid.UUID
    url: str
    keys: tuple[bytes, ...]
    enabled: bool
    # Shared by every target of the same subscription in this process (webhooks.circuit).
    gate: Gate = field(default_factory=Gate, compare=False, repr=False)
    unusable: str = ""  # why nothing can be sent to it now (its secret cannot be decrypted)


def targets_for(
    subscription_ids: Iterable[uuid.UUID], *, now: dt.datetime
) -> dict[uuid.UUID, Target]:
    """The send targets of these subscriptions (one query); a deleted one is simply absent.

    The previous secret is included (second signature) until its rotation window ends. Each
    target carries the subscription's gate (`webhooks.circuit`), told the failure counter read
    here.
    """
    rows = Subscription.objects.filter(pk__in=set(subscription_ids)).only(
        "id",
        "organization_id",
        "url",
        "enabled",
        "secret_encrypted",
        "previous_secret_encrypted",
        "previous_secret_expires_at",
        "consecutive_failures",
        "updated_at",
    )
    return {row.id: _target(row, now) for row in rows}


def _target(row: Subscription, now: dt.datetime) -> Target:
    gate = circuit.gate_for(row.id)
    gate.sync(row.consecutive_failures, row.updated_at)
    target = partial(
        Target,
        subscription_id=row.id,
        organization_id=row.organization_id,
        url=row.url,
        enabled=row.enabled,
        gate=gate,
    )
    try:
        return target(keys=tuple(signing.secret_key(s) for s in _secrets(row, now)))
    except DecryptionError as exc:
        # One bad row (a key rotated away, a corrupt value) must not stop every other send.
        logger.error("webhook subscription %s: its signing secret cannot be decrypted", row.id)
        unusable = f"SecretUnavailable: {exc} (check ENCRYPTION_KEYS_WEBHOOKS)"
        return target(keys=(), unusable=unusable)


def _secrets(row: Subscription, now: dt.datetime) -> list[str]:
    secrets = [signing.decrypt_secret(row.secret_encrypted)]
    expires = row.previous_secret_expires_at
    if row.previous_secret_encrypted and expires is not None and now < expires:
        secrets.append(signing.decrypt_secret(row.previous_secret_encrypted))
    return secrets


def subscription_list(*, organization: Organization | uuid.UUID) -> QuerySet[Subscription]:
    return Subscription.objects.filter(organization=organization).order_by("created_at")


def subscription_get(
    *, organization: Organization | uuid.UUID, subscription_id: object
) -> Subscription | None:
    """The organization's subscription, or None (another tenant's id is simply not found)."""
    try:
        pk = uuid.UUID(str(subscription_id))
    except ValueError:
        return None
    return Subscription.objects.filter(organization=organization, pk=pk).first()


def delivery_list(
    *,
    organization: Organization | uuid.UUID,
    subscription_id: uuid.UUID | None = None,
    status: str | None = None,
    before_id: int | None = None,
    limit: int = 50,
) -> list[WebhookDelivery]:
    """The organization's webhook deliveries, newest first (webhook_delivery_list_idx)."""
    rows = WebhookDelivery.objects.filter(
        organization=organization, consumer__startswith=CONSUMER_PREFIX
    ).select_related("event")
    if subscription_id is not None:
        rows = rows.filter(consumer=consumer_name(subscription_id))
    if status:
        rows = rows.filter(status=status)
    if before_id is not None:
        rows = rows.filter(pk__lt=before_id)
    return list(rows.order_by("-id")[:limit])


def delivery_get(
    *, organization: Organization | uuid.UUID, delivery_id: object, with_attempts: bool = False
) -> WebhookDelivery | None:
    """The organization's webhook delivery, or None (another tenant's id is simply not found).

    `with_attempts` prefetches its attempt log, oldest first (`delivery.webhook_attempts.all()`).
    """
    try:
        pk = int(str(delivery_id))
    except ValueError:
        return None
    rows = WebhookDelivery.objects.filter(
        organization=organization, consumer__startswith=CONSUMER_PREFIX, pk=pk
    ).select_related("event")
    if with_attempts:
        log = Attempt.objects.order_by("created_at", "id")
        rows = rows.prefetch_related(Prefetch("webhook_attempts", queryset=log))
    return rows.first()


def subscription_organization(consumer: str) -> uuid.UUID | None:
    """The organization of a subscription's consumer name `webhook:<uuid>` (None: no such
    subscription); the bus's pause API asks it through eventbus.store.pauses.register_owner."""
    subscription_id = subscription_id_of(consumer)
    if subscription_id is None:
        return None
    return (
        Subscription.objects.filter(pk=subscription_id)
        .values_list("organization_id", flat=True)
        .first()
    )
