"""The store webhook receiver's work: verify, dedupe, write a receipt and an event. No HTTP here.

`x-linkedstore-hmac-sha256` is the hex HMAC-SHA256 of the raw body with the app secret
(webhook.md), compared in constant time; anything else is refused before a row is written. A
receipt's identity (unique per store) makes a replayed delivery write nothing where the shop
gives something to tell deliveries apart: the event and the resource id for one-shot events
(`order/paid` happens once per order), the data request's id for `customers/data_request`, the
body's hash for `customers/redact` (redacting twice changes nothing). `*/updated` and `app/*` are
never deduplicated: the shop sends the same `{store_id, event, id}` for every update (webhook.md
has no delivery id, no timestamp), so a repeat is a new fact (the order was refunded, the app
suspended again); the worker's fetch and upsert, and the status change, are idempotent, so a
true replay of such a delivery costs one API call and changes nothing. The LGPD webhooks'
personal data is used to find the contact and never stored.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

import eventbus
from core import rls
from crm.models import Contact
from crm.selectors import match_contact
from eventbus.store.provenance import Provenance
from nuvemshop.conf import nuvemshop_settings
from nuvemshop.models import CustomerLink, Store, WebhookReceipt

SIGNATURE_HEADER = "x-linkedstore-hmac-sha256"
# The provenance of what the receiver emits once the shop's signature is verified.
VERIFIED = Provenance.app("nuvemshop", "nuvemshop.receiver")
LGPD_EVENTS = {"store/redact", "customers/redact", "customers/data_request"}


class BadSignature(Exception):
    """Missing or wrong x-linkedstore-hmac-sha256 (401, nothing written)."""


class BadPayload(Exception):
    """Verified but unusable: not JSON, no store id, an event the URL does not name (400)."""


@dataclass(frozen=True)
class Accepted:
    receipt_id: uuid.UUID | None  # None: a replay (nothing written) or an unknown store
    duplicate: bool = False


def signature_valid(body: bytes, signature: str) -> bool:
    secret = nuvemshop_settings.CLIENT_SECRET
    if not secret or not signature:
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature.strip().lower())


def webhook_accept(*, event: str, body: bytes, signature: str) -> Accepted:
    """Verify and record one delivery; BadSignature / BadPayload otherwise."""
    if not signature_valid(body, signature):
        raise BadSignature("x-linkedstore-hmac-sha256 does not match the body")
    data = _parsed(body, event)
    rls.set_scope(bypass=True)  # verified: the shop names the store, which names the tenant
    store = Store.objects.filter(ns_store_id=int(data["store_id"])).first()
    if store is None:
        return Accepted(receipt_id=None)
    rls.set_scope(organization_id=store.organization_id)
    receipt_id = uuid.uuid4()
    identity = _identity(event, data, body, receipt_id)
    try:
        with transaction.atomic():
            receipt = WebhookReceipt.objects.create(
                id=receipt_id,
                organization_id=store.organization_id,
                store=store,
                event=event,
                ns_resource_id=_resource_id(event, data),
                identity=identity,
            )
            _emit(store, receipt, data)
    except IntegrityError:  # the identity was seen: a replay
        return Accepted(receipt_id=None, duplicate=True)
    return Accepted(receipt_id=receipt.pk)


def _parsed(body: bytes, event: str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError as error:
        raise BadPayload("the body is not JSON") from error
    if not isinstance(data, dict) or not str(data.get("store_id", "")).isdigit():
        raise BadPayload("the body has no store_id")
    if data.get("event") not in (None, event):
        raise BadPayload(f"the body's event {data.get('event')!r} is not {event!r}")
    return data


def _resource_id(event: str, data: dict[str, Any]) -> int | None:
    if event.startswith("customers/"):
        raw = (data.get("customer") or {}).get("id")
    else:
        raw = data.get("id")
    return int(str(raw)) if str(raw or "").isdigit() else None


def _identity(event: str, data: dict[str, Any], body: bytes, receipt_id: uuid.UUID) -> str:
    if event == "customers/data_request":
        request_id = (data.get("data_request") or {}).get("id")
        return f"{event}:{request_id or hashlib.sha256(body).hexdigest()}"
    if event.startswith("customers/"):
        return f"{event}:{data.get('id', '')}:{hashlib.sha256(body).hexdigest()}"
    if repeatable(event):  # the same body every time: each delivery is its own receipt
        return f"{event}:{data.get('id', '')}:{receipt_id}"
    return f"{event}:{data.get('id', '')}"


def repeatable(event: str) -> bool:
    """Events the shop sends again, with the same body, whenever the thing changes again."""
    return event.endswith("/updated") or event.startswith("app/")


def _emit(store: Store, receipt: WebhookReceipt, data: dict[str, Any]) -> None:
    if receipt.event == "store/redact":
        eventbus.emit(
            "nuvemshop.store_redact_received",
            organization=store.organization_id,
            entity_kind="nuvemshop_store",
            entity_id=store.pk,
            payload={"store_id": str(store.pk), "ns_store_id": store.ns_store_id},
            idempotency_key=f"nuvemshop.store_redact:{receipt.pk}",
        )
        return
    if receipt.event in ("customers/redact", "customers/data_request"):
        _emit_customer_request(store, receipt, data)
        return
    eventbus.emit(
        "nuvemshop.webhook_received",
        organization=store.organization_id,
        entity_kind="nuvemshop_store",
        entity_id=store.pk,
        payload={"receipt_id": str(receipt.pk), "store_id": str(store.pk), "event": receipt.event},
        idempotency_key=f"nuvemshop.webhook_received:{receipt.pk}",
    )


def _emit_customer_request(store: Store, receipt: WebhookReceipt, data: dict[str, Any]) -> None:
    """The LGPD request for the matched contact (ids only on the bus; lgpd opens the request)."""
    contact = _contact(store, data.get("customer") or {})
    redact = receipt.event == "customers/redact"
    ns_request = (data.get("data_request") or {}).get("id") if not redact else None
    payload: dict[str, Any] = {
        "ns_customer_id": receipt.ns_resource_id,
        "ns_request_id": str(ns_request or receipt.pk),
        "store_id": str(store.pk),
        "contact_id": str(contact.pk) if contact else None,
    }
    eventbus.emit(
        "nuvemshop.customer_redact_received" if redact else "nuvemshop.customer_data_requested",
        organization=store.organization_id,
        entity_kind="contact" if contact else "nuvemshop_store",
        entity_id=contact.pk if contact else store.pk,
        payload=payload,
        idempotency_key=f"nuvemshop.customer_request:{receipt.pk}",
        # The LGPD app opens these requests only from here (lgpd.handlers.SHOP_RECEIVER).
        provenance=VERIFIED,
    )
    receipt.outcome = "contact_found" if contact else "no_contact"
    receipt.save(update_fields=["outcome"])


def _contact(store: Store, customer: dict[str, Any]) -> Contact | None:
    """The linked contact, else the CRM's match (crm.selectors.match_contact: e-mail, CPF,
    phone; the personal data is used to look, never kept)."""
    if str(customer.get("id") or "").isdigit():
        link = CustomerLink.objects.filter(store=store, ns_customer_id=int(customer["id"])).first()
        if link is not None:
            return link.contact
    return match_contact(
        organization_id=store.organization_id,
        email=str(customer.get("email") or ""),
        phone=str(customer.get("phone") or ""),
        cpf=str(customer.get("identification") or ""),
    )
