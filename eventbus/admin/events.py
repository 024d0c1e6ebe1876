"""Read-only event and delivery browsers: large-table friendly lists, detail pages with links.

Lists never count the table (capped pagination) and offer only filters an index serves; detail
pages show the payload and metadata pretty-printed and escaped, each consumer's delivery state and
the attempt history, with links event <-> deliveries <-> organization <-> correlation view.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import display_for_value, flatten_fieldsets
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core.admin_tables import ReadOnlyAdmin, ReadOnlyMixin
from core.replica.routing import replica_view
from eventbus.admin import filters, rendering, selectors
from eventbus.admin.rendering import EventColumns, OrganizationColumn
from eventbus.models import Delivery, DeliveryAttempt, DeliveryStatus, EventLog


@admin.register(EventLog)
class EventLogAdmin(OrganizationColumn, EventColumns, ReadOnlyAdmin):
    list_display = (
        "created_at",
        "event_type",
        "organization_name",
        "entity",
        "status",
        "progress",
        "produced_by",
        "request_id",
    )
    list_filter = (
        filters.SystemEventsFilter,
        filters.OrganizationFilter,
        filters.EventTypeFilter,
        filters.EntityKindFilter,
        filters.DeadEventFilter,
        ("created_at", filters.CreatedFilter),
    )
    search_fields = ("id",)  # exact and indexed: see get_search_results
    search_help_text = "Exact event id, entity id or request id."
    ordering = ("-created_at",)  # event_log_created_idx / event_log_org_created_idx
    change_form_template = "admin/eventbus/eventlog/change_form.html"
    change_list_template = "admin/eventbus/eventlog/change_list.html"
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "id",
                    "event_type",
                    "organization_name",
                    "entity",
                    "status",
                    "progress",
                    "created_at",
                    "updated_at",
                    "produced_by",
                    "causation",
                    "request_id",
                    "priority",
                    "ordering_key",
                    "last_error",
                )
            },
        ),
        ("Payload", {"fields": ("payload_pretty",)}),
        ("Metadata", {"fields": ("metadata_pretty",)}),
    )
    readonly_fields = flatten_fieldsets(fieldsets)  # view-only: every field shown

    def get_queryset(self, request: HttpRequest) -> QuerySet[EventLog]:
        # The payload (up to 256 KiB) is loaded only by the detail page that shows it.
        return selectors.event_queryset().select_related("organization").defer("payload")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[EventLog], search_term: str
    ) -> tuple[QuerySet[EventLog], bool]:
        if not search_term.strip():
            return queryset, False
        return queryset.filter(pk__in=selectors.events_matching(search_term).values("pk")), False

    @replica_view
    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra = {"hides_system": filters.hides_system(request), **(extra_context or {})}
        return super().changelist_view(request, extra)

    @replica_view
    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        event_id = selectors.parse_uuid(object_id)
        extra = {
            "deliveries": selectors.event_deliveries(event_id) if event_id else [],
            **(extra_context or {}),
        }
        return super().change_view(request, object_id, form_url, extra)

    @admin.display(description="consumers done")
    def progress(self, obj: EventLog) -> str:
        return f"{len(obj.consumed_by)} / {obj.fanout}"

    @admin.display(description="produced by")
    def produced_by(self, obj: EventLog) -> str:
        """The bus's provenance: an integrator's key, a pipeline run, an app or the system."""
        found = obj.provenance
        if found is None:
            return "unknown (recorded before provenance)"
        detail = found.get("execution_id") or found.get("component")
        door = found.get("door", "")
        via = f" via {door}" if door and door != "app" else ""
        return f"{obj.producer}{via}" + (f" ({detail})" if detail else "")

    @admin.display(description="caused by")
    def causation(self, obj: EventLog) -> SafeString | str:
        meta = obj.metadata or {}
        cause = meta.get("causation_id")
        if not cause:
            return "nothing on the bus"
        link = rendering.admin_link("admin:eventbus_eventlog_change", cause, f"event {cause}")
        return format_html("{} (generation {})", link, meta.get("causation_depth") or 0)


class AttemptInline(ReadOnlyMixin, admin.TabularInline):
    model = DeliveryAttempt
    fields = ("attempt", "outcome", "created_at", "duration_ms", "error_class", "error", "worker")
    readonly_fields = fields
    extra = 0
    can_delete = False
    verbose_name_plural = "failed attempts"


@admin.register(Delivery)
class DeliveryAdmin(OrganizationColumn, ReadOnlyAdmin):
    list_display = (
        "id",
        "consumer",
        "status",
        "attempts",
        "event_link",
        "organization_name",
        "next_attempt",
        "finished_at",
        "redelivered",
    )
    list_filter = (filters.DeliveryStatusFilter, filters.ConsumerFilter, "redelivered")
    search_fields = ("event__id",)
    search_help_text = "Exact event id, entity id or request id."
    ordering = ("-id",)
    inlines = (AttemptInline,)
    fields = (
        "consumer",
        "status",
        "attempts",
        "max_attempts",
        "event_link",
        "organization_name",
        "created_at",
        "updated_at",
        "next_attempt",
        "locked_until",
        "locked_by",
        "finished_at",
        "error_class",
        "error_full",
        "may_have_run",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Delivery]:
        return Delivery.objects.select_related("organization")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Delivery], search_term: str
    ) -> tuple[QuerySet[Delivery], bool]:
        if not search_term.strip():
            return queryset, False
        return selectors.deliveries_matching(queryset, search_term), False

    @admin.display(description="next attempt at", ordering="next_attempt_at")
    def next_attempt(self, obj: Delivery) -> str:
        """Only while the delivery waits for one (pending: new or retrying); "-" otherwise."""
        waiting = obj.status == DeliveryStatus.PENDING
        return display_for_value(obj.next_attempt_at if waiting else None, "-")

    @admin.display(description="may have run before")
    def may_have_run(self, obj: Delivery) -> str:
        return rendering.redelivery(obj)

    @admin.display(description="event")
    def event_link(self, obj: Delivery) -> SafeString:
        return rendering.admin_link("admin:eventbus_eventlog_change", obj.event_id, obj.event_id)

    @admin.display(description="error")
    def error_full(self, obj: Delivery) -> SafeString | str:
        if not obj.last_error:
            return "-"
        return format_html("{}{}", obj.error_class or "", rendering.pretty_text(obj.last_error))
