"""Nuvemshop writes: connect a store, change its status, process a webhook receipt, register the
store's webhooks, remove a store's data (store/redact), and carry an LGPD redaction to the shop.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone

import eventbus
from core import audit
from core.alerts import alert
from crm import services as crm_services
from crm.models import Lead, Order, Product
from nuvemshop import sync, upserts
from nuvemshop.client import NotFound, NuvemshopClient
from nuvemshop.conf import STORE_WEBHOOK_EVENTS, nuvemshop_settings
from nuvemshop.models import (
    CustomerLink,
    ShopRedaction,
    SkippedRecord,
    Store,
    SyncCursor,
    WebhookReceipt,
)
from nuvemshop.oauth import TokenGrant

logger = logging.getLogger(__name__)

WEBHOOK_PATH = "/api/webhooks/nuvemshop/"
STATUS_EVENTS = {
    "app/uninstalled": Store.Status.UNINSTALLED,
    "app/suspended": Store.Status.SUSPENDED,
    "app/resumed": Store.Status.CONNECTED,
}


def store_connect(*, organization_id: uuid.UUID, grant: TokenGrant, actor: str) -> Store:
    """Save (or refresh) the store's encrypted token and emit `nuvemshop.store_connected`.

    A store belongs to one organization: installing it again for another one is refused.
    """
    with transaction.atomic():
        store = Store.objects.select_for_update().filter(ns_store_id=grant.ns_store_id).first()
        if store is not None and str(store.organization_id) != str(organization_id):
            raise ValueError(
                f"store {grant.ns_store_id} is already connected to another organization; "
                "uninstall the app from that store first (one organization per store)"
            )
        store = store or Store(organization_id=organization_id, ns_store_id=grant.ns_store_id)
        store.access_token = grant.access_token
        store.scopes = grant.scope
        store.status = Store.Status.CONNECTED
        store.status_reason = ""
        store.token_checked_at = timezone.now()
        store.save()
        eventbus.emit(
            "nuvemshop.store_connected",
            organization=organization_id,
            entity_kind="nuvemshop_store",
            entity_id=store.pk,
            payload={"store_id": str(store.pk), "ns_store_id": store.ns_store_id},
        )
        audit.record(
            actor=actor,
            action="nuvemshop.store.connect",
            target_type="nuvemshop.store",
            target_id=store.pk,
            organization_id=organization_id,
            details={"ns_store_id": store.ns_store_id, "scopes": grant.scope},
        )
    return store


def store_details_refresh(*, store: Store, data: dict[str, Any] | None = None) -> str:
    """The store's name from the shop (`GET /store`: `name` per language); `data` when the
    caller already has that answer. The name it saved."""
    if data is None:
        with NuvemshopClient(store) as api:
            data = api.get("store")
    name = upserts.localized(data.get("name"))[:200] if isinstance(data, dict) else ""
    if name:
        Store.objects.filter(pk=store.pk).update(name=name)
    return name


def full_resync_request(*, store: Store, actor: str) -> None:
    """Queue the `nuvemshop.full_resync` job of a store (admin "resync", install)."""
    eventbus.emit(
        "nuvemshop.full_resync",
        organization=store.organization_id,
        entity_kind="nuvemshop_store",
        entity_id=store.pk,
        payload={"store_id": str(store.pk), "requested_by": actor},
    )


def store_status_set(*, store: Store, status: str, reason: str) -> None:
    """Record that a store stopped (or resumed) syncing; uninstalling also drops the token."""
    fields: dict[str, Any] = {"status": status, "status_reason": reason[:200]}
    if status == Store.Status.UNINSTALLED:
        fields["access_token_encrypted"] = ""
    Store.objects.filter(pk=store.pk).update(**fields)
    logger.warning("nuvemshop store status", extra={"store_id": str(store.pk), "status": status})


def store_token_invalid(*, store: Store, error: str) -> None:
    """The API refused the token (401): stop syncing and tell a human (its runbook:
    docs/integrations/nuvemshop.md)."""
    store_status_set(store=store, status=Store.Status.TOKEN_INVALID, reason=error)
    alert(
        "Nuvemshop token invalid",
        store_id=str(store.pk),
        ns_store_id=store.ns_store_id,
        organization_id=str(store.organization_id),
    )


def receipt_process(*, receipt_id: uuid.UUID) -> str:
    """Act on one store webhook: status change, or fetch + upsert + the catalog's events."""
    receipt = WebhookReceipt.objects.select_related("store").filter(pk=receipt_id).first()
    if receipt is None or receipt.processed_at is not None:
        return "done"
    store = receipt.store
    if receipt.event in STATUS_EVENTS:
        with transaction.atomic():
            store_status_set(store=store, status=STATUS_EVENTS[receipt.event], reason=receipt.event)
            if receipt.event == "app/resumed":  # what changed while suspended is caught up
                store.refresh_from_db()
                full_resync_request(store=store, actor="system:app/resumed")
            _processed(receipt, "status")
        return "status"
    if not store.syncing:
        return _processed(receipt, f"store {store.status}")
    if receipt.event.startswith("order/"):
        return _order_event(store, receipt)
    if receipt.event.startswith("product/"):
        return _product_event(store, receipt)
    return _processed(receipt, "ignored")


