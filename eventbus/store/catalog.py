"""The event catalog's mechanism: versions, schemas, upcasters, priorities, ordering and owners.

The vocabulary is not here: each app declares the types it owns in its own `events.py`
(`declare(...)`; discovered at start-up before any consumer), and the bus only keeps the rules.
Emitting an undeclared type, or a payload missing a required field, is an `EventValidationError`
and writes nothing. A breaking payload change is a new version: declare the new one and keep the
old one with `superseded_on`; the old version stays emittable (and so consumable) for
`SUPPORT_WINDOW` after that date.

**Owners and doors.** Every type has an owner (the app whose `events.py` declares it) and the
doors it may be emitted through: the application's own code always (`app`), and only where the
declaration says so the integrators' API (`api`, `POST /api/v1/events`) and the pipelines'
`emit-event` node (`pipeline`). The default is the app alone: a command one app sends another
(`message.queued`, `nuvemshop.sync_page`, `lgpd.data_request_received`...) can never be sent by
a tenant. `emittable(type, door)` answers; `not_emittable(type, door)` is the refusal, naming the
type and its owner.

Upcasters (`@upcaster("type", from_version=N)`: a function from a version N payload to a version
N+1 payload) let handlers see the latest version of an event stored under an older one: a
delivery of an old event (a dead letter reprocessed after a deploy, a replay, or simply an event
emitted just before it) is upcast, step by step, before its handler runs (`upcast`; the stored
event stays as written). An upcast that cannot be done is an `UpcastError`: dead-lettered with
its reason. Types without upcasters cost nothing: their payloads are handed over as stored.

Each type also has a **priority** (`declare(..., priority=N)`, an integer from -10 to 10, 0 by
default; an emit may override it): within a consumer, deliveries of higher priority are claimed
first, and types at or above `EVENTBUS_NOTIFY_MIN_PRIORITY` wake idle workers at once. And an
**ordering key**: `message.*` and `conversation.*` are keyed by their conversation (the payload's
`conversation_id`, or the entity id of a `conversation` entity), so consumers declared
`ordered=True` handle one conversation's events one at a time, in emit order
(`declare(..., ordered_by="field")` keys another type by a payload field; an emit may pass its
own `ordering_key`).
"""

from __future__ import annotations

import datetime as dt
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from eventbus.store.errors import EventTypeNotEmittable, EventValidationError, UpcastError

EVENT_TYPE_PATTERN = r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$"
_EVENT_TYPE_RE = re.compile(EVENT_TYPE_PATTERN)
SUPPORT_WINDOW = dt.timedelta(days=30)
PRIORITY_RANGE = range(-10, 11)  # -10 (background) .. 0 (normal) .. 10 (most urgent)
HIGH_PRIORITY = 5  # the seed's user-facing types; EVENTBUS_NOTIFY_MIN_PRIORITY's default
# Types under these entities are ordered by their conversation unless declared otherwise.
ORDERED_ENTITIES = {"message": "conversation_id", "conversation": "conversation_id"}
MAX_ORDERING_KEY_LENGTH = 255

# The doors an event may come in through. The application's code is always one of them.
APP, API, PIPELINE = "app", "api", "pipeline"
DOORS = (APP, API, PIPELINE)
OPTIONAL_DOORS = frozenset({API, PIPELINE})


@dataclass(frozen=True)
class EventSchema:
    """One version of one event type."""

    name: str
    version: int
    required: tuple[str, ...]
    description: str = ""
    superseded_on: dt.date | None = None

    def is_supported(self, today: dt.date) -> bool:
        return self.superseded_on is None or today <= self.superseded_on + SUPPORT_WINDOW


_schemas: dict[str, dict[int, EventSchema]] = {}
_priorities: dict[str, int] = {}  # type -> priority (per type, not per version)
_ordered_by: dict[str, str] = {}  # type -> the payload field that keys its order
_owners: dict[str, str] = {}  # type -> the app label that declared it
_doors: dict[str, frozenset[str]] = {}  # type -> the optional doors open to it (api, pipeline)
_continuations: set[str] = set()  # types whose next emit by their own handler is the same depth

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
_upcasters: dict[str, dict[int, Upcaster]] = {}  # type -> from_version -> function


def validate_event_type(event_type: object) -> str:
    """Return the type if it matches `{entity}.{action}` in lower snake case, else raise."""
    if not isinstance(event_type, str) or not _EVENT_TYPE_RE.match(event_type):
        raise EventValidationError(
            f"invalid event type {event_type!r}: expected '{{entity}}.{{action}}' in lower snake "
            "case, e.g. 'lead.stage_changed'",
            field="event_type",
        )
    return event_type


