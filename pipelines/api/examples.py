"""Example requests and answers of the pipelines and orders API, for its OpenAPI document
(`/api/docs/`): an order.post pipeline that notifies an ERP, then sets the order's status, and
one order run through it. A test validates every example against its schema
(tests/core/test_api_docs.py)."""

from __future__ import annotations

from typing import Any

PIPELINE_ID = "7e3a1c5b-9d2f-4b6e-8a0c-2e4f6a8b0c1d"
EXECUTION_ID = "0195a3c4-2f6e-7a8b-9c0d-1e2f3a4b5c6d"
EVENT_ID = "0195a3c3-5d7f-7b9a-8c1e-3f5a7b9c1d3e"
ORDER_ID = "b8d0f2a4-6c8e-4a1b-9d3f-5a7c9e1b3d5f"

DEFINITION: dict[str, Any] = {
    "nodes": [
        {"id": "start", "type": "start"},
        {
            "id": "notify",
            "type": "http-request",
            "config": {
                "method": "POST",
                "url": "https://erp.example.com/orders",
                "body": {"number": "{{orderNumber}}", "total": "{{order.totalAmount}}"},
            },
            "onError": "abort",
        },
        {
            "id": "ok",
            "type": "set-status",
            "config": {"statusTag": "success", "name": "Integrado ao ERP"},
        },
    ],
    "edges": [
        {"from": "start", "to": "notify"},
        {"from": "notify", "to": "ok", "branch": "success"},
    ],
}
CREATE_REQUEST: dict[str, Any] = {"name": "ERP", "trigger": "order.post", "definition": DEFINITION}
UPDATE_REQUEST: dict[str, Any] = {"enabled": False}

PIPELINE: dict[str, Any] = {
    "id": PIPELINE_ID,
    "name": "ERP",
    "trigger": "order.post",
    "enabled": True,
    "definition": DEFINITION,
    "created_at": "2026-03-01T09:00:00.000000Z",
    "updated_at": "2026-03-01T09:00:00.000000Z",
}
DISABLED: dict[str, Any] = {
    **PIPELINE,
    "enabled": False,
    "updated_at": "2026-03-02T12:20:00.000000Z",
}
PIPELINES: dict[str, Any] = {"results": [PIPELINE]}

EXECUTIONS: dict[str, Any] = {
    "results": [
        {
            "id": EXECUTION_ID,
            "pipeline_id": PIPELINE_ID,
            "trigger": "order.post",
            "event_id": EVENT_ID,
            "order_id": ORDER_ID,
            "status": "FAILED",
            "attempts": 1,
            "failed_node": "notify",
            "error": "POST erp.example.com answered HTTP 500: upstream error",
            "started_at": "2026-03-02T12:00:01.000000Z",
            "finished_at": "2026-03-02T12:00:01.380000Z",
            "steps": [
                {
                    "node_id": "notify",
                    "node_type": "http-request",
                    "status": "FAILED",
                    "attempts": 1,
                    "started_at": "2026-03-02T12:00:01.010000Z",
                    "finished_at": "2026-03-02T12:00:01.370000Z",
                    "duration_ms": 360,
                    "input_excerpt": '{"method": "POST", "url": "https://erp.example.com/orders"}',
                    "output_excerpt": "",
                    "error": "POST erp.example.com answered HTTP 500: upstream error",
                }
            ],
        }
    ]
}

ORDER_REQUEST: dict[str, Any] = {
    "number": "A-1042",
    "total_cents": 15980,
    "currency": "BRL",
    "items": [{"sku": "TSHIRT-M", "name": "T-shirt M", "qty": 2, "unit_cents": 7990}],
    "customer": {"name": "Ana Souza", "email": "ana@example.com", "phone": "+5511999990000"},
    "shipping_address": "Rua Augusta 100, São Paulo",
}
ORDER: dict[str, Any] = {
    "id": ORDER_ID,
    "number": "A-1042",
    "status": "confirmed",
    "total_cents": 15980,
    "currency": "BRL",
    "items": ORDER_REQUEST["items"],
    "status_tag": "",
    "status_name": "",
    "phase": "",
    "confirmed_at": "2026-03-02T12:00:00.900000Z",
    "pre_execution_id": None,
}
PRE_FAILED: dict[str, Any] = {
    "error": {
        "code": "pipeline_failed",
        "message": "The order.pre pipeline failed at step 'check-stock'; nothing was written.",
        "fields": {"pipeline.check-stock": ["GET stock.example.com answered HTTP 409: no stock"]},
        "request_id": "9b2f6c1e-5d4a-4f3b-8e7d-2a1c0b9f8e7d",
    }
}
