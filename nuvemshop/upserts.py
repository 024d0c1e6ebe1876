"""Store records into CRM rows, upserted by the store's ids (seed 000 §9.3): a replayed page or
event updates the same row, never a second one (`(organization, ns_order_id)`,
`(organization, ns_product_id)` and `(store, ns_customer_id)` are unique)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal, InvalidOperation
from typing import Any

from django.utils.dateparse import parse_datetime

from crm.models import Contact, Order, Product
from crm.selectors import match_contact
from nuvemshop.models import CustomerLink, Store

LANGUAGES = ("pt", "es", "en")


def cents(value: Any) -> int:
    """The API's decimal strings ("58.00") as cents."""
    try:
        return int((Decimal(str(value or "0")) * 100).to_integral_value())
    except InvalidOperation:
        return 0


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


def contact_for_customer(store: Store, data: dict[str, Any]) -> Contact:
    """The contact of a store customer: its link, else the CRM's match (e-mail, CPF, phone),
    else a new contact; the link is kept so later orders and LGPD webhooks find it."""
    ns_id = int(data["id"])
    link = CustomerLink.objects.filter(store=store, ns_customer_id=ns_id).select_related("contact")
    found = link.first()
    if found is not None:
        return found.contact
    contact = _matched(store, data) or _created(store, data)
    CustomerLink.objects.get_or_create(
        store=store,
        ns_customer_id=ns_id,
        defaults={"organization_id": store.organization_id, "contact": contact},
    )
    return contact


def _matched(store: Store, data: dict[str, Any]) -> Contact | None:
    return match_contact(
        organization_id=store.organization_id,
        email=str(data.get("email") or ""),
        phone=str(data.get("phone") or ""),
        cpf=str(data.get("identification") or ""),  # the customer's CPF/CNPJ in Nuvemshop
    )


def _created(store: Store, data: dict[str, Any]) -> Contact:
    contact = Contact(
        organization_id=store.organization_id,
        name=str(data.get("name") or "")[:200],
        email=str(data.get("email") or "")[:254],
        phone=str(data.get("phone") or "")[:32],
    )
    contact.cpf = str(data.get("identification") or "")
    contact.save()
    return contact


def order_upsert(store: Store, data: dict[str, Any]) -> tuple[Order, bool]:
    """The CRM order for a store order (matched to a contact when it has a customer)."""
    buyer = data.get("customer") or None
    contact = contact_for_customer(store, buyer) if buyer and buyer.get("id") else None
    address = data.get("shipping_address") or {}
    return Order.objects.update_or_create(
        organization_id=store.organization_id,
        ns_order_id=int(data["id"]),
        defaults={
            "ns_store_id": store.ns_store_id,
            "number": f"{store.ns_store_id}-{data.get('number') or data['id']}",
            "contact": contact,
            "total_cents": cents(data.get("total")),
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
        },
    )


def _item(line: dict[str, Any]) -> dict[str, Any]:
    return {
        "sku": str(line.get("sku") or line.get("product_id") or ""),
        "name": str(line.get("name") or ""),
        "qty": int(line.get("quantity") or 1),
        "unit_cents": cents(line.get("price")),
    }


def _address(address: Any) -> str:
    if not isinstance(address, dict):
        return str(address or "")
    keys = ("address", "number", "floor", "locality", "city", "province", "zipcode", "country")
    return ", ".join(str(address[k]) for k in keys if address.get(k))
