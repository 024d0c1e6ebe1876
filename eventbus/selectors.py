"""Reads of the event log for the API and operators, always scoped to one organization.

Lists are newest first over `event_log_org_created_idx` (organization_id, created_at DESC) with
keyset pagination (`before`): a page costs O(limit) rows however long the log is, and nothing
here counts the whole table.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import Exists, OuterRef, Prefetch, Q, QuerySet

from eventbus.models import ConsumerState, Delivery, EventLog


@dataclass(frozen=True)
class EventFilters:
    """What a list of events may be narrowed by (None: no condition)."""

    statuses: Sequence[str] | None = None
    event_type: str | None = None
    entity_kind: str | None = None
    entity_id: uuid.UUID | None = None
    created_after: dt.datetime | None = None  # inclusive
    created_before: dt.datetime | None = None  # exclusive
    consumer: str | None = None  # events fanned out to this consumer


def events_page(
    *,
    organization_id: uuid.UUID,
    filters: EventFilters,
    before: tuple[dt.datetime, uuid.UUID] | None,
    limit: int,
) -> list[EventLog]:
    """Up to `limit` events older than `before` (created_at, id), newest first."""
    events = _filtered(EventLog.objects.filter(organization_id=organization_id), filters)
    if before is not None:
        created_at, event_id = before
        # The `lte` bound is what the index range scan uses; the OR only breaks ties.
        events = events.filter(created_at__lte=created_at).filter(
            Q(created_at__lt=created_at) | Q(id__lt=event_id)
        )
    return list(events.order_by("-created_at", "-id")[:limit])


def event_with_deliveries(*, organization_id: uuid.UUID, event_id: uuid.UUID) -> EventLog | None:
    """One event of the organization with its deliveries (by consumer); None if not theirs."""
    deliveries = Prefetch("deliveries", queryset=Delivery.objects.order_by("consumer"))
    return (
        EventLog.objects.filter(organization_id=organization_id, pk=event_id)
        .prefetch_related(deliveries)
        .first()
    )


def event_delivery_ids(
    *,
    organization_id: uuid.UUID,
    event_id: uuid.UUID,
    statuses: Sequence[str],
    consumer: str | None = None,
) -> list[int]:
    """Ids of the event's deliveries in `statuses` (of one consumer, or all)."""
    deliveries = Delivery.objects.filter(
        organization_id=organization_id, event_id=event_id, status__in=list(statuses)
    )
    if consumer is not None:
        deliveries = deliveries.filter(consumer=consumer)
    return list(deliveries.values_list("id", flat=True))


def event_has_consumer(*, organization_id: uuid.UUID, event_id: uuid.UUID, consumer: str) -> bool:
    return Delivery.objects.filter(
        organization_id=organization_id, event_id=event_id, consumer=consumer
    ).exists()


def _filtered(events: QuerySet[EventLog], filters: EventFilters) -> QuerySet[EventLog]:
    conditions = {
        "status__in": list(filters.statuses) if filters.statuses is not None else None,
        "event_type": filters.event_type,
        "entity_kind": filters.entity_kind,
        "entity_id": filters.entity_id,
        "created_at__gte": filters.created_after,
        "created_at__lt": filters.created_before,
    }
    events = events.filter(**{k: v for k, v in conditions.items() if v is not None})
    if filters.consumer is not None:
        # One probe of delivery_event_consumer_uniq per candidate event.
        fanned_out = Delivery.objects.filter(event_id=OuterRef("pk"), consumer=filters.consumer)
        events = events.filter(Exists(fanned_out))
    return events


@dataclass(frozen=True)
class ConsumerLine:
    """A consumer as the console's consumers page shows it (state None: never paused)."""

    name: str
    runs_on: str  # "drain", "broker", or "data" (a webhook subscription)
    state: ConsumerState | None

    @property
    def status(self) -> str:
        return self.state.state if self.state else "running"


def consumer_lines() -> list[ConsumerLine]:
    """Every registered consumer with its pause/breaker state, then the consumers that are data
    (webhook subscriptions) that are not running. One query on a small table."""
    from eventbus.registry import registry

    states = {s.consumer: s for s in ConsumerState.objects.all()}
    lines = [ConsumerLine(c.name, c.runs_on, states.pop(c.name, None)) for c in registry.all()]
    extra = [ConsumerLine(n, "data", s) for n, s in sorted(states.items()) if s.paused]
    return sorted(lines, key=lambda line: line.name) + extra
