"""Example requests and answers of the LGPD data-request API, for its OpenAPI document
(`/api/docs/`): a contact's access request, completed with its export ready. A test validates
every example against its schema (tests/core/test_api_docs.py)."""

from __future__ import annotations

import hashlib
from typing import Any

REQUEST_ID = "1c9e2f4a-6b8d-4a0c-9e1f-3a5b7c9d1e2f"
CONTACT_ID = "3f2c681b-8281-48ec-9c16-bbe021c83df3"

CREATE_REQUEST = {"contact_id": CONTACT_ID, "kind": "access"}

RECEIVED: dict[str, Any] = {
    "id": REQUEST_ID,
    "contact_id": CONTACT_ID,
    "kind": "access",
    "channel": "api",
    "status": "received",
    "requested_by": "api_key:dck_a1b2c3d4",
    "received_at": "2026-03-02T12:00:00.000000Z",
    "export_generated_at": None,
    "export_expires_at": None,
    "export_sha256": "",
    "export_deleted_at": None,
    "export_deleted_reason": "",
    "export_link_sent_at": None,
    "export_link_used_at": None,
    "export_url": None,
    "redacted_at": None,
    "sla_warned_at": None,
    "sla_escalated_at": None,
    "completed_at": None,
}
COMPLETED: dict[str, Any] = {
    **RECEIVED,
    "status": "completed",
    "export_generated_at": "2026-03-09T12:00:04.000000Z",
    "export_expires_at": "2026-04-08T12:00:04.000000Z",
    "export_sha256": hashlib.sha256(b"the export file").hexdigest(),
    "export_link_sent_at": "2026-03-09T12:00:05.000000Z",
    "export_url": f"https://deskcomm.example.com/api/v1/lgpd/data-requests/{REQUEST_ID}/export",
    "completed_at": "2026-03-09T12:00:04.000000Z",
}
NEXT_CURSOR = "MjAyNi0wMy0wMlQxMjowMDowMHwxYzllMmY0YQ"
PAGE: dict[str, Any] = {
    "results": [COMPLETED],
    "next_cursor": NEXT_CURSOR,
    "next": f"https://deskcomm.example.com/api/v1/lgpd/data-requests?limit=1&cursor={NEXT_CURSOR}",
}

CONSENT_REQUEST = {
    "consent_type": "marketing_whatsapp",
    "granted": False,
    "source": "web_form",
    "evidence": "Unticked 'send me offers' on the account page.",
}
CONSENT: dict[str, Any] = {
    "id": 4411,
    "contact_id": CONTACT_ID,
    "consent_type": "marketing_whatsapp",
    "granted": False,
    "source": "web_form",
    "evidence": "Unticked 'send me offers' on the account page.",
    "recorded_at": "2026-12-06T14:03:11.204518Z",
}
CONSENTS: dict[str, Any] = {"results": [CONSENT]}
