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


class PermanentError(Exception):
    """Raised by a consumer for work that can never succeed: dead-letter the delivery at once."""


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
