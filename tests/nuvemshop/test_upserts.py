"""Reading the store's shapes: money strings as cents, per-language texts, ISO dates."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
import time_machine
from django.test import Client
from django.utils import timezone

from core.models import Organization
from crm.models import Order
from eventbus.dispatch.relay import Relay, run_published
from eventbus.store.models import Delivery, EventLog
from nuvemshop import sync
from nuvemshop.models import CustomerLink, Store
from nuvemshop.upserts import BadRecord, cents, contact_for_customer, localized, order_upsert, when
from pipelines import services
from pipelines.models import Execution
from tests.nuvemshop.conftest import drain
from tests.nuvemshop.test_handlers import notify
from tests.pipelines.conftest import loopback_allowed  # noqa: F401  (a fixture)
from tests.support.factories import ContactFactory, LeadFactory
from tests.support.nuvemshop import FakeStore, customer, order
from tests.support.pipelines import seed_example
from tests.support.receiver import Receiver


@pytest.mark.parametrize(
    ("value", "expected"), [("58.00", 5800), ("19.9", 1990), (None, 0), ("", 0), (12, 1200)]
)
def test_cents(value: object, expected: int) -> None:
    assert cents(value) == expected


@pytest.mark.parametrize("value", ["12,50", "R$ 12.50", "x", "NaN", "Infinity", True])
def test_an_amount_the_api_does_not_send_is_an_error_not_zero(value: object) -> None:
    """The API's amounts are decimal strings with a point ("58.00"): "12,50" is not 0 cents."""
    with pytest.raises(BadRecord, match="total .* is not a decimal amount"):
        cents(value, name="total")


@pytest.mark.parametrize(
    ("shop_status", "payment", "crm_status"),
    [
        ("open", "pending", "draft"),
        ("open", "paid", "confirmed"),
        ("closed", "paid", "confirmed"),
        ("cancelled", "pending", "cancelled"),
    ],
)
@pytest.mark.django_db
def test_a_shop_order_is_confirmed_once_paid(
    store: Store, shop_status: str, payment: str, crm_status: str
) -> None:
    data = {**order(5, number=5, payment_status=payment), "status": shop_status}
    placed, _ = order_upsert(store, data)
    placed.refresh_from_db()
    assert (placed.status, placed.status_name) == (crm_status, shop_status)
    assert placed.placed_at == when("2026-12-01T10:00:00-03:00")
    paid = when("2026-12-01T10:05:00-03:00") if crm_status == "confirmed" else None
    assert placed.confirmed_at == paid
    # Paid before the store was connected: history, confirmed without order.post.
    assert not EventLog.objects.filter(event_type="order.confirmed").exists()


def paid_now(ns_id: int) -> dict[str, object]:
    data = order(ns_id, number=ns_id, payment_status="paid")
    return {**data, "paid_at": (timezone.now() + dt.timedelta(minutes=1)).isoformat()}


@pytest.mark.django_db
@pytest.mark.usefixtures("loopback_allowed", "side_effects")
def test_a_shop_order_runs_the_order_post_pipeline_once(
    client: Client, store: Store, shop: FakeStore, org: Organization, receiver: Receiver
) -> None:
    """A webhook retried, later states (updated, fulfilled) and a full sync importing it again:
    one `order.confirmed`, one order-post-worker delivery, one pipeline run."""
    services.pipeline_create(
        organization=org,
        name="ERP",
        trigger="order.post",
        definition=seed_example(receiver.url("/orders")),
        actor="test",
    )
    shop.orders.append({**order(900, number=900), "customer": customer(5)})
    notify(client, "order/created", 900)
    drain()
    assert Order.objects.get(ns_order_id=900).status == "draft"  # not paid: no order.post
    shop.orders[0] = {**paid_now(900), "customer": customer(5)}
    notify(client, "order/paid", 900)
    notify(client, "order/paid", 900)  # the shop's retry of the same notification
    drain()
    notify(client, "order/updated", 900)
    shop.orders[0] = {**shop.orders[0], "shipping_status": "fulfilled"}
    notify(client, "order/fulfilled", 900)
    drain()
    sync.full_resync_start(store_id=store.pk, run_id=uuid.uuid4())
    drain()
    placed = Order.objects.get(ns_order_id=900)
    assert placed.status == "confirmed"
    assert EventLog.objects.filter(event_type="order.confirmed").count() == 1
    (delivery,) = Delivery.objects.filter(consumer="order-post-worker")
    assert Relay(worker_id="t").run_once() >= 1
    delivery.refresh_from_db()
    assert run_published(delivery.pk, str(delivery.lease_token)) == "done"
    assert Relay(worker_id="t").run_once() == 0  # nothing else to publish
    assert Execution.objects.filter(order_id=placed.pk).count() == 1
    assert len(receiver.on("/orders")) == 1


