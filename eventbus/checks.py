"""System checks for the event bus: consumers must consume declared event types."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, register

from eventbus import catalog
from eventbus.registry import registry


@register()
def check_consumers(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """eventbus.E001: a consumer subscribes to an event type missing from the catalog."""
    errors: list[CheckMessage] = []
    for consumer in registry.all():
        for event_type in consumer.events:
            if not catalog.is_declared(event_type):
                errors.append(
                    Error(
                        f"consumer {consumer.name} consumes undeclared event type {event_type!r}",
                        hint="Declare it with eventbus.catalog.declare(...) or fix the name.",
                        obj=consumer.label,
                        id="eventbus.E001",
                    )
                )
    return errors
