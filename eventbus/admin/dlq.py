"""The DLQ screen: dead deliveries, their filters, Reprocess and Discard.

Both actions work on the checked rows (admin actions) and on everything matching the current
filters (`matching/<action>/`: a confirmation page that counts the matches, then re-applies the
same filters server-side on POST, limited to what had died when the page was shown). They are
gated by the proxy model's custom permissions and call `eventbus.services`, which moves the state
through `eventbus/claim.py` and writes the audit trail.
"""

from __future__ import annotations

import copy
import datetime as dt
from dataclasses import dataclass
from typing import Any

from django import forms
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
from core.admin_tables import ReadOnlyAdmin
from eventbus import services
from eventbus.admin import filters, rendering, selectors
from eventbus.admin.rendering import EventColumns, OrganizationColumn
from eventbus.models import DeadLetter, Delivery, EventLog

PREVIEW_ROWS = 20
CHANGELIST = "admin:eventbus_deadletter_changelist"


@dataclass(frozen=True)
class OperatorAction:
    name: str
    done: str  # past tense, for the result message
    permission: str
    needs_reason: bool

    def run(self, ids: list[int], *, actor: str, reason: str) -> int:
        if self.name == "discard":
            return services.deliveries_discard(delivery_ids=ids, actor=actor, reason=reason)
        return services.deliveries_reprocess(delivery_ids=ids, actor=actor, reason=reason)


REPROCESS = OperatorAction("reprocess", "Reprocessed", "eventbus.reprocess_deadletter", False)
DISCARD = OperatorAction("discard", "Discarded", "eventbus.discard_deadletter", True)
OPERATOR_ACTIONS = {a.name: a for a in (REPROCESS, DISCARD)}


class DiscardForm(forms.Form):
    reason = forms.CharField(
        max_length=1000,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text="Required. Kept in the audit log with your name and the time.",
    )


