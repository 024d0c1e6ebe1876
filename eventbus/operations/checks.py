"""System checks for the event bus: consumers must consume declared event types; emit's limits
must be ones emit can enforce."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, Warning, register
from django.core.exceptions import ImproperlyConfigured

from core.checks import PROJECT_TAG
from eventbus.store import catalog
from eventbus.store.conf import bus_settings
from eventbus.store.registry import registry

# Python's JSON encoder gives up (RecursionError) somewhat below its recursion limit of 1000: a
# depth limit above this would be refused with a message naming the wrong number.
MAX_ENFORCEABLE_JSON_DEPTH = 500


@register(PROJECT_TAG)
def check_consumers(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """eventbus.E001: a consumer subscribes to an event type missing from the catalog."""
    errors: list[CheckMessage] = []
    for consumer in registry.all():
        for event_type in consumer.events:
            if not catalog.is_declared(event_type):
                errors.append(
                    Error(
                        f"consumer {consumer.name} consumes undeclared event type {event_type!r}",
                        hint="Declare it with eventbus.store.catalog.declare(...) or fix the name.",
                        obj=consumer.label,
                        id="eventbus.E001",
                    )
                )
    return errors


@register(PROJECT_TAG)
def check_emit_limits(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """eventbus.E002: EVENTBUS_MAX_JSON_DEPTH not an integer in 1..MAX_ENFORCEABLE_JSON_DEPTH."""
    try:
        depth = bus_settings.MAX_JSON_DEPTH
    except ImproperlyConfigured as error:
        return [_json_depth_error(str(error))]
    if 1 <= depth <= MAX_ENFORCEABLE_JSON_DEPTH:
        return []
    return [_json_depth_error(f"EVENTBUS_MAX_JSON_DEPTH is {depth!r}")]


def _json_depth_error(problem: str) -> Error:
    return Error(
        problem,
        hint=f"Use a whole number from 1 to {MAX_ENFORCEABLE_JSON_DEPTH} (default 32).",
        id="eventbus.E002",
    )


@register(PROJECT_TAG)
def check_ordered_consumers(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """eventbus.W001: an ordered consumer takes a type that has no ordering key in the catalog."""
    warnings: list[CheckMessage] = []
    for consumer in registry.all():
        if not consumer.ordered:
            continue
        for event_type in consumer.events:
            if catalog.is_declared(event_type) and catalog.ordered_by(event_type) is None:
                warnings.append(
                    Warning(
                        f"ordered consumer {consumer.name} takes {event_type}, which the catalog "
                        "gives no ordering key: those events run unordered unless each emit "
                        "passes ordering_key=",
                        hint=f"Declare it with ordered_by='<payload field>' "
                        f"(eventbus.store.catalog.declare({event_type!r}, ..., ordered_by=...)).",
                        obj=consumer.label,
                        id="eventbus.W001",
                    )
                )
    return warnings
