"""Store records into CRM rows, upserted by the store's ids (seed 000 §9.3): a replayed page or
event updates the same row, never a second one (`(organization, ns_order_id)`,
`(organization, ns_product_id)` and `(store, ns_customer_id)` are unique)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import DataError
from django.utils.dateparse import parse_datetime

from core.lgpd_registry import TOMBSTONES
from core.redaction import redact_text
from crm.models import Contact, Order, Product
from crm.services import contact_resolve, order_confirm
from nuvemshop.models import CustomerLink, ShopRedaction, Store

LANGUAGES = ("pt", "es", "en")


class BadRecord(ValueError):
    """A store record the CRM cannot store as it is (a shape or a value the API does not
    document): recorded per record (`nuvemshop.SkippedRecord`), never retried as transient."""


# What a record of an undocumented shape raises on its way in (a string where an object was
# expected, a missing id, a number out of range): the record's fault, not the network's.
SHAPE_ERRORS = (AttributeError, TypeError, KeyError, IndexError, ValueError, ArithmeticError)


@contextmanager
def checked(resource: str, data: Any) -> Iterator[None]:
    """Turn a record's shape errors into BadRecord, naming the record (its id, never its data).

    Callers run it inside a savepoint, so a database refusal (DataError) leaves nothing behind."""
    try:
        yield
    except BadRecord:
        raise
    except (*SHAPE_ERRORS, DataError) as error:
        detail = redact_text(f"{type(error).__name__}: {error}")[:200]
        raise BadRecord(f"{resource} {record_id(data) or '?'}: {detail}") from error


def record_id(data: Any) -> int | None:
    raw = str(data.get("id") or "") if isinstance(data, dict) else ""
    return int(raw) if raw.isdigit() else None


def cents(value: Any, *, name: str = "amount") -> int:
    """The API's decimal strings ("58.00", a point and two decimals: the order, product and
    checkout resources) as cents; absent is 0. Anything else ("12,50", "R$ 12", "NaN") is a
    BadRecord: storing 0 would record a sale as free."""
    if value is None or value == "":
        return 0
    if isinstance(value, bool):
        raise BadRecord(f"{name} {value!r} is not a decimal amount")
    try:
        amount = Decimal(str(value).strip())
    except InvalidOperation as error:
        raise BadRecord(f"{name} {str(value)[:20]!r} is not a decimal amount") from error
    if not amount.is_finite():
        raise BadRecord(f"{name} {str(value)[:20]!r} is not a decimal amount")
    return int((amount * 100).to_integral_value())


def localized(value: Any) -> str:
    """A product's per-language text ({"pt": ...}): Portuguese first, else any."""
    if isinstance(value, dict):
        for language in LANGUAGES:
            if value.get(language):
                return str(value[language])
        return str(next(iter(value.values()), "") or "")
    return str(value or "")


def when(value: Any) -> dt.datetime | None:
    return parse_datetime(value) if isinstance(value, str) and value else None


def product_upsert(store: Store, data: dict[str, Any]) -> tuple[Product, bool]:
    """The CRM product for a store product; (row, created)."""
    variant = (data.get("variants") or [{}])[0]
    stock = variant.get("stock")
    return Product.objects.update_or_create(
        organization_id=store.organization_id,
        ns_product_id=int(data["id"]),
        defaults={
            "ns_store_id": store.ns_store_id,
            "name": localized(data.get("name"))[:300] or f"product {data['id']}",
            "description": localized(data.get("description")),
            "sku": str(variant.get("sku") or "")[:100],
            "price_cents": cents(variant.get("price")) if variant.get("price") else None,
            "stock": int(stock) if isinstance(stock, int) else None,
            "url": str(data.get("canonical_url") or "")[:500],
            "published": bool(data.get("published", True)),
            "deleted_at": None,
        },
    )


def contact_for_customer(store: Store, data: dict[str, Any]) -> Contact | None:
    """The contact of a store customer: its link, else the CRM's one door
    (crm.services.contact_resolve: the shop customer id, e-mail, CPF, phone, matched or claimed
    race-free, a new contact with `contact.created`); the link is kept so later orders and LGPD
    webhooks find it. None for a customer whose data was redacted (`customer_redacted`):
    nothing of theirs is stored again."""
    ns_id = int(data["id"])
    link = CustomerLink.objects.filter(store=store, ns_customer_id=ns_id).select_related("contact")
    found = link.first()
    if found is not None:
        return found.contact
    if customer_redacted(store, data):
        return None
    contact, _ = contact_resolve(
        organization_id=store.organization_id,
        nuvemshop_customer=f"{store.ns_store_id}:{ns_id}",
        email=str(data.get("email") or ""),
        phone=str(data.get("phone") or ""),
        cpf=str(data.get("identification") or ""),  # the customer's CPF/CNPJ in Nuvemshop
        name=str(data.get("name") or ""),
        source="nuvemshop",
    )
    CustomerLink.objects.get_or_create(
        store=store,
        ns_customer_id=ns_id,
        defaults={"organization_id": store.organization_id, "contact": contact},
    )
    return contact


