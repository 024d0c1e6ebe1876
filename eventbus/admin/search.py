"""The console's search box: partial matches that an index serves, on tables of millions of rows.

A term is matched every way that applies to it, and a row matching any of them is listed:

- **event types** by part of the name (`lead` finds lead.created and lead.stage_changed): the
  names come from the catalog or the DLQ's loose scan (a few hundred at most) and are matched
  here, so the table is searched by `event_type IN (...)` on its type index;
- **consumers** (DLQ, deliveries) by part of their name or of their label ("Order sync",
  "hooks.example"): the same, by `consumer IN (...)`;
- **ids** by their start: 4 to 32 hex digits (dashes optional) are a range of the uuid index of
  the event id, the entity id (per entity kind, `event_log_entity_idx`) or a delivery's event id;
- **the short id the DLQ shows**: the event id's last 8 characters (a leading "…" optional),
  through `delivery_dead_short_id_idx`;
- **request ids**, exactly (`event_log_request_idx`); a delivery's number, exactly;
- **error texts** (DLQ, deliveries) by part, case-insensitively, at 3 characters or more: a
  trigram index (`delivery_error_trgm_idx`, pg_trgm) serves `upper(last_error) LIKE '%TERM%'`.

Each branch is a condition on the listed table an index serves; branches that start from another
table are evaluated once into an array (`= ANY(ARRAY(...))`, an InitPlan), so PostgreSQL can OR
them all as one bitmap scan instead of filtering the table row by row.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from django.contrib.postgres.expressions import ArraySubquery
from django.db import models
from django.db.models import F, Func, Q, QuerySet
from django.db.models.functions import Cast, Right

from eventbus.admin import selectors
from eventbus.store import catalog, consumer_labels
from eventbus.store.models import SHORT_ID_CHARS, Delivery, DeliveryStatus, EventLog

MIN_PREFIX = 4  # hex digits before an id prefix is searched (fewer match most of the table)
MIN_TEXT = 3  # characters before error texts are searched (a trigram)
HELP = (
    "Part of an event type, consumer or error text; an event, entity or request id, the start "
    "of one, or the short id shown (its last 8 characters)."
)
EVENT_HELP = (
    "Part of an event type; an event, entity or request id, or the start of an event or entity id."
)

_HEX = re.compile(r"[0-9a-f]+")
_ELLIPSES = ("…", "...")


@dataclass(frozen=True)
class Term:
    """A search box entry, and what it can be part of."""

    text: str
    hex: str  # lower-case hex digits when it can be (part of) an id, else ""
    short_id: bool  # written as the console shows short ids ("…1a2b3c4d")

    @property
    def id_range(self) -> tuple[uuid.UUID, uuid.UUID] | None:
        """The uuids starting with these digits (None: too short to be worth it, or a suffix)."""
        if self.short_id or len(self.hex) < MIN_PREFIX:
            return None
        return uuid.UUID(self.hex.ljust(32, "0")), uuid.UUID(self.hex.ljust(32, "f"))

    @property
    def suffix(self) -> str:
        """The digits to find at the end of an event id ('' when they cannot be a short id):
        8 to 12 of them, the last group of a uuid's text."""
        return self.hex if SHORT_ID_CHARS <= len(self.hex) <= 12 else ""

    def names_in(self, names: Collection[str]) -> list[str]:
        """The names containing the term, case-insensitively."""
        needle = self.text.lower()
        return sorted(name for name in names if needle in name.lower())


def parse(raw: str) -> Term:
    text = raw.strip()
    short_id = text.startswith(_ELLIPSES)
    digits = text.lstrip(".…").strip().replace("-", "").lower()
    hex_digits = digits if _HEX.fullmatch(digits) and len(digits) <= 32 else ""
    return Term(text, hex_digits, short_id)


class AnyOf(Func):
    """`column = ANY(ARRAY(subquery))`: the subquery runs once, before the scan (an InitPlan),
    so the condition is an index condition that a BitmapOr can combine with the others (an
    `IN (subquery)` inside an OR is a filter evaluated for every row)."""

    template = "%(expressions)s)"
    arg_joiner = " = ANY("
    output_field = models.BooleanField()

    def __init__(self, column: str, queryset: QuerySet[Any]) -> None:
        super().__init__(F(column), ArraySubquery(queryset))


# -- events ------------------------------------------------------------------------------------


