"""WhatsApp in the admin: WAHA sessions (status, last sync, keys write-only, "test send"),
messages with their status timeline, conversations with their 24 h window and messages."""

from __future__ import annotations

import datetime as dt
from contextvars import ContextVar
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from core.admin_tables import ReadOnlyAdmin, ReadOnlyMixin
from crm.conf import crm_settings
from crm.conversation_admin import LifecycleActions
from crm.models import Conversation, Message
from eventbus.store.models import EventLog
from whatsapp import client as waha
from whatsapp import services
from whatsapp.conf import whatsapp_settings
from whatsapp.models import WahaSession


class WahaSessionForm(forms.ModelForm):
    """The API key and the HMAC secret are write-only: empty keeps the stored one."""

    api_key = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="WAHA's X-Api-Key for this session. Empty: keep the stored one "
        "(or WAHA_API_KEY when none is stored).",
    )
    webhook_secret = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="The HMAC key WAHA signs this session's webhooks with (HMAC-SHA512). "
        "Empty: keep the stored one (or WAHA_WEBHOOK_SECRET).",
    )

    class Meta:
        model = WahaSession
        fields = ["organization", "name", "base_url", "is_default"]

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        organization = cleaned.get("organization")
        if cleaned.get("is_default") and organization is not None:
            other = (
                WahaSession.objects.filter(organization=organization, is_default=True)
                .exclude(pk=self.instance.pk)
                .first()
            )
            if other is not None:
                self.add_error(
                    "is_default",
                    f"{organization} already sends through its default session "
                    f"{other.name!r}: untick “default” here, or untick it there first.",
                )
        return cleaned

    def save(self, commit: bool = True) -> WahaSession:
        session: WahaSession = super().save(commit=False)
        if self.cleaned_data.get("api_key"):
            session.api_key = self.cleaned_data["api_key"]
        if self.cleaned_data.get("webhook_secret"):
            session.webhook_secret = self.cleaned_data["webhook_secret"]
        if commit:
            session.save()
        return session


# The request's own origin ("https://crm.example.com/"), while a session's page is rendered:
# the webhook URL's base when PUBLIC_BASE_URL is not set.
_origin: ContextVar[str] = ContextVar("waha_admin_origin", default="")


def webhook_url_for(name: str, origin: str = "") -> str:
    """The absolute URL WAHA must post this session's webhooks to: PUBLIC_BASE_URL's (the
    address the WAHA host reaches us by), else the admin request's origin."""
    base = (whatsapp_settings.PUBLIC_BASE_URL or origin).rstrip("/")
    return f"{base}{reverse('waha-webhook', args=[name])}"


@admin.register(WahaSession)
class WahaSessionAdmin(admin.ModelAdmin):
    form = WahaSessionForm
    list_display = [
        "name",
        "organization",
        "status_badge",
        "status_changed_at",
        "last_sync_at",
        "sync_error",
        "is_default",
    ]
    list_filter = ["status", "organization"]
    search_fields = ["name"]
    readonly_fields = [
        "status",
        "status_changed_at",
        "last_sync_at",
        "last_sync_error",
        "paused_until",
        "alerted_at",
        "keys",
        "webhook_url",
        "created_at",
    ]
    actions = ["test_send"]

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj: WahaSession) -> str:
        colour = {"WORKING": "#2e7d32", "FAILED": "#c62828", "SCAN_QR_CODE": "#ef6c00"}.get(
            obj.status, "#555"
        )
        return format_html('<strong style="color:{}">{}</strong>', colour, obj.status)

    @admin.display(description="last sync error")
    def sync_error(self, obj: WahaSession) -> str:
        return (
            (obj.last_sync_error[:80] + "…")
            if len(obj.last_sync_error) > 80
            else obj.last_sync_error
        )

    @admin.display(description="keys")
    def keys(self, obj: WahaSession) -> str:
        api = (
            "stored (encrypted)"
            if obj.api_key_encrypted
            else "WAHA_API_KEY"
            if whatsapp_settings.API_KEY
            else "none"
        )
        hmac = (
            "stored (encrypted)"
            if obj.webhook_secret_encrypted
            else (
                "WAHA_WEBHOOK_SECRET"
                if whatsapp_settings.WEBHOOK_SECRET
                else "none: webhooks refused"
            )
        )
        return f"API key: {api}; HMAC secret: {hmac}"

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        token = _origin.set(request.build_absolute_uri("/"))
        try:
            response = super().changeform_view(request, object_id, form_url, extra_context)
            render = getattr(response, "render", None)
            if render is not None:  # a TemplateResponse: rendered while the origin is known
                render()
            return response
        finally:
            _origin.reset(token)

    @admin.display(description="webhook URL for WAHA")
    def webhook_url(self, obj: WahaSession) -> str:
        if not obj.name:
            return "-"
        return format_html(
            "<code>{}</code><br>events: message, message.ack, session.status; HMAC: SHA512 "
            "with this session's secret",
            webhook_url_for(obj.name, _origin.get()),
        )

    @admin.action(description="Test send: a text to the session's own number")
    def test_send(self, request: HttpRequest, queryset: QuerySet[WahaSession]) -> None:
        for session in queryset:
            try:
                waha_id = services.test_send(session)
            except waha.WahaError as exc:
                self.message_user(request, f"{session.name}: {exc}", messages.ERROR)
            else:
                self.message_user(request, f"{session.name}: sent ({waha_id})", messages.SUCCESS)


