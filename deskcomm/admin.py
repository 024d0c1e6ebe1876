"""Admin screens for API keys: create (the key is shown once), list, revoke (with confirmation).

Keys are never deleted (the audit trail refers to them) and never edited beyond their name:
scopes change by issuing a new key and revoking the old one.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.cache import add_never_cache_headers

from deskcomm import scopes, services
from deskcomm.models import ApiKey

ISSUED_TEMPLATE = "admin/deskcomm/apikey/issued.html"
REVOKE_TEMPLATE = "admin/deskcomm/apikey/revoke_confirmation.html"


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
            actor=f"user:{request.user.get_username()}",
        )
        for field in ApiKey._meta.concrete_fields:
            setattr(obj, field.attname, getattr(key, field.attname))
        obj._state.adding = False
        obj.issued_key = full  # type: ignore[attr-defined]

    def response_add(self, request: HttpRequest, obj: ApiKey, *args: Any) -> HttpResponse:
        """Show the full key once, on a page that must not be cached; it is stored nowhere."""
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "API key created",
            "api_key": obj,
            "issued_key": obj.issued_key,  # type: ignore[attr-defined]
        }
        response = TemplateResponse(request, ISSUED_TEMPLATE, context)
        add_never_cache_headers(response)
        return response

    @admin.action(description="Revoke selected API keys", permissions=["change"])
    def revoke_selected(
        self, request: HttpRequest, queryset: QuerySet[ApiKey]
    ) -> HttpResponse | None:
        form = RevokeForm(request.POST if "confirm" in request.POST else None)
        if not form.is_valid():
            return self._confirm_revoke(request, queryset, form)
        actor = f"user:{request.user.get_username()}"
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
