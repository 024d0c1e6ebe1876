"""The Nuvemshop integration's event types (seed 000 §3.7 and the sync's own). Every payload
carries ids only: the LGPD webhooks' e-mail, phone and CPF never reach the bus.

None is open to the API or to pipelines. The order and cart facts come from the shop (a verified
webhook, then the shop's API): an integrator claiming `nuvemshop.order_paid` would tell every
subscriber that a payment happened. The rest are commands the sync worker obeys (connect, resync,
a page, a webhook to fetch, a store to erase) or LGPD requests the shop signed
(`customer_redact_received`, `customer_data_requested` open irreversible requests: only the
receiver, after checking the shop's signature, emits them).
"""

from __future__ import annotations

from eventbus.store import catalog

SEED = "seed 000 §3"

catalog.declare_all(
    {
        "nuvemshop.order_created": ("order_id", "ns_order_id", "total_cents"),
        "nuvemshop.order_paid": ("order_id", "paid_at", "amount_cents"),
        "nuvemshop.order_cancelled": ("order_id", "cancelled_at"),
        "nuvemshop.order_fulfilled": ("order_id", "fulfilled_at"),
        "nuvemshop.cart_abandoned": ("cart_id", "value_cents", "abandoned_at"),
        "nuvemshop.customer_redact_received": ("ns_customer_id", "ns_request_id"),
        "nuvemshop.product_synced": ("product_id", "action"),
    },
    description=SEED,
    priorities={"nuvemshop.product_synced": -5},  # bulk sync last
)

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
    continues=True,  # each page emits the next: one generation, however many pages
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
