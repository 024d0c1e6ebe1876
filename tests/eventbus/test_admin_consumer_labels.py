"""A webhook consumer is called by its subscription's name on every console page, never by its
raw `webhook:<uuid>`, through one batched lookup (issue 44, item 6)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from core.models import Organization
from eventbus.store.models import Delivery
from tests.support.admin import CONSOLE_READER, staff
from tests.support.dlq import make_dead, webhook_dead_letter

pytestmark = pytest.mark.django_db

DELIVERIES = reverse("admin:eventbus_delivery_changelist")
WEBHOOK_DELIVERIES = reverse("admin:webhooks_webhookdelivery_changelist")


@pytest.fixture
def ops(client: Client) -> Client:
    client.force_login(staff("ops", *CONSOLE_READER))
    return client


@pytest.fixture
def webhook(org: Organization) -> tuple[Any, Delivery]:
    """A dead webhook delivery of the subscription "Order sync", emitted in request req-label-1."""
    subscription, _ = webhook_dead_letter(org, description="Order sync", enabled=True)
    (dead,) = make_dead(org, 1, request_id="req-label-1")
    Delivery.objects.filter(pk=dead.pk).update(consumer=subscription.consumer)
    dead.refresh_from_db()
    return subscription, dead


def shows_name_not_uuid(html: str, subscription: Any) -> None:
    assert "Order sync" in html
    assert f">{subscription.consumer}<" not in html  # no cell or link reads webhook:<uuid>


def section(html: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}".*?</table>', html, re.S)
    assert found, element_id
    return found.group(0)


def test_the_bus_status_table_names_the_subscription(
    ops: Client, webhook: tuple[Any, Delivery]
) -> None:
    subscription, _ = webhook
    html = ops.get(reverse("eventbus_ops:status")).content.decode()
    table = section(html, "status-by-type")
    shows_name_not_uuid(table, subscription)
    link = reverse("admin:webhooks_subscription_change", args=[subscription.pk])
    assert f'<a href="{link}">Order sync</a>' in table


def test_the_correlation_view_names_the_subscription(
    ops: Client, webhook: tuple[Any, Delivery]
) -> None:
    subscription, dead = webhook
    url = f"{reverse('eventbus_ops:correlation')}?request_id=req-label-1"
    html = ops.get(url).content.decode()
    shows_name_not_uuid(html, subscription)
    delivery = reverse("admin:eventbus_delivery_change", args=[dead.pk])
    assert re.search(rf'<a href="{delivery}" title="{subscription.consumer}">Order sync</a>', html)


def test_the_deliveries_list_delivery_and_event_pages_name_the_subscription(
    ops: Client, webhook: tuple[Any, Delivery]
) -> None:
    subscription, dead = webhook
    shows_name_not_uuid(ops.get(DELIVERIES).content.decode(), subscription)
    detail = ops.get(reverse("admin:eventbus_delivery_change", args=[dead.pk]))
    shows_name_not_uuid(detail.content.decode(), subscription)
    event = ops.get(reverse("admin:eventbus_eventlog_change", args=[dead.event_id]))
    shows_name_not_uuid(section(event.content.decode(), "deliveries"), subscription)
    consumer_filter = next(
        spec for spec in ops.get(DELIVERIES).context["cl"].filter_specs if spec.title == "consumer"
    )
    assert (subscription.consumer, "Order sync (hooks.example.com)") in (
        consumer_filter.lookup_choices
    )


def test_the_webhook_delivery_pages_name_the_subscription(
    ops: Client, webhook: tuple[Any, Delivery]
) -> None:
    subscription, dead = webhook
    listing = ops.get(WEBHOOK_DELIVERIES).content.decode()
    shows_name_not_uuid(listing, subscription)
    assert str(subscription.pk) not in re.sub(r'(href|title)="[^"]*"', "", listing)
    detail = ops.get(reverse("admin:webhooks_webhookdelivery_change", args=[dead.pk]))
    shows_name_not_uuid(detail.content.decode(), subscription)


def test_the_subscriptions_list_shows_the_description(
    ops: Client, webhook: tuple[Any, Delivery]
) -> None:
    html = ops.get(reverse("admin:webhooks_subscription_changelist")).content.decode()
    assert re.search(r'<td class="field-description">Order sync</td>', html)


def test_labels_are_looked_up_once_per_page_not_per_row(ops: Client, org: Organization) -> None:
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert ops.get(DELIVERIES).status_code == 200
            assert ops.get(WEBHOOK_DELIVERIES).status_code == 200
        return len(captured)

    webhook_dead_letter(org, description="First hook", enabled=True)
    one = queries()
    for n in range(4):
        webhook_dead_letter(org, description=f"Hook {n}", enabled=True)
    assert queries() == one


def test_the_consumers_page_names_a_paused_subscription(
    client: Client, webhook: tuple[Any, Delivery]
) -> None:
    from eventbus.operations import services

    subscription, _ = webhook
    services.consumer_pause(consumer=subscription.consumer, actor="test", reason="receiver down")
    client.force_login(staff("ops", *CONSOLE_READER, "eventbus.view_consumerstate"))
    html = client.get(reverse("eventbus_ops:consumers")).content.decode()
    row = re.search(rf'data-consumer="{subscription.consumer}".*?</tr>', html, re.S)
    assert row, html
    shows_name_not_uuid(row.group(0), subscription)
