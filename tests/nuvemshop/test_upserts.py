"""Reading the store's shapes: money strings as cents, per-language texts, ISO dates."""

from __future__ import annotations

import datetime as dt

import pytest

from nuvemshop.models import CustomerLink, Store
from nuvemshop.upserts import BadRecord, cents, contact_for_customer, localized, order_upsert, when
from tests.support.factories import ContactFactory
from tests.support.nuvemshop import customer, order


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
    ("shop_status", "crm_status"),
    [("open", "confirmed"), ("closed", "confirmed"), ("cancelled", "cancelled")],
)
@pytest.mark.django_db
def test_a_shop_order_lands_with_the_crm_status_of_its_shop_status(
    store: Store, shop_status: str, crm_status: str
) -> None:
    placed, _ = order_upsert(store, {**order(5, number=5), "status": shop_status})
    placed.refresh_from_db()
    assert (placed.status, placed.status_name) == (crm_status, shop_status)
    assert placed.confirmed_at == when("2026-12-01T10:00:00-03:00")


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
