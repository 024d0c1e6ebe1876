"""Deskcomm's event bus inside PostgreSQL.

Public API (pinned):
    eventbus.emit(event_type, *, organization, entity_kind, entity_id=None, payload=None,
                  metadata=None, idempotency_key=None, causation_id=None) -> EventLog
    eventbus.emit_many(items, *, organization) -> list[uuid.UUID]
    @eventbus.consumer("name-worker", events=[...], max_attempts=8, delay=None, atomic=False,
                       runs_on="drain")  # or "broker": run by the jobs process (rundramatiq)
    @eventbus.consumer(..., batch=N)  # fn(events: list[Event]): up to N of one organization
    eventbus.PermanentError, eventbus.EventValidationError, eventbus.Event

Importing `eventbus` is safe while Django loads: no module here touches models at import time.
"""

from __future__ import annotations

from eventbus.store.emitter import emit, emit_many
from eventbus.store.errors import ConsumerRegistrationError, EventValidationError, PermanentError
from eventbus.store.event import Event
from eventbus.store.registry import consumer, registry

__all__ = [
    "ConsumerRegistrationError",
    "Event",
    "EventValidationError",
    "PermanentError",
    "consumer",
    "emit",
    "emit_many",
    "registry",
]
