"""The value handed to consumers: one event as seen by one delivery."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

from django.utils import timezone

from eventbus import catalog

_FIELDS = (
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
    `redelivery_reason` says what happened.
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
        values = {f: getattr(self, f) for f in _FIELDS if f not in ("payload", "metadata")}
        return Event(
            **values,
            payload=payload,
            metadata=metadata,
            correlation=self._correlation,
            redelivery_reason=self.redelivery_reason,
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
        return all(getattr(self, f) == getattr(other, f) for f in _FIELDS)

    __hash__ = None  # type: ignore[assignment]  # mutable-looking payloads: not hashable

    def __repr__(self) -> str:
        return (
            f"Event(id={self.id!r}, event_type={self.event_type!r}, "
            f"organization_id={self.organization_id!r}, consumer={self.consumer!r}, "
            f"delivery_id={self.delivery_id!r}, attempt={self.attempt!r})"
        )
