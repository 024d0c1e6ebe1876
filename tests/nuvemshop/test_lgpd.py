"""The shop's mandatory LGPD webhooks end to end: customers/data_request -> an access request,
customers/redact -> a redact request whose redaction leaves no trace in the CRM or the bus and
is carried to the shop (`PUT /customers/{id}`), store/redact -> the store's data removed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from crm.models import Contact, Order, Product
from eventbus.store.models import EventLog
from lgpd.handlers import EXPORT_CONSUMER, REDACT_CONSUMER, SHOP_REQUEST_CONSUMER
from lgpd.models import DataRequest
from nuvemshop.handlers import SYNC_CONSUMER
from nuvemshop.models import ShopRedaction, Store, WebhookReceipt
from tests.nuvemshop.conftest import drain
from tests.support.nuvemshop import (
    FakeNuvemshop,
    FakeStore,
    customer,
    notification,
    order,
    product,
)
from tests.support.traces import traces

pytestmark = pytest.mark.django_db

NAME, EMAIL, PHONE = "Joana Pereira", "joana.pereira@example.com", "+5511987650000"
ALL = (SYNC_CONSUMER, SHOP_REQUEST_CONSUMER, EXPORT_CONSUMER, REDACT_CONSUMER)


@pytest.fixture(autouse=True)
def _no_delay(settings: Any) -> None:
    settings.LGPD = {**settings.LGPD, "EXPORT_DELAY_DAYS": 0, "REDACT_DELAY_DAYS": 0}


def deliver(client: Client, event: str, payload: dict[str, Any]) -> None:
    body, signature = FakeNuvemshop.signed(payload)
    response = client.post(
        f"/api/webhooks/nuvemshop/{event}",
        data=body,
        content_type="application/json",
        headers={"x-linkedstore-hmac-sha256": signature},
    )
    assert response.status_code == 200, response.content


@pytest.fixture
def synced(client: Client, store: Store, shop: FakeStore) -> Contact:
    """Joana bought in the shop: her order was synced, which made her a linked CRM contact."""
    buyer = customer(77, name=NAME, email=EMAIL, phone=PHONE)
    shop.customers.append(buyer)
    shop.orders.append(order(555, number=101, buyer=buyer))
    deliver(client, "order/created", {"store_id": 789, "event": "order/created", "id": 555})
    drain()
    return Contact.objects.get(email=EMAIL)


def lgpd_body(kind: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "store_id": 789,
        "customer": {"id": 77, "email": EMAIL, "phone": PHONE, "identification": "12345678909"},
        "orders_to_redact" if kind == "redact" else "orders_requested": [555],
    }
    if kind == "data_request":
        body["data_request"] = {"id": 456}
    return body


def test_customers_data_request_opens_an_access_request_without_personal_data_on_the_bus(
    client: Client, synced: Contact
) -> None:
    deliver(client, "customers/data_request", lgpd_body("data_request"))
    drain((SHOP_REQUEST_CONSUMER,))
    request = DataRequest.objects.get()
    assert (request.kind, request.contact_id, request.channel) == ("access", synced.pk, "nuvemshop")
    [event] = EventLog.objects.filter(event_type="nuvemshop.customer_data_requested")
    assert event.payload["ns_customer_id"] == 77 and event.payload["ns_request_id"] == "456"
    assert not any(needle in json.dumps(event.payload) for needle in (EMAIL, PHONE, "12345678909"))
    deliver(client, "customers/data_request", lgpd_body("data_request"))  # the shop retries
    drain((SHOP_REQUEST_CONSUMER,))
    assert DataRequest.objects.count() == 1


def test_customers_redact_leaves_no_trace_and_redacts_in_the_shop(
    client: Client, synced: Contact, fake: FakeNuvemshop, shop: FakeStore
) -> None:
    assert traces((NAME, EMAIL, PHONE))  # the search sees her before
    deliver(client, "customers/redact", lgpd_body("redact"))
    drain(ALL)
    request = DataRequest.objects.get()
    assert (request.kind, request.status) == ("redact", "completed")
    assert traces((NAME, EMAIL, PHONE)) == []
    [applied] = EventLog.objects.filter(event_type="lgpd.redact_applied")
    assert applied.payload["scope"] == "crm_and_nuvemshop"
    [put] = [h for h in fake.api_hits("/customers/77") if h.method == "PUT"]
    sent = json.loads(put.body)
    assert EMAIL not in put.body.decode() and sent["name"] == "Anonimizado"
    assert ShopRedaction.objects.get().status == "done"
    assert Order.objects.get(ns_order_id=555).total_cents == 5800  # the money stays


def test_a_crm_redaction_of_a_contact_unknown_to_the_shop_says_crm_only(
    store: Store, org: Any
) -> None:
    from lgpd import services

    contact = Contact.objects.create(organization=org, name="Outra Pessoa", email="o@example.com")
    services.data_request_create(
        organization_id=org.pk, contact_id=contact.pk, kind="redact", channel="api", actor="t"
    )
    drain((REDACT_CONSUMER,))
    [applied] = EventLog.objects.filter(event_type="lgpd.redact_applied")
    assert applied.payload["scope"] == "crm_only"
    assert not ShopRedaction.objects.exists()


def test_store_redact_removes_the_stores_data(
    client: Client, synced: Contact, store: Store, shop: FakeStore
) -> None:
    shop.products.append(product(31))
    deliver(client, "product/created", {"store_id": 789, "event": "product/created", "id": 31})
    drain()
    assert Product.objects.exists() and Order.objects.exists()
    deliver(client, "store/redact", {"store_id": 789})
    drain()
    store.refresh_from_db()
    assert (store.status, store.access_token_encrypted) == ("redacted", "")
    assert not Order.objects.filter(ns_store_id=789).exists()
    assert not Product.objects.filter(ns_store_id=789).exists()
    assert not store.customer_links.exists()
    assert WebhookReceipt.objects.filter(event="store/redact").count() == 1


def test_a_redaction_requested_in_the_crm_reaches_the_shop(
    synced: Contact, fake: FakeNuvemshop
) -> None:
    from lgpd import services

    services.data_request_create(
        organization_id=synced.organization_id,
        contact_id=synced.pk,
        kind="redact",
        channel="admin",
        actor="user:dpo",
    )
    drain(ALL)
    [applied] = EventLog.objects.filter(event_type="lgpd.redact_applied")
    assert applied.payload["scope"] == "crm_and_nuvemshop"
    assert [h.method for h in fake.api_hits("/customers/77")] == ["PUT"]
    assert not synced.nuvemshop_links.exists()  # the shop id points at nobody any more


def test_a_redaction_sticks_when_the_shop_sends_the_persons_orders_again(
    client: Client, store: Store, shop: FakeStore
) -> None:
    """Issue 41 item 6: the shop's orders keep the buyer as placed (the customer's PUT does not
    rewrite them), so the next order/updated brings her name, e-mail and phone back."""
    buyer = customer(77, name=NAME, email=EMAIL, phone=PHONE)
    shop.customers.append(buyer)
    shop.orders.append(order(555, number=101, buyer=dict(buyer)))
    deliver(client, "order/created", notification(789, "order/created", 555))
    drain()
    deliver(client, "customers/redact", lgpd_body("redact"))
    drain(ALL)
    assert traces((NAME, EMAIL, PHONE)) == []
    contacts = Contact.objects.count()

    shop.orders[0]["payment_status"] = "paid"
    deliver(client, "order/updated", notification(789, "order/updated", 555))
    # A new order of hers as another shop customer (a guest checkout with the same e-mail).
    shop.orders.append(order(556, number=102, buyer=customer(88, name=NAME, email=EMAIL)))
    deliver(client, "order/created", notification(789, "order/created", 556))
    drain(ALL)
    assert traces((NAME, EMAIL, PHONE)) == []
    assert Contact.objects.count() == contacts
    updated, new = Order.objects.get(ns_order_id=555), Order.objects.get(ns_order_id=556)
    assert (updated.payment_status, updated.total_cents, updated.contact_id) == ("paid", 5800, None)
    assert (new.total_cents, new.contact_id, new.customer_email) == (5800, None, "")