@pytest.mark.django_db
def test_an_old_order_paid_late_does_not_close_a_newer_lead(
    client: Client, store: Store, shop: FakeStore, org: Organization
) -> None:
    buyer = customer(8, email="ana@example.com")
    old = {**paid_now(910), "customer": buyer, "created_at": "2026-01-10T10:00:00-03:00"}
    contact = contact_for_customer(store, buyer)
    with time_machine.travel(dt.datetime(2026, 3, 1, tzinfo=dt.UTC)):
        newer = LeadFactory(organization=org, contact=contact)
    shop.orders.append(old)
    notify(client, "order/paid", 910)
    drain()
    assert EventLog.objects.filter(event_type="nuvemshop.order_paid").count() == 1
    newer.refresh_from_db()
    assert newer.status == "open"
    assert not EventLog.objects.filter(event_type="lead.won").exists()
    # A lead that was open when the order was placed is closed by it.
    with time_machine.travel(dt.datetime(2026, 1, 5, tzinfo=dt.UTC)):
        older = LeadFactory(organization=org, contact=contact)
    shop.orders.append(
        {**paid_now(911), "customer": buyer, "created_at": "2026-01-10T10:00:00-03:00"}
    )
    notify(client, "order/paid", 911)
    drain()
    older.refresh_from_db()
    assert older.status == "won"  # through mark_lead_won
    assert EventLog.objects.get(event_type="lead.won").entity_id == older.pk


def test_localized_prefers_portuguese() -> None:
    assert localized({"es": "Camisa", "pt": "Camiseta"}) == "Camiseta"
    assert localized({"fr": "Chemise"}) == "Chemise"
    assert localized("plain") == "plain"
    assert localized(None) == ""


def test_when_reads_the_apis_offsets() -> None:
    parsed = when("2026-12-01T10:05:00-03:00")
    assert parsed == dt.datetime(2026, 12, 1, 13, 5, tzinfo=dt.UTC)
    assert when(None) is None and when("") is None


@pytest.mark.django_db
def test_a_customer_is_matched_to_a_contact_by_the_crms_rule_and_linked(store: Store) -> None:
    by_cpf = ContactFactory(organization=store.organization, email="", phone="", cpf="12345678909")
    by_phone = ContactFactory(organization=store.organization, email="", phone="(11) 98765-4321")
    cpf_customer = {**customer(1, email="nova@example.com"), "identification": "123.456.789-09"}
    assert contact_for_customer(store, cpf_customer) == by_cpf
    assert contact_for_customer(store, customer(2, phone="+5511987654321")) == by_phone
    fresh = contact_for_customer(store, customer(3, email="outra@example.com"))
    assert fresh.pk not in (by_cpf.pk, by_phone.pk) and fresh.email == "outra@example.com"
    assert CustomerLink.objects.get(store=store, ns_customer_id=1).contact == by_cpf
    assert contact_for_customer(store, customer(1)) == by_cpf  # the link wins from now on
