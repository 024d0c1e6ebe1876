"""Admin for the core records: organizations (with links into the bus), the audit log and API
keys (created with the key shown once, revoked with confirmation; never deleted or re-scoped).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from core import admin_links, audit, scopes, services, shown_once
from core.admin_links import Link
from core.admin_scope import OrganizationListFilter, sees_all
from core.admin_tables import ReadOnlyAdmin
from core.flags import FLAGS
from core.models import ApiKey, AuditLog, Organization, StaffOrganization

REVOKE_TEMPLATE = "admin/core/apikey/revoke_confirmation.html"


def scope_choices() -> list[tuple[str, str]]:
    return [(name, f"{name}: {description}") for name, description in scopes.declared().items()]


class ApiKeyCreationForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(
        choices=scope_choices, widget=forms.CheckboxSelectMultiple, required=True
    )

    class Meta:
        model = ApiKey
        fields = ["organization", "name"]


class RevokeForm(forms.Form):
    reason = forms.CharField(required=False, max_length=1000, label="Reason (kept in the audit)")


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["name", "organization", "display_prefix", "scope_list", "created_at"]
    list_display += ["last_used_at", "revoked_at"]
    list_filter = ["organization", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "prefix"]
    list_select_related = ["organization"]
    actions = ["revoke_selected"]
    change_fields = ["name", "organization", "display_prefix", "scopes", "created_by"]
    change_fields += ["created_at", "last_used_at", "revoked_at"]

    @admin.display(description="prefix")
    def display_prefix(self, obj: ApiKey) -> str:
        return obj.display_prefix

    @admin.display(description="scopes")
    def scope_list(self, obj: ApiKey) -> str:
        return ", ".join(obj.scopes)

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kw: Any
    ) -> Any:
        if obj is None:
            kw["form"] = ApiKeyCreationForm
        return super().get_form(request, obj, change=change, **kw)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.change_fields if obj else ["organization", "name", "scopes"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return self.change_fields[1:] if obj else []

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if change:
            obj.save(update_fields=["name"])
            return
        key, full = services.api_key_create(
            organization=form.cleaned_data["organization"],
            name=form.cleaned_data["name"],
            scopes_granted=form.cleaned_data["scopes"],
            actor=audit.user_actor(request),
        )
        for field in ApiKey._meta.concrete_fields:
            setattr(obj, field.attname, getattr(key, field.attname))
        obj._state.adding = False
        obj.issued_key = full  # type: ignore[attr-defined]

    def response_add(self, request: HttpRequest, obj: ApiKey, *args: Any) -> HttpResponse:
        """Redirect to a page that shows the full key once (a refresh creates nothing)."""
        page = shown_once.ShownOnce(
            title="API key created",
            intro=[
                f"The API key {obj.name!r} ({obj.display_prefix}) for {obj.organization} was "
                f"created with the scopes {', '.join(obj.scopes)}."
            ],
            items=[("API key", obj.issued_key)],  # type: ignore[attr-defined]
            notes=["Use it as Authorization: Bearer <key>."],
            back_url=reverse("admin:core_apikey_changelist"),
        )
        return shown_once.stash(request, page)

    @admin.action(description="Revoke selected API keys", permissions=["change"])
    def revoke_selected(
        self, request: HttpRequest, queryset: QuerySet[ApiKey]
    ) -> HttpResponse | None:
        form = RevokeForm(request.POST if "confirm" in request.POST else None)
        if not form.is_valid():
            return self._confirm_revoke(request, queryset, form)
        actor = audit.user_actor(request)
        reason = form.cleaned_data["reason"]
        revoked = sum(
            services.api_key_revoke(api_key=key, actor=actor, reason=reason) for key in queryset
        )
        self.message_user(request, f"Revoked {revoked} API key(s).", messages.SUCCESS)
        return None

    def _confirm_revoke(
        self, request: HttpRequest, queryset: QuerySet[ApiKey], form: RevokeForm
    ) -> HttpResponse:
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Revoke API keys?",
            "keys": queryset,
            "form": form,
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, REVOKE_TEMPLATE, context)


def _filtered(viewname: str, **params: object) -> str:
    return f"{reverse(viewname)}?{urlencode({k: str(v) for k, v in params.items()})}"


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "created_at", "bus_links")
    search_fields = ("name", "slug")
    readonly_fields = ("id", "created_at", "bus_links", "flags_in_effect")
    fields = ("id", "name", "slug", "feature_flags", "flags_in_effect", "created_at", "bus_links")

    @admin.display(description="flags in effect")
    def flags_in_effect(self, obj: Organization) -> SafeString:
        """Every declared flag (core.flags): its value for this organization and what it does."""
        stored = obj.feature_flags if isinstance(obj.feature_flags, dict) else {}
        return format_html_join(
            "",
            "<div><code>{}</code>: <strong>{}</strong>{} — {}</div>",
            (
                (
                    name,
                    "on" if stored.get(name, flag.default) else "off",
                    "" if name in stored else " (default)",
                    flag.description,
                )
                for name, flag in FLAGS.items()
            ),
        )

    @admin.display(description="event bus")
    def bus_links(self, obj: Organization) -> SafeString:
        """The pages the apps registered for an organization (core.admin_links), then its audit."""
        links = [*admin_links.organization_links(), Link("audit", "admin:core_auditlog_changelist")]
        return format_html_join(
            " · ",
            '<a href="{}">{}</a>',
            ((_filtered(link.viewname, organization=obj.pk), link.label) for link in links),
        )


def audit_target(entry: AuditLog) -> SafeString | str:
    """What an audit entry acted on: a link to it when its app registered one
    (core.admin_links), else `type:id`."""
    link = admin_links.audit_target_link(entry.target_type)
    if link is not None and entry.target_id.isdigit():
        url = reverse(link.viewname, args=[entry.target_id])
        return format_html('<a href="{}">{} {}</a>', url, link.label, entry.target_id)
    return f"{entry.target_type}:{entry.target_id}"


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
    list_filter = ("action", "target_type", OrganizationListFilter, "created_at")
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
        return audit_target(obj)

    @admin.display(description="reason")
    def short_reason(self, obj: AuditLog) -> str:
        return obj.reason if len(obj.reason) <= 80 else obj.reason[:79] + "…"

    @admin.display(description="request id")
    def request(self, obj: AuditLog) -> SafeString | str:
        if not obj.request_id:
            return "-"
        view = admin_links.request_view()
        if view is None:
            return obj.request_id
        url = _filtered(view, request_id=obj.request_id)
        return format_html('<a href="{}">{}</a>', url, obj.request_id)


@admin.register(StaffOrganization)
class StaffOrganizationAdmin(admin.ModelAdmin):
    """Which organizations each staff user works in (core.admin_scope): managed by those who
    see every organization, never by the scoped staff themselves."""

    list_display = ("user", "organization", "created_at")
    list_filter = ("organization",)
    search_fields = ("user__username",)
    list_select_related = ("user", "organization")

    def has_module_permission(self, request: HttpRequest) -> bool:
        return sees_all(request.user) and super().has_module_permission(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return sees_all(request.user) and super().has_view_permission(request, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return sees_all(request.user) and super().has_add_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return sees_all(request.user) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return sees_all(request.user) and super().has_delete_permission(request, obj)
