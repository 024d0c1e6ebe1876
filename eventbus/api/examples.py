"""Example requests and answers of the event bus's API, for its OpenAPI document (`/api/docs/`).

Values an integrator would see: one lead whose stage changed, emitted through an API key,
delivered to a CRM sync consumer and to a webhook subscription. A test validates every example
against its schema (tests/core/test_api_docs.py).
"""

from __future__ import annotations

from typing import Any

EVENT_ID = "0195a3c2-7b1e-7c4d-9a2f-6e8b1d3c5a70"
ENTITY_ID = "3f2c681b-8281-48ec-9c16-bbe021c83df3"
ORGANIZATION_ID = "6a1f0c2e-9d3b-4e5a-8c7f-1b2d3e4f5a6b"
REPLAY_ID = "0195a3d0-11aa-7e3b-8f00-5c6d7e8f9a0b"
EMITTED = "2026-03-02T12:00:00.412000Z"
SETTLED = "2026-03-02T12:00:01.093000Z"
WEBHOOK_CONSUMER = "webhook:9d1e4b7a-2c3f-4a5b-8d6e-7f8a9b0c1d2e"

EVENT: dict[str, Any] = {
    "id": EVENT_ID,
    "event_type": "lead.stage_changed",
    "entity_kind": "lead",
    "entity_id": ENTITY_ID,
    "status": "done",
    "payload": {"from_stage_id": "new", "to_stage_id": "qualified"},
    "metadata": {
        "trace_id": "erp-sync-42",
        "request_id": "9b2f6c1e-5d4a-4f3b-8e7d-2a1c0b9f8e7d",
        "actor_id": "api_key:dck_a1b2c3d4",
        "source": "api",
        "emitted_at": "2026-03-02T12:00:00.412000+00:00",
    },
    "provenance": {"door": "api", "producer": "api_key:dck_a1b2c3d4"},
    "consumed_by": ["crm-sync-worker", WEBHOOK_CONSUMER],
    "attempts": 0,
    "last_error": None,
    "ordering_key": None,
    "priority": 0,
    "created_at": EMITTED,
    "updated_at": SETTLED,
}

DELIVERIES: list[dict[str, Any]] = [
    {
        "consumer": "crm-sync-worker",
        "status": "done",
        "attempts": 1,
        "max_attempts": 8,
        "next_attempt_at": EMITTED,
        "last_error": None,
        "error_class": None,
        "finished_at": SETTLED,
        "updated_at": SETTLED,
        "redelivered": False,
        "redelivery_reason": None,
    },
    {
        "consumer": WEBHOOK_CONSUMER,
        "status": "done",
        "attempts": 1,
        "max_attempts": 8,
        "next_attempt_at": EMITTED,
        "last_error": None,
        "error_class": None,
        "finished_at": "2026-03-02T12:00:00.870000Z",
        "updated_at": "2026-03-02T12:00:00.870000Z",
        "redelivered": False,
        "redelivery_reason": None,
    },
]

EVENT_DETAIL: dict[str, Any] = {**EVENT, "deliveries": DELIVERIES}

NEXT_CURSOR = "MjAyNi0wMy0wMlQxMjowMDowMC40MTIwMDBafDAxOTVhM2My"
EVENT_PAGE: dict[str, Any] = {
    "results": [EVENT],
    "next_cursor": NEXT_CURSOR,
    "next": f"https://deskcomm.example.com/api/v1/events?limit=1&cursor={NEXT_CURSOR}",
}

DEAD_DELIVERY: dict[str, Any] = {
    **DELIVERIES[0],
    "status": "pending",
    "attempts": 0,
    "next_attempt_at": "2026-03-02T12:31:00.000000Z",
    "finished_at": None,
    "updated_at": "2026-03-02T12:31:00.000000Z",
}
REPROCESSED: dict[str, Any] = {
    "moved": 1,
    "event": {
        **EVENT_DETAIL,
        "status": "pending",
        "deliveries": [DEAD_DELIVERY, DELIVERIES[1]],
        "updated_at": "2026-03-02T12:31:00.000000Z",
    },
}
DISCARDED: dict[str, Any] = {
    "moved": 1,
    "event": {
        **EVENT_DETAIL,
        "deliveries": [
            {
                **DELIVERIES[0],
                "status": "discarded",
                "attempts": 8,
                "last_error": "HTTPStatusError: 422 from crm.example.com",
                "error_class": "HTTPStatusError",
            },
            DELIVERIES[1],
        ],
    },
}

