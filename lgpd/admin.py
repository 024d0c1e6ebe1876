"""Admin: data requests are created through the service (which emits and audits) and are
read-only afterwards; their timestamps are the proof of the timeline. Staff with the view
permission download an export from its page (audited); an action e-mails the data subject a new
single-use link."""

from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, QueryDict
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core import audit
from lgpd import exports, services, sla
from lgpd.models import DataRequest
from lgpd.views import serve_export

NOTHING_TO_SAVE = {
    "show_save": False,
    "show_save_and_continue": False,
    "show_save_and_add_another": False,
}
TIMELINE = (
    "status",
    "received_at",
    "export_generated_at",
    "export_expires_at",
    "export_sha256",
    "export_link_sent_at",
    "export_link_used_at",
    "export_deleted_at",
    "export_deleted_reason",
    "redacted_at",
    "sla_warned_at",
    "sla_escalated_at",
    "completed_at",
)


def _actor(request: HttpRequest) -> str:
    return audit.user_actor(request)


class DataRequestForm(forms.ModelForm):
    class Meta:
        model = DataRequest
        fields = ["contact", "kind"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The contact search box looks its value up to show it again: a value that is no
        # contact id at all would fail there (a 500) instead of as this form's error.
        if isinstance(self.data, QueryDict) and _not_an_id(self.data.get("contact", "")):
            data = self.data.copy()
            data["contact"] = ""
            self.data = data


def _not_an_id(value: str) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return bool(value)
    return False


@admin.register(DataRequest)
class DataRequestAdmin(admin.ModelAdmin):
    form = DataRequestForm
    list_display = ("short_id", "kind", "status", "contact", "received_at", "due", "sla_left")
    list_filter = ("kind", "status")
    search_fields = ("=id", "=contact__id")
    list_select_related = ("contact",)
    autocomplete_fields = ("contact",)  # search by name, phone or e-mail (crm.admin)

    class Media:
        css = {"all": ("lgpd/admin.css",)}

    ordering = ("-received_at",)
    actions = ["send_new_link"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ["contact", "kind"]
        fields = ["id", "organization", "contact", "kind", "channel", "requested_by"]
        return [*fields, "due", "sla_left", "export_download", *TIMELINE]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [] if obj is None else self.get_fields(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        # Every field is read-only after creation: nothing to save, so no Save buttons.
        extra = {**NOTHING_TO_SAVE, **(extra_context or {})}
        return super().change_view(request, object_id, form_url, extra)

    @admin.display(description="id")
    def short_id(self, obj: DataRequest) -> str:
        return str(obj.pk)[:8]

    @admin.display(description="due", ordering="received_at")
    def due(self, obj: DataRequest) -> str:
        return sla.exact(sla.due_at(obj))

    @admin.display(description="SLA")
    def sla_left(self, obj: DataRequest) -> SafeString:
        return sla.countdown_html(obj)

    def get_urls(self) -> list[Any]:
        download = self.admin_site.admin_view(self.export_view)
        return [
            path("<uuid:object_id>/export/", download, name="lgpd_datarequest_export"),
            *super().get_urls(),
        ]

    @admin.display(description="export")
    def export_download(self, obj: DataRequest) -> str:
        try:
            exports.check_available(obj)
        except exports.Unavailable as exc:
            return str(exc)
        url = reverse("admin:lgpd_datarequest_export", args=[obj.pk])
        return format_html('<a class="button" href="{}">Download the export</a>', url)

    def export_view(self, request: HttpRequest, object_id: Any) -> HttpResponseBase:
        """The export file, for staff who may view the request (audited as an admin download)."""
        found = DataRequest.objects.filter(pk=object_id).first()
        if found is None or not self.has_view_permission(request, found):
            raise Http404("no such data request")
        try:
            exports.check_available(found)
        except exports.Unavailable as exc:
            raise Http404(str(exc)) from None
        return serve_export(found, actor=_actor(request), channel=services.DownloadChannel.ADMIN)

    @admin.action(description="E-mail the data subject a new download link", permissions=["change"])
    def send_new_link(self, request: HttpRequest, queryset: QuerySet[DataRequest]) -> None:
        for data_request in queryset:
            try:
                sent = services.export_link_send(request_id=data_request.pk, actor=_actor(request))
            except exports.Unavailable as exc:
                self.message_user(request, f"{data_request.pk}: {exc}", messages.WARNING)
                continue
            if sent:
                self.message_user(request, f"{data_request.pk}: a new link was e-mailed.")
            else:
                self.message_user(
                    request,
                    f"{data_request.pk}: the contact has no e-mail address.",
                    messages.WARNING,
                )

    def save_model(self, request: HttpRequest, obj: DataRequest, form: Any, change: bool) -> None:
        if change:
            return
        created = services.data_request_create(
            organization_id=obj.contact.organization_id,
            contact_id=obj.contact.pk,
            kind=obj.kind,
            channel=DataRequest.Channel.ADMIN,
            actor=_actor(request),
        )
        obj.pk = created.pk
        obj._state.adding = False
