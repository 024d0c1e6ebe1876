"""Read-only event and delivery browsers: large-table friendly lists, detail pages with links.

Lists never count the table (capped pagination) and offer only filters an index serves; detail
pages show the payload and metadata pretty-printed and escaped, each consumer's delivery state and
the attempt history, with links event <-> deliveries <-> organization <-> correlation view.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import flatten_fieldsets
from django.contrib.admin.views.main import ChangeList
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core import audit
from core.admin_tables import ReadOnlyAdmin, ReadOnlyMixin
from core.replica.routing import replica_view
from eventbus.admin import filters, rendering, search, selectors
from eventbus.admin.rendering import EventColumns, OrganizationColumn
from eventbus.operations import services
from eventbus.store.models import Delivery, DeliveryAttempt, DeliveryStatus, EventLog

RETRY_PERMISSION = "eventbus.retry_delivery"


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
    search_fields = ("id",)  # in part and indexed: eventbus/admin/search.py
    search_help_text = search.EVENT_HELP
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
        return search.events(queryset, search_term), False

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
        deliveries = selectors.event_deliveries(event_id) if event_id else []
        extra = {"deliveries": rendering.labelled(deliveries), **(extra_context or {})}
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
    fields = (
        "attempt",
        "outcome",
        "created_at",
        "duration_ms",
        "error_class",
        "error_and_traceback",
        "worker",
    )
    readonly_fields = fields
    extra = 0
    can_delete = False
    verbose_name_plural = "failed attempts"

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A delivery's attempts are part of it: whoever may view the delivery sees them.
        return request.user.has_perm("eventbus.view_delivery")

    @admin.display(description="error")
    def error_and_traceback(self, obj: DeliveryAttempt) -> SafeString:
        trace = rendering.traceback(obj.traceback) if obj.traceback else ""
        return format_html("{}{}", obj.error, trace)


class DeliveryChangeList(ChangeList):
    """The deliveries list: each shown row carries its consumer's label (one lookup per page)."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        self.result_list = rendering.labelled(self.result_list)


@admin.register(Delivery)
class DeliveryAdmin(OrganizationColumn, ReadOnlyAdmin):
    list_display = (
        "id",
        "consumer_title",
        "status_shown",
        "attempts",
        "event_link",
        "organization_name",
        "next_attempt",
        "finished_at",
        "redelivered_flag",
    )
    list_filter = (
        filters.DeliveryStatusFilter,
        filters.ConsumerFilter,
        "redelivered",
        filters.ActedOnFilter,
    )
    search_fields = ("event__id",)
    search_help_text = search.HELP + " A delivery's number."
    ordering = ("-id",)
    inlines = (AttemptInline,)
    actions = ("retry_now_selected",)
    change_form_template = "admin/eventbus/delivery/change_form.html"
    fields = (
        "consumer_title",
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

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return DeliveryChangeList

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Delivery], search_term: str
    ) -> tuple[QuerySet[Delivery], bool]:
        if not search_term.strip():
            return queryset, False
        return search.deliveries(queryset, search_term), False

    def has_retry_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(RETRY_PERMISSION)

    @replica_view
    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        pk = int(object_id) if object_id.isdigit() else 0
        waiting = selectors.waiting_to_retry(self.get_queryset(request).filter(pk=pk)).exists()
        extra = {
            "can_retry": waiting and self.has_retry_permission(request),
            **(extra_context or {}),
        }
        return super().change_view(request, object_id, form_url, extra)

    @admin.action(
        description="Retry now (deliveries waiting to retry after a failure)",
        permissions=["retry"],
    )
    def retry_now_selected(
        self, request: HttpRequest, queryset: QuerySet[Delivery]
    ) -> HttpResponseRedirect | None:
        ids = list(selectors.ids_of(queryset))
        moved = services.deliveries_retry_now(delivery_ids=ids, actor=audit.user_actor(request))
        text = f"Retried {moved} of {len(ids)} deliveries now: due at once, the workers claim them."
        if moved < len(ids):
            text += (
                f" {len(ids) - moved} were not waiting to retry (running, done, dead, "
                "discarded, never failed or due already): left alone."
            )
        self.message_user(request, text, messages.SUCCESS if moved else messages.WARNING)
        if len(ids) == 1 and request.POST.get("from_detail"):
            return HttpResponseRedirect(reverse("admin:eventbus_delivery_change", args=ids))
        return None

    @admin.display(description="consumer")
    def consumer_title(self, obj: Delivery) -> SafeString | str:
        return rendering.consumer_of(obj)

    @admin.display(description="status", ordering="status")
    def status_shown(self, obj: Delivery) -> SafeString:
        """The status as a badge; a pending delivery that failed before reads "retrying"."""
        retrying = obj.status == DeliveryStatus.PENDING and obj.last_error
        shown = filters.RETRYING if retrying else obj.status
        return format_html('<span class="dc-badge dc-{}">{}</span>', shown, shown)

    @admin.display(description="next attempt", ordering="next_attempt_at")
    def next_attempt(self, obj: Delivery) -> SafeString | str:
        """When a pending delivery is due ('-' for the others: they have no next attempt)."""
        if obj.status != DeliveryStatus.PENDING:
            return "-"
        return rendering.due(obj.next_attempt_at)

    @admin.display(description="redelivered", ordering="redelivered", empty_value="")
    def redelivered_flag(self, obj: Delivery) -> SafeString | str:
        return rendering.redelivered_flag(obj)

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
