"""Reads for the operations console: the DLQ, the event browser, event detail, correlation.

Every query here is served by an index (named in its comment): the event log holds millions of
rows, so nothing scans it or counts it whole. Status-page aggregates live in
`eventbus/operations/status.py`.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import BigIntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from core.admin_scope import visible_organizations
from core.models import AuditLog, Organization
from core.replica.routing import read_connection
from eventbus.operations.distinct import CHOICES_LIMIT, distinct_values
from eventbus.store.models import Delivery, DeliveryAttempt, DeliveryStatus, EventLog
from eventbus.store.registry import registry

CORRELATION_LIMIT = 500


def consumer_choices(*, limit: int = CHOICES_LIMIT) -> list[str]:
    """Consumers for filters: those registered, and any with done or dead deliveries (a
    consumer removed from the code, a webhook subscription), without scanning the table."""
    names = {c.name for c in registry.all()}
    names.update(distinct_values("done_consumer", limit=limit))
    names.update(distinct_values("dead_consumer", limit=limit))
    return sorted(names)[:limit]


def dead_event_type_choices(*, limit: int = CHOICES_LIMIT) -> list[str]:
    """Event types present in the DLQ (a loose scan of delivery_dead_group_idx)."""
    return distinct_values("dead_event_type", limit=limit)


# The entity kinds of the newest dead letters: a bounded read (delivery_dlq_idx, then each
# letter's event by its key, partition included), whatever the DLQ's size.
DEAD_ENTITY_KINDS_SQL = """
SELECT DISTINCT e.entity_kind
  FROM (SELECT event_id, event_created_at FROM eventbus_delivery WHERE status = 'dead'
         ORDER BY finished_at DESC, id DESC LIMIT %(letters)s) d
  JOIN event_log e ON e.id = d.event_id AND e.created_at = d.event_created_at
 ORDER BY 1 LIMIT %(limit)s
