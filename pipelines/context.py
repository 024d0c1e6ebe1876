"""The context a pipeline runs over: what its templates and conditions can name.

Order triggers: `orderNumber` and `order` (`id`, `number`, `totalAmount` as "123.45",
`total_cents`, `currency`, `items`, `status_tag`, external codes). `event.<Type>`: `event` (`id`,
`type`, `entity_kind`, `entity_id`, `payload`, `occurred_at`) and `payload`; an event about an
order also gets `order.id`, so set-status can write on it. No customer identity is ever put in
the context (so none reaches a step's recorded excerpt).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import eventbus


def amount(total_cents: int) -> str:
    sign = "-" if total_cents < 0 else ""
    cents = abs(total_cents)
    return f"{sign}{cents // 100}.{cents % 100:02d}"


def order_context(summary: Mapping[str, Any]) -> dict[str, Any]:
    """From `order.confirmed`'s payload (crm.services.order_summary) or an order request."""
    total = int(summary.get("total_cents", 0))
    order = {
        "id": summary.get("order_id"),
        "number": summary.get("number"),
        "totalAmount": summary.get("total_amount") or amount(total),
        "total_cents": total,
        "currency": summary.get("currency", "BRL"),
        "items": list(summary.get("items") or []),
        "status_tag": summary.get("status_tag", ""),
        "ns_store_id": summary.get("ns_store_id"),
        "ns_order_id": summary.get("ns_order_id"),
    }
    return {"orderNumber": order["number"], "order": order}


def event_context(event: eventbus.Event) -> dict[str, Any]:
    payload = dict(event.payload)
    found: dict[str, Any] = {
        "event": {
            "id": str(event.id),
            "type": event.event_type,
            "entity_kind": event.entity_kind,
            "entity_id": str(event.entity_id) if event.entity_id else None,
            "payload": payload,
            "occurred_at": event.created_at.isoformat(),
        },
        "payload": payload,
    }
    if event.entity_kind == "order" and event.entity_id is not None:
        found["order"] = {"id": str(event.entity_id)}
    return found