def events(queryset: QuerySet[EventLog], raw: str) -> QuerySet[EventLog]:
    """The event browser's search: type, ids (whole or start), request id, short id."""
    term = parse(raw)
    # The request id as an array too: estimated as a handful of rows (the partial index's
    # `metadata ? 'request_id'` alone is guessed at thousands, and a guess that large makes the
    # planner walk the whole log by time looking for a rare type).
    by_request = selectors.events_with_request_id(term.text).values("pk")
    match = Q(AnyOf("pk", by_request))
    found = term.id_range
    if found is not None:
        match |= Q(pk__range=found) | _entity_match(found)
    types = term.names_in(catalog.declared_types())
    if types:
        match |= Q(event_type__in=types)
    if term.suffix:
        match |= Q(AnyOf("pk", _dead_by_short_id(term).values("event_id")))
    return queryset.filter(match)


def _entity_match(found: tuple[uuid.UUID, uuid.UUID]) -> Q:
    """Events whose entity id is in the range: `event_log_entity_idx`, probed per entity kind
    (the kinds from a loose scan)."""
    return Q(entity_kind__in=selectors.distinct_values("entity_kind"), entity_id__range=found)


def _events_by_reference(term: Term) -> QuerySet[EventLog]:
    """Events found from what a delivery does not carry: entity id, request id."""
    match = selectors.request_id_match(term.text)
    found = term.id_range
    if found is not None:
        match |= _entity_match(found)
    return selectors.event_queryset().filter(match)


# -- deliveries --------------------------------------------------------------------------------


def dead_letters(queryset: QuerySet[Delivery], raw: str) -> QuerySet[Delivery]:
    """The DLQ's search: type, consumer, ids, short id, request id, error text."""
    term = parse(raw)
    types = term.names_in(selectors.dead_event_type_choices())
    consumers = _consumers(term, selectors.distinct_values("dead_consumer"))
    return _deliveries(queryset, term, types, consumers)


def deliveries(queryset: QuerySet[Delivery], raw: str) -> QuerySet[Delivery]:
    """The deliveries list's search: the DLQ's, and a delivery's number."""
    term = parse(raw)
    types = term.names_in(catalog.declared_types())
    consumers = _consumers(term, selectors.consumer_choices())
    return _deliveries(queryset, term, types, consumers, numbered=True)


def _consumers(term: Term, names: Collection[str]) -> list[str]:
    """Consumers whose name, title or detail line contains the term."""
    needle = term.text.lower()
    return sorted(
        label.name
        for label in consumer_labels.labels(names).values()
        if any(needle in part.lower() for part in (label.name, label.title, label.detail))
    )


def _deliveries(
    queryset: QuerySet[Delivery],
    term: Term,
    types: list[str],
    consumers: list[str],
    *,
    numbered: bool = False,
) -> QuerySet[Delivery]:
    referenced = _events_by_reference(term).values("pk")
    match = Q(AnyOf("event_id", referenced))
    if numbered and term.text.isdigit() and len(term.text) < 19:
        match |= Q(pk=int(term.text))
    if types:
        match |= Q(event_type__in=types)
    if consumers:
        match |= Q(consumer__in=consumers)
    found = term.id_range
    if found is not None:
        match |= Q(event_id__gte=found[0], event_id__lte=found[1])  # no __range on a key
    if term.suffix:
        match |= _short_id_match(term)
    if len(term.text) >= MIN_TEXT:
        match |= Q(last_error__icontains=term.text)
    return with_short_id(queryset).filter(match)


def with_short_id(queryset: QuerySet[Delivery]) -> QuerySet[Delivery]:
    """Deliveries with `_short_id` (the expression of `delivery_dead_short_id_idx`) and
    `_event_text` (the event id as text) available to filters."""
    text = Cast("event_id", models.TextField())
    return queryset.alias(_event_text=text, _short_id=Right(text, SHORT_ID_CHARS))


def _short_id_match(term: Term) -> Q:
    """Dead letters whose event id ends with the term (the index holds dead rows only: the
    short id is shown in the DLQ)."""
    return Q(
        status=DeliveryStatus.DEAD,
        _short_id=term.suffix[-SHORT_ID_CHARS:],
        _event_text__endswith=term.suffix,
    )


def _dead_by_short_id(term: Term) -> QuerySet[Delivery]:
    return with_short_id(Delivery.objects.all()).filter(_short_id_match(term))
