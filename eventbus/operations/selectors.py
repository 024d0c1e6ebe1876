"""Reads of the event log for the API and operators, always scoped to one organization.

Lists are newest first over `event_log_org_created_idx` (organization_id, created_at DESC) with
keyset pagination (`before`): a page costs O(limit) rows however long the log is, and nothing
here counts the whole table.
"""

from __future__ import annotations

import datetime as dt
import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, connections
from django.db.models import Prefetch

from core.db import bound_cursor
from core.replica.routing import read_alias
from eventbus.store.models import ConsumerState, Delivery, EventLog


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
    """Up to `limit` events older than `before` (created_at, id), newest first.

    One statement from a text kept per shape of the filters (the ORM compiled the same query
    anew on every call: a quarter of an API list request's Python, py-spy), with server-side
    parameters; the rows become events by `from_db` after the fields' own conversions.
    """
    alias = read_alias(EventLog)
    sql, params = page_statement(organization_id, filters, before, limit)
    with bound_cursor(alias) as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [_event_of(alias, row) for row in rows]


def page_statement(
    organization_id: uuid.UUID,
    filters: EventFilters,
    before: tuple[dt.datetime, uuid.UUID] | None,
    limit: int,
) -> tuple[str, dict[str, Any]]:
    """`events_page`'s statement and its parameters."""
    params: dict[str, Any] = {
        name: getattr(filters, name) for name in _CONDITIONS if getattr(filters, name) is not None
    }
    if "statuses" in params:
        params["statuses"] = list(params["statuses"])
    shape = tuple(params)
    if before is not None:
        params["before_at"], params["before_id"] = before
    params.update(org=organization_id, limit=limit)
    return _page_sql(shape, before is not None), params


# EventFilters' attributes and the condition each adds (`e` is event_log).
_CONDITIONS = {
    "statuses": "e.status = ANY(%(statuses)s)",
    "event_type": "e.event_type = %(event_type)s",
    "entity_kind": "e.entity_kind = %(entity_kind)s",
    "entity_id": "e.entity_id = %(entity_id)s",
    "created_after": "e.created_at >= %(created_after)s",
    "created_before": "e.created_at < %(created_before)s",
    # One probe of delivery_event_consumer_uniq per candidate event, in its month's partition.
    "consumer": "EXISTS (SELECT FROM eventbus_delivery d WHERE d.event_id = e.id"
    " AND d.event_created_at = e.created_at AND d.consumer = %(consumer)s)",
}
# The `lte` bound is what the index range scan uses; the OR only breaks ties.
_BEFORE = "e.created_at <= %(before_at)s AND (e.created_at < %(before_at)s OR e.id < %(before_id)s)"
_FIELDS = EventLog._meta.concrete_fields


@functools.cache
def _page_sql(shape: tuple[str, ...], keyset: bool) -> str:
    columns = ", ".join(f"e.{connection.ops.quote_name(f.column)}" for f in _FIELDS)
    where = ["e.organization_id = %(org)s", *(_CONDITIONS[name] for name in shape)]
    if keyset:
        where.append(_BEFORE)
    return (
        f"SELECT {columns} FROM event_log e WHERE {' AND '.join(where)}"
        " ORDER BY e.created_at DESC, e.id DESC LIMIT %(limit)s"
    )


@functools.cache
def _converters(alias: str) -> list[tuple[int, Any, list[Any]]]:
    """What the ORM applies to each column of an event row read on `alias` (JSON decoding...)."""
    db = connections[alias]
    out = []
    for index, field in enumerate(_FIELDS):
        column = field.get_col(EventLog._meta.db_table)
        found = db.ops.get_db_converters(column) + column.get_db_converters(db)
        if found:
            out.append((index, column, found))
    return out


def _event_of(alias: str, row: Sequence[Any]) -> EventLog:
    values = list(row)
    db = connections[alias]
    for index, column, converters in _converters(alias):
        value = values[index]
        for convert in converters:
            value = convert(value, column, db)
        values[index] = value
    return EventLog.from_db(alias, None, values)  # type: ignore[arg-type]


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
    from eventbus.store.registry import registry

    states = {s.consumer: s for s in ConsumerState.objects.all()}
    lines = [ConsumerLine(c.name, c.runs_on, states.pop(c.name, None)) for c in registry.all()]
    extra = [ConsumerLine(n, "data", s) for n, s in sorted(states.items()) if s.paused]
    return sorted(lines, key=lambda line: line.name) + extra
