"""Example requests and answers of the CRM API (the OpenAPI reference shows them)."""

from __future__ import annotations

from typing import Any

LEAD_ID = "6f1c2a54-0b7e-4c1e-9d3a-2f4b8c9d0e11"
CONTACT_ID = "0d9e7c4b-1a2f-4e3d-8b6c-5a4f3e2d1c0b"
CONVERSATION_ID = "3a2b1c0d-9e8f-4a7b-8c6d-5e4f3a2b1c0d"
STAMP = "2026-12-06T14:03:11.204518Z"

CREATE_REQUEST: dict[str, Any] = {
    "name": "Loja da Ana: 40 camisetas",
    "source": "web_form",
    "stage_id": "new",
    "contact_id": CONTACT_ID,
    "value_cents": 120000,
}
LEAD: dict[str, Any] = {
    "id": LEAD_ID,
    "name": "Loja da Ana: 40 camisetas",
    "source": "web_form",
    "pipeline_id": "default",
    "stage_id": "new",
    "status": "open",
    "contact_id": CONTACT_ID,
    "owner_id": None,
    "value_cents": 120000,
    "won_at": None,
    "lost_at": None,
    "close_reason": "",
    "created_at": STAMP,
    "updated_at": STAMP,
}
UPDATE_REQUEST: dict[str, Any] = {"value_cents": 150000}
UPDATED = {**LEAD, "value_cents": 150000}
STAGE_REQUEST = {"stage_id": "proposal"}
MOVED = {**LEAD, "stage_id": "proposal"}
ASSIGN_REQUEST = {"owner_id": 12}
ASSIGNED = {**LEAD, "owner_id": 12}
WON_REQUEST = {"value_cents": 150000, "reason": "signed the proposal"}
WON = {
    **LEAD,
    "status": "won",
    "value_cents": 150000,
    "won_at": STAMP,
    "close_reason": "signed the proposal",
}
LOST_REQUEST = {"reason": "price"}
LOST = {**LEAD, "status": "lost", "lost_at": STAMP, "close_reason": "price"}
PAGE = {"results": [LEAD], "next_cursor": None, "next": None}
ACTIVITY_REQUEST = {"kind": "call", "note": "Asked for a quote for 40 units."}
ACTIVITY = {
    "id": 981,
    "lead_id": LEAD_ID,
    "kind": "call",
    "note": "Asked for a quote for 40 units.",
    "created_at": STAMP,
}
ACTIVITIES = {"results": [ACTIVITY], "next_before_id": None}
MESSAGE_REQUEST = {"body": "Olá Ana! Seu orçamento está pronto."}
QUEUED = {
    "id": "9b8a7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d",
    "conversation_id": CONVERSATION_ID,
    "contact_id": CONTACT_ID,
    "status": "queued",
    "is_template": False,
    "created_at": STAMP,
}
