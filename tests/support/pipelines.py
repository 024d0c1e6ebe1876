"""Pipeline test data: seed 004's example definition."""

from __future__ import annotations

from typing import Any


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
