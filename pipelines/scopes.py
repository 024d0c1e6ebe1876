"""The API key scopes of the pipeline and order endpoints (loaded by PipelinesConfig.ready)."""

from __future__ import annotations

from core.scopes import declare

PIPELINES_READ = declare(
    "pipelines:read", "List and read pipelines and their executions with per-step tracking."
)
PIPELINES_WRITE = declare("pipelines:write", "Create and change pipelines (definition, enabled).")
ORDERS_WRITE = declare(
    "orders:write", "Create orders: runs the order.pre pipeline, then confirms the order."
)
