"""Example requests and answers of the webhook API, for its OpenAPI document (`/api/docs/`).

One subscription of a CRM endpoint to lead events, and one delivery to it that failed once and
then succeeded. A test validates every example against its schema (tests/core/test_api_docs.py).
"""

from __future__ import annotations

from typing import Any

SUBSCRIPTION_ID = "9d1e4b7a-2c3f-4a5b-8d6e-7f8a9b0c1d2e"
EVENT_ID = "0195a3c2-7b1e-7c4d-9a2f-6e8b1d3c5a70"
PING_EVENT_ID = "0195a3c9-0d2e-7f1a-8b3c-4d5e6f7a8b9c"
CREATED = "2026-03-01T09:30:00.000000Z"

SUBSCRIBE_REQUEST = {
    "url": "https://crm.example.com/deskcomm-hooks",
    "event_types": ["lead.*", "contact.created"],
    "description": "CRM sync",
}
UPDATE_REQUEST = {"event_types": ["lead.*", "contact.*"]}

SUBSCRIPTION: dict[str, Any] = {
    "id": SUBSCRIPTION_ID,
    "url": "https://crm.example.com/deskcomm-hooks",
    "description": "CRM sync",
    "event_types": ["lead.*", "contact.created"],
    "enabled": True,
    "consecutive_failures": 0,
    "disabled_at": None,
    "disabled_reason": "",
    "secret_rotation_ends_at": None,
    "created_at": CREATED,
}
UPDATED: dict[str, Any] = {**SUBSCRIPTION, "event_types": ["lead.*", "contact.*"]}
DISABLED: dict[str, Any] = {
    **SUBSCRIPTION,
    "enabled": False,
    "disabled_at": "2026-03-02T12:10:00.000000Z",
    "disabled_reason": "disabled through the API",
}
WITH_SECRET: dict[str, Any] = {
    **SUBSCRIPTION,
    "secret": "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",  # pragma: allowlist secret
}
ROTATED: dict[str, Any] = {
    **WITH_SECRET,
    "secret": "whsec_HyAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4=",  # pragma: allowlist secret
    "secret_rotation_ends_at": "2026-03-03T12:00:00.000000Z",  # pragma: allowlist secret
}
SUBSCRIPTIONS: dict[str, Any] = {"results": [SUBSCRIPTION]}
PING: dict[str, Any] = {"event_id": PING_EVENT_ID}

DELIVERY: dict[str, Any] = {
    "id": 48213,
    "webhook_id": "5b0c7f3e-1a2d-4e6f-9a8b-7c6d5e4f3a2b",
    "subscription_id": SUBSCRIPTION_ID,
    "event_id": EVENT_ID,
    "event_type": "lead.stage_changed",
    "status": "done",
    "attempts": 2,
    "next_attempt_at": "2026-03-02T12:00:31.000000Z",
    "last_error": None,
    "created_at": "2026-03-02T12:00:00.412000Z",
    "finished_at": "2026-03-02T12:00:31.240000Z",
}
DELIVERIES: dict[str, Any] = {"results": [DELIVERY]}
DELIVERY_DETAIL: dict[str, Any] = {
    **DELIVERY,
    "attempt_log": [
        {
            "attempt": 1,
            "at": "2026-03-02T12:00:00.900000Z",
            "status_code": 503,
            "duration_ms": 412,
            "response_excerpt": "upstream unavailable",
            "error_class": "HTTPStatus",
            "error": "HTTP 503 from crm.example.com",
        },
        {
            "attempt": 2,
            "at": "2026-03-02T12:00:31.100000Z",
            "status_code": 200,
            "duration_ms": 140,
            "response_excerpt": '{"ok": true}',
            "error_class": "",
            "error": "",
        },
    ],
}
RESENT: dict[str, Any] = {
    **DELIVERY,
    "status": "pending",
    "next_attempt_at": "2026-03-02T13:00:00.000000Z",
    "finished_at": None,
}
