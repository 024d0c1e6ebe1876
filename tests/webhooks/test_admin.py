"""Admin screens: the secret is shown once, actions call services, deliveries resend."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

import eventbus
from core.models import AuditLog, Organization
from eventbus.store.models import Delivery
from tests.webhooks.conftest import Subscribe
from webhooks import signing
from webhooks.models import Subscription

pytestmark = pytest.mark.django_db
URL = "https://hooks.example.com/in"


@pytest.fixture
def admin_client(db: None) -> Client:
    user = User.objects.create_superuser("ops", "ops@example.com", "pw-not-used")
    client = Client()
    client.force_login(user)
    return client


def test_adding_a_subscription_shows_its_secret_once(
    admin_client: Client, org: Organization
) -> None:
    response = admin_client.post(
        "/admin/webhooks/subscription/add/",
        {"organization": org.pk, "url": URL, "description": "", "event_types": "lead.*, lead.won"},
    )
    assert response.status_code == 302  # POST/redirect/GET: a refresh re-submits nothing
    shown = admin_client.get(response["Location"])
    assert shown.status_code == 200 and "no-store" in shown["Cache-Control"]
    page = shown.content.decode()
    subscription = Subscription.objects.get()
    secret = signing.decrypt_secret(subscription.secret_encrypted)
    assert secret in page and "will not be shown again" in page
    again = admin_client.get(response["Location"])
    assert again.status_code == 410 and secret not in again.content.decode()
    assert Subscription.objects.count() == 1
    # Another session with the same URL gets nothing either.
    other = Client()
    other.force_login(User.objects.create_superuser("ops2", "o2@example.com", "pw-not-used"))
    assert other.get(response["Location"]).status_code == 410
    assert subscription.event_types == ["lead.*", "lead.won"]
    change = admin_client.get(f"/admin/webhooks/subscription/{subscription.pk}/change/")
    assert change.status_code == 200 and secret not in change.content.decode()
    assert subscription.secret_encrypted not in change.content.decode()


def test_the_add_form_refuses_bad_input(admin_client: Client, org: Organization) -> None:
    response = admin_client.post(
        "/admin/webhooks/subscription/add/",
        {"organization": org.pk, "url": "https://127.0.0.1/x", "event_types": "lead.*"},
    )
    assert response.status_code == 200 and "SSRF protection" in response.content.decode()
    assert not Subscription.objects.exists()


@pytest.mark.parametrize(
    "url", ["https://0177.0.0.1/x", "https://127.1/x", "https://2130706433/x", "https://0x7f.1/x"]
)
def test_the_add_form_refuses_non_canonical_ipv4_hosts(
    admin_client: Client, org: Organization, url: str
) -> None:
    response = admin_client.post(
        "/admin/webhooks/subscription/add/",
        {"organization": org.pk, "url": url, "event_types": "lead.*"},
    )
    page = response.content.decode()
    assert response.status_code == 200 and "is not a canonical IPv4 address" in page
    assert not Subscription.objects.exists() and not AuditLog.objects.exists()


def test_rotate_disable_enable_and_ping_actions(admin_client: Client, subscribe: Subscribe) -> None:
    subscription, old = subscribe(URL)
    changelist = "/admin/webhooks/subscription/"
    rotated = admin_client.post(
        changelist, {"action": "rotate_secret", "_selected_action": [subscription.pk]}, follow=True
    )
    subscription.refresh_from_db()
    new = signing.decrypt_secret(subscription.secret_encrypted)
    assert new != old and new in rotated.content.decode()
    admin_client.post(changelist, {"action": "disable", "_selected_action": [subscription.pk]})
    subscription.refresh_from_db()
    assert not subscription.enabled
    admin_client.post(changelist, {"action": "enable", "_selected_action": [subscription.pk]})
    admin_client.post(
        changelist, {"action": "send_test_ping", "_selected_action": [subscription.pk]}
    )
    subscription.refresh_from_db()
    assert subscription.enabled
    assert Delivery.objects.filter(consumer=subscription.consumer).count() == 1
    actions = set(AuditLog.objects.values_list("action", flat=True))
    assert {"webhook.subscription_rotate_secret", "webhook.subscription_ping"} <= actions


def test_deliveries_are_listed_read_only_and_resent(
    admin_client: Client, subscribe: Subscribe, org: Organization
) -> None:
    _subscription, _ = subscribe(URL)
    eventbus.emit(
        "lead.won", organization=org, entity_kind="lead", payload={"value": 1, "won_at": "x"}
    )
    delivery = Delivery.objects.get()
    Delivery.objects.filter(pk=delivery.pk).update(status="dead")
    listing = admin_client.get("/admin/webhooks/webhookdelivery/")
    assert listing.status_code == 200 and "lead.won" in listing.content.decode()
    detail = admin_client.get(f"/admin/webhooks/webhookdelivery/{delivery.pk}/change/")
    assert detail.status_code == 200
    admin_client.post(
        "/admin/webhooks/webhookdelivery/", {"action": "resend", "_selected_action": [delivery.pk]}
    )
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("pending", 0)
    assert AuditLog.objects.filter(action="webhook.delivery_resend").count() == 1
