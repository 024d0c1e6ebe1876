"""nuvemshop-sync-worker in-process against the fake: store webhooks fetched and upserted with
the catalog's events (once), webhook registration, a full sync, a revoked token."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
import time_machine
from django.test import Client

import eventbus
from core.models import AuditLog, Organization
from crm.models import Contact, Order, Product
from eventbus.store.models import Delivery, EventLog
from nuvemshop import sync
from nuvemshop.models import (
    CustomerLink,
    ShopRedaction,
    SkippedRecord,
    Store,
    SyncCursor,
    WebhookReceipt,
)
from tests.nuvemshop.conftest import drain
from tests.support.factories import ContactFactory, LeadFactory
from tests.support.nuvemshop import (
    APP_ID,
    FakeNuvemshop,
    FakeStore,
    customer,
    notification,
    order,
    product,
)

pytestmark = pytest.mark.django_db


def deliver(client: Client, event: str, **payload: Any) -> None:
    body, signature = FakeNuvemshop.signed({"store_id": 789, "event": event, **payload})
    response = client.post(
        f"/api/webhooks/nuvemshop/{event}",
        data=body,
        content_type="application/json",
        headers={"x-linkedstore-hmac-sha256": signature},
    )
    assert response.status_code == 200, response.content


def payloads(event_type: str) -> list[dict[str, Any]]:
    return list(EventLog.objects.filter(event_type=event_type).values_list("payload", flat=True))


def test_order_paid_upserts_the_order_and_emits_its_events_once(
    client: Client, store: Store, shop: FakeStore
) -> None:
    buyer = customer(77, email="maria@example.com")
    shop.orders.append(order(555, number=101, buyer=buyer, total="58.00", payment_status="paid"))
    contact = ContactFactory(organization=store.organization, email="Maria@example.com")
    with time_machine.travel(dt.datetime(2026, 11, 30, tzinfo=dt.UTC)):  # open before the order
        lead = LeadFactory(organization=store.organization, contact=contact)
    deliver(client, "order/paid", id=555)
    drain()
    placed = Order.objects.get(ns_order_id=555)
    assert (placed.total_cents, placed.contact_id, placed.payment_status) == (
        5800,
        contact.pk,
        "paid",
    )
    [paid] = payloads("nuvemshop.order_paid")
    assert (paid["order_id"], paid["amount_cents"]) == (str(placed.pk), 5800)
    assert dt.datetime.fromisoformat(paid["paid_at"]) == placed.paid_at
    assert "maria" not in str(paid).lower()
    lead.refresh_from_db()
    assert lead.status == "won" and len(payloads("lead.won")) == 1
    assert payloads("lead.won")[0]["value"] == 5800
    # The same order paid again (a second delivery of the shop): nothing new anywhere.
    deliver(client, "order/updated", id=555)
    drain()
    assert Order.objects.filter(ns_order_id=555).count() == 1
    assert len(payloads("nuvemshop.order_paid")) == 1 and len(payloads("lead.won")) == 1
    assert Contact.objects.filter(organization=store.organization).count() == 1
    assert CustomerLink.objects.get(ns_customer_id=77).contact_id == contact.pk


def test_a_shop_order_announces_its_creation_cancellation_and_fulfilment_once(
    client: Client, store: Store, shop: FakeStore
) -> None:
    shop.orders.append(order(601, number=201))
    deliver(client, "order/created", id=601)
    drain()
    placed = Order.objects.get(ns_order_id=601)
    [created] = payloads("nuvemshop.order_created")
    assert (created["order_id"], created["ns_order_id"]) == (str(placed.pk), 601)
    shop.orders[0].update(
        status="cancelled", cancelled_at="2026-12-01T11:00:00-03:00", cancel_reason="customer"
    )
    deliver(client, "order/cancelled", id=601)
    drain()
    [cancelled] = payloads("nuvemshop.order_cancelled")
    assert (cancelled["order_id"], cancelled["reason"]) == (str(placed.pk), "customer")
    shipped = {**order(602, number=202), "shipping_status": "shipped"}
    shop.orders.append({**shipped, "shipped_at": "2026-12-02T09:00:00-03:00"})
    deliver(client, "order/fulfilled", id=602)
    drain()
    [fulfilled] = payloads("nuvemshop.order_fulfilled")
    assert fulfilled["order_id"] == str(Order.objects.get(ns_order_id=602).pk)
    assert len(payloads("nuvemshop.order_created")) == 2  # 602 was new to the CRM too


def test_product_events_upsert_and_mark_deleted(
    client: Client, store: Store, shop: FakeStore
) -> None:
    shop.products.append(product(31, name="Camiseta", price="49.90"))
    deliver(client, "product/created", id=31)
    drain()
    synced = Product.objects.get(ns_product_id=31)
    assert (synced.name, synced.price_cents, synced.sku) == ("Camiseta", 4990, "SKU-31")
    shop.products.clear()
    deliver(client, "product/deleted", id=31)
    drain()
    synced.refresh_from_db()
    assert synced.deleted_at is not None
    actions = [p["action"] for p in payloads("nuvemshop.product_synced")]
    assert sorted(actions) == ["created", "deleted"]


def test_app_uninstalled_stops_syncing(
    client: Client, store: Store, fake: FakeNuvemshop, shop: FakeStore
) -> None:
    deliver(client, "app/uninstalled", id=4321)
    drain()
    store.refresh_from_db()
    assert (store.status, store.access_token_encrypted) == ("uninstalled", "")
    shop.orders.append(order(556, number=102))
    deliver(client, "order/created", id=556)
    drain()
    assert not Order.objects.exists()
    assert WebhookReceipt.objects.get(event="order/created").outcome == "store uninstalled"
    assert fake.api_hits("/orders/556") == []  # the shop was not even asked


def test_install_registers_webhooks_idempotently_and_runs_the_first_sync(
    store: Store, fake: FakeNuvemshop, shop: FakeStore
) -> None:
    from nuvemshop import services
    from nuvemshop.conf import STORE_WEBHOOK_EVENTS

    shop.webhooks.append({"id": 1, "event": "order/paid", "url": "https://old.example.com/hook"})
    shop.products.extend(product(i) for i in range(1, 6))
    shop.customers.extend(customer(i) for i in range(1, 4))
    shop.orders.extend(order(1000 + i, number=i, buyer=customer(i % 3 + 1)) for i in range(7))
    services.store_connect(
        organization_id=store.organization_id,
        grant=services.TokenGrant("tok-789", "bearer", "read_orders", 789),
        actor="test",
    )
    drain()
    hooks = {h["event"]: h["url"] for h in shop.webhooks}
    assert set(hooks) == set(STORE_WEBHOOK_EVENTS)
    assert hooks["order/paid"] == "https://crm.example.com/api/webhooks/nuvemshop/order/paid"
    assert services.webhooks_register(store=store) == {
        "created": 0,
        "updated": 0,
        "unchanged": len(STORE_WEBHOOK_EVENTS),
    }
    store.refresh_from_db()
    assert (store.products_count, store.customers_count, store.orders_count) == (5, 3, 7)
    assert store.last_sync_at is not None
    assert SyncCursor.objects.count() == 3
    assert not SyncCursor.objects.filter(finished_at__isnull=True).exists()
    for hit in fake.api_hits("/v1/789/"):
        assert hit.headers["authentication"] == "bearer tok-789"
        assert hit.headers["user-agent"].startswith("Deskcomm")


def test_a_revoked_token_marks_the_store_and_dead_letters(
    client: Client, store: Store, shop: FakeStore, caplog: pytest.LogCaptureFixture
) -> None:
    shop.token = "revoked-now"
    deliver(client, "order/created", id=9)
    drain()
    store.refresh_from_db()
    assert store.status == "token_invalid"
    assert "Nuvemshop token invalid" in caplog.text


def test_a_429_is_waited_out_for_every_process_of_the_store(
    client: Client, store: Store, fake: FakeNuvemshop, shop: FakeStore
) -> None:
    shop.orders.append(order(700, number=7))
    fake.throttle(2, retry_after=0.3)
    deliver(client, "order/created", id=700)
    drain()
    assert Order.objects.filter(ns_order_id=700).exists()
    hits = fake.api_hits("/orders/700")
    assert len(hits) == 3
    assert hits[2].at - hits[1].at >= 0.25  # waited the Retry-After before trying again


def test_app_suspended_stops_syncing_until_resumed(
    client: Client, store: Store, shop: FakeStore
) -> None:
    deliver(client, "app/suspended", id=4321)
    drain()
    store.refresh_from_db()
    assert (store.status, store.syncing) == ("suspended", False)
    deliver(client, "app/resumed", id=4321)
    drain()
    store.refresh_from_db()
    assert (store.status, store.syncing) == ("connected", True)
    assert EventLog.objects.filter(event_type="nuvemshop.full_resync").count() == 1


# -- issue 38: another tenant's store, receipt or redaction is never acted on ----------------

CROSS_TENANT_ATTACKS = {
    "nuvemshop.store_redact_received": lambda s, r, x: {"store_id": s, "ns_store_id": 789},
    "nuvemshop.full_resync": lambda s, r, x: {"store_id": s},
    "nuvemshop.sync_page": lambda s, r, x: {
        "store_id": s,
        "resource": "products",
        "run_id": str(uuid.uuid4()),
        "page": 1,
    },
    "nuvemshop.store_connected": lambda s, r, x: {"store_id": s, "ns_store_id": 789},
    "nuvemshop.webhook_received": lambda s, r, x: {
        "receipt_id": r,
        "store_id": s,
        "event": "order/paid",
    },
    "nuvemshop.shop_redact_requested": lambda s, r, x: {"redaction_id": x, "store_id": s},
}


@pytest.mark.usefixtures("enforced")
@pytest.mark.parametrize("event_type", sorted(CROSS_TENANT_ATTACKS))
def test_an_event_naming_another_tenants_store_is_refused_and_audited(
    event_type: str, store: Store, fake: FakeNuvemshop, org_b: Organization
) -> None:
    """B's event names A's store (and its receipt, its redaction): dead at once, audited in B,
    nothing of A's touched, nothing asked of the shop."""
    receipt = WebhookReceipt.objects.create(
        organization=store.organization, store=store, event="order/paid", identity="order/paid:1"
    )
    redaction = ShopRedaction.objects.create(
        organization=store.organization, store=store, ns_customer_id=5, lgpd_request_id=uuid.uuid4()
    )
    Product.objects.create(organization=store.organization, ns_product_id=1, name="P")
    payload = CROSS_TENANT_ATTACKS[event_type](str(store.pk), str(receipt.pk), str(redaction.pk))
    attack = eventbus.emit(event_type, organization=org_b, entity_kind="x", payload=payload)
    hits_before = len(fake.api_hits())
    drain()
    dead = Delivery.objects.get(event_id=attack.id)
    assert (dead.status, dead.attempts) == ("dead", 1), dead.last_error
    assert "does not belong to the event's organization" in (dead.last_error or "")
    [audit] = AuditLog.objects.filter(action="security.cross_tenant_refused")
    assert audit.organization_id == org_b.pk and audit.details["event_id"] == str(attack.id)
    store.refresh_from_db()
    assert store.status == Store.Status.CONNECTED and store.access_token
    assert Product.objects.filter(organization=store.organization).count() == 1
    assert ShopRedaction.objects.get(pk=redaction.pk).status == ShopRedaction.Status.PENDING
    assert len(fake.api_hits()) == hits_before


