"""The LGPD consumers: export at D+7, redaction at D+15 (delays are settings, read at emit).

Both consume `lgpd.data_request_received`; each acts on its own request type and returns at once
for the other (and for a request already done: the services are idempotent). `atomic=True`:
the work and the ack commit together, so a killed worker never leaves half a redaction.
"""

from __future__ import annotations

import uuid

import eventbus
from crm.models import Contact
from eventbus.store.tenancy import guard_payload, require_producer
from lgpd import conf, services
from lgpd.models import DataRequest

# A request (and its contact) of another organization is never exported or erased (audited).
REQUEST_IDS = {"request_id": DataRequest, "contact_id": Contact}
EXPORT_CONSUMER = "lgpd-export-worker"
REDACT_CONSUMER = "lgpd-redact-worker"


@eventbus.consumer(
    EXPORT_CONSUMER, events=["lgpd.data_request_received"], delay=conf.export_delay, atomic=True
)
def export_on_request(event: eventbus.Event) -> None:
    if event.payload["request_type"] == "access":
        guard_payload(event, REQUEST_IDS)
        services.export_generate(
            request_id=uuid.UUID(event.payload["request_id"]), actor=f"system:{EXPORT_CONSUMER}"
        )


# Three attempts, then the DLQ and the DPO (lgpd.alerts.dead_letter_hook): compliance prefers a
# human over blind retries (LGPD_REDACT_ATTEMPTS overrides it).
@eventbus.consumer(
    REDACT_CONSUMER,
    events=["lgpd.data_request_received"],
    delay=conf.redact_delay,
    max_attempts=3,
    atomic=True,
)
def redact_on_request(event: eventbus.Event) -> None:
    if event.payload["request_type"] == "redact":
        guard_payload(event, REQUEST_IDS)
        services.redaction_apply(
            request_id=uuid.UUID(event.payload["request_id"]), actor=f"system:{REDACT_CONSUMER}"
        )


SHOP_REQUEST_CONSUMER = "lgpd-shop-request-worker"
# Who alone may open a shop's request: the Nuvemshop receiver (its provenance, as the bus sets it).
SHOP_RECEIVER = ("app:nuvemshop", "nuvemshop.receiver")


# The shop's LGPD webhooks (nuvemshop.receiver): open the CRM's own request for the matched
# contact; its export/redaction then runs like any other (and reaches back to the shop).
@eventbus.consumer(
    SHOP_REQUEST_CONSUMER,
    events=["nuvemshop.customer_redact_received", "nuvemshop.customer_data_requested"],
    atomic=True,  # the request and the ack commit together: one request per webhook
)
def request_from_shop(event: eventbus.Event) -> None:
    # Irreversible requests: only from the receiver, once it checked the shop's signature.
    require_producer(event, producer=SHOP_RECEIVER[0], component=SHOP_RECEIVER[1])
    guard_payload(event, {"contact_id": Contact})
    contact_id = event.payload.get("contact_id")
    if not contact_id:
        return  # no such customer in the CRM: nothing to report or erase
    redact = event.event_type == "nuvemshop.customer_redact_received"
    services.data_request_create(
        organization_id=event.organization_id,
        contact_id=uuid.UUID(contact_id),
        kind=DataRequest.Kind.REDACT if redact else DataRequest.Kind.ACCESS,
        channel=DataRequest.Channel.NUVEMSHOP,
        actor=f"nuvemshop:{event.payload.get('store_id', '')}",
    )