def customer_redacted(store: Store, data: dict[str, Any]) -> bool:
    """The shop still holds a person the CRM redacted: their customer id was redacted in this
    store (`ShopRedaction`), or their e-mail, phone or CPF is a tombstone (lgpd.tombstones,
    looked up through core.lgpd_registry: lgpd sits above the integrations)."""
    ns_id = record_id(data) or 0  # 0: no store customer has it
    if ShopRedaction.objects.filter(store=store, ns_customer_id=ns_id).exists():
        return True
    return TOMBSTONES.redacted(
        store.organization_id,
        email=str(data.get("email") or ""),
        phone=str(data.get("phone") or ""),
        cpf=str(data.get("identification") or ""),
    )


# The shop's order: a draft until the shop says it is paid (`payment_status` "paid"), then
# confirmed through crm.services.order_confirm, once (`order.confirmed`, the order.post
# pipelines); a cancelled one is cancelled. Paid is the shop's confirmed state: an open order
# may still be abandoned unpaid, a fulfilled one was paid first.
PAID = "paid"


def order_status(shop_status: Any) -> str:
    return Order.Status.CANCELLED if shop_status == "cancelled" else Order.Status.DRAFT


def order_upsert(store: Store, data: dict[str, Any]) -> tuple[Order, bool]:
    """The CRM order for a store order (matched to a contact when it has a customer), confirmed
    through crm.services.order_confirm the first time it is seen paid: a webhook retried, a
    full sync importing it again or a later state (fulfilled) never confirms it twice. An order
    paid before the store was connected is history: confirmed without `order.confirmed`.

    BadRecord when the order has a shape or a value the API does not document (run it in a
    savepoint: the contact it may have created goes with it)."""
    with checked("order", data):
        buyer = data.get("customer") or None
        address = data.get("shipping_address") or {}
        fields = {
            "ns_store_id": store.ns_store_id,
            "number": f"{store.ns_store_id}-{data.get('number') or int(data['id'])}",
            "placed_at": when(data.get("created_at")),
            "total_cents": cents(data.get("total"), name="total"),
            "currency": str(data.get("currency") or "BRL")[:3],
            "items": [_item(line) for line in data.get("products") or []],
            "customer_name": str((buyer or {}).get("name") or "")[:200],
            "customer_email": str((buyer or {}).get("email") or "")[:254],
            "customer_phone": str((buyer or {}).get("phone") or "")[:32],
            "shipping_address": _address(address),
            "status_name": str(data.get("status") or "")[:200],
            "payment_status": str(data.get("payment_status") or "")[:32],
            "shipping_status": str(data.get("shipping_status") or "")[:32],
            "paid_at": when(data.get("paid_at")),
            "cancelled_at": when(data.get("cancelled_at"))
            or (when(data.get("updated_at")) if data.get("status") == "cancelled" else None),
            "fulfilled_at": when(data.get("shipped_at")),
        }
        fields["contact"] = (
            contact_for_customer(store, buyer) if buyer and buyer.get("id") else None
        )
        if buyer and fields["contact"] is None and customer_redacted(store, buyer):
            # Redacted in the CRM: the order keeps its money, never the person (LGPD).
            fields.update(customer_name="", customer_email="", customer_phone="")
            fields["shipping_address"] = ""
        status = order_status(data.get("status"))
        # A confirmed order stays confirmed (the shop's later states do not undo it) unless
        # the shop cancels it.
        changed = {**fields, "status": status} if status == Order.Status.CANCELLED else fields
        order, created = Order.objects.update_or_create(
            organization_id=store.organization_id,
            ns_order_id=int(data["id"]),
            defaults=changed,
            create_defaults={**fields, "status": status},
        )
        if order.status == Order.Status.DRAFT and order.payment_status == PAID:
            order = order_confirm(
                organization=store.organization,
                number=order.number,
                total_cents=order.total_cents,
                currency=order.currency,
                confirmed_at=order.paid_at,
                announce=order.paid_at is None or order.paid_at >= store.installed_at,
            )
        return order, created


def _item(line: dict[str, Any]) -> dict[str, Any]:
    return {
        "sku": str(line.get("sku") or line.get("product_id") or ""),
        "name": str(line.get("name") or ""),
        "qty": int(line.get("quantity") or 1),
        "unit_cents": cents(line.get("price"), name="item price"),
    }


def _address(address: Any) -> str:
    if not isinstance(address, dict):
        return str(address or "")
    keys = ("address", "number", "floor", "locality", "city", "province", "zipcode", "country")
    return ", ".join(str(address[k]) for k in keys if address.get(k))