def declare(
    name: str,
    *,
    required: Iterable[str] = (),
    version: int = 1,
    description: str = "",
    superseded_on: dt.date | None = None,
    priority: int | None = None,
    ordered_by: str | None = None,
    doors: Iterable[str] | None = None,
    owner: str | None = None,
    continues: bool = False,
) -> EventSchema:
    """Declare (or re-declare identically) one version of an event type.

    `priority`, `ordered_by` and `doors` belong to the type (every version): given once, they
    stay. `doors`: the optional doors (`"api"`, `"pipeline"`) the type is open to besides the
    owner's code; none by default. `owner`: the app label that owns the type (default: the
    top-level package of the declaring module); another app declaring the same type is refused.
    `continues=True`: emitted by the app while handling an event of the same type (a paginated
    job's next page), it stays at its cause's causation depth (eventbus.store.provenance).
    """
    validate_event_type(name)
    owner = owner or _caller_package()
    current_owner = _owners.get(name)
    if current_owner is not None and current_owner != owner:
        raise EventValidationError(
            f"event type {name} is owned by {current_owner}: {owner} cannot declare it"
        )
    schema = EventSchema(name, version, tuple(required), description, superseded_on)
    existing = _schemas.get(name, {}).get(version)
    if existing is not None and existing != schema:
        raise EventValidationError(f"event type {name} v{version} is already declared differently")
    opened = _validate_doors(name, doors) if doors is not None else None
    if opened is not None and name in _doors and _doors[name] != opened:
        raise EventValidationError(f"event type {name} is already declared with other doors")
    if priority is not None:
        _priorities[name] = validate_priority(priority)
    if ordered_by is not None:
        if not isinstance(ordered_by, str) or not ordered_by:
            raise EventValidationError(f"{name}: ordered_by must name a payload field")
        _ordered_by[name] = ordered_by
    if opened is not None:
        _doors[name] = opened
    if continues:
        _continuations.add(name)
    _owners[name] = owner
    _schemas.setdefault(name, {})[version] = schema
    return schema


def declare_all(
    types: Mapping[str, Iterable[str]],
    *,
    description: str,
    doors: Iterable[str] | None = None,
    priorities: Mapping[str, int] | None = None,
    owner: str | None = None,
) -> None:
    """`declare` each type of `types` (name -> required fields) alike: one description and
    doors, a priority where `priorities` names one (the owner: the calling module's package)."""
    owner = owner or _caller_package()
    for name, required in types.items():
        declare(
            name,
            required=required,
            description=description,
            doors=doors,
            priority=(priorities or {}).get(name),
            owner=owner,
        )


def _validate_doors(name: str, doors: Iterable[str]) -> frozenset[str]:
    opened = frozenset(doors) - {APP}
    unknown = opened - OPTIONAL_DOORS
    if unknown:
        raise EventValidationError(
            f"{name}: unknown door(s) {sorted(unknown)}; the optional doors are "
            f"{sorted(OPTIONAL_DOORS)} (the owner's code is always one)"
        )
    return opened


def _caller_package() -> str:
    """The top-level package of the module calling `declare` (its owner by default)."""
    frame = sys._getframe(2)
    return str(frame.f_globals.get("__name__", "")).partition(".")[0] or "unknown"


def owner_of(name: str) -> str:
    """The app that owns a declared type."""
    latest(name)  # refuses an undeclared type
    return _owners[name]


def doors_of(name: str) -> frozenset[str]:
    """Every door a declared type may be emitted through (`app` always)."""
    latest(name)
    return _doors.get(name, frozenset()) | {APP}


def emittable(name: str, door: str) -> bool:
    """Whether `name` (declared) may come in through `door`."""
    return door == APP or door in _doors.get(name, frozenset())


def continues(name: str) -> bool:
    """Whether the type is a continuation of itself (see `declare`)."""
    return name in _continuations


def check_door(name: str, door: str) -> None:
    """Refuse (EventTypeNotEmittable) a declared type that `door` is not open to."""
    if not emittable(name, door):
        raise EventTypeNotEmittable(name, owner=owner_of(name), door=door)


