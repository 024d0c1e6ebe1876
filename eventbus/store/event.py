"""The value handed to consumers: one event as seen by one delivery."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from django.utils import timezone

from eventbus.store import catalog

# Event()'s keyword arguments that __eq__ compares, the event's own first (up to created_at).
FIELDS = (
    "id",
    "organization_id",
    "event_type",
    "entity_kind",
    "entity_id",
    "payload",
    "metadata",
    "created_at",
    "consumer",
    "delivery_id",
    "attempt",
    "max_attempts",
    "redelivered",
)


class Event:
    """An event, read once by the claim (no ORM object per row on the hot path). Read-only.

    `consumer`, `delivery_id` and `attempt` say which delivery is running (attempt is 1-based).
    `payload` and `metadata` may be given as JSON text (as the claim reads them): they are
    decoded on first access, so a handler that never looks at them never pays for decoding.
    `correlation` holds the ids a handler run binds (request_id, trace_id, actor_id) when the
    claim read them from the metadata itself; otherwise they come from `metadata`.
    `redelivered` is true when an earlier run of this delivery may have happened without its
    outcome being recorded (its worker died, stalled past its lease or lost the database while
    holding it): check the idempotency key before repeating a side effect.
    `redelivery_reason` says what happened. `ordering_key` is the delivery's key when its
    consumer is ordered (one at a time per key, in emit order), else None.
    """

    __slots__ = (
        "_correlation",
        "_metadata",
        "_payload",
        "attempt",
        "consumer",
        "created_at",
        "delivery_id",
        "entity_id",
        "entity_kind",
        "event_type",
        "id",
        "max_attempts",
        "ordering_key",
        "organization_id",
        "redelivered",
        "redelivery_reason",
    )

    id: uuid.UUID
    organization_id: uuid.UUID
    event_type: str
    entity_kind: str
    entity_id: uuid.UUID | None
    created_at: dt.datetime
    consumer: str
    delivery_id: int
    attempt: int
    max_attempts: int
    redelivered: bool
    redelivery_reason: str | None
    ordering_key: str | None
    _payload: dict[str, Any] | str
    _metadata: dict[str, Any] | str
    _correlation: dict[str, str] | None

    def __init__(
        self,
        *,
        id: uuid.UUID,
        organization_id: uuid.UUID,
        event_type: str,
        entity_kind: str,
        entity_id: uuid.UUID | None,
        payload: dict[str, Any] | str,
        metadata: dict[str, Any] | str,
        created_at: dt.datetime,
        consumer: str = "",
        delivery_id: int = 0,
        attempt: int = 0,
        max_attempts: int = 0,
        correlation: dict[str, str] | None = None,
        redelivered: bool = False,
        redelivery_reason: str | None = None,
        ordering_key: str | None = None,
    ) -> None:
        init = object.__setattr__
        init(self, "id", id)
        init(self, "organization_id", organization_id)
        init(self, "event_type", event_type)
        init(self, "entity_kind", entity_kind)
        init(self, "entity_id", entity_id)
        init(self, "_payload", payload)
        init(self, "_metadata", metadata)
        init(self, "created_at", created_at)
        init(self, "consumer", consumer)
        init(self, "delivery_id", delivery_id)
        init(self, "attempt", attempt)
        init(self, "max_attempts", max_attempts)
        init(self, "_correlation", correlation)
        init(self, "redelivered", redelivered)
        init(self, "redelivery_reason", redelivery_reason)
        init(self, "ordering_key", ordering_key)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Event is read-only: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Event is read-only: cannot delete {name!r}")

    @property
    def payload(self) -> dict[str, Any]:
        return self._decoded("_payload")

    @property
    def metadata(self) -> dict[str, Any]:
        return self._decoded("_metadata")

    @property
    def request_id(self) -> str | None:
        value = self.correlation.get("request_id")
        return str(value) if value is not None else None

    @property
    def correlation(self) -> dict[str, str]:
        """request_id, trace_id and actor_id, those the event carries."""
        found = self._correlation
        if found is None:
            meta = self.metadata
            keys = ("request_id", "trace_id", "actor_id")
            found = {k: str(meta[k]) for k in keys if meta.get(k) is not None}
            object.__setattr__(self, "_correlation", found)
        return found

    def upcast(self, today: dt.date | None = None) -> Event:
        """This event as its handler should see it: the payload brought to the latest version
        the catalog's upcasters reach (itself when its type has none, or nothing changed).
        `metadata` then says `schema_version` (the new one) and `upcast_from` (the stored one).
        Raises UpcastError (a permanent failure) when that cannot be done."""
        if not catalog.has_upcasters(self.event_type):
            return self
        stored = self.metadata.get("schema_version", 1)
        today = today or timezone.localdate()
        version, payload = catalog.upcast(self.event_type, stored, self.payload, today)
        if version == stored:
            return self
        metadata = {**self.metadata, "schema_version": version, "upcast_from": stored}
        values = {f: getattr(self, f) for f in FIELDS if f not in ("payload", "metadata")}
        return Event(
            **values,
            payload=payload,
            metadata=metadata,
            correlation=self._correlation,
            redelivery_reason=self.redelivery_reason,
            ordering_key=self.ordering_key,
        )

    def _decoded(self, slot: str) -> dict[str, Any]:
        value: dict[str, Any] | str = getattr(self, slot)
        if isinstance(value, str):
            value = json.loads(value)
            object.__setattr__(self, slot, value)
        assert isinstance(value, dict)
        return value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in FIELDS)

    __hash__ = None  # type: ignore[assignment]  # mutable-looking payloads: not hashable

    def __repr__(self) -> str:
        return (
            f"Event(id={self.id!r}, event_type={self.event_type!r}, "
            f"organization_id={self.organization_id!r}, consumer={self.consumer!r}, "
            f"delivery_id={self.delivery_id!r}, attempt={self.attempt!r})"
        )


# Event()'s keyword arguments that are stored under another slot name, and the defaults of
# those it may be built without.
_SLOT_OF = {"payload": "_payload", "metadata": "_metadata", "correlation": "_correlation"}
_DEFAULTS: dict[str, object] = {
    "consumer": "",
    "delivery_id": 0,
    "attempt": 0,
    "max_attempts": 0,
    "redelivered": False,
    "redelivery_reason": None,
    "ordering_key": None,
}


def row_loader(
    fields: Sequence[tuple[int, str]], correlation: Sequence[tuple[int, str]]
) -> Callable[[Sequence[Any]], Event]:
    """A function that builds an Event from a row of values: `fields` pairs a value's index with
    the Event() keyword it is, `correlation` an index with a correlation id's name (the dict of
    those not NULL becomes `correlation`). The Event is the one `Event(**...)` would build, made
    by writing its slots directly: the claim makes one per claimed row, and the keyword call
    was most of the Python time of reading a claim."""
    given = {name for _, name in fields}
    required = set(FIELDS) - set(_DEFAULTS) - given
    if required or "correlation" in given:
        raise TypeError(f"an Event row needs {sorted(required)}; correlation comes by name")
    slot = Event.__dict__
    writes = [(slot[_SLOT_OF.get(name, name)].__set__, index) for index, name in fields]
    defaults = [(slot[name].__set__, v) for name, v in _DEFAULTS.items() if name not in given]
    set_correlation = slot["_correlation"].__set__
    new = object.__new__

    def load(values: Sequence[Any]) -> Event:
        event: Event = new(Event)
        for write, index in writes:
            write(event, values[index])
        for write, value in defaults:
            write(event, value)
        set_correlation(event, {n: values[i] for i, n in correlation if values[i] is not None})
        return event

    return load
