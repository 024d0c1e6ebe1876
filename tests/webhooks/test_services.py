"""Subscription services: validation, secrets encrypted at rest and shown once, retention."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from core.models import AuditLog, Organization
from tests.webhooks.conftest import Subscribe
from webhooks import services, signing
from webhooks.models import Attempt, Subscription

pytestmark = pytest.mark.django_db
URL = "https://hooks.example.com/in"


def test_create_returns_the_secret_once_and_stores_it_encrypted(subscribe: Subscribe) -> None:
    _subscription, secret = subscribe(URL, ["lead.*", "lead.*", "contact.created"])
    assert secret.startswith("whsec_") and len(signing.secret_key(secret)) == 32
    stored = Subscription.objects.get()
    assert secret not in stored.secret_encrypted
    assert signing.decrypt_secret(stored.secret_encrypted) == secret
    assert stored.event_types == ["lead.*", "contact.created"]
    assert (stored.enabled, stored.consecutive_failures, stored.max_attempts) == (True, 0, 8)
    audit = AuditLog.objects.get(action="webhook.subscription_create")
    assert secret not in str(audit.details)


@pytest.mark.parametrize(
    ("event_types", "message"),
    [
        ([], "must not be empty"),
        ("lead.*", "must be a list"),
        (["lead.creatd"], "unknown event type"),
        (["nope.*"], "no declared event type"),
        ([42], "not a string"),
    ],
)
def test_bad_event_types_are_refused_and_nothing_is_written(
    org: Organization, loopback_ok: object, event_types: object, message: str
) -> None:
    with pytest.raises(services.InvalidSubscription, match=message):
        services.subscription_create(
            organization=org,
            url=URL,
            event_types=event_types,
            actor="t",  # type: ignore[arg-type]
        )
    assert not Subscription.objects.exists() and not AuditLog.objects.exists()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://a:b@x.example.com/", "credentials"),
        ("http://0177.0.0.1:8080/", "host '0177.0.0.1' is not a canonical IPv4 address"),
        ("http://0x7f.1/", "host '0x7f.1' is not a canonical IPv4 address"),
        ("http://2130706433/", "host '2130706433' is not a canonical IPv4 address"),
        ("http://127.1/", "write four decimal numbers without leading zeros"),
        ("http://127.0.0.1:65536/", "port 65536 is outside 1-65535"),
    ],
)
def test_bad_urls_are_refused(
    org: Organization, loopback_ok: object, url: str, message: str
) -> None:
    with pytest.raises(services.InvalidSubscription, match=message) as refused:
        services.subscription_create(organization=org, url=url, event_types=["*"], actor="t")
    assert refused.value.field == "url"
    assert not Subscription.objects.exists() and not AuditLog.objects.exists()


def test_rotation_keeps_the_previous_secret_for_the_grace_window(subscribe: Subscribe) -> None:
    subscription, old = subscribe(URL)
    new = services.subscription_rotate_secret(subscription=subscription, actor="t")
    subscription.refresh_from_db()
    assert new != old
    assert signing.decrypt_secret(subscription.secret_encrypted) == new
    assert signing.decrypt_secret(subscription.previous_secret_encrypted or "") == old
    window = subscription.previous_secret_expires_at - timezone.now()  # type: ignore[operator]
    assert dt.timedelta(hours=23, minutes=59) < window <= dt.timedelta(hours=24)


def test_update_validates_like_create(subscribe: Subscribe) -> None:
    subscription, _ = subscribe(URL)
    services.subscription_update(subscription=subscription, actor="t", event_types=["lead.won"])
    with pytest.raises(services.InvalidSubscription):
        services.subscription_update(subscription=subscription, actor="t", url="ftp://x")
    subscription.refresh_from_db()
    assert (subscription.url, subscription.event_types) == (URL, ["lead.won"])


def test_attempt_log_retention(subscribe: Subscribe, org: Organization) -> None:
    import eventbus
    from eventbus.store.models import Delivery

    subscription, _ = subscribe(URL)
    eventbus.emit(
        "lead.won", organization=org, entity_kind="lead", payload={"value": 1, "won_at": "x"}
    )
    delivery = Delivery.objects.get()
    now = timezone.now()
    for age in (31, 29):
        Attempt.objects.create(
            delivery=delivery, subscription=subscription, organization=org, attempt=1,
            webhook_id=signing.delivery_id(delivery.event_id, subscription.id), url=URL,
            status_code=200, duration_ms=5, created_at=now - dt.timedelta(days=age),
        )  # fmt: skip
    assert services.attempts_purge(now=now) == 1
    assert services.attempts_purge(now=now) == 0
    assert Attempt.objects.count() == 1