# -- issue 41 ---------------------------------------------------------------------------------


def notify(client: Client, event: str, resource_id: int) -> dict[str, Any]:
    """The shop's notification (the same bytes every time for the same event and id)."""
    body, signature = FakeNuvemshop.signed(notification(789, event, resource_id))
    response = client.post(
        f"/api/webhooks/nuvemshop/{event}",
        data=body,
        content_type="application/json",
        headers={"x-linkedstore-hmac-sha256": signature},
    )
    assert response.status_code == 200, response.content
    return dict(response.json())


def test_a_repeated_order_updated_is_fetched_again(
    client: Client, store: Store, fake: FakeNuvemshop, shop: FakeStore
) -> None:
    shop.orders.append(order(560, number=110, payment_status="paid"))
    assert notify(client, "order/updated", 560) == {"status": "accepted"}
    drain()
    assert Order.objects.get(ns_order_id=560).payment_status == "paid"
    shop.orders[0]["payment_status"] = "refunded"  # the shop notifies with the same body
    assert notify(client, "order/updated", 560) == {"status": "accepted"}
    drain()
    assert len(fake.api_hits("/orders/560")) == 2
    assert Order.objects.get(ns_order_id=560).payment_status == "refunded"
    # One-shot events keep their replay protection (the shop retries until a 200).
    assert notify(client, "order/paid", 560) == {"status": "accepted"}
    assert notify(client, "order/paid", 560) == {"status": "duplicate"}


