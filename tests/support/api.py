"""Helpers for API tests: issue keys, build authenticated clients, read the error shape."""

from __future__ import annotations

from typing import Any

from django.db import connection
from rest_framework.test import APIClient

from core import scopes, services
from core.models import Organization

JSON = "application/json"

# What an API request may change, minus bookkeeping every request writes (key last use,
# throttle state, the audit of issuing keys).
SNAPSHOT_SQL = {
    "events": "SELECT id, status, consumed_by, fanout, updated_at FROM event_log ORDER BY id",
    "deliveries": "SELECT id, status, attempts, updated_at FROM eventbus_delivery ORDER BY id",
    "audit": "SELECT id FROM deskcomm_auditlog WHERE action NOT LIKE 'api_key.%%' ORDER BY id",
    "idempotency": "SELECT id, response::text FROM deskcomm_idempotencykey ORDER BY id",
    "subscriptions": "SELECT id, url, description, event_types, enabled, consecutive_failures, "
    "secret_encrypted, previous_secret_encrypted, updated_at "
    "FROM webhooks_subscription ORDER BY id",
    "attempts": "SELECT id FROM webhooks_attempt ORDER BY id",
    "data_requests": "SELECT id, status FROM lgpd_datarequest ORDER BY id",
    "consumer_states": "SELECT consumer, state, reason FROM eventbus_consumer_state ORDER BY 1",
    "pipelines": "SELECT id, name, trigger, enabled, definition::text, updated_at "
    "FROM pipelines_pipeline ORDER BY id",
    "executions": "SELECT id, status, attempts FROM pipeline_execution ORDER BY id",
    "orders": "SELECT id, status, status_tag FROM deskcomm_order ORDER BY id",
    "leads": "SELECT id, name, stage_id, owner_id, status, deleted_at, updated_at "
    "FROM deskcomm_lead ORDER BY id",
    "lead_activities": "SELECT id FROM deskcomm_leadactivity ORDER BY id",
    "consents": "SELECT id FROM deskcomm_consentrecord ORDER BY id",
    "messages": "SELECT id, status FROM deskcomm_message ORDER BY id",
}


def all_scopes() -> list[str]:
    return list(scopes.declared())


def issue_key(organization: Organization, *granted: str, name: str = "test key") -> str:
    """A new API key's full value (all declared scopes when none are named)."""
    _, full = services.api_key_create(
        organization=organization,
        name=name,
        scopes_granted=list(granted) or all_scopes(),
        actor="test",
    )
    return full


def client_for(token: str | None = None, **headers: str) -> APIClient:
    client = APIClient()
    if token is not None:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    client.credentials(**headers)
    return client


def api_client(organization: Organization, *granted: str) -> APIClient:
    return client_for(issue_key(organization, *granted))


def error_of(response: Any, status: int, code: str) -> dict[str, Any]:
    """Assert the response is the API error shape with this status and code; return `error`."""
    assert response.status_code == status, (response.status_code, response.content[:500])
    assert response["Content-Type"].startswith(JSON)
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"code", "message", "fields", "request_id"}
    assert error["code"] == code, error
    assert error["message"]
    assert error["request_id"] == response["X-Request-ID"]
    return dict(error)


def lead_stage_changed(**extra: Any) -> dict[str, Any]:
    """A valid POST /api/v1/events body."""
    body: dict[str, Any] = {
        "event_type": "lead.stage_changed",
        "entity_kind": "lead",
        "payload": {"from_stage_id": "new", "to_stage_id": "qualified"},
    }
    body.update(extra)
    return body


def prefix_of(token: str) -> str:
    """The key's public part, `dck_<12 hex>` (how audit rows and metadata name the caller)."""
    return token[:16]


def snapshot() -> dict[str, list[tuple[Any, ...]]]:
    """The rows an API request could write (compare before and after: "nothing changed")."""
    with connection.cursor() as cursor:
        out = {}
        for name, sql in SNAPSHOT_SQL.items():
            cursor.execute(sql)
            out[name] = cursor.fetchall()
        return out