def _processed(receipt: WebhookReceipt, outcome: str) -> str:
    WebhookReceipt.objects.filter(pk=receipt.pk, processed_at__isnull=True).update(
        processed_at=timezone.now(), outcome=outcome
    )
    return outcome


def _order_event(store: Store, receipt: WebhookReceipt) -> str:
    with NuvemshopClient(store) as api:
        try:
            data = api.get(f"orders/{receipt.ns_resource_id}")
        except NotFound:
            return _processed(receipt, "gone")
    try:
        with transaction.atomic():
            order, created = upserts.order_upsert(store, data)
            _emit_order_events(order, data, announce=created or receipt.event == "order/created")
            sync.record_stored(store, "orders", data)
            _processed(receipt, "upserted")
    except upserts.BadRecord as error:
        # The shop's answer will not get better by asking again: dead-letter it at once (the
        # DLQ's reprocess runs it again once the order is fixed in the shop).
        sync.record_skipped(store, "orders", data, error, source=receipt.event)
        raise eventbus.PermanentError(f"the shop's order cannot be stored: {error}") from error
    return "upserted"


def _emit_order_events(order: Order, data: dict[str, Any], *, announce: bool) -> None:
    """The catalog's order events, each once per order (its idempotency key)."""
    events: list[tuple[str, dict[str, Any]]] = []
    if announce:
        contact = str(order.contact_id) if order.contact_id else None
        events.append(
            (
                "nuvemshop.order_created",
                {
                    "order_id": str(order.pk),
                    "ns_order_id": order.ns_order_id,
                    "contact_id": contact,
                    "total_cents": order.total_cents,
                },
            )
        )
    if order.paid_at is not None and order.payment_status == "paid":
        events.append(
            (
                "nuvemshop.order_paid",
                {
                    "order_id": str(order.pk),
                    "paid_at": order.paid_at.isoformat(),
                    "amount_cents": order.total_cents,
                },
            )
        )
        _lead_won(order)
    if order.cancelled_at is not None:
        reason = data.get("cancel_reason")
        events.append(
            (
                "nuvemshop.order_cancelled",
                {
                    "order_id": str(order.pk),
                    "cancelled_at": order.cancelled_at.isoformat(),
                    "reason": reason,
                },
            )
        )
    if order.shipping_status in ("fulfilled", "shipped"):
        fulfilled = order.fulfilled_at or order.updated_at
        events.append(
            (
                "nuvemshop.order_fulfilled",
                {
                    "order_id": str(order.pk),
                    "fulfilled_at": fulfilled.isoformat(),
                    "tracking": bool(data.get("shipping_tracking_number")),
                },
            )
        )
    for event_type, payload in events:
        eventbus.emit(
            event_type,
            organization=order.organization_id,
            entity_kind="order",
            entity_id=order.pk,
            payload=payload,
            idempotency_key=f"{event_type}:{order.pk}",
        )


def _lead_won(order: Order) -> None:
    """A paid order closes the contact's newest open lead as won (LEAD_WON_ON_PAID), if that
    lead was open when the order was placed: a late `order_paid` (an old order a full sync
    imported, a webhook long after) never closes a lead opened after the order. Closed through
    the CRM's `mark_lead_won` (which emits `lead.won`, value = the order's total in cents)."""
    if not nuvemshop_settings.LEAD_WON_ON_PAID or order.contact_id is None:
        return
    lead = (
        Lead.objects.filter(
            contact_id=order.contact_id,
            created_at__lte=order.placed_at or order.created_at,
            status=Lead.Status.OPEN,
            deleted_at__isnull=True,
        )
        .order_by("-created_at")
        .first()
    )
    if lead is None:
        return
    # Closed meanwhile (another order, a person): nothing more to close.
    with contextlib.suppress(crm_services.LeadClosed):
        crm_services.lead_mark_won(
            lead, value_cents=order.total_cents, reason=f"nuvemshop order {order.number} paid"
        )


def _product_event(store: Store, receipt: WebhookReceipt) -> str:
    if receipt.event == "product/deleted":
        return _product_deleted(store, receipt)
    with NuvemshopClient(store) as api:
        try:
            data = api.get(f"products/{receipt.ns_resource_id}")
        except NotFound:
            return _product_deleted(store, receipt)
    with transaction.atomic():
        product, created = upserts.product_upsert(store, data)
        sync.product_synced_emit(store, product, "created" if created else "updated", data)
        _processed(receipt, "upserted")
    return "upserted"


def _product_deleted(store: Store, receipt: WebhookReceipt) -> str:
    with transaction.atomic():
        product = Product.objects.filter(
            organization_id=store.organization_id, ns_product_id=receipt.ns_resource_id
        ).first()
        if product is not None:
            if product.deleted_at is None:
                product.deleted_at = timezone.now()
                product.save(update_fields=["deleted_at", "updated_at"])
            sync.product_synced_emit(store, product, "deleted", {"updated_at": "deleted"})
        _processed(receipt, "deleted")
    return "deleted"


