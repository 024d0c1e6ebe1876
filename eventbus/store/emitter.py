"""Emit: write an event and its deliveries in the caller's transaction (transactional outbox).

`emit` and `emit_many` validate everything before touching the database, then write the event row
and one delivery per subscribed consumer in a single statement, so a rollback of the caller's
transaction takes both away and an error never leaves half an event behind.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, transaction
from django.utils import timezone
from psycopg.rows import dict_row
from psycopg.types.numeric import Int2

from core import context, rate_limits
from core.db import bound_cursor, pipeline
from eventbus.store import catalog, metrics
from eventbus.store import provenance as provenances
from eventbus.store.conf import bus_settings
from eventbus.store.errors import EmitRateLimited, EventTypeNotEmittable, EventValidationError
from eventbus.store.ids import uuid7
from eventbus.store.registry import registry
from eventbus.store.sql import statement
from eventbus.store.storable import JsonLimits, check_text, json_text

if TYPE_CHECKING:
    from core.models import Organization
    from eventbus.store.models import EventLog

WAKEUP_CHANNEL = "eventbus_wakeup"
EMIT_MANY_STATEMENT_ROWS = 250  # items per statement; statements are pipelined


@dataclass(frozen=True)
class PreparedEvent:
    """A validated event, serialised and ready to insert."""

    id: uuid.UUID
    event_type: str
    entity_kind: str
    entity_id: uuid.UUID | None
    payload: dict[str, Any]
    metadata: dict[str, Any]
    payload_json: str
    metadata_json: str
    idempotency_key: str | None
    ordering_key: str | None
    priority: int


def emit(
    event_type: str,
    *,
    organization: Organization | uuid.UUID | str,
    entity_kind: str,
    entity_id: uuid.UUID | str | None = None,
    payload: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    idempotency_key: str | None = None,
    causation_id: uuid.UUID | str | None = None,
    ordering_key: str | None = None,
    priority: int | None = None,
    provenance: provenances.Provenance | None = None,
) -> EventLog:
    """Write one event and its deliveries inside the caller's transaction; return the event.

    The same `idempotency_key` within an organization returns the existing event unchanged.
    `ordering_key` (default: the catalog's, e.g. the conversation of a `message.*`): consumers
    declared `ordered=True` handle the events of one key one at a time, in emit order.
    `priority` (-10..10; default: the type's, `catalog.priority_of`): within a consumer, higher
    priority is claimed first; at `EVENTBUS_NOTIFY_MIN_PRIORITY` or above it wakes idle workers.
    `causation_id`: the id of the event that caused this one (seed 004's envelope), stored as
    the metadata key `causation_id` next to the correlation ids.
    `provenance` (eventbus.store.provenance): who produces the event; given by the doors that let
    others in (`Provenance.api_key`, `Provenance.pipeline`: the type must be open to that door,
    else `EventTypeNotEmittable`, and the organization's EVENTBUS_DOOR_EMIT_RATE applies, else
    `EmitRateLimited`), inferred for the app's own code.
    Raises `EventValidationError` (and writes nothing) for a bad type, payload or organization.
    """
    if causation_id is not None:
        metadata = {
            **_validate_mapping("metadata", metadata),
            "causation_id": _causation(causation_id),
        }
    org_id = resolve_organization(organization)
    now = timezone.now()
    preparer = Preparer(now, provenance)
    prepared = preparer.prepare(
        event_type,
        entity_kind=entity_kind,
        entity_id=entity_id,
        payload=payload,
        metadata=metadata,
        idempotency_key=idempotency_key,
        ordering_key=ordering_key,
        priority=priority,
    )
    routes = registry.columns_for(prepared.event_type)
    with bound_cursor() as cursor:
        cursor.execute(
            statement("emit_insert_one"),
            {
                "id": prepared.id,
                "org": org_id,
                "event_type": prepared.event_type,
                "entity_kind": prepared.entity_kind,
                "entity_id": prepared.entity_id,
                "payload": prepared.payload_json,
                "metadata": prepared.metadata_json,
                "idempotency_key": prepared.idempotency_key,
                "now": now,
                "consumers": routes.consumers,
                "max_attempts": routes.max_attempts,
                "delays": routes.delays,
                "ordered": routes.ordered,
                "ordering_key": prepared.ordering_key,
                "priority": prepared.priority,
                "notify": preparer.wakes(prepared),
                "channel": WAKEUP_CHANNEL,
                **preparer.door_quota(org_id),  # counted in the same statement
            },
            prepare=True,  # its planning cost ~4x its run (core.db.PREPARE_ONLY_WHEN_ASKED)
        )
        inserted = cursor.fetchone()  # (id, fanout, woken)
    if inserted is not None and inserted[1] == REFUSED_AT_DOOR:
        raise preparer.refused_at_door(org_id, 1)
    if inserted is None:
        return _existing_event(org_id, prepared.idempotency_key)
    event_id, fanout, _ = inserted
    if event_id is None:
        raise _missing_organization(org_id)
    _count_on_commit([prepared.event_type])
    return _as_model(prepared, org_id, now, fanout=fanout)


def emit_many(
    items: Iterable[Mapping[str, Any]],
    *,
    organization: Organization | uuid.UUID | str,
    provenance: provenances.Provenance | None = None,
) -> list[uuid.UUID]:
    """Bulk emit for high volume; returns the event ids in input order.

    Each item is a mapping with `event_type`, `entity_kind` and optionally `entity_id`, `payload`,
    `metadata`, `idempotency_key`, `ordering_key`, `priority` (as in `emit`). All or nothing: an
    invalid item raises `EventValidationError` and nothing is written (the call runs in a
    savepoint, or its own transaction). A repeated idempotency key yields the existing event's id.
    `provenance` as in `emit`: through a door, every item's type must be open to it (the refusal
    names the item) and the items count against the organization's door rate.

    The items go out in statements of `EMIT_MANY_STATEMENT_ROWS` in pipeline mode: the server
    inserts one statement while this process validates and serialises the next.
    """
    org_id = resolve_organization(organization)
    now = timezone.now()
    preparer = Preparer(now, provenance)
    sent: list[tuple[psycopg.Cursor[Any], list[PreparedEvent]]] = []
    prepared: Iterable[PreparedEvent] = (
        _prepare_item(index, item, preparer) for index, item in enumerate(items)
    )
    if preparer.door != catalog.APP:
        # Through a door: every item is checked, then counted, before anything is sent.
        prepared = list(prepared)
        preparer.count_at_door(org_id, len(prepared))
    with transaction.atomic(), pipeline() as new_cursor:
        chunk: list[PreparedEvent] = []
        for event in prepared:
            chunk.append(event)
            if len(chunk) == EMIT_MANY_STATEMENT_ROWS:
                sent.append((_send_chunk(new_cursor(), chunk, org_id, now), chunk))
                chunk = []
        if chunk:
            sent.append((_send_chunk(new_cursor(), chunk, org_id, now), chunk))
    ids: list[uuid.UUID] = []
    wake = False
    for cursor, chunk in sent:
        inserted = {row["id"] for row in cursor.fetchall()}
        if None in inserted:  # every statement found it missing: nothing was written
            raise _missing_organization(org_id)
        ids.extend(_ids_in_order(chunk, inserted, org_id))
        wake = wake or any(preparer.wakes(e) for e in chunk)
    _count_on_commit([e.event_type for _, chunk in sent for e in chunk])
    if wake:
        with bound_cursor() as cursor:
            cursor.execute(statement("emit_wakeup"), {"channel": WAKEUP_CHANNEL})
    return ids


# emit_insert_one.sql's `fanout` when the door's quota refused the emit (nothing written).
REFUSED_AT_DOOR = -1


def _door_key(org_id: uuid.UUID) -> str:
    """The organization's quota at the doors (core.rate_limits' state key)."""
    return f"emit-door:{org_id}"


@dataclass(frozen=True)
class _Limits:
    """The knobs a Preparer reads, worked out once per `settings.EVENTBUS` (an emit() read
    them on every call: a tenth of its Python time)."""

    payload: JsonLimits
    metadata: JsonLimits
    wake_at: int
    wake_types: frozenset[str]
    max_depth: int
    door_rate: rate_limits.Rate

    @classmethod
    def now(cls) -> _Limits:
        return bus_settings.derived(_LIMITS, cls, cls._read)

    @classmethod
    def _read(cls) -> _Limits:
        depth = bus_settings.MAX_JSON_DEPTH
        return cls(
            JsonLimits(bus_settings.MAX_PAYLOAD_BYTES, "EVENTBUS_MAX_PAYLOAD_BYTES", depth),
            JsonLimits(bus_settings.MAX_METADATA_BYTES, "EVENTBUS_MAX_METADATA_BYTES", depth),
            bus_settings.NOTIFY_MIN_PRIORITY,
            frozenset(bus_settings.NOTIFY_EVENT_TYPES),
            bus_settings.MAX_CAUSATION_DEPTH,
            rate_limits.parse_rate(bus_settings.DOOR_EMIT_RATE),
        )


_LIMITS: dict[type[_Limits], tuple[object, _Limits]] = {}


class Preparer:
    """Validates and serialises events for one emit call (no database access).

    What is the same for every item of the call is worked out once: the time, the ambient
    context, the provenance, each (type, schema version)'s schema and each type's place in the
    causation chain, and the metadata of items that bring none of their own (most bulk items),
    so a large `emit_many` spends its time on the payloads.
    """

    def __init__(self, now: dt.datetime, provenance: provenances.Provenance | None = None) -> None:
        self.now = now
        self.today = now.date()
        self.emitted_at = now.isoformat()
        self.context = context.current()
        self.provenance = provenance or provenances.inferred(self.context.get("source"))
        self.door = self.provenance.door
        self._provenance_meta = self.provenance.as_metadata()
        limits = _Limits.now()
        self.limits = limits
        self.payload_limits = limits.payload
        self.metadata_limits = limits.metadata
        self.wake_at = limits.wake_at
        self.wake_types = limits.wake_types
        self._valid_types: set[str] = set()
        self._schemas: dict[tuple[str, int | None], catalog.EventSchema] = {}
        self._chains: dict[str, dict[str, Any]] = {}
        self._plain_metadata: dict[catalog.EventSchema, tuple[dict[str, Any], str]] = {}

    def count_at_door(self, org_id: uuid.UUID, count: int) -> None:
        """Count `count` events against the organization's door rate (api and pipeline doors
        only); EmitRateLimited when over it."""
        if self.door == catalog.APP or not count:
            return
        rate = self.limits.door_rate
        wait = rate_limits.hit(_door_key(org_id), rate, self.now, count)
        if wait is not None:
            raise EmitRateLimited(wait, bus_settings.DOOR_EMIT_RATE)

    def door_quota(self, org_id: uuid.UUID) -> dict[str, Any]:
        """emit_insert_one.sql's door parameters: the organization's quota key (None for the
        app's own emits, never counted), and the rate's interval and period."""
        rate = self.limits.door_rate
        return {
            "door_key": None if self.door == catalog.APP else _door_key(org_id),
            "door_interval": rate.interval,
            "door_period": rate.period,
        }

    def refused_at_door(self, org_id: uuid.UUID, count: int) -> EmitRateLimited:
        """The error for `count` events the door's quota refused (they counted nothing)."""
        rate = self.limits.door_rate
        wait = rate_limits.wait_after_refusal(_door_key(org_id), rate, self.now, count)
        return EmitRateLimited(wait, bus_settings.DOOR_EMIT_RATE)

    def _bus_keys(self, name: str) -> dict[str, Any]:
        """The metadata only the bus writes for a type: provenance and causation chain."""
        found = self._chains.get(name)
        if found is None:
            depth, pipelines = provenances.chain(self.provenance, name, self.limits.max_depth)
            found = {provenances.PROVENANCE_KEY: self._provenance_meta}
            if depth:  # absent: 0, nothing on the bus caused it
                found[provenances.DEPTH_KEY] = depth
            if pipelines:
                found[provenances.PIPELINES_KEY] = list(pipelines)
            self._chains[name] = found
        return found

    def prepare(
        self,
        event_type: object,
        *,
        entity_kind: object,
        entity_id: object,
        payload: object,
        metadata: object,
        idempotency_key: object,
        ordering_key: object = None,
        priority: object = None,
    ) -> PreparedEvent:
        name = self._event_type(event_type)
        if self.door != catalog.APP and catalog.is_declared(name):
            catalog.check_door(name, self.door)
        kind = _validate_entity_kind(entity_kind)
        ent_id = _validate_entity_id(entity_id)
        body = _validate_mapping("payload", payload)
        extra = _validate_mapping("metadata", metadata)
        key = _validate_idempotency_key(
            idempotency_key if idempotency_key is not None else extra.get("idempotency_key")
        )
        schema = self._schema(name, extra.get("schema_version"))
        catalog.check_payload(schema, body)
        order = (
            _validate_ordering_key(ordering_key)
            if ordering_key is not None
            else catalog.ordering_key(name, kind, ent_id, body)
        )
        rank = (
            catalog.priority_of(name) if priority is None else catalog.validate_priority(priority)
        )
        payload_json = json_text("payload", body, self.payload_limits)
        if not extra and key is None:
            meta, metadata_json = self._metadata_without_extras(schema)
        else:
            meta = {
                **self.context,
                **extra,
                "schema_version": schema.version,
                "emitted_at": self.emitted_at,
                **self._bus_keys(name),
            }
            if key is not None:
                meta["idempotency_key"] = key
            metadata_json = json_text("metadata", meta, self.metadata_limits)
        return PreparedEvent(
            uuid7(),
            schema.name,
            kind,
            ent_id,
            body,
            meta,
            payload_json,
            metadata_json,
            key,
            order,
            rank,
        )

    def wakes(self, event: PreparedEvent) -> bool:
        """Whether emitting `event` wakes idle workers (LISTEN/NOTIFY at commit)."""
        return event.priority >= self.wake_at or event.event_type in self.wake_types

    def _event_type(self, event_type: object) -> str:
        if isinstance(event_type, str) and event_type in self._valid_types:
            return event_type
        name = catalog.validate_event_type(event_type)
        self._valid_types.add(name)
        return name

    def _schema(self, name: str, version: object) -> catalog.EventSchema:
        if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
            return catalog.schema_for(name, version, self.today)  # refuses it
        key = (name, version)
        schema = self._schemas.get(key)
        if schema is None:
            schema = self._schemas[key] = catalog.schema_for(name, version, self.today)
        return schema

    def _metadata_without_extras(self, schema: catalog.EventSchema) -> tuple[dict[str, Any], str]:
        found = self._plain_metadata.get(schema)
        if found is None:
            meta = {
                **self.context,
                "schema_version": schema.version,
                "emitted_at": self.emitted_at,
                **self._bus_keys(schema.name),
            }
            found = self._plain_metadata[schema] = (
                meta,
                json_text("metadata", meta, self.metadata_limits),
            )
        # Shared by this call's events, like the JSON text: a Preparer lives for one emit call,
        # and only emit() hands the dict out (on the one event it returns).
        return found


def resolve_organization(organization: object) -> uuid.UUID:
    """The organization's id; an id given as such must exist."""
    from core.models import Organization

    if organization is None or organization == "":
        raise EventValidationError("organization is required: every event belongs to a tenant")
    if isinstance(organization, Organization):
        return organization.pk
    try:
        org_id = (
            organization if isinstance(organization, uuid.UUID) else uuid.UUID(str(organization))
        )
    except ValueError:
        raise EventValidationError(f"organization {organization!r} is not a valid id") from None
    if not Organization.objects.filter(pk=org_id).exists():
        raise EventValidationError(f"organization {org_id} does not exist")
    return org_id


def _prepare_item(index: int, item: Mapping[str, Any], preparer: Preparer) -> PreparedEvent:
    if not isinstance(item, Mapping):
        raise EventValidationError(f"item {index}: expected a mapping, got {type(item).__name__}")
    unknown = set(item) - {
        "event_type",
        "entity_kind",
        "entity_id",
        "payload",
        "metadata",
        "idempotency_key",
        "ordering_key",
        "priority",
    }
    if unknown:
        raise EventValidationError(f"item {index}: unknown field(s) {sorted(unknown)}")
    try:
        return preparer.prepare(
            item.get("event_type"),
            entity_kind=item.get("entity_kind"),
            entity_id=item.get("entity_id"),
            payload=item.get("payload"),
            metadata=item.get("metadata"),
            idempotency_key=item.get("idempotency_key"),
            ordering_key=item.get("ordering_key"),
            priority=item.get("priority"),
        )
    except EventTypeNotEmittable as exc:
        raise EventTypeNotEmittable(
            exc.event_type, owner=exc.owner, door=exc.door, item=index
        ) from None
    except EventValidationError as exc:
        raise EventValidationError(f"item {index}: {exc}", field=exc.field) from None


def _send_chunk(
    cursor: psycopg.Cursor[Any], chunk: Sequence[PreparedEvent], org_id: uuid.UUID, now: dt.datetime
) -> psycopg.Cursor[Any]:
    """Queue one emit_insert_many statement on a pipeline cursor; its rows are read later."""
    types = sorted({e.event_type for e in chunk})
    routes = [(t, c) for t in types for c in registry.for_event(t)]
    cursor.row_factory = dict_row
    cursor.execute(
        statement("emit_insert_many"),
        {
            "org": org_id,
            "now": now,
            "ids": [e.id for e in chunk],
            "event_types": [e.event_type for e in chunk],
            "entity_kinds": [e.entity_kind for e in chunk],
            "entity_ids": [e.entity_id for e in chunk],
            "payloads": [e.payload_json for e in chunk],
            "metadatas": [e.metadata_json for e in chunk],
            "idempotency_keys": [e.idempotency_key for e in chunk],
            "ordering_keys": [e.ordering_key for e in chunk],
            "priorities": [Int2(e.priority) for e in chunk],
            "r_types": [t for t, _ in routes],
            "r_consumers": [c.name for _, c in routes],
            "r_max": [c.effective_max_attempts() for _, c in routes],
            "r_delays": [float(c.delay_seconds) for _, c in routes],
            "r_ordered": [c.ordered for _, c in routes],
        },
        binary=True,
    )
    return cursor


def _ids_in_order(
    chunk: Sequence[PreparedEvent], inserted: set[uuid.UUID], org_id: uuid.UUID
) -> list[uuid.UUID]:
    skipped = [e.idempotency_key for e in chunk if e.id not in inserted and e.idempotency_key]
    existing: dict[str, uuid.UUID] = {}
    if skipped:
        with bound_cursor() as cursor:
            cursor.row_factory = dict_row
            cursor.execute(statement("emit_existing_by_key"), {"org": org_id, "keys": skipped})
            existing = {row["idempotency_key"]: row["id"] for row in cursor.fetchall()}
    ids: list[uuid.UUID] = []
    first_by_key: dict[str, uuid.UUID] = {}
    for e in chunk:
        if e.id in inserted:
            ids.append(e.id)
            if e.idempotency_key:
                first_by_key.setdefault(e.idempotency_key, e.id)
        else:
            key = e.idempotency_key or ""
            ids.append(existing.get(key) or first_by_key[key])
    return ids


def _count_on_commit(event_types: list[str]) -> None:
    """Count emitted events when the caller's transaction commits (at once in autocommit): an
    emit that is rolled back never happened."""
    transaction.on_commit(partial(metrics.count_emitted, event_types), robust=True)


def _missing_organization(org_id: uuid.UUID) -> EventValidationError:
    return EventValidationError(
        f"organization {org_id} does not exist (deleted?); nothing was written",
        field="organization",
    )


def _existing_event(org_id: uuid.UUID, key: str | None) -> EventLog:
    from eventbus.store.models import EventLog

    return EventLog.objects.get(organization_id=org_id, idempotency_key=key)


def _as_model(
    prepared: PreparedEvent, org_id: uuid.UUID, now: dt.datetime, *, fanout: int
) -> EventLog:
    """The row emit() wrote, as the ORM would load it (built from its columns in field order,
    as `Model.from_db` does: a third of the cost of keyword arguments)."""
    from eventbus.store.models import EventLog

    values = {
        "id": prepared.id,
        "organization_id": org_id,
        "event_type": prepared.event_type,
        "entity_kind": prepared.entity_kind,
        "entity_id": prepared.entity_id,
        "payload": prepared.payload,
        "metadata": prepared.metadata,
        "consumed_by": [],
        "attempts": 0,
        "last_error": None,
        "next_attempt_at": None,
        "status": "pending" if fanout else "done",
        "fanout": fanout,
        "idempotency_key": prepared.idempotency_key,
        "ordering_key": prepared.ordering_key,
        "priority": prepared.priority,
        "created_at": now,
        "updated_at": now,
    }
    if not _EVENTLOG_COLUMNS:
        _EVENTLOG_COLUMNS.extend(f.attname for f in EventLog._meta.concrete_fields)
    row = [values[name] for name in _EVENTLOG_COLUMNS]
    return EventLog.from_db(DEFAULT_DB_ALIAS, _EVENTLOG_COLUMNS, row)


_EVENTLOG_COLUMNS: list[str] = []  # EventLog's concrete columns in field order, read once


def _validate_entity_kind(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 64:
        raise EventValidationError(
            "entity_kind is required: a non-empty string of at most 64 characters",
            field="entity_kind",
        )
    return check_text("entity_kind", value)


def _validate_entity_id(value: object) -> uuid.UUID | None:
    if value is None:
        return None
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise EventValidationError(
            f"entity_id {value!r} is not a UUID", field="entity_id"
        ) from None


def _validate_mapping(field: str, value: object) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise EventValidationError(
            f"{field} must be a JSON object, got {type(value).__name__}", field=field
        )
    return dict(value)


def _causation(value: object) -> str:
    try:
        return str(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)))
    except ValueError:
        raise EventValidationError(
            f"causation_id {value!r} is not an event id (a UUID)", field="causation_id"
        ) from None


def _validate_ordering_key(value: object) -> str:
    if not isinstance(value, str) or not value or len(value) > catalog.MAX_ORDERING_KEY_LENGTH:
        raise EventValidationError(
            f"ordering_key must be a non-empty string of at most "
            f"{catalog.MAX_ORDERING_KEY_LENGTH} characters",
            field="ordering_key",
        )
    return check_text("ordering_key", value)


def _validate_idempotency_key(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > 255:
        raise EventValidationError(
            "idempotency_key must be a non-empty string of at most 255 characters",
            field="idempotency_key",
        )
    return check_text("idempotency_key", value)
