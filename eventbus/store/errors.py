"""Exceptions of the event bus public API."""

from __future__ import annotations


class EventValidationError(ValueError):
    """An event was rejected before anything was written (bad type, payload, organization...).

    `field` names the `emit` argument at fault ("event_type", "payload", "metadata"...) when there
    is one, so the HTTP API can answer with per-field errors.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class EventTypeNotEmittable(EventValidationError):
    """An event type was emitted through a door its owner did not open (the integrators' API, a
    pipeline's emit-event node). Nothing was written; the HTTP API answers 403."""

    code = "event_type_not_emittable"

    def __init__(self, event_type: str, *, owner: str, door: str, item: int | None = None) -> None:
        where = {"api": "the API", "pipeline": "a pipeline"}.get(door, door)
        super().__init__(
            ("" if item is None else f"item {item}: ")
            + f"{event_type} is owned by {owner} and cannot be emitted through {where}: only the "
            "types listed by GET /api/v1/event-types as emittable are",
            field="event_type",
        )
        self.event_type = event_type
        self.owner = owner
        self.door = door


class EmitRateLimited(Exception):
    """An organization emitted more than EVENTBUS_DOOR_EMIT_RATE through the API and pipelines:
    nothing was written; retry after `retry_after` seconds."""

    def __init__(self, retry_after: float, rate: str) -> None:
        super().__init__(
            f"this organization emitted more than {rate} events through the API and pipelines; "
            f"retry in {retry_after:.0f} s"
        )
        self.retry_after = retry_after


class PermanentError(Exception):
    """Raised by a consumer for work that can never succeed: dead-letter the delivery at once."""


class CausationTooDeep(EventValidationError, PermanentError):
    """An emit while handling an event would make its causation chain longer than
    EVENTBUS_MAX_CAUSATION_DEPTH: refused (a loop, or a fan-out that never settles). Raised in a
    handler it is permanent: the delivery is dead-lettered at once, never retried."""

    def __init__(self, event_type: str, *, depth: int, limit: int) -> None:
        super().__init__(
            f"{event_type} would be generation {depth} of its causation chain, past "
            f"EVENTBUS_MAX_CAUSATION_DEPTH ({limit}): refused (an event loop?)",
            field="causation_depth",
        )
        self.depth = depth
        self.limit = limit


class UpcastError(PermanentError):
    """A stored payload could not be brought to a version this deploy handles (no upcaster from
    its version and that version's support is over, an unknown version, or an upcaster that
    failed or produced an invalid payload): the delivery is dead-lettered with this message."""


class ConsumerRegistrationError(ValueError):
    """A consumer declaration is invalid (bad name, bad event type, duplicate name)."""


class HandlerTimeout(Exception):
    """A handler ran past its consumer's timeout: the attempt failed (retried per the table)."""


class LeaseLost(Exception):
    """An atomic consumer's ack changed nothing (its lease was taken over): roll its writes back."""
