"""The full sync (products, customers, orders), one page per delivery, resumable from a cursor.

`nuvemshop.full_resync` starts a run: a cursor per resource at page 0 and the first
`nuvemshop.sync_page` of each. A page is fetched (outside any transaction: the shared limiter
commits on its own), then its upserts, the cursor's advance and the next page's event commit
together. A worker killed anywhere leaves the cursor where the last commit put it: the retried
delivery fetches the same page again (upserts change nothing twice) or, if its commit had
happened, finds the cursor past it and returns.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Now
from django.utils import timezone

import eventbus
from crm.models import Order, Product
from nuvemshop import upserts
from nuvemshop.client import NuvemshopClient, Page
from nuvemshop.models import CustomerLink, SkippedRecord, Store, SyncCursor

logger = logging.getLogger(__name__)

RESOURCES = (
    SyncCursor.Resource.PRODUCTS,
    SyncCursor.Resource.CUSTOMERS,
    SyncCursor.Resource.ORDERS,
)


def full_resync_start(*, store_id: uuid.UUID, run_id: uuid.UUID) -> bool:
    """Start run `run_id` of a store's full sync; False if the store does not sync or the run
    already started (a retried delivery)."""
    with transaction.atomic():
        store = Store.objects.select_for_update().filter(pk=store_id).first()
        if store is None or not store.syncing:
            return False
        if SyncCursor.objects.filter(store=store, run_id=run_id).exists():
            return False
        for resource in RESOURCES:
            SyncCursor.objects.update_or_create(
                store=store,
                resource=resource,
                defaults={
                    "organization_id": store.organization_id,
                    "run_id": run_id,
                    "pages_done": 0,
                    "next_url": "",
                    "total": None,
                    "rows_synced": 0,
                    "started_at": timezone.now(),
                    "finished_at": None,
                },
            )
            _emit_page(store, resource, run_id, 1)
    return True


def sync_page(*, store_id: uuid.UUID, resource: str, run_id: uuid.UUID, page: int) -> int:
    """Fetch and upsert page `page` of a run; the rows written (0 for a stale or done page)."""
    cursor = _current(store_id, resource, run_id, page)
    if cursor is None:
        return 0
    store = cursor.store
    if not store.syncing:
        return 0
    with NuvemshopClient(store) as api:
        fetched = api.page(resource, cursor.next_url)
    with transaction.atomic():
        locked = _current(store_id, resource, run_id, page, lock=True)
        if locked is None:  # another worker committed this page meanwhile
            return 0
        written = _apply(store, resource, fetched.items)
        _advance(locked, store, fetched, page, written)
    return written


def _current(
    store_id: uuid.UUID, resource: str, run_id: uuid.UUID, page: int, *, lock: bool = False
) -> SyncCursor | None:
    cursors = SyncCursor.objects.select_related("store")
    if lock:
        cursors = cursors.select_for_update(of=("self",))
    cursor = cursors.filter(store_id=store_id, resource=resource).first()
    if cursor is None or cursor.run_id != run_id or cursor.finished_at is not None:
        return None
    return cursor if cursor.pages_done + 1 == page else None


def _apply(store: Store, resource: str, items: list[dict[str, Any]]) -> int:
    """Upsert a page's records, each in its own savepoint: a record of an undocumented shape is
    recorded (`SkippedRecord`, a warning) and the rest of the page is stored without it."""
    written = 0
    for item in items:
        try:
            with transaction.atomic(), upserts.checked(resource.rstrip("s"), item):
                _apply_one(store, resource, item)
        except upserts.BadRecord as error:
            record_skipped(store, resource, item, error, source="sync")
            continue
        record_stored(store, resource, item)
        written += 1
    return written


def _apply_one(store: Store, resource: str, item: dict[str, Any]) -> None:
    if resource == SyncCursor.Resource.PRODUCTS:
        product, created = upserts.product_upsert(store, item)
        product_synced_emit(store, product, "created" if created else "updated", item)
    elif resource == SyncCursor.Resource.CUSTOMERS:
        upserts.contact_for_customer(store, item)
    else:
        upserts.order_upsert(store, item)


def record_skipped(
    store: Store, resource: str, item: Any, error: upserts.BadRecord, *, source: str
) -> None:
    """Remember a record that could not be stored (the admin lists them) and log it."""
    ns_id = upserts.record_id(item)
    logger.warning(
        "nuvemshop record skipped",
        extra={
            "store_id": str(store.pk),
            "resource": resource,
            "ns_id": ns_id,
            "error": str(error),
        },
    )
    if ns_id is None:
        return
    updated = SkippedRecord.objects.filter(store=store, resource=resource, ns_id=ns_id).update(
        error=str(error)[:500], source=source, failures=F("failures") + 1, last_failed_at=Now()
    )
    if not updated:
        SkippedRecord.objects.get_or_create(
            store=store,
            resource=resource,
            ns_id=ns_id,
            defaults={
                "organization_id": store.organization_id,
                "error": str(error)[:500],
                "source": source,
            },
        )


def record_stored(store: Store, resource: str, item: Any) -> None:
    """A record stored at last is no longer skipped."""
    ns_id = upserts.record_id(item)
    if ns_id is not None:
        SkippedRecord.objects.filter(store=store, resource=resource, ns_id=ns_id).delete()


def _advance(cursor: SyncCursor, store: Store, fetched: Page, page: int, written: int) -> None:
    cursor.pages_done = page
    cursor.next_url = fetched.next_url
    cursor.total = fetched.total
    cursor.rows_synced += written
    if fetched.next_url:
        _emit_page(store, cursor.resource, cursor.run_id, page + 1)
    else:
        cursor.finished_at = timezone.now()
    cursor.save()
    if cursor.finished_at is not None:
        _finish_if_complete(store, cursor.run_id)


def _finish_if_complete(store: Store, run_id: uuid.UUID) -> None:
    open_cursors = SyncCursor.objects.filter(store=store, run_id=run_id, finished_at__isnull=True)
    if open_cursors.exists():
        return
    counts_refresh(store)
    Store.objects.filter(pk=store.pk).update(last_sync_at=timezone.now())
    logger.info("nuvemshop full sync done", extra={"store_id": str(store.pk)})


def counts_refresh(store: Store) -> None:
    """The admin's counts: the store's products, customers (links) and orders in the CRM."""
    Store.objects.filter(pk=store.pk).update(
        products_count=Product.objects.filter(
            organization_id=store.organization_id,
            ns_store_id=store.ns_store_id,
            deleted_at__isnull=True,
        ).count(),
        customers_count=CustomerLink.objects.filter(store=store).count(),
        orders_count=Order.objects.filter(
            organization_id=store.organization_id, ns_store_id=store.ns_store_id
        ).count(),
    )


def _emit_page(store: Store, resource: str, run_id: uuid.UUID, page: int) -> None:
    eventbus.emit(
        "nuvemshop.sync_page",
        organization=store.organization_id,
        entity_kind="nuvemshop_store",
        entity_id=store.pk,
        payload={
            "store_id": str(store.pk),
            "resource": resource,
            "run_id": str(run_id),
            "page": page,
        },
        idempotency_key=f"nuvemshop.sync_page:{run_id}:{resource}:{page}",
    )


def product_synced_emit(store: Store, product: Product, action: str, item: dict[str, Any]) -> None:
    """`nuvemshop.product_synced` once per product version (its `updated_at` in the store)."""
    version = item.get("updated_at") or action
    eventbus.emit(
        "nuvemshop.product_synced",
        organization=store.organization_id,
        entity_kind="product",
        entity_id=product.pk,
        payload={"product_id": str(product.pk), "action": action},
        idempotency_key=f"nuvemshop.product_synced:{product.pk}:{version}",
    )