def test_a_second_app_suspended_acts(client: Client, store: Store, shop: FakeStore) -> None:
    for event in ("app/suspended", "app/resumed", "app/suspended"):
        assert notify(client, event, int(APP_ID)) == {"status": "accepted"}
        drain()
    store.refresh_from_db()
    assert (store.status, store.syncing) == ("suspended", False)


def test_a_malformed_order_is_recorded_and_its_page_is_stored(
    store: Store, fake: FakeNuvemshop, shop: FakeStore
) -> None:
    shop.orders.extend(order(1100 + i, number=i) for i in range(5))
    shop.orders[1]["customer"] = "not an object"  # AttributeError in the upsert
    shop.orders[3]["total"] = "12,50"  # not the API's decimal string
    sync.full_resync_start(store_id=store.pk, run_id=uuid.uuid4())
    drain()
    stored = set(Order.objects.values_list("ns_order_id", flat=True))
    assert stored == {1100, 1102, 1104}
    skipped = {r.ns_id: r for r in SkippedRecord.objects.filter(resource="orders")}
    assert set(skipped) == {1101, 1103}
    assert "AttributeError" in skipped[1101].error and skipped[1101].source == "sync"
    assert "total '12,50' is not a decimal amount" in skipped[1103].error
    cursor = SyncCursor.objects.get(resource="orders")
    assert (cursor.finished_at is not None, cursor.rows_synced) == (True, 3)
    # Each page was fetched once: no transient retries of the page.
    assert len([h for h in fake.api_hits("/v1/789/orders") if h.method == "GET"]) == 1
    assert not Delivery.objects.exclude(status="done").exists()
    # Fixed in the shop, the next sync stores it and forgets the failure.
    shop.orders[3]["total"] = "12.50"
    sync.full_resync_start(store_id=store.pk, run_id=uuid.uuid4())
    drain()
    assert Order.objects.get(ns_order_id=1103).total_cents == 1250
    assert set(SkippedRecord.objects.values_list("ns_id", flat=True)) == {1101}