class MatchingForm(forms.Form):
    """POST of the "all matching" confirmation page."""

    filters = forms.CharField(required=False, max_length=4000, widget=forms.HiddenInput)
    as_of = forms.DateTimeField(widget=forms.HiddenInput)
    reason = forms.CharField(
        required=False, max_length=1000, widget=forms.Textarea(attrs={"rows": 3, "cols": 60})
    )

    def __init__(self, *args: Any, action: OperatorAction, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        reason = self.fields["reason"]
        reason.required = action.needs_reason
        reason.label = "Reason" if action.needs_reason else "Note (optional)"
        reason.help_text = "Kept in the audit log with your name and the time."


def actor_of(request: HttpRequest) -> str:
    return f"user:{request.user.get_username()}"


def describe_filters(changelist: ChangeList) -> list[tuple[str, str]]:
    """(title, chosen value) of each active filter, and the search term, for the operator."""
    described: list[tuple[str, str]] = []
    for spec in changelist.filter_specs:
        parameters = [p for p in spec.expected_parameters() if p]
        unfiltered = changelist.get_query_string(remove=parameters)
        described.extend(
            (str(spec.title), str(choice["display"]))
            for choice in spec.choices(changelist)
            if choice["selected"] and choice["query_string"] != unfiltered
        )
    if changelist.query:
        described.append(("search", changelist.query))
    return described


@admin.register(DeadLetter)
class DeadLetterAdmin(OrganizationColumn, EventColumns, ReadOnlyAdmin):
    list_display = (
        "died_at",
        "event_type",
        "consumer",
        "organization_name",
        "attempts_used",
        "error",
        "event_link",
    )
    list_filter = (
        filters.DlqEventTypeFilter,
        filters.DlqConsumerFilter,
        filters.OrganizationFilter,
        filters.ErrorClassFilter,
        filters.DlqEntityKindFilter,
        ("created_at", filters.CreatedFilter),
        ("finished_at", filters.DiedFilter),
    )
    # The box searches exactly (event id, entity id, request id): see get_search_results.
    search_fields = ("event__id",)
    search_help_text = "Exact event id, entity id or request id."
    ordering = ("-finished_at",)  # delivery_dlq_idx
    actions = ("reprocess_selected", "discard_selected")
    change_list_template = "admin/eventbus/deadletter/change_list.html"
    change_form_template = "admin/eventbus/deadletter/change_form.html"
    fieldsets = (
        (
            "Delivery",
            {
                "fields": (
                    "consumer",
                    "attempts_used",
                    "created_at",
                    "died_at",
                    "error_class",
                    "error_full",
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
        return selectors.dead_letters().select_related("organization")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Delivery], search_term: str
    ) -> tuple[QuerySet[Delivery], bool]:
        if not search_term.strip():
            return queryset, False
        return selectors.deliveries_matching(queryset, search_term), False

    def has_reprocess_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(REPROCESS.permission)

    def has_discard_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(DISCARD.permission)

    # -- columns and detail fields ---------------------------------------------------------

    @admin.display(description="died at", ordering="finished_at")
    def died_at(self, obj: Delivery) -> Any:
        return obj.finished_at

    @admin.display(description="event type")
    def event_type(self, obj: Delivery) -> str:
        return obj.event_type

    @admin.display(description="attempts")
    def attempts_used(self, obj: Delivery) -> str:
        return f"{obj.attempts} / {obj.max_attempts}"

    @admin.display(description="last error")
    def error(self, obj: Delivery) -> str:
        return rendering.short(obj.last_error)

    @admin.display(description="error")
    def error_full(self, obj: Delivery) -> SafeString:
        return rendering.pretty_text(obj.last_error)

    @admin.display(description="may have run before")
    def may_have_run(self, obj: Delivery) -> str:
        return rendering.redelivery(obj)

    @admin.display(description="event")
    def event_link(self, obj: Delivery) -> SafeString:
        return rendering.admin_link("admin:eventbus_eventlog_change", obj.event_id, "open event")

    def event_of(self, obj: Delivery) -> EventLog:
        return obj.event

    # -- pages -------------------------------------------------------------------------------

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
        return super().changelist_view(request, extra)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        pk = int(object_id) if object_id.isdigit() else 0
        extra = {
            "attempts": selectors.delivery_attempts(pk),
            "can_reprocess": self.has_reprocess_permission(request),
            "can_discard": self.has_discard_permission(request),
            **(extra_context or {}),
        }
        return super().change_view(request, object_id, form_url, extra)

    def get_urls(self) -> list[URLPattern]:
        matching = path(
            "matching/<str:action>/",
            self.admin_site.admin_view(self.matching_view),
            name="eventbus_deadletter_matching",
        )
        return [matching, *super().get_urls()]

    # -- actions on the checked rows -----------------------------------------------------

    @admin.action(description="Reprocess selected dead letters", permissions=["reprocess"])
    def reprocess_selected(self, request: HttpRequest, queryset: QuerySet[Delivery]) -> None:
        ids = list(selectors.ids_of(queryset))
        moved = REPROCESS.run(ids, actor=actor_of(request), reason="")
        self.report(request, REPROCESS, moved, len(ids))

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
            "preview": queryset.order_by("-finished_at")[:PREVIEW_ROWS],
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
        moved = operation.run(ids, actor=actor_of(request), reason=data["reason"])
        self.report(request, operation, moved, len(ids))
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
        context_ = {
            **self.admin_site.each_context(request),
            "title": f"{operation.name.capitalize()} all matching dead letters",
            "opts": self.opts,
            "operation": operation,
            "form": form,
            "count": matching.count(),  # the dead set only (delivery_dlq_idx), shown once
            "preview": matching[:PREVIEW_ROWS],
            "criteria": describe_filters(changelist),
            "back_url": f"{reverse(CHANGELIST)}?{filters_query}",
        }
        return TemplateResponse(request, "admin/eventbus/deadletter/matching.html", context_)

    # -- messages --------------------------------------------------------------------------

    def report(
        self, request: HttpRequest, operation: OperatorAction, moved: int, asked: int
    ) -> None:
        text = f"{operation.done} {moved} of {asked} dead letter(s)."
        if moved < asked:
            text += f" {asked - moved} were no longer dead (already reprocessed or discarded)."
        request_id = context.current().get("request_id")
        message: str | SafeString = text
        if request_id:
            message = format_html(
                "{} Audit trail: {}", text, rendering.correlation_link(request_id)
            )
        self.message_user(request, message, messages.SUCCESS if moved else messages.WARNING)