def webhooks_register(*, store: Store) -> dict[str, int]:
    """Make the store's webhooks match what the CRM needs: list, create missing, update changed.

    Idempotent: a second run finds everything in place and changes nothing.
    """
    base = nuvemshop_settings.WEBHOOK_BASE_URL.rstrip("/")
    if not base:
        logger.warning("NUVEMSHOP_WEBHOOK_BASE_URL is not set: no webhooks registered")
        return {"created": 0, "updated": 0, "unchanged": 0}
    report = {"created": 0, "updated": 0, "unchanged": 0}
    with NuvemshopClient(store) as api:
        existing = {hook["event"]: hook for hook in api.pages("webhooks")}
        for event in STORE_WEBHOOK_EVENTS:
            url = f"{base}{WEBHOOK_PATH}{event}"
            hook = existing.get(event)
            if hook is None:
                api.request("POST", api.url("webhooks"), json={"event": event, "url": url})
                report["created"] += 1
            elif hook.get("url") != url:
                api.request("PUT", api.url(f"webhooks/{hook['id']}"), json={"url": url})
                report["updated"] += 1
            else:
                report["unchanged"] += 1
    Store.objects.filter(pk=store.pk).update(webhooks_registered_at=timezone.now())
    return report


def store_redact(*, store_id: uuid.UUID) -> dict[str, int]:
    """store/redact: remove the store's data (orders, products, links, cursors, token)."""
    with transaction.atomic():
        store = Store.objects.select_for_update().filter(pk=store_id).first()
        if store is None:
            return {}
        scope = {"organization_id": store.organization_id, "ns_store_id": store.ns_store_id}
        removed = {
            "orders": Order.objects.filter(**scope).delete()[0],
            "products": Product.objects.filter(**scope).delete()[0],
            "customer_links": CustomerLink.objects.filter(store=store).delete()[0],
            "cursors": SyncCursor.objects.filter(store=store).delete()[0],
            "skipped_records": SkippedRecord.objects.filter(store=store).delete()[0],
        }
        Store.objects.filter(pk=store.pk).update(
            status=Store.Status.REDACTED,
            status_reason="store/redact",
            access_token_encrypted="",
            scopes="",
            products_count=0,
            customers_count=0,
            orders_count=0,
        )
        audit.record(
            actor="system:nuvemshop-sync-worker",
            action="nuvemshop.store.redact",
            target_type="nuvemshop.store",
            target_id=store.pk,
            organization_id=store.organization_id,
            details=removed,
        )
    return removed


def redaction_propagate(*, contact_id: uuid.UUID, request_id: uuid.UUID) -> bool:
    """In the LGPD redaction's transaction: queue the shop-side redaction of every store customer
    linked to the contact; True if there was one (the redaction's scope: crm_and_nuvemshop)."""
    links = CustomerLink.objects.filter(contact_id=contact_id).select_related("store")
    queued = False
    for link in links:
        if link.store.status == Store.Status.REDACTED:
            continue
        redaction, created = ShopRedaction.objects.get_or_create(
            lgpd_request_id=request_id,
            store=link.store,
            ns_customer_id=link.ns_customer_id,
            defaults={"organization_id": link.organization_id},
        )
        if created:
            eventbus.emit(
                "nuvemshop.shop_redact_requested",
                organization=link.organization_id,
                entity_kind="nuvemshop_store",
                entity_id=link.store_id,
                payload={"redaction_id": str(redaction.pk), "store_id": str(link.store_id)},
                idempotency_key=f"nuvemshop.shop_redact:{redaction.pk}",
            )
        queued = True
    # The shop id now points at nobody: a later order of that customer finds no anonymized
    # contact through it (the ShopRedaction row keeps the id until the shop call is made).
    links.delete()
    return queued


# What the shop keeps of a redacted customer: the API offers PUT /customers/{id} (no DELETE).
REDACTED_CUSTOMER = {"name": "Anonimizado", "phone": "", "identification": "", "note": ""}


def shop_redaction_run(*, redaction_id: uuid.UUID) -> str:
    """Blank the customer's identity in the shop; 404 (already gone) counts as done."""
    redaction = ShopRedaction.objects.select_related("store").filter(pk=redaction_id).first()
    if redaction is None or redaction.status == ShopRedaction.Status.DONE:
        return "done"
    store = redaction.store
    if not store.syncing:
        ShopRedaction.objects.filter(pk=redaction.pk).update(
            status=ShopRedaction.Status.FAILED, error=f"store {store.status}"
        )
        return "store not syncing"
    body = {**REDACTED_CUSTOMER, "email": f"anonimizado-{redaction.ns_customer_id}@invalid.invalid"}
    # A 404: the customer is already gone from the shop, which is what was asked.
    with NuvemshopClient(store) as api, contextlib.suppress(NotFound):
        api.request("PUT", api.url(f"customers/{redaction.ns_customer_id}"), json=body)
    ShopRedaction.objects.filter(pk=redaction.pk).update(
        status=ShopRedaction.Status.DONE, done_at=timezone.now(), error=""
    )
    return "done"