def test_a_malformed_webhook_order_is_dead_at_once_and_clears_once_reprocessed(
    client: Client, store: Store, shop: FakeStore, org: Organization
) -> None:
    """The shop's answer is the same on every retry: dead at the first attempt, recorded; once
    fixed in the shop, the DLQ's reprocess stores it and nothing reads as failed any more."""
    from eventbus.operations import services as bus

    shop.orders.append({**order(1234567890, number=120), "total": "12,50"})
    notify(client, "order/created", 1234567890)
    drain()
    dead = Delivery.objects.get(consumer="nuvemshop-sync-worker", status="dead")
    assert dead.attempts == 1 and "total '12,50' is not a decimal amount" in dead.last_error
    assert not Order.objects.exists()
    assert SkippedRecord.objects.get().source == "order/created"
    shop.orders[0]["total"] = "12.50"
    assert bus.deliveries_reprocess(delivery_ids=[dead.pk], actor="user:admin") == 1
    drain()
    assert Order.objects.get(ns_order_id=1234567890).total_cents == 1250
    assert not Delivery.objects.filter(status="dead").exists()
    assert not EventLog.objects.filter(status="dead").exists()
    assert not SkippedRecord.objects.exists()


def test_the_stores_name_comes_from_the_shop(
    store: Store, fake: FakeNuvemshop, shop: FakeStore
) -> None:
    from nuvemshop import maintenance, services

    Store.objects.filter(pk=store.pk).update(name="")
    shop.name = "Loja da Maria"  # GET /store answers {"name": {"pt": ...}} (store.md)
    services.store_connect(
        organization_id=store.organization_id,
        grant=services.TokenGrant("tok-789", "bearer", "read_orders", 789),
        actor="test",
    )
    drain()
    store.refresh_from_db()
    assert (store.name, str(store)) == ("Loja da Maria", "Loja da Maria")
    shop.name = "Loja Nova"  # renamed in the shop: the hourly token check follows
    assert maintenance.tokens_refresh() == 1
    store.refresh_from_db()
    assert store.name == "Loja Nova"
