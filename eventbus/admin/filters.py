"""List filters whose choices come from cheap queries and whose lookups an index serves.

Django's field filters list their choices with SELECT DISTINCT over the table; on the event log
that is a full scan. These take choices from the catalog, loose index scans or small tables.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.contrib.admin import DateFieldListFilter, SimpleListFilter
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ORDER_VAR, PAGE_VAR, SEARCH_VAR
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest

from core.models import SYSTEM_ORGANIZATION_ID
from eventbus.admin import selectors
from eventbus.store import catalog, consumer_labels
from eventbus.store.consumer_labels import ConsumerLabel
from eventbus.store.models import Delivery, DeliveryStatus, Status


class SystemEventsFilter(SimpleListFilter):
    """The system organization's events (`cron.*` of every job run) are hidden unless asked
    for, picked as the organization, or searched for by id: they would flood the list."""

    title = "system organization events"
    parameter_name = "system"
    SHOWN = "shown"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(self.SHOWN, "shown")]

    def choices(self, changelist: Any) -> Iterator[Any]:  # the admin's choice dicts
        yield {
            "selected": self.value() is None,
            "query_string": changelist.get_query_string(remove=[self.parameter_name]),
            "display": "hidden (default)",
        }
        yield {
            "selected": self.value() == self.SHOWN,
            "query_string": changelist.get_query_string({self.parameter_name: self.SHOWN}),
            "display": "shown",
        }

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() not in (None, self.SHOWN):
            raise IncorrectLookupParameters(f"unknown choice {self.value()!r}")
        if self.value() == self.SHOWN or not hides_system(request):
            return queryset
        return queryset.exclude(organization_id=SYSTEM_ORGANIZATION_ID)


def hides_system(request: HttpRequest) -> bool:
    """Whether the event list hides system events: on the default view only (any page, order
    or period), where they flood the list. Once a filter or a search narrows the list, all it
    matches is shown: that is what was asked for (a dead `cron.failed` included), and the
    narrowed queries keep the plans their indexes give them."""
    if request.GET.get(SEARCH_VAR, "").strip():
        return False
    return all(name in UNNARROWING or name.startswith("created_at__") for name in request.GET)


UNNARROWING = frozenset({PAGE_VAR, ORDER_VAR, SEARCH_VAR})


class ChoiceFilter(SimpleListFilter):
    """Filters `lookup` by the chosen value; subclasses say where the choices come from.

    The chosen value stays a choice when the data no longer offers it (the consumer whose dead
    letters were all just reprocessed): the filter stays on screen, chosen, instead of vanishing
    while it still narrows the list."""

    lookup = ""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        choices = self.choice_values()
        chosen = self.value()
        if chosen is not None and chosen not in {value for value, _ in choices}:
            choices = [*choices, (chosen, self.missing_label(chosen))]
        return choices

    def missing_label(self, value: str) -> str:
        """How a chosen value the data no longer offers is listed."""
        return f"{value} (none now)"

    def choice_values(self) -> list[tuple[str, str]]:
        raise NotImplementedError

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value is None:
            return queryset
        try:
            return queryset.filter(**{self.lookup: value})
        except (ValidationError, ValueError) as exc:  # e.g. not a UUID: the admin's "?e=1" page
            raise IncorrectLookupParameters(exc) from exc


class OrganizationFilter(ChoiceFilter):
    title = "organization"
    parameter_name = "organization"
    lookup = "organization_id"  # leading column of the organization indexes

    def choice_values(self) -> list[tuple[str, str]]:
        return selectors.organization_choices()


class EventTypeFilter(ChoiceFilter):
    title = "event type"
    parameter_name = "event_type"
    lookup = "event_type"

    def choice_values(self) -> list[tuple[str, str]]:
        return [(name, name) for name in catalog.declared_types()]


class EntityKindFilter(ChoiceFilter):
    title = "entity kind"
    parameter_name = "entity_kind"
    lookup = "entity_kind"

    def choice_values(self) -> list[tuple[str, str]]:
        return [(kind, kind) for kind in selectors.distinct_values("entity_kind")]


class ConsumerFilter(ChoiceFilter):
    """Consumers by the name an operator knows them by (a webhook by its subscription's)."""

    title = "consumer"
    parameter_name = "consumer"
    lookup = "consumer"

    def consumer_names(self) -> list[str]:
        return selectors.consumer_choices()

    def choice_values(self) -> list[tuple[str, str]]:
        found = consumer_labels.labels(self.consumer_names())
        choices = [(name, _choice_label(label)) for name, label in found.items()]
        return sorted(choices, key=lambda choice: choice[1].lower())

    def missing_label(self, value: str) -> str:
        return f"{_choice_label(consumer_labels.labels([value])[value])} (none now)"


class DeadEventFilter(ChoiceFilter):
    """Events with a dead delivery, found through the deliveries' dead indexes.

    (event_log keeps no index on `status`, so the ack's summary update stays HOT.)
    """

    title = "status"
    parameter_name = "status"

    def choice_values(self) -> list[tuple[str, str]]:
        return [(Status.DEAD, "dead (a delivery died)")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() is None:
            return queryset
        if self.value() != Status.DEAD:
            raise IncorrectLookupParameters(f"unknown status {self.value()!r}")
        dead = Delivery.objects.filter(status=DeliveryStatus.DEAD).values("event_id")
        return queryset.filter(pk__in=dead)


RETRYING = "retrying"


class DeliveryStatusFilter(ChoiceFilter):
    """Each state has an index (pending, processing, dead, discarded) or most rows (done);
    "retrying" is pending after a failure, waiting for its next attempt (delivery_retrying_idx)."""

    title = "status"
    parameter_name = "status"
    lookup = "status"

    def choice_values(self) -> list[tuple[str, str]]:
        return [
            (DeliveryStatus.PENDING.value, "pending"),
            (RETRYING, "retrying (failed, waits)"),
            (DeliveryStatus.PROCESSING.value, "processing"),
            (DeliveryStatus.DONE.value, "done"),
            (DeliveryStatus.DEAD.value, "dead"),
            (DeliveryStatus.DISCARDED.value, "discarded"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value is not None and value not in {v for v, _ in self.choice_values()}:
            raise IncorrectLookupParameters(f"unknown status {value!r}")
        if value == RETRYING:
            return queryset.filter(status=DeliveryStatus.PENDING, last_error__isnull=False)
        return super().queryset(request, queryset)


class ActedOnFilter(SimpleListFilter):
    """The deliveries one operator request acted on (reprocessed, discarded, retried), from the
    audit trail (audit_request_idx): where the DLQ's message sends you after "Reprocess all
    matching", since those letters have left the DLQ."""

    title = "operator action"
    parameter_name = "acted_in"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        chosen = self.value()
        return [(chosen, f"request {chosen}")] if chosen else []

    def has_output(self) -> bool:
        return self.value() is not None

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        request_id = self.value()
        if request_id is None:
            return queryset
        return queryset.filter(pk__in=selectors.acted_on(request_id))


class DlqEventTypeFilter(EventTypeFilter):
    lookup = "event_type"  # the delivery's own copy: no join to the log

    def choice_values(self) -> list[tuple[str, str]]:
        return [(name, name) for name in selectors.dead_event_type_choices()]


class DlqConsumerFilter(ConsumerFilter):
    """Consumers with dead letters (a loose scan)."""

    def consumer_names(self) -> list[str]:
        return selectors.distinct_values("dead_consumer")


def _choice_label(label: ConsumerLabel) -> str:
    return label.name if label.is_plain else f"{label.title} ({label.detail})"


class DlqOrganizationFilter(OrganizationFilter):
    def choice_values(self) -> list[tuple[str, str]]:
        return selectors.dead_organization_choices()

    def missing_label(self, value: str) -> str:
        return f"{selectors.organization_name(value) or value} (none now)"


class DlqEntityKindFilter(EntityKindFilter):
    lookup = "event__entity_kind"

    def choice_values(self) -> list[tuple[str, str]]:
        return [(kind, kind) for kind in selectors.dead_entity_kind_choices()]


class ErrorClassFilter(ChoiceFilter):
    title = "error class"
    parameter_name = "error_class"
    lookup = "error_class"

    def choice_values(self) -> list[tuple[str, str]]:
        return [(name, name) for name in selectors.dead_error_classes()]


class TitledDateFilter(DateFieldListFilter):
    """A period filter (today, past 7 days, this month, this year) with its own title."""

    label = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.title = self.label or self.title
        # Periods only: Django adds "No date" / "Has date" for a nullable column.
        self.links = tuple(link for link in self.links if not _isnull(link[1]))


def _isnull(params: dict[str, Any]) -> bool:
    return any(name.endswith("__isnull") for name in params)


class CreatedFilter(TitledDateFilter):
    label = "created"


class DiedFilter(TitledDateFilter):
    label = "died"