def validate_priority(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value not in PRIORITY_RANGE:
        raise EventValidationError(
            f"priority must be an integer from {PRIORITY_RANGE.start} to "
            f"{PRIORITY_RANGE.stop - 1}, got {value!r}",
            field="priority",
        )
    return value


def priority_of(name: str) -> int:
    """The type's priority (0 unless declared)."""
    return _priorities.get(name, 0)


def ordered_by(name: str) -> str | None:
    """The payload field that keys the type's order, if any."""
    found = _ordered_by.get(name)
    if found is None:
        found = ORDERED_ENTITIES.get(name.partition(".")[0])
    return found


def ordering_key(
    name: str, entity_kind: str, entity_id: object, payload: Mapping[str, Any]
) -> str | None:
    """The catalog's ordering key of an event: its `ordered_by` payload field, else the entity
    id when the entity is what that field names (`conversation_id` and a `conversation`)."""
    field = ordered_by(name)
    if field is None:
        return None
    value = payload.get(field)
    if value is None and entity_id is not None and f"{entity_kind}_id" == field:
        value = entity_id
    if value is None or isinstance(value, bool | dict | list):
        return None
    return str(value)[:MAX_ORDERING_KEY_LENGTH]


def is_declared(name: str) -> bool:
    return name in _schemas


def declared_types() -> list[str]:
    return sorted(_schemas)


def versions_of(name: str) -> list[EventSchema]:
    """Every declared version of a type, oldest first."""
    latest(name)
    return [schema for _, schema in sorted(_schemas[name].items())]


def latest(name: str) -> EventSchema:
    versions = _schemas.get(name)
    if not versions:
        raise EventValidationError(
            f"unknown event type {name!r}: declare it in the catalog "
            "(eventbus.store.catalog.declare) before emitting it",
            field="event_type",
        )
    return versions[max(versions)]


def schema_for(name: str, version: object | None, today: dt.date) -> EventSchema:
    """The schema an emit must satisfy: the requested version, or the latest one."""
    if version is None:
        return latest(name)
    current = latest(name)
    if not isinstance(version, int) or isinstance(version, bool):
        raise EventValidationError(
            f"schema_version must be an integer, got {version!r}", field="schema_version"
        )
    schema = _schemas[name].get(version)
    if schema is None:
        raise EventValidationError(
            f"{name} has no schema version {version} (latest is {current.version})",
            field="schema_version",
        )
    if not schema.is_supported(today):
        raise EventValidationError(
            f"{name} v{version} was superseded on {schema.superseded_on} and its "
            f"{SUPPORT_WINDOW.days}-day support window is over; emit v{current.version}",
            field="schema_version",
        )
    return schema


def upcaster(name: str, *, from_version: int) -> Callable[[Upcaster], Upcaster]:
    """Register the decorated function as the upcaster of `name` from `from_version` to the next
    version (both must be declared first). It receives a copy of the payload and returns the
    next version's payload, which must have that version's required fields."""

    def register(function: Upcaster) -> Upcaster:
        versions = _schemas.get(name, {})
        if from_version not in versions or from_version + 1 not in versions:
            raise EventValidationError(
                f"cannot register an upcaster of {name} from v{from_version}: declare v"
                f"{from_version} and v{from_version + 1} first",
                field="schema_version",
            )
        existing = _upcasters.setdefault(name, {}).get(from_version)
        if existing is not None and existing is not function:
            raise EventValidationError(f"{name} already has an upcaster from v{from_version}")
        _upcasters[name][from_version] = function
        return function

    return register


def has_upcasters(name: str) -> bool:
    return name in _upcasters


def upcast(
    name: str, version: object, payload: Mapping[str, Any], today: dt.date
) -> tuple[int, dict[str, Any]]:
    """(version, payload) brought as far up as the upcasters go; raises UpcastError when the
    stored version is unknown, when the version reached is no longer supported and is not the
    latest, or when an upcaster fails or returns an invalid payload."""
    versions = _schemas.get(name, {})
    steps = _upcasters.get(name, {})
    if not isinstance(version, int) or isinstance(version, bool) or version not in versions:
        raise UpcastError(
            f"{name} v{version} is not declared in this deploy (known: "
            f"{', '.join(f'v{v}' for v in sorted(versions))}): cannot upcast it"
        )
    current: dict[str, Any] = dict(payload)
    while version in steps:
        try:
            current = steps[version](dict(current))
            if not isinstance(current, dict):
                raise TypeError(f"returned {type(current).__name__}, not a dict")
            check_payload(versions[version + 1], current)
        except Exception as exc:
            raise UpcastError(
                f"upcasting {name} v{version} to v{version + 1} failed: {type(exc).__name__}: {exc}"
            ) from exc
        version += 1
    latest_version = max(versions)
    if version != latest_version and not versions[version].is_supported(today):
        raise UpcastError(
            f"{name} v{version} was superseded on {versions[version].superseded_on} and its "
            f"support window is over, and there is no upcaster from v{version} to "
            f"v{version + 1}: declare one (eventbus.store.catalog.upcaster)"
        )
    return version, current


def check_payload(schema: EventSchema, payload: Mapping[str, object]) -> None:
    missing = [field for field in schema.required if field not in payload]
    if missing:
        raise EventValidationError(
            f"{schema.name} v{schema.version} payload is missing required field(s): "
            f"{', '.join(missing)}",
            field="payload",
        )