REPROCESS_REQUEST = {"consumer": "crm-sync-worker", "reason": "CRM API fixed (INC-2291)"}
DISCARD_REQUEST = {"consumer": "crm-sync-worker", "reason": "lead deleted in the CRM by hand"}

CONSUMER_STATE: dict[str, Any] = {
    "consumer": "crm-sync-worker",
    "state": "running",
    "since": None,
    "reason": "",
    "changed_by": "",
    "probe_at": None,
}
PAUSED: dict[str, Any] = {
    **CONSUMER_STATE,
    "state": "paused",
    "since": "2026-03-02T12:05:00.000000Z",
    "reason": "CRM API down for maintenance until 13:00",
    "changed_by": "api_key:dck_a1b2c3d4",
    "changed": True,
}
RESUMED: dict[str, Any] = {**CONSUMER_STATE, "changed": True}
PAUSE_REQUEST = {"reason": "CRM API down for maintenance until 13:00"}
RESUME_REQUEST = {"reason": "maintenance over"}

REPLAY_REQUEST = {
    "since": "2026-03-01T08:00:00Z",
    "until": "2026-03-01T10:00:00Z",
    "event_type": "lead.stage_changed",
    "reason": "crm-sync-worker mapped stages wrongly from 08:00 to 10:00",
    "dry_run": True,
}
REPLAY_REPORT: dict[str, Any] = {
    "replay_id": REPLAY_ID,
    "consumer": "crm-sync-worker",
    "since": "2026-03-01T08:00:00Z",
    "until": "2026-03-01T10:00:00Z",
    "organization_id": ORGANIZATION_ID,
    "event_types": ["lead.stage_changed"],
    "matched": 412,
    "queued": 0,
    "left": 3,
    "dry_run": True,
    "by_status": {"done": 409, "dead": 0, "pending": 3},
}

OUTBOX_ROW: dict[str, Any] = {
    "id": EVENT_ID,
    "event_type": "lead.stage_changed",
    "event_version": 1,
    "organization_id": ORGANIZATION_ID,
    "aggregate_type": "lead",
    "aggregate_id": ENTITY_ID,
    "correlation_id": "erp-sync-42",
    "causation_id": None,
    "payload": {"from_stage_id": "new", "to_stage_id": "qualified"},
    "status": "PUBLISHED",
    "attempts": 0,
    "last_error": None,
    "available_at": EMITTED,
    "occurred_at": EMITTED,
}
OUTBOX_PAGE: dict[str, Any] = {
    "results": [OUTBOX_ROW],
    "next_cursor": NEXT_CURSOR,
    "next": f"https://deskcomm.example.com/api/outbox?limit=1&cursor={NEXT_CURSOR}",
}
OUTBOX_REPROCESS_REQUEST = {"reason": "ERP back online"}
OUTBOX_REPROCESSED: dict[str, Any] = {
    "moved": 1,
    "row": {**OUTBOX_ROW, "status": "PENDING", "attempts": 8, "last_error": "ConnectTimeout"},
}

EVENT_TYPES: dict[str, Any] = {
    "results": [
        {
            "event_type": "lead.stage_changed",
            "owner": "crm",
            "doors": ["app", "api"],
            "emittable": True,
            "latest_version": 1,
            "priority": 0,
            "versions": [
                {
                    "version": 1,
                    "description": "A lead moved from one pipeline stage to another.",
                    "superseded_on": None,
                    "accepted": True,
                    "payload_schema": {
                        "$schema": "https://json-schema.org/draft/2020-12/schema",
                        "title": "lead.stage_changed v1",
                        "type": "object",
                        "required": ["from_stage_id", "to_stage_id"],
                        "properties": {"from_stage_id": {}, "to_stage_id": {}},
                        "additionalProperties": True,
                    },
                }
            ],
        }
    ]
}
