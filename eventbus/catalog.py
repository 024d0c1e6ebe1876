"""The event catalog: every event type, its payload's required fields and its schema version.

Seed 000 §3 is declared here; apps declare their own types with `declare(...)` in their
`handlers.py`. Emitting an undeclared type, or a payload missing a required field, is an
`EventValidationError` and writes nothing. A breaking payload change is a new version: declare the
new one and keep the old one with `superseded_on`; the old version stays emittable (and so
consumable) for `SUPPORT_WINDOW` after that date.

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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from eventbus.errors import EventValidationError, UpcastError

EVENT_TYPE_PATTERN = r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$"
_EVENT_TYPE_RE = re.compile(EVENT_TYPE_PATTERN)
SUPPORT_WINDOW = dt.timedelta(days=30)
PRIORITY_RANGE = range(-10, 11)  # -10 (background) .. 0 (normal) .. 10 (most urgent)
HIGH_PRIORITY = 5  # the seed's user-facing types; EVENTBUS_NOTIFY_MIN_PRIORITY's default
# Types under these entities are ordered by their conversation unless declared otherwise.
ORDERED_ENTITIES = {"message": "conversation_id", "conversation": "conversation_id"}
MAX_ORDERING_KEY_LENGTH = 255


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
) -> EventSchema:
    """Declare (or re-declare identically) one version of an event type.

    `priority` and `ordered_by` belong to the type (every version): given once, they stay.
    """
    validate_event_type(name)
    schema = EventSchema(name, version, tuple(required), description, superseded_on)
    existing = _schemas.get(name, {}).get(version)
    if existing is not None and existing != schema:
        raise EventValidationError(f"event type {name} v{version} is already declared differently")
    if priority is not None:
        _priorities[name] = validate_priority(priority)
    if ordered_by is not None:
        if not isinstance(ordered_by, str) or not ordered_by:
            raise EventValidationError(f"{name}: ordered_by must name a payload field")
        _ordered_by[name] = ordered_by
    _schemas.setdefault(name, {})[version] = schema
    return schema


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


def latest(name: str) -> EventSchema:
    versions = _schemas.get(name)
    if not versions:
        raise EventValidationError(
            f"unknown event type {name!r}: declare it in the catalog (eventbus.catalog.declare) "
            "before emitting it",
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
            f"v{version + 1}: declare one (eventbus.catalog.upcaster)"
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


def _declare_seed_catalog() -> None:
    """Seed 000 §3. Optional fields (marked `?` in the seed) are not required."""
    seed: dict[str, tuple[str, ...]] = {
        # lead.*
        "lead.created": ("name", "source", "pipeline_id", "stage_id"),
        "lead.updated": ("changes",),
        "lead.stage_changed": ("from_stage_id", "to_stage_id"),
        "lead.won": ("value", "won_at"),
        "lead.lost": ("reason", "lost_at"),
        "lead.assigned": ("to_owner_id",),
        "lead.deleted": ("soft", "deleted_by"),
        # lead_activity.*
        "lead_activity.recorded": ("activity_type", "lead_id", "content_excerpt"),
        # contact.*
        "contact.created": ("phone", "source"),
        "contact.merged": ("from_contact_id", "into_contact_id", "merged_fields"),
        "contact.blocked": ("reason",),
        "contact.anonymized": ("lgpd_request_id", "anonymized_fields"),
        # message.*
        "message.delivered": ("message_id", "delivered_at"),
        "message.read": ("message_id", "read_at"),
        "message.failed": ("message_id", "error_code", "error_message", "retryable"),
        # conversation.*
        "conversation.opened": ("conversation_id", "contact_id", "channel"),
        "conversation.assigned": ("to_user_id", "mode"),
        "conversation.resolved": ("resolved_by", "duration_s"),
        "conversation.reopened": ("reopened_by",),
        # ai.*
        "ai.responded": (
            "conversation_id",
            "message_id",
            "model",
            "tokens_in",
            "tokens_out",
            "cost_cents",
            "latency_ms",
        ),
        "ai.handoff_triggered": ("conversation_id", "reason", "from"),
        "ai.sentiment_alert": ("conversation_id", "sentiment", "score"),
        "ai.budget_warning": ("pct_used", "daily_budget_cents", "current_cents"),
        "ai.budget_throttled": ("daily_budget_cents", "current_cents", "throttle_until"),
        # nuvemshop.*
        "nuvemshop.order_created": ("order_id", "ns_order_id", "total_cents"),
        "nuvemshop.order_paid": ("order_id", "paid_at", "amount_cents"),
        "nuvemshop.order_cancelled": ("order_id", "cancelled_at"),
        "nuvemshop.order_fulfilled": ("order_id", "fulfilled_at"),
        "nuvemshop.cart_abandoned": ("cart_id", "value_cents", "abandoned_at"),
        "nuvemshop.customer_redact_received": ("ns_customer_id", "ns_request_id"),
        "nuvemshop.product_synced": ("product_id", "action"),
        # lgpd.*
        "lgpd.consent_changed": ("contact_id", "consent_type", "granted", "source"),
        "lgpd.data_request_received": ("request_id", "request_type", "contact_id", "channel"),
        "lgpd.redact_applied": ("request_id", "contact_id", "scope"),
        # system.*
        "system.contact_blocked_by_stop": ("contact_id", "keyword"),
        "system.send_blocked": ("contact_id", "reason"),
        "system.window_24h_expired": ("conversation_id", "contact_id", "expired_at"),
        # webhook.*
        "webhook.delivery_failed": ("subscription_id", "event_id", "attempt", "error"),
        "webhook.subscription_disabled": ("subscription_id", "reason", "last_error"),
    }
    # User-facing work first (a customer waits for it); bulk sync last.
    priorities = {
        "ai.handoff_triggered": HIGH_PRIORITY,
        "conversation.opened": HIGH_PRIORITY,
        "message.failed": HIGH_PRIORITY,
        "nuvemshop.product_synced": -5,
    }
    for name, required in seed.items():
        declare(name, required=required, description="seed 000 §3", priority=priorities.get(name))
    # Seed 000's v1 carried `export_url_signed`, a bearer link to the subject's whole export, to
    # every consumer and webhook. v2 holds ids, states and dates only; the link goes to the data
    # subject by e-mail (lgpd.services).
    declare(
        "lgpd.export_generated",
        required=("request_id", "export_url_signed", "expires_at"),
        description="seed 000 §3 (superseded: it broadcast the download link)",
        superseded_on=dt.date(2026, 12, 1),
    )
    # Seed 000's v1 of message.received and message.sent carried the message text (`body`) to
    # every consumer and webhook: personal data in the event log. v2 holds ids only; consumers
    # read the text from the Message row (crm.Message), which the LGPD redaction scrubs.
    declare(
        "message.received",
        required=("direction", "conversation_id", "contact_id", "body", "waha_message_id"),
        description="seed 000 §3 (superseded: it carried the message text)",
        superseded_on=dt.date(2026, 12, 1),
        priority=HIGH_PRIORITY,
    )
    declare(
        "message.received",
        version=2,
        required=(
            "message_id",
            "conversation_id",
            "contact_id",
            "direction",
            "channel",
            "waha_message_id",
        ),
        description="an inbound message was stored (ids only: read the text from the message)",
    )
    declare(
        "message.sent",
        required=("direction", "conversation_id", "contact_id", "channel", "body", "message_id"),
        description="seed 000 §3 (superseded: it carried the message text)",
        superseded_on=dt.date(2026, 12, 1),
    )
    declare(
        "message.sent",
        version=2,
        required=(
            "message_id",
            "conversation_id",
            "contact_id",
            "direction",
            "channel",
            "waha_message_id",
        ),
        description="the channel accepted an outbound message (ids only)",
    )
    declare(
        "lgpd.export_generated",
        version=2,
        required=("request_id", "expires_at", "link_sent"),
        description="an access request's export is ready (no link: it is e-mailed to the subject)",
    )


def _declare_platform_catalog() -> None:
    """Types the platform itself emits: cron runs (system organization) and seed 004's order."""
    declare(
        "cron.started",
        required=("job", "run_id", "trigger"),
        description="a scheduled job run started (system organization)",
    )
    declare(
        "cron.completed",
        required=("job", "run_id", "trigger", "duration_ms", "rows_processed"),
        description="a scheduled job run completed",
    )
    declare(
        "cron.failed",
        required=("job", "run_id", "trigger", "duration_ms", "rows_processed", "error"),
        description="a scheduled job run failed (alerted)",
    )
    declare(
        "order.confirmed",
        required=("order_id", "number", "total_cents", "currency", "confirmed_at"),
        description="seed 004: an order was confirmed (fat event: the order summary)",
    )


_declare_seed_catalog()
_declare_platform_catalog()
