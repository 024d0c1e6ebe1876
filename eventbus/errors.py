"""Exceptions of the event bus public API."""

from __future__ import annotations


class EventValidationError(ValueError):
    """An event was rejected before anything was written (bad type, payload, organization...)."""


class PermanentError(Exception):
    """Raised by a consumer for work that can never succeed: dead-letter the delivery at once."""


class ConsumerRegistrationError(ValueError):
    """A consumer declaration is invalid (bad name, bad event type, duplicate name)."""
