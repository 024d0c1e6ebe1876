"""The admin pages: stores with status, last sync, counts and the "resync" action; the shop's
orders and products; never a token or a customer's identity."""

from __future__ import annotations

import pytest
from django.test import Client

from crm.models import Order, Product
from eventbus.store.models import EventLog
from nuvemshop.models import SkippedRecord, Store

pytestmark = pytest.mark.django_db


def test_the_stores_list_shows_status_counts_and_links(admin_client: Client, store: Store) -> None:
    Store.objects.filter(pk=store.pk).update(orders_count=12, products_count=3)
    stopped = Store(organization=store.organization, ns_store_id=790, status="token_invalid")
    stopped.save()
    page = admin_client.get("/admin/nuvemshop/store/").content.decode()
    assert "Connect a store" in page
    assert "token refused: reinstall" in page
    assert f"/admin/crm/order/?ns_store_id={store.ns_store_id}" in page
    assert store.access_token_encrypted not in page and "tok-789" not in page
    detail = admin_client.get(f"/admin/nuvemshop/store/{store.pk}/change/").content.decode()
    assert "tok-789" not in detail and store.access_token_encrypted not in detail


def test_resync_queues_the_full_sync_job(admin_client: Client, store: Store) -> None:
    response = admin_client.post(
        "/admin/nuvemshop/store/",
        {"action": "resync", "_selected_action": [str(store.pk)]},
    )
    assert response.status_code == 302
    [job] = EventLog.objects.filter(event_type="nuvemshop.full_resync")
    assert job.payload["store_id"] == str(store.pk)


def test_the_shops_orders_and_products_pages(admin_client: Client, store: Store) -> None:
    Order.objects.create(
        organization=store.organization,
        number="789-101",
        total_cents=5800,
        ns_store_id=789,
        ns_order_id=555,
        customer_email="maria@example.com",
        payment_status="paid",
    )
    Product.objects.create(organization=store.organization, name="Camiseta", ns_product_id=31)
    orders = admin_client.get("/admin/crm/order/?ns_store_id=789").content.decode()
    assert "789-101" in orders and "paid" in orders and "maria@example.com" not in orders
    order = Order.objects.get()
    detail = admin_client.get(f"/admin/crm/order/{order.pk}/change/").content.decode()
    assert "maria@example.com" not in detail
    assert "Camiseta" in admin_client.get("/admin/crm/product/").content.decode()


def test_skipped_records_are_listed(admin_client: Client, store: Store) -> None:
    SkippedRecord.objects.create(
        organization=store.organization,
        store=store,
        resource="orders",
        ns_id=1234567890,
        source="sync",
        error="order 1234567890: total '12,50' is not a decimal amount",
    )
    page = admin_client.get("/admin/nuvemshop/skippedrecord/").content.decode()
    assert "1234567890" in page and "is not a decimal amount" in page
