"""Webhook writes: subscriptions (create, update, delete, rotate, enable, disable, ping), resend
and attempt-log retention. Keyword-only arguments; each operator action is audited."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.utils import timezone

import eventbus
from core import audit
from core.models import Organization
from eventbus.dispatch import claim as claims
from eventbus.operations import services as bus_services
from eventbus.store import catalog
from eventbus.store.models import Delivery, EventLog
from webhooks import signing, ssrf
from webhooks.conf import webhook_settings
from webhooks.models import Attempt, Subscription, consumer_name, subscription_id_of

WILDCARD_ALL = "*"
MAX_EVENT_TYPES = 100
MAX_DESCRIPTION = 500


class InvalidSubscription(ValueError):
    """Bad subscription input (URL, event types...); nothing was written.

    `field` names the input at fault (`url`, `event_types`, `description`) so the API can
    report it where it belongs.
    """

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class ActionRefused(ValueError):
    """The subscription or delivery is not in a state that allows the action; nothing changed."""


class ResendRefused(ActionRefused):
    """The delivery cannot be resent (not a webhook delivery, still pending, disabled...)."""


def subscription_create(
    *,
    organization: Organization,
    url: str,
    event_types: Iterable[str],
    description: str = "",
    actor: str,
) -> tuple[Subscription, str]:
    """Create an enabled subscription; returns it and its secret (shown to the caller once)."""
    secret = signing.generate_secret()
    subscription = Subscription(
        organization=organization,
        url=_clean_url(url),
        event_types=clean_event_types(event_types),
        description=_clean_description(description),
        secret_encrypted=signing.encrypt_secret(secret),
        max_attempts=webhook_settings.MAX_ATTEMPTS,
    )
    with transaction.atomic():
        subscription.save()
        _audit(
            subscription, actor, "webhook.subscription_create", details={"url": subscription.url}
        )
    return subscription, secret


def subscription_update(
    *,
    subscription: Subscription,
    actor: str,
    url: str | None = None,
    event_types: Iterable[str] | None = None,
    description: str | None = None,
) -> Subscription:
    """Change the URL, event types or description (validated like at creation)."""
    changes: dict[str, Any] = {}
    if url is not None:
        changes["url"] = _clean_url(url)
    if event_types is not None:
        changes["event_types"] = clean_event_types(event_types)
    if description is not None:
        changes["description"] = _clean_description(description)
    for field, value in changes.items():
        setattr(subscription, field, value)
    with transaction.atomic():
        subscription.save()
        _audit(
            subscription, actor, "webhook.subscription_update", details={"fields": sorted(changes)}
        )
    return subscription


def subscription_delete(*, subscription: Subscription, actor: str) -> None:
    """Delete a subscription; deliveries still pending die unsent when they come due."""
    with transaction.atomic():
        _audit(
            subscription, actor, "webhook.subscription_delete", details={"url": subscription.url}
        )
        subscription.delete()


def subscription_rotate_secret(*, subscription: Subscription, actor: str) -> str:
    """New secret; the previous one keeps signing (both signatures sent) for the grace window."""
    secret = signing.generate_secret()
    grace = dt.timedelta(hours=webhook_settings.ROTATION_GRACE_HOURS)
    subscription.previous_secret_encrypted = subscription.secret_encrypted
    subscription.previous_secret_expires_at = timezone.now() + grace
    subscription.secret_encrypted = signing.encrypt_secret(secret)
    with transaction.atomic():
        subscription.save()
        _audit(subscription, actor, "webhook.subscription_rotate_secret")
    return secret


def subscription_enable(*, subscription: Subscription, actor: str) -> Subscription:
    """Re-enable (an explicit action): the failure counter starts again from 0."""
    subscription.enabled = True
    subscription.consecutive_failures = 0
    subscription.disabled_at = None
    subscription.disabled_reason = ""
    with transaction.atomic():
        subscription.save()
        _audit(subscription, actor, "webhook.subscription_enable")
    return subscription


def subscription_disable(
    *, subscription_id: uuid.UUID, actor: str, reason: str, last_error: str = ""
) -> bool:
    """Disable (if enabled) and emit `webhook.subscription_disabled` in the same transaction.

    The event is never delivered to the disabled endpoint: fan-out only takes enabled ones.
    Returns False when it was already disabled (nothing emitted twice).
    """
    with transaction.atomic():
        changed = Subscription.objects.filter(pk=subscription_id, enabled=True).update(
            enabled=False,
            disabled_at=timezone.now(),
            disabled_reason=reason,
            updated_at=timezone.now(),
        )
        if not changed:
            return False
        subscription = Subscription.objects.get(pk=subscription_id)
        eventbus.emit(
            "webhook.subscription_disabled",
            organization=subscription.organization_id,
            entity_kind="webhook_subscription",
            entity_id=subscription.id,
            payload={
                "subscription_id": str(subscription.id),
                "reason": reason,
                "last_error": last_error,
            },
        )
        _audit(subscription, actor, "webhook.subscription_disable", reason=reason)
    return True


def subscription_ping(*, subscription: Subscription, actor: str) -> EventLog:
    """Queue a `webhook.ping` delivered to this subscription only (through the worker)."""
    if not subscription.enabled:
        raise ActionRefused("the subscription is disabled: enable it before a test ping")
    with transaction.atomic():
        event = eventbus.emit(
            "webhook.ping",
            organization=subscription.organization_id,
            entity_kind="webhook_subscription",
            entity_id=subscription.id,
            payload={"subscription_id": str(subscription.id)},
        )
        _audit(
            subscription, actor, "webhook.subscription_ping", details={"event_id": str(event.id)}
        )
    return event


def delivery_resend(*, delivery: Delivery, actor: str) -> None:
    """A new attempt of a done or dead delivery, same delivery id (X-Webhook-Delivery)."""
    subscription = _subscription_of(delivery)
    if not subscription.enabled:
        raise ResendRefused("the subscription is disabled: enable it before resending")
    with transaction.atomic():
        if not claims.reprocess([delivery.pk]):
            raise ResendRefused(
                f"delivery {delivery.pk} is {delivery.status}: only done or dead deliveries "
                "can be resent"
            )
        audit.record(
            actor=actor,
            action="webhook.delivery_resend",
            target_type="eventbus.delivery",
            target_id=delivery.pk,
            organization_id=delivery.organization_id,
            details={"subscription_id": str(subscription.id), "event_id": str(delivery.event_id)},
        )


def attempts_purge(*, now: dt.datetime | None = None, batch: int = 10_000) -> int:
    """Delete attempt-log rows older than WEBHOOKS_ATTEMPT_RETENTION_DAYS; returns how many."""
    cutoff = (now or timezone.now()) - dt.timedelta(days=webhook_settings.ATTEMPT_RETENTION_DAYS)
    total = 0
    while True:
        ids = list(
            Attempt.objects.filter(created_at__lt=cutoff).values_list("pk", flat=True)[:batch]
        )
        if not ids:
            return total
        total += Attempt.objects.filter(pk__in=ids).delete()[0]


def clean_event_types(event_types: Iterable[str]) -> list[str]:
    """Exact declared types, `entity.*` wildcards of declared entities, or `*`; deduplicated."""
    try:
        return _event_types(event_types)
    except ValueError as exc:
        raise InvalidSubscription(str(exc), field="event_types") from None


def _event_types(event_types: Iterable[str]) -> list[str]:
    if isinstance(event_types, str) or not isinstance(event_types, Iterable):
        raise ValueError("event_types must be a list of event types")
    cleaned = list(dict.fromkeys(event_types))
    if not cleaned:
        raise ValueError("event_types must not be empty (use ['*'] for every event)")
    if len(cleaned) > MAX_EVENT_TYPES:
        raise ValueError(f"at most {MAX_EVENT_TYPES} event types per subscription")
    for name in cleaned:
        _check_event_type(name)
    return cleaned


def _check_event_type(name: object) -> None:
    if name == WILDCARD_ALL:
        return
    if not isinstance(name, str):
        raise ValueError(f"event type {name!r} is not a string")
    entities = {t.split(".", 1)[0] for t in catalog.declared_types()}
    if name.endswith(".*"):
        if name[:-2] not in entities:
            raise ValueError(f"{name!r}: no declared event type starts with {name[:-1]!r}")
        return
    if not catalog.is_declared(name):
        raise ValueError(f"unknown event type {name!r}: use a declared type, 'entity.*' or '*'")


def _clean_url(url: str) -> str:
    try:
        return ssrf.validate_url(url)
    except ValueError as exc:
        raise InvalidSubscription(str(exc), field="url") from None


def _clean_description(description: str) -> str:
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
        raise InvalidSubscription(
            f"description must be a string of at most {MAX_DESCRIPTION} characters",
            field="description",
        )
    return description


def _subscription_of(delivery: Delivery) -> Subscription:
    subscription_id = subscription_id_of(delivery.consumer)
    if subscription_id is None:
        raise ResendRefused(f"delivery {delivery.pk} is not a webhook delivery")
    subscription = Subscription.objects.filter(
        pk=subscription_id, organization_id=delivery.organization_id
    ).first()
    if subscription is None:
        raise ResendRefused("the subscription of this delivery no longer exists")
    return subscription


def _audit(
    subscription: Subscription,
    actor: str,
    action: str,
    *,
    reason: str = "",
    details: dict[str, Any] | None = None,
) -> None:
    audit.record(
        actor=actor,
        action=action,
        target_type="webhooks.subscription",
        target_id=subscription.pk,
        organization_id=subscription.organization_id,
        reason=reason,
        details=details,
    )


def subscription_pause(*, subscription: Subscription, actor: str, reason: str) -> bool:
    """Hold the subscription's deliveries pending (none sent, no attempt charged) until resumed.

    The bus's consumer pause (eventbus/store/pauses.py) on `webhook:<id>`: unlike a disable, new
    events still fan out to it, so nothing is lost while the endpoint is down. Audited.
    """
    return bus_services.consumer_pause(
        consumer=consumer_name(subscription.id),
        actor=actor,
        reason=reason,
        organization_id=subscription.organization_id,
    )


def subscription_resume(*, subscription: Subscription, actor: str) -> bool:
    """Send the subscription's held deliveries again (the workers are woken). Audited."""
    return bus_services.consumer_resume(
        consumer=consumer_name(subscription.id),
        actor=actor,
        organization_id=subscription.organization_id,
    )