STEPS = (
    ("created", "created_at"),
    ("sent", "sent_at"),
    ("delivered", "delivered_at"),
    ("read", "read_at"),
)


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ["short_id", "direction", "status", "sender", "conversation_link", "created_at"]
    list_filter = ["status", "direction"]
    list_select_related = ["conversation"]
    ordering = ["-created_at"]
    fields = (
        "id",
        "organization",
        "conversation",
        "direction",
        "sender",
        "status",
        "is_template",
        "body",
        "media_urls",
        "external_id",
        "attempts",
        "error_code",
        "error_message",
        "timeline",
    )
    readonly_fields = fields

    @admin.display(description="id")
    def short_id(self, obj: Message) -> str:
        return str(obj.pk)[:8]

    @admin.display(description="conversation")
    def conversation_link(self, obj: Message) -> str:
        return format_html(
            '<a href="../conversation/{}/change/">{}</a>',
            obj.conversation_id,
            str(obj.conversation_id)[:8],
        )

    @admin.display(description="status timeline")
    def timeline(self, obj: Message) -> str:
        """The message's dates, then every event about it (queued, sent, failed, delivered...)."""
        rows: list[tuple[dt.datetime, str]] = [
            (getattr(obj, field), label) for label, field in STEPS if getattr(obj, field)
        ]
        events = EventLog.objects.filter(
            organization_id=obj.organization_id, entity_kind="message", entity_id=obj.pk
        ).order_by("created_at")[:50]
        rows += [(e.created_at, f"event {e.event_type}") for e in events]
        rows.sort(key=lambda row: row[0])
        return format_html(
            "<ol style='margin:0;padding-left:1.2em'>{}</ol>",
            format_html_join(
                "",
                "<li><code>{}</code> {}</li>",
                (
                    (timezone.localtime(when).strftime("%Y-%m-%d %H:%M:%S"), what)
                    for when, what in rows
                ),
            ),
        )


class MessageInline(ReadOnlyMixin, admin.TabularInline):
    model = Message
    fields = ("created_at", "direction", "status", "sender", "body")
    readonly_fields = fields
    ordering = ["-created_at"]
    extra = 0
    max_num = 0
    show_change_link = True

    def get_queryset(self, request: HttpRequest) -> QuerySet[Message]:
        return super().get_queryset(request).order_by("-created_at")


@admin.register(Conversation)
class ConversationAdmin(LifecycleActions, ReadOnlyAdmin):
    """Conversations by status and assignee; the lifecycle actions (crm.conversation_admin)."""

    list_display = [
        "short_id",
        "contact",
        "channel",
        "status",
        "assigned_to",
        "window",
        "bot_active",
        "created_at",
    ]
    list_filter = ["status", "assigned_to", "channel", "bot_active"]
    list_select_related = ["contact", "assigned_to"]
    ordering = ["-created_at"]
    fields = (
        "id",
        "organization",
        "contact",
        "channel",
        "external_chat_id",
        "status",
        "assigned_to",
        "assigned_at",
        "resolved_at",
        "resolved_by",
        "bot_active",
        "last_inbound_at",
        "window",
    )
    readonly_fields = fields
    inlines = [MessageInline]

    @admin.display(description="id")
    def short_id(self, obj: Conversation) -> str:
        return str(obj.pk)[:8]

    @admin.display(description="24 h window", ordering="last_inbound_at")
    def window(self, obj: Conversation) -> str:
        if obj.last_inbound_at is None:
            return "closed (no inbound message)"
        closes = obj.last_inbound_at + dt.timedelta(hours=crm_settings.WINDOW_HOURS)
        state = "open until" if closes > timezone.now() else "closed at"
        return f"{state} {timezone.localtime(closes).strftime('%Y-%m-%d %H:%M')}"
