"""Admin for the core records: organizations (with links into the bus) and the audit log."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from deskcomm.admin_tables import ReadOnlyAdmin
from deskcomm.models import AuditLog, Organization


def _filtered(viewname: str, **params: object) -> str:
    return f"{reverse(viewname)}?{urlencode({k: str(v) for k, v in params.items()})}"


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "created_at", "bus_links")
    search_fields = ("name", "slug")
    readonly_fields = ("id", "created_at", "bus_links")

    @admin.display(description="event bus")
    def bus_links(self, obj: Organization) -> SafeString:
        return format_html(
            '<a href="{}">events</a> · <a href="{}">dead letters</a> · <a href="{}">audit</a>',
            _filtered("admin:eventbus_eventlog_changelist", organization=obj.pk),
            _filtered("admin:eventbus_deadletter_changelist", organization=obj.pk),
            _filtered("admin:deskcomm_auditlog_changelist", organization=obj.pk),
        )


class AuditOrganizationFilter(admin.SimpleListFilter):
    title = "organization"
    parameter_name = "organization"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            (str(pk), name) for pk, name in Organization.objects.values_list("pk", "name")[:200]
        ]

    def queryset(self, request: HttpRequest, queryset: Any) -> Any:
        value = self.value()
        return queryset.filter(organization_id=value) if value else queryset


@admin.register(AuditLog)
class AuditLogAdmin(ReadOnlyAdmin):
    """Append-only: operators read it; only services write it."""

    list_display = (
        "created_at",
        "actor",
        "action",
        "target",
        "short_reason",
        "organization",
        "request",
    )
    list_filter = ("action", "target_type", AuditOrganizationFilter, "created_at")
    search_fields = ("request_id",)  # exact matching: see get_search_results
    search_help_text = "Exact request id, target id or actor (user:name)."
    ordering = ("-created_at",)  # audit_created_idx
    list_select_related = ("organization",)
    fields = (
        "created_at",
        "actor",
        "action",
        "target",
        "reason",
        "organization",
        "request",
        "details",
    )
    readonly_fields = fields

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[AuditLog], search_term: str
    ) -> tuple[QuerySet[AuditLog], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        # request_id: audit_request_idx; the others are rare searches on a modest table.
        return queryset.filter(Q(request_id=term) | Q(target_id=term) | Q(actor=term)), False

    @admin.display(description="target")
    def target(self, obj: AuditLog) -> SafeString | str:
        if obj.target_type == "eventbus.delivery" and obj.target_id.isdigit():
            url = reverse("admin:eventbus_delivery_change", args=[obj.target_id])
            return format_html('<a href="{}">delivery {}</a>', url, obj.target_id)
        return f"{obj.target_type}:{obj.target_id}"

    @admin.display(description="reason")
    def short_reason(self, obj: AuditLog) -> str:
        return obj.reason if len(obj.reason) <= 80 else obj.reason[:79] + "…"

    @admin.display(description="request id")
    def request(self, obj: AuditLog) -> SafeString | str:
        if not obj.request_id:
            return "-"
        url = _filtered("eventbus_ops:correlation", request_id=obj.request_id)
        return format_html('<a href="{}">{}</a>', url, obj.request_id)
