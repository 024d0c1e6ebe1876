"""The DLQ screen: dead deliveries, their filters, Reprocess and Discard.

Both actions work on the checked rows (admin actions) and on everything matching the current
filters (`matching/<action>/`: a confirmation page that counts the matches, then re-applies the
same filters server-side on POST, limited to what had died when the page was shown). They are
gated by the proxy model's custom permissions and call `eventbus.operations.services`, which moves
the state through `eventbus/dispatch/claim.py` and writes the audit trail.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.utils import flatten_fieldsets
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core import context
from core.admin_scope import scope_queryset
from core.admin_tables import ReadOnlyAdmin
from core.replica.routing import replica_view
from eventbus.admin import dlq_disabled, filters, rendering, search, selectors
from eventbus.admin.dlq_actions import (
    DISCARD,
    OPERATOR_ACTIONS,
    REPROCESS,
    DiscardForm,
    MatchingForm,
    OperatorAction,
    actor_of,
    describe_filters,
)
from eventbus.admin.rendering import EventColumns, OrganizationColumn
from eventbus.store import consumer_labels
from eventbus.store.models import DeadLetter, Delivery, EventLog

PREVIEW_ROWS = 20
HISTORY_ROWS = 20
CHANGELIST = "admin:eventbus_deadletter_changelist"


labelled = rendering.labelled
DELIVERIES = "admin:eventbus_delivery_changelist"
ACTIONS_DONE = {
    "delivery.reprocess": "reprocessed (back in the queue as the same delivery)",
    "delivery.discard": "discarded (removed from the DLQ for good)",
    "delivery.retry_now": "retried now",
}


class DeadLetterChangeList(ChangeList):
    """The DLQ page: each shown row carries its consumer's label (one lookup per page)."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        self.result_list = labelled(self.result_list)


