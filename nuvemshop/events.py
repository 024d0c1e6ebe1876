"""Event types of the Nuvemshop integration beyond seed 000 §3.7 (declared at start-up). Every
payload carries ids only: the LGPD webhooks' e-mail, phone and CPF never reach the bus."""

from __future__ import annotations

from eventbus import catalog

catalog.declare(
    "nuvemshop.store_connected",
    required=["store_id", "ns_store_id"],
    description="nuvemshop: a store installed the app; the sync worker registers its webhooks",
)
catalog.declare(
    "nuvemshop.full_resync",
    required=["store_id"],
    description="nuvemshop: the full_resync job (install, admin 'resync'): sync every resource",
)
catalog.declare(
    "nuvemshop.sync_page",
    required=["store_id", "resource", "run_id", "page"],
    description="nuvemshop: one page of a full sync, resumable from the store's cursor",
)
catalog.declare(
    "nuvemshop.webhook_received",
    required=["receipt_id", "store_id", "event"],
    description="nuvemshop: a verified store webhook; the sync worker fetches and upserts",
)
catalog.declare(
    "nuvemshop.customer_data_requested",
    required=["ns_customer_id", "ns_request_id"],
    description="nuvemshop: customers/data_request; lgpd opens an access request",
)
catalog.declare(
    "nuvemshop.store_redact_received",
    required=["store_id", "ns_store_id"],
    description="nuvemshop: store/redact; the sync worker removes the store's data",
)
catalog.declare(
    "nuvemshop.shop_redact_requested",
    required=["redaction_id", "store_id"],
    description="nuvemshop: an LGPD redaction to carry out in the shop (PUT /customers/{id})",
)
