"""`nuvemshop-sync-worker` (seed 000 §6.4): the full sync's pages, the store webhooks' fetch and
upsert, webhook registration on install, store/redact and shop-side LGPD redactions.

Not `atomic`: the API calls wait on the shared rate limiter, which commits on its own; each
write step is its own transaction and every step is idempotent (cursors, receipts, upserts by
the store's ids, idempotency keys on every event), so a retried delivery changes nothing twice.
"""

from __future__ import annotations

import uuid

import eventbus
from eventbus.store.tenancy import guard_payload
from nuvemshop import services, sync
from nuvemshop.client import TokenInvalid
from nuvemshop.models import ShopRedaction, Store, WebhookReceipt

SYNC_CONSUMER = "nuvemshop-sync-worker"


@eventbus.consumer(
    SYNC_CONSUMER,
    events=[
        "nuvemshop.store_connected",
        "nuvemshop.full_resync",
        "nuvemshop.sync_page",
        "nuvemshop.webhook_received",
        "nuvemshop.store_redact_received",
        "nuvemshop.shop_redact_requested",
    ],
)
def nuvemshop_sync(event: eventbus.Event) -> None:
    store_id = uuid.UUID(event.payload["store_id"])
    # Every id the payload names is the event's organization's, or nothing is done (audited).
    guard_payload(
        event,
        {"store_id": Store, "receipt_id": WebhookReceipt, "redaction_id": ShopRedaction},
    )
    try:
        _dispatch(event, store_id)
    except TokenInvalid as error:
        store = Store.objects.filter(pk=store_id, organization_id=event.organization_id).first()
        if store is not None:
            services.store_token_invalid(store=store, error=str(error))
        raise eventbus.PermanentError(str(error)) from error


def _dispatch(event: eventbus.Event, store_id: uuid.UUID) -> None:
    payload = event.payload
    if event.event_type == "nuvemshop.store_connected":
        store = Store.objects.get(pk=store_id, organization_id=event.organization_id)
        if store.syncing:
            services.store_details_refresh(store=store)
            services.webhooks_register(store=store)
            services.full_resync_request(store=store, actor=f"system:{SYNC_CONSUMER}")
    elif event.event_type == "nuvemshop.full_resync":
        sync.full_resync_start(store_id=store_id, run_id=event.id)
    elif event.event_type == "nuvemshop.sync_page":
        sync.sync_page(
            store_id=store_id,
            resource=payload["resource"],
            run_id=uuid.UUID(payload["run_id"]),
            page=int(payload["page"]),
        )
    elif event.event_type == "nuvemshop.webhook_received":
        services.receipt_process(receipt_id=uuid.UUID(payload["receipt_id"]))
    elif event.event_type == "nuvemshop.store_redact_received":
        services.store_redact(store_id=store_id)
    elif event.event_type == "nuvemshop.shop_redact_requested":
        services.shop_redaction_run(redaction_id=uuid.UUID(payload["redaction_id"]))