"""
DEAD_ENTITY_KINDS_LETTERS = 1000


def dead_entity_kind_choices(*, limit: int = CHOICES_LIMIT) -> list[str]:
    """Entity kinds of the newest DEAD_ENTITY_KINDS_LETTERS dead letters (not every kind the
    log has seen: the DLQ's filter offers only kinds with dead letters)."""
    params = {"letters": DEAD_ENTITY_KINDS_LETTERS, "limit": limit}
    with read_connection().cursor() as cursor:
        cursor.execute(DEAD_ENTITY_KINDS_SQL, params)
        return [row[0] for row in cursor.fetchall()]


def dead_organization_choices(*, limit: int = CHOICES_LIMIT) -> list[tuple[str, str]]:
    """(id, name) of the organizations with dead letters (a loose scan of delivery_dead_org_idx)."""
    ids = distinct_values("dead_organization", limit=limit)
    found = visible_organizations(Organization.objects.filter(pk__in=ids)).order_by("name")
    found = found.values_list("pk", "name")
    return [(str(pk), name) for pk, name in found]


def organization_name(pk: str) -> str | None:
    """The name of a visible organization by its id as text (None: unknown, hidden, not an id)."""
    found = parse_uuid(pk)
    if found is None:
        return None
    rows = visible_organizations(Organization.objects.filter(pk=found))
    return rows.values_list("name", flat=True).first()


def organization_choices(*, limit: int = CHOICES_LIMIT) -> list[tuple[str, str]]:
    """(id, name) of organizations for filters, by name."""
    found = visible_organizations(Organization.objects.all()).values_list("pk", "name")
    return [(str(pk), name) for pk, name in found[:limit]]


def dead_letters() -> QuerySet[Delivery]:
    """The DLQ: dead deliveries (delivery_dlq_idx, or delivery_dead_idx per consumer)."""
    return Delivery.objects.filter(status=DeliveryStatus.DEAD)


def with_root_cause(deliveries: QuerySet[Delivery]) -> QuerySet[Delivery]:
    """Annotate `root_error`: the latest failed attempt whose error class differs from the
    final one (a `SubscriptionDisabled` that followed HTTP 500s shows the 500). A correlated
    subquery per shown row only, on the attempts' delivery_id index; None when every attempt
    failed the same way."""
    earlier = (
        DeliveryAttempt.objects.filter(delivery_id=OuterRef("pk"))
        .exclude(error_class=Coalesce(OuterRef("error_class"), Value("")))
        .order_by("-created_at", "-id")
    )
    return deliveries.annotate(root_error=Subquery(earlier.values("error")[:1]))


def waiting_to_retry(deliveries: QuerySet[Delivery]) -> QuerySet[Delivery]:
    """Those pending again after a failure and not yet due: what Retry now moves
    (eventbus/store/sql/retry_now.sql)."""
    return deliveries.filter(
        status=DeliveryStatus.PENDING, last_error__isnull=False, next_attempt_at__gt=timezone.now()
    )


def consumers_of(delivery_ids: Sequence[int]) -> list[str]:
    """The distinct consumers of some deliveries (by primary key)."""
    rows = Delivery.objects.filter(pk__in=delivery_ids).values_list("consumer", flat=True)
    return sorted(set(rows))


def events_with_request_id(request_id: str) -> QuerySet[EventLog]:
    """Events whose metadata.request_id is `request_id` (event_log_request_idx)."""
    return event_queryset().filter(request_id_match(request_id))


def request_id_match(request_id: str) -> Q:
    """For `event_queryset()`: the expression matches the index, has_key its partial predicate."""
    return Q(metadata__has_key="request_id") & Q(_request_id=request_id)


def event_queryset() -> QuerySet[EventLog]:
    """EventLog with the request id expression available to filters (`_request_id`)."""
    return EventLog.objects.alias(_request_id=request_id_expression())


def request_id_expression() -> KeyTextTransform:
    """`metadata ->> 'request_id'`: the expression of event_log_request_idx."""
    return KeyTextTransform("request_id", "metadata")


def parse_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def event_deliveries(event_id: uuid.UUID) -> list[Delivery]:
    """One event's deliveries (delivery_event_consumer_uniq) with their failed attempts."""
    return list(
        Delivery.objects.filter(event_id=event_id)
        .order_by("consumer")
        .prefetch_related("attempt_log")
    )


def delivery_attempts(delivery_id: int) -> list[DeliveryAttempt]:
    """A delivery's failed attempts in time order (FK index on delivery_id): after a reprocess
    the numbers start again at 1, so ordering by number would interleave the two runs."""
    attempts = DeliveryAttempt.objects.filter(delivery_id=delivery_id)
    return list(attempts.order_by("created_at", "id"))


@dataclass(frozen=True)
class TimelineEntry:
    """One thing that happened for a request: `kind` is audit, event, delivery or attempt."""

    at: dt.datetime
    kind: str
    item: Any


@dataclass(frozen=True)
class CauseNode:
    """An event in the causation tree, `depth` levels below the event (or request) that
    started the chain, with the consumers that handled it."""

    event: EventLog
    depth: int
    deliveries: list[Delivery]


@dataclass(frozen=True)
class Correlation:
    """Everything one request id caused, in time order, and its events as a causation tree."""

    request_id: str
    entries: list[TimelineEntry]
    truncated: bool  # more events than CORRELATION_LIMIT; only the first ones are shown
    tree: list[CauseNode] = field(default_factory=list)


def causation_tree(events: Sequence[EventLog], deliveries: Sequence[Delivery]) -> list[CauseNode]:
    """The events depth first: each under the event its `causation_id` names (when that event
    is among them), siblings in time order; events with no known cause are the roots."""
    known = {e.pk for e in events}
    children: dict[object, list[EventLog]] = {}
    for event in sorted(events, key=lambda e: (e.created_at, str(e.pk))):
        cause = (event.metadata or {}).get("causation_id")
        parent = uuid.UUID(str(cause)) if _is_uuid(cause) else None
        children.setdefault(parent if parent in known else None, []).append(event)
    by_event: dict[object, list[Delivery]] = {}
    for delivery in sorted(deliveries, key=lambda d: d.consumer):
        by_event.setdefault(delivery.event_id, []).append(delivery)
    tree: list[CauseNode] = []
    stack = [(event, 0) for event in reversed(children.get(None, []))]
    while stack:
        event, depth = stack.pop()
        tree.append(CauseNode(event, depth, by_event.get(event.pk, [])))
        stack.extend((child, depth + 1) for child in reversed(children.get(event.pk, [])))
    return tree


def _is_uuid(value: object) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return value is not None


KIND_ORDER = {"audit": 0, "event": 1, "delivery": 2, "attempt": 3}


def correlation(request_id: str, *, limit: int = CORRELATION_LIMIT) -> Correlation:
    """Audit entries, events, deliveries and failed attempts of one request, oldest first."""
    audits = list(
        AuditLog.objects.filter(request_id=request_id).order_by("created_at")[:limit]
    )  # audit_request_idx
    events = list(
        events_with_request_id(request_id)
        .select_related("organization")
        .order_by("created_at")[: limit + 1]
    )
    truncated = len(events) > limit
    events = events[:limit]
    deliveries = list(Delivery.objects.filter(event_id__in=[e.pk for e in events]))
    attempts = list(DeliveryAttempt.objects.filter(delivery_id__in=[d.pk for d in deliveries]))
    entries = [
        *(TimelineEntry(a.created_at, "audit", a) for a in audits),
        *(TimelineEntry(e.created_at, "event", e) for e in events),
        *(TimelineEntry(_delivery_time(d), "delivery", d) for d in deliveries),
        *(TimelineEntry(a.created_at, "attempt", a) for a in attempts),
    ]
    entries.sort(key=lambda entry: (entry.at, KIND_ORDER[entry.kind]))
    tree = causation_tree(events, deliveries)
    return Correlation(request_id, entries, truncated or len(audits) == limit, tree)


def _delivery_time(delivery: Delivery) -> dt.datetime:
    # A finished delivery is shown when it finished; one still in flight at its last change.
    return delivery.finished_at or delivery.updated_at


DELIVERY_TARGET = "eventbus.delivery"  # the audit trail's target type of delivery actions


def acted_on(request_id: str) -> QuerySet[Any, dict[str, Any]]:
    """The ids of the deliveries an operator request acted on (audit_request_idx), as a
    subquery of bigints."""
    rows = AuditLog.objects.filter(request_id=request_id, target_type=DELIVERY_TARGET)
    return rows.annotate(delivery_id=Cast("target_id", BigIntegerField())).values("delivery_id")


def delivery_history(delivery_id: int) -> QuerySet[AuditLog]:
    """What operators did to one delivery, newest first (audit_target_idx)."""
    rows = AuditLog.objects.filter(target_type=DELIVERY_TARGET, target_id=str(delivery_id))
    return rows.order_by("-created_at", "-id")


def last_traceback(delivery_id: int) -> str | None:
    """The traceback of a delivery's latest failed attempt that recorded one."""
    attempts = DeliveryAttempt.objects.filter(delivery_id=delivery_id, traceback__isnull=False)
    return attempts.order_by("-created_at", "-id").values_list("traceback", flat=True).first()


def ids_of(queryset: QuerySet[Delivery]) -> Sequence[int]:
    """The primary keys of a (filtered) delivery queryset, for operator services."""
    return list(queryset.order_by().values_list("pk", flat=True))


def dead_error_classes(*, limit: int = CHOICES_LIMIT) -> list[str]:
    """Error classes present in the DLQ (a loose scan of delivery_dead_error_idx)."""
    return distinct_values("dead_error_class", limit=limit)


def without_audit(found: Correlation) -> Correlation:
    """The same timeline without audit entries (for users who may not read the audit log)."""
    entries = [entry for entry in found.entries if entry.kind != "audit"]
    return Correlation(found.request_id, entries, found.truncated, found.tree)