@admin.register(DeadLetter)
class DeadLetterAdmin(OrganizationColumn, EventColumns, ReadOnlyAdmin):
    list_display = (
        "died",
        "event_summary",
        "consumer_title",
        "organization_name",
        "attempts_used",
        "error",
    )
    list_display_links = None  # the event id links to the letter; the rest is text
    list_filter = (
        filters.DlqEventTypeFilter,
        filters.DlqConsumerFilter,
        filters.DlqOrganizationFilter,
        filters.ErrorClassFilter,
        filters.DlqEntityKindFilter,
        ("created_at", filters.CreatedFilter),
        ("finished_at", filters.DiedFilter),
    )
    # The box matches types, consumers, ids, short ids and errors in part: eventbus/admin/search.py.
    search_fields = ("event__id",)
    search_help_text = search.HELP
    ordering = ("-finished_at",)  # delivery_dlq_idx
    actions = ("reprocess_selected", "discard_selected")
    change_list_template = "admin/eventbus/deadletter/change_list.html"
    change_form_template = "admin/eventbus/deadletter/change_form.html"
    fieldsets = (
        (
            "Delivery",
            {
                "fields": (
                    "consumer_title",
                    "attempts_used",
                    "created",
                    "died_at",
                    "error_class",
                    "error_full",
                    "traceback_full",
                    "root_cause_full",
                    "may_have_run",
                )
            },
        ),
        (
            "Event",
            {"fields": ("event_link", "event_type", "organization_name", "entity", "request_id")},
        ),
        ("Payload", {"fields": ("payload_pretty",)}),
        ("Metadata", {"fields": ("metadata_pretty",)}),
    )
    readonly_fields = flatten_fieldsets(fieldsets)  # view-only: every field shown

    def get_queryset(self, request: HttpRequest) -> QuerySet[Delivery]:
        # The list reads deliveries (+ organization names) only; the detail page loads the event.
        return selectors.with_root_cause(selectors.dead_letters().select_related("organization"))

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return DeadLetterChangeList

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Delivery], search_term: str
    ) -> tuple[QuerySet[Delivery], bool]:
        if not search_term.strip():
            return queryset, False
        return search.dead_letters(queryset, search_term), False

    def has_reprocess_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(REPROCESS.permission)

    def has_discard_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(DISCARD.permission)

    # -- columns and detail fields ---------------------------------------------------------

    @admin.display(description="died at", ordering="finished_at")
    def died_at(self, obj: Delivery) -> str:
        return rendering.exact_time(obj.finished_at)

    @admin.display(description="died", ordering="finished_at")
    def died(self, obj: Delivery) -> SafeString | str:
        return rendering.moment(obj.finished_at)

    @admin.display(description="created")
    def created(self, obj: Delivery) -> str:
        return rendering.exact_time(obj.created_at)

    @admin.display(description="event type")
    def event_type(self, obj: Delivery) -> str:
        return obj.event_type

    @admin.display(description="event")
    def event_summary(self, obj: Delivery) -> SafeString:
        letter = reverse("admin:eventbus_deadletter_change", args=[obj.pk])
        return format_html(
            '<span class="dc-type">{}</span>{}',
            obj.event_type,
            rendering.short_id(obj.event_id, letter),
        )

    @admin.display(description="consumer")
    def consumer_title(self, obj: Delivery) -> SafeString | str:
        return rendering.consumer_of(obj)

    @admin.display(description="attempts")
    def attempts_used(self, obj: Delivery) -> str:
        return f"{obj.attempts} / {obj.max_attempts}"

    @admin.display(description="last error")
    def error(self, obj: Delivery) -> SafeString:
        return rendering.errors(obj.last_error, getattr(obj, "root_error", None))

    @admin.display(description="root cause")
    def root_cause_full(self, obj: Delivery) -> SafeString | str:
        root = getattr(obj, "root_error", None)
        return rendering.pretty_text(root) if root else "- (every attempt failed the same way)"

    @admin.display(description="error")
    def error_full(self, obj: Delivery) -> SafeString:
        return rendering.pretty_text(obj.last_error)

    @admin.display(description="traceback")
    def traceback_full(self, obj: Delivery) -> SafeString | str:
        """The last attempt's (the one that killed it), collapsed; every attempt's is in the
        attempt history below."""
        return rendering.traceback(selectors.last_traceback(obj.pk))

    @admin.display(description="may have run before")
    def may_have_run(self, obj: Delivery) -> str:
        return rendering.redelivery(obj)

    @admin.display(description="event")
    def event_link(self, obj: Delivery) -> SafeString:
        return rendering.admin_link("admin:eventbus_eventlog_change", obj.event_id, "open event")

    def event_of(self, obj: Delivery) -> EventLog:
        return obj.event

    # -- pages -------------------------------------------------------------------------------

    @replica_view
    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra = {
            "title": "Dead letters (DLQ)",
            "can_reprocess": self.has_reprocess_permission(request),
            "can_discard": self.has_discard_permission(request),
            "filters_query": request.GET.urlencode(),
            **(extra_context or {}),
        }
        response = super().changelist_view(request, extra)
        changelist = getattr(response, "context_data", {}).get("cl")
        if changelist is not None and not changelist.result_count:
            # Say why the list is empty: what narrows it, and where acted-on letters went.
            response.context_data["criteria"] = describe_filters(changelist)  # type: ignore[attr-defined]
        return response

    @replica_view
    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        pk = int(object_id) if object_id.isdigit() else 0
        if not self.get_queryset(request).filter(pk=pk).exists():
            gone = self.gone_view(request, pk)
            if gone is not None:
                return gone
        extra = {
            "subtitle": self.subtitle(pk),
            "attempts": selectors.delivery_attempts(pk),
            "can_reprocess": self.has_reprocess_permission(request),
            "can_discard": self.has_discard_permission(request),
            **(extra_context or {}),
        }
        return super().change_view(request, object_id, form_url, extra)

    def gone_view(self, request: HttpRequest, pk: int) -> TemplateResponse | None:
        """The page of a letter that left the DLQ (reprocessed, discarded): what happened to it,
        when and by whom (the audit trail), and where it is now. None when this user can see
        neither the delivery nor an action on it (the admin's "does not exist" follows)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        delivery = (
            scope_queryset(request, Delivery.objects.filter(pk=pk))
            .select_related("organization")
            .first()
        )
        history = [
            (entry, ACTIONS_DONE.get(entry.action, entry.action))
            for entry in scope_queryset(request, selectors.delivery_history(pk))[:HISTORY_ROWS]
        ]
        if delivery is None and not history:
            return None
        if delivery is not None:
            labelled([delivery])
        context_ = {
            **self.admin_site.each_context(request),
            "title": f"Dead letter {pk} is no longer in the DLQ",
            "opts": self.opts,
            "pk": pk,
            "delivery": delivery,
            "history": history,
        }
        return TemplateResponse(request, "admin/eventbus/deadletter/gone.html", context_)

    def subtitle(self, pk: int) -> str | None:
        """'lead.created to Order sync': the letter as people say it (not webhook:<uuid> <- id)."""
        letter = selectors.dead_letters().filter(pk=pk).values("event_type", "consumer").first()
        if letter is None:
            return None  # the admin's own "does not exist" handling follows
        label = consumer_labels.labels([letter["consumer"]])[letter["consumer"]]
        return f"{letter['event_type']} to {label.title}"

    def get_urls(self) -> list[URLPattern]:
        matching = path(
            "matching/<str:action>/",
            self.admin_site.admin_view(self.matching_view),
            name="eventbus_deadletter_matching",
        )
        return [matching, *super().get_urls()]

    # -- actions on the checked rows -----------------------------------------------------

    @admin.action(description="Reprocess selected dead letters", permissions=["reprocess"])
    def reprocess_selected(
        self, request: HttpRequest, queryset: QuerySet[Delivery]
    ) -> TemplateResponse | None:
        ids = list(selectors.ids_of(queryset))
        off = dlq_disabled.disabled_among(ids)
        choice = dlq_disabled.choice_of(request)
        if off and choice is None:
            context_ = {**self.admin_site.each_context(request), "opts": self.opts}
            return dlq_disabled.warning_page(request, context_, ids, off)
        enabled = dlq_disabled.enable_if_chosen(request, choice, off)
        moved = REPROCESS.run(ids, actor=actor_of(request), reason="")
        self.report(request, REPROCESS, moved, len(ids), enabled=enabled)
        return None

    @admin.action(description="Discard selected dead letters…", permissions=["discard"])
    def discard_selected(
        self, request: HttpRequest, queryset: QuerySet[Delivery]
    ) -> TemplateResponse | None:
        ids = list(selectors.ids_of(queryset))
        form = DiscardForm(request.POST if request.POST.get("post") == "yes" else None)
        if form.is_valid():
            moved = DISCARD.run(ids, actor=actor_of(request), reason=form.cleaned_data["reason"])
            self.report(request, DISCARD, moved, len(ids))
            return None
        context_ = {
            **self.admin_site.each_context(request),
            "title": "Discard dead letters",
            "opts": self.opts,
            "form": form,
            "ids": ids,
            "preview": labelled(queryset.order_by("-finished_at")[:PREVIEW_ROWS]),
            "count": len(ids),
        }
        return TemplateResponse(
            request, "admin/eventbus/deadletter/discard_selected.html", context_
        )

    # -- actions on everything matching the filters --------------------------------------

    def matching_view(self, request: HttpRequest, action: str) -> HttpResponse:
        operation = OPERATOR_ACTIONS.get(action)
        if operation is None:
            raise Http404("unknown action")
        if not request.user.has_perm(operation.permission):
            raise PermissionDenied
        data = request.POST if request.method == "POST" else None
        filters_query = request.POST.get("filters", "") if data else request.GET.urlencode()
        try:
            changelist = self.scoped_changelist(request, filters_query)
        except IncorrectLookupParameters:
            self.message_user(request, "Those filters are not valid.", messages.ERROR)
            return HttpResponseRedirect(reverse(CHANGELIST))
        form = MatchingForm(
            data,
            action=operation,
            initial={"filters": filters_query, "as_of": timezone.now().isoformat()},
        )
        if form.is_valid():
            return self.run_matching(request, operation, changelist.queryset, form.cleaned_data)
        return self.matching_confirmation(request, operation, changelist, form, filters_query)

    def scoped_changelist(self, request: HttpRequest, filters_query: str) -> ChangeList:
        """The changelist for this query string: the DLQ narrowed exactly as the list shows it."""
        scoped = copy.copy(request)
        scoped.GET = QueryDict(filters_query)
        return self.get_changelist_instance(scoped)

    def run_matching(
        self,
        request: HttpRequest,
        operation: OperatorAction,
        matching: QuerySet[Delivery],
        data: dict[str, Any],
    ) -> HttpResponse:
        as_of: dt.datetime = data["as_of"]
        # Only what had died when the operator saw the count: later deaths were not confirmed.
        ids = list(selectors.ids_of(matching.filter(finished_at__lte=as_of)))
        enabled = 0
        if operation is REPROCESS and data.get("enable_disabled"):
            off = dlq_disabled.disabled_among(ids)
            enabled = dlq_disabled.enable_if_chosen(request, dlq_disabled.ENABLE, off)
        moved = operation.run(ids, actor=actor_of(request), reason=data["reason"])
        self.report(request, operation, moved, len(ids), enabled=enabled)
        return HttpResponseRedirect(f"{reverse(CHANGELIST)}?{data['filters']}")

    def matching_confirmation(
        self,
        request: HttpRequest,
        operation: OperatorAction,
        changelist: ChangeList,
        form: MatchingForm,
        filters_query: str,
    ) -> TemplateResponse:
        matching = changelist.queryset
        off = self.disabled_matching(operation, matching)
        context_ = {
            **self.admin_site.each_context(request),
            "title": f"{operation.name.capitalize()} all matching dead letters",
            "opts": self.opts,
            "operation": operation,
            "form": form,
            "count": matching.count(),  # the dead set only (delivery_dlq_idx), shown once
            "preview": labelled(matching[:PREVIEW_ROWS]),
            "criteria": describe_filters(changelist),
            "disabled": off,
            "may_enable": dlq_disabled.may_enable(request, off),
            "back_url": f"{reverse(CHANGELIST)}?{filters_query}",
        }
        return TemplateResponse(request, "admin/eventbus/deadletter/matching.html", context_)

    def disabled_matching(
        self, operation: OperatorAction, matching: QuerySet[Delivery]
    ) -> list[consumer_labels.ConsumerLabel]:
        """Disabled consumers among the matches (distinct consumers of the dead set)."""
        if operation is not REPROCESS:
            return []
        names = matching.order_by().values_list("consumer", flat=True).distinct()
        return consumer_labels.disabled(list(names))

    # -- messages --------------------------------------------------------------------------

    def report(
        self,
        request: HttpRequest,
        operation: OperatorAction,
        moved: int,
        asked: int,
        *,
        enabled: int = 0,
    ) -> None:
        text = f"{operation.done} {moved} of {asked} dead letter(s)."
        if enabled:
            text = f"Enabled {enabled} consumer(s). {text}"
        if moved < asked:
            text += f" {asked - moved} were no longer dead (already reprocessed or discarded)."
        if moved:
            text += f" {operation.left}"
        request_id = context.current().get("request_id")
        message: str | SafeString = text
        if request_id:
            acted = f"{reverse(DELIVERIES)}?{urlencode({'acted_in': request_id})}"
            message = format_html(
                '{} <a href="{}" id="acted-deliveries">See the {} deliveries</a>. Audit trail: {}',
                text,
                acted,
                operation.done.lower(),
                rendering.correlation_link(request_id),
            )
        self.message_user(request, message, messages.SUCCESS if moved else messages.WARNING)
