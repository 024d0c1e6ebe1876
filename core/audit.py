"""The audit trail of operator actions (one writer: `record`).

Actors are named one way everywhere: `user:<username>` for a person in the admin,
`api_key:<prefix>` for an API client (core.api.authentication), `system:<name>` for the
platform's own jobs and consumers (`cli:<os user>` for management commands run by hand).
Rows written before this convention keep what they say (`admin:<username>`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from core import context
from core.models import AuditLog


class _HasUser(Protocol):
    user: Any


def user_actor(request: _HasUser) -> str:
    """`user:<username>`: the admin user acting in this request."""
    return f"user:{request.user.get_username()}"


def system_actor(name: str) -> str:
    """`system:<name>`: a job or consumer of the platform acting on its own."""
    return f"system:{name}"


def record_many(
    *,
    actor: str,
    action: str,
    target_type: str,
    targets: Iterable[tuple[str, uuid.UUID | None, Mapping[str, Any]]],
    reason: str = "",
) -> int:
    """Write one audit row per (target_id, organization_id, details); request id from context."""
    request_id = context.current().get("request_id", "")
    rows = [
        AuditLog(
            actor=actor,
            action=action,
            target_type=target_type,
            target_id=str(target_id),
            organization_id=org_id,
            reason=reason,
            request_id=request_id,
            details=dict(details),
        )
        for target_id, org_id, details in targets
    ]
    AuditLog.objects.bulk_create(rows, batch_size=1000)
    return len(rows)


def record(
    *,
    actor: str,
    action: str,
    target_type: str,
    target_id: object,
    organization_id: uuid.UUID | None = None,
    reason: str = "",
    details: Mapping[str, Any] | None = None,
) -> None:
    """Write one audit row."""
    record_many(
        actor=actor,
        action=action,
        target_type=target_type,
        targets=[(str(target_id), organization_id, details or {})],
        reason=reason,
    )
