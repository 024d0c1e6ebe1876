"""The API key scopes of the event bus endpoints (loaded by EventbusConfig.ready)."""

from __future__ import annotations

from core.scopes import declare

EVENTS_READ = declare("events:read", "List and read events and their per-consumer states.")
EVENTS_WRITE = declare("events:write", "Emit events (POST /api/v1/events).")
EVENTS_REPROCESS = declare("events:reprocess", "Re-run an event's dead (or done) deliveries.")
EVENTS_DISCARD = declare("events:discard", "Discard an event's dead deliveries (with a reason).")
OUTBOX_READ = declare("outbox:read", "List outbox rows (GET /api/outbox).")
OUTBOX_REPROCESS = declare("outbox:reprocess", "Put a FAILED outbox row back to PENDING.")
CONSUMERS_READ = declare(
    "consumers:read", "Read a consumer's pause / circuit-breaker state (GET /api/v1/consumers/...)."
)
CONSUMERS_WRITE = declare(
    "consumers:write",
    "Pause and resume consumers (platform keys) or the key's own webhook "
    "subscriptions (POST /api/v1/consumers/<name>/pause|resume).",
)
CONSUMERS_REPLAY = declare(
    "consumers:replay",
    "Replay a consumer over a time window: its deliveries of the key's organization's events "
    "run again (POST /api/v1/consumers/<name>/replay).",
)
