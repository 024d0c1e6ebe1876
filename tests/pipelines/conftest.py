"""Pipeline test helpers: the seed's example definition, a loopback receiver allowed as a host."""

from __future__ import annotations

from typing import Any

import pytest

from core.models import Organization
from pipelines.models import AllowedHost
from tests.support.receiver import Receiver


def seed_example(url: str, **notify: Any) -> dict[str, Any]:
    """Seed 004's order.post example: notify an ERP, then set-status."""
    return {
        "nodes": [
            {"id": "start", "type": "start"},
            {
                "id": "notify",
                "type": "http-request",
                "config": {
                    "method": "POST",
                    "url": url,
                    "body": {"number": "{{orderNumber}}", "total": "{{order.totalAmount}}"},
                },
                "onError": "abort",
                **notify,
            },
            {
                "id": "ok",
                "type": "set-status",
                "config": {
                    "statusTag": "success",
                    "name": "Integrado ao ERP",
                    "phase": "order.post",
                },
            },
        ],
        "edges": [
            {"from": "start", "to": "notify"},
            {"from": "notify", "to": "ok", "branch": "success"},
        ],
    }


@pytest.fixture
def loopback_allowed(settings: Any, org: Organization) -> None:
    """The organization may call 127.0.0.1, and private targets are allowed (as in tests)."""
    settings.PIPELINES = {**getattr(settings, "PIPELINES", {}), "ALLOW_PRIVATE_TARGETS": True}
    AllowedHost.objects.create(organization=org, host="127.0.0.1")


@pytest.fixture
def erp(receiver: Receiver) -> Receiver:
    return receiver
