"""The event bus over HTTP: `/api/v1/events...` and seed 004's `/api/outbox`."""
