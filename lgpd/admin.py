"""Admin: data requests are created through the service (which emits and audits) and are
read-only afterwards; their timestamps are the proof of the timeline."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from lgpd import services
from lgpd.models import DataRequest

TIMELINE = (
    "status",
    "received_at",
    "export_generated_at",
    "export_expires_at",
    "export_sha256",
    "export_deleted_at",
    "redacted_at",
    "sla_warned_at",
    "sla_escalated_at",
    "completed_at",
)


class DataRequestForm(forms.ModelForm):
    class Meta:
        model = DataRequest
        fields = ["contact", "kind"]


@admin.register(DataRequest)
class DataRequestAdmin(admin.ModelAdmin):
    form = DataRequestForm
    list_display = ("id", "kind", "status", "contact_id", "received_at", "completed_at")
    list_filter = ("kind", "status")
    search_fields = ("=id", "=contact__id")
    raw_id_fields = ("contact",)
    ordering = ("-received_at",)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ["contact", "kind"]
        return ["id", "organization", "contact", "kind", "channel", "requested_by", *TIMELINE]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [] if obj is None else self.get_fields(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: DataRequest, form: Any, change: bool) -> None:
        if change:
            return
        created = services.data_request_create(
            organization_id=obj.contact.organization_id,
            contact_id=obj.contact.pk,
            kind=obj.kind,
            channel=DataRequest.Channel.ADMIN,
            actor=f"admin:{request.user.get_username()}",
        )
        obj.pk = created.pk
        obj._state.adding = False
