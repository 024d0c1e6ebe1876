"""Admin screens: subscriptions (secret shown once, rotate, enable/disable, test ping) and webhook
deliveries (read-only, attempts inline, resend). Actions call services; nothing else writes."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core import audit, shown_once
from core.admin_tables import ReplicaListAdmin
from eventbus.admin import rendering
from webhooks import services
from webhooks.conf import CONSUMER_PREFIX
from webhooks.models import Attempt, Subscription, WebhookDelivery


def _actor(request: HttpRequest) -> str:
    return audit.user_actor(request)


class EventTypesField(forms.CharField):
    """Comma-separated event types in the form; a list in the model."""

    def prepare_value(self, value: Any) -> Any:
        return ", ".join(value) if isinstance(value, list) else value

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        text = super().to_python(value) or ""
        return [part.strip() for part in text.split(",") if part.strip()]


class SubscriptionForm(forms.ModelForm):
    # Checked by webhooks.ssrf.validate_url (the sending client's parser, forbidden hosts).
    url = forms.CharField(max_length=services.ssrf.MAX_URL_LENGTH)
    event_types = EventTypesField(
        help_text="Comma-separated: exact types (lead.created), entity wildcards (lead.*) or *."
    )

    class Meta:
        model = Subscription
        fields = ["organization", "url", "description", "event_types"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        try:
            if "url" in data:
                data["url"] = services.ssrf.validate_url(data["url"])
            if "event_types" in data:
                data["event_types"] = services.clean_event_types(data["event_types"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        return data


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    form = SubscriptionForm
    # The description is the name the console gives the subscription's deliveries (DLQ, status).
    list_display = [
        "url",
        "description",
        "organization",
        "enabled",
        "consecutive_failures",
        "types",
        "created_at",
    ]
    list_filter = ["enabled", "organization"]
    search_fields = ["url", "description"]
    readonly_fields = [
        "enabled",
        "consecutive_failures",
        "disabled_at",
        "disabled_reason",
        "previous_secret_expires_at",
        "created_at",
        "updated_at",
    ]
    actions = ["rotate_secret", "enable", "disable", "pause", "resume", "send_test_ping"]

    @admin.display(description="event types")
    def types(self, obj: Subscription) -> str:
        return ", ".join(obj.event_types)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        fields = list(self.readonly_fields)
        return [*fields, "organization"] if obj is not None else []

    def save_model(self, request: HttpRequest, obj: Subscription, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if change:
            services.subscription_update(
                subscription=obj,
                actor=_actor(request),
                url=data["url"],
                event_types=data["event_types"],
                description=data.get("description", ""),
            )
            return
        created, secret = services.subscription_create(
            organization=data["organization"],
            url=data["url"],
            event_types=data["event_types"],
            description=data.get("description", ""),
            actor=_actor(request),
        )
        obj.pk = created.pk
        request._webhook_secrets = [(created, secret)]  # type: ignore[attr-defined]

    def delete_model(self, request: HttpRequest, obj: Subscription) -> None:
        services.subscription_delete(subscription=obj, actor=_actor(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Subscription]) -> None:
        for subscription in queryset:
            services.subscription_delete(subscription=subscription, actor=_actor(request))

    def response_add(self, request: HttpRequest, obj: Subscription, *args: Any) -> HttpResponse:
        """Redirect to a page that shows the new secret once (a refresh creates nothing)."""
        return _secrets_page(request, getattr(request, "_webhook_secrets", []), created=True)

    @admin.action(description="Rotate secret (previous one valid 24 h)", permissions=["change"])
    def rotate_secret(self, request: HttpRequest, queryset: QuerySet[Subscription]) -> Any:
        rotated = [
            (s, services.subscription_rotate_secret(subscription=s, actor=_actor(request)))
            for s in queryset
        ]
        return _secrets_page(request, rotated, created=False)

    @admin.action(description="Enable (resets the failure counter)", permissions=["change"])
    def enable(self, request: HttpRequest, queryset: QuerySet[Subscription]) -> None:
        for subscription in queryset:
            services.subscription_enable(subscription=subscription, actor=_actor(request))
        self.message_user(request, f"{len(queryset)} subscription(s) enabled.")

    @admin.action(description="Disable", permissions=["change"])
    def disable(self, request: HttpRequest, queryset: QuerySet[Subscription]) -> None:
        count = sum(
            services.subscription_disable(
                subscription_id=s.id, actor=_actor(request), reason="disabled in the admin"
            )
            for s in queryset
        )
        self.message_user(request, f"{count} subscription(s) disabled.")

    @admin.action(
        description="Pause deliveries (kept pending, nothing charged)", permissions=["change"]
    )
    def pause(self, request: HttpRequest, queryset: QuerySet[Subscription]) -> None:
        count = sum(
            services.subscription_pause(
                subscription=s, actor=_actor(request), reason="paused in the admin"
            )
            for s in queryset
        )
        self.message_user(request, f"{count} subscription(s) paused (see Operations: Consumers).")

    @admin.action(description="Resume paused deliveries", permissions=["change"])
    def resume(self, request: HttpRequest, queryset: QuerySet[Subscription]) -> None:
        count = sum(
            services.subscription_resume(subscription=s, actor=_actor(request)) for s in queryset
        )
        self.message_user(request, f"{count} subscription(s) resumed.")

    @admin.action(description="Send a test ping", permissions=["change"])
    def send_test_ping(self, request: HttpRequest, queryset: QuerySet[Subscription]) -> None:
        for subscription in queryset:
            try:
                services.subscription_ping(subscription=subscription, actor=_actor(request))
            except services.ActionRefused as exc:
                self.message_user(request, f"{subscription.url}: {exc}", messages.ERROR)
            else:
                self.message_user(request, f"Ping queued for {subscription.url}.")


def _secrets_page(
    request: HttpRequest, secrets: list[tuple[Subscription, str]], *, created: bool
) -> HttpResponse:
    grace = "The previous secret keeps signing (both signatures are sent) for 24 hours."
    page = shown_once.ShownOnce(
        title="Webhook secret" if created else "Rotated webhook secrets",
        intro=["Give the receiver its signing secret (Standard Webhooks format)."],
        items=[(subscription.url, secret) for subscription, secret in secrets],
        notes=[] if created else [grace],
        back_url=reverse("admin:webhooks_subscription_changelist"),
        back_label="Back to the subscriptions",
    )
    return shown_once.stash(request, page)


ATTEMPT_FIELDS = ("attempt", "created_at", "status_code", "duration_ms", "error_class", "excerpt")
DELIVERY_FIELDS = (
    "event",
    "subscription",
    "status",
    "attempts",
    "max_attempts",
    "next_attempt_at",
    "last_error",
    "created_at",
    "finished_at",
)


class AttemptInline(admin.TabularInline):
    model = Attempt
    fields = ATTEMPT_FIELDS
    readonly_fields = ATTEMPT_FIELDS
    extra = 0
    can_delete = False
    ordering = ["created_at", "id"]

    @admin.display(description="response excerpt")
    def excerpt(self, obj: Attempt) -> str:
        return format_html("<code>{}</code>", obj.response_excerpt[:300] or obj.error[:300])

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class WebhookDeliveryChangeList(ChangeList):
    """Each shown delivery carries its subscription's label (one query per page)."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        self.result_list = rendering.labelled(self.result_list)


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReplicaListAdmin):
    list_display = ["id", "event_type", "subscription", "status", "attempts", "next_attempt_at"]
    list_filter = ["status"]
    list_select_related = ["event"]
    search_fields = ["=event__id", "consumer"]
    show_full_result_count = False  # no COUNT(*) over the delivery table
    inlines = [AttemptInline]
    actions = ["resend"]
    fields = DELIVERY_FIELDS
    readonly_fields = DELIVERY_FIELDS

    def get_queryset(self, request: HttpRequest) -> QuerySet[WebhookDelivery]:
        return super().get_queryset(request).filter(consumer__startswith=CONSUMER_PREFIX)

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return WebhookDeliveryChangeList

    @admin.display(description="event type")
    def event_type(self, obj: WebhookDelivery) -> str:
        return obj.event.event_type

    @admin.display(description="subscription")
    def subscription(self, obj: WebhookDelivery) -> SafeString | str:
        """Its description and host, linked to it (eventbus.store.consumer_labels), not its uuid."""
        return rendering.consumer_of(obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_resend_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("eventbus.change_delivery")

    @admin.action(description="Resend (same delivery id)", permissions=["resend"])
    def resend(self, request: HttpRequest, queryset: QuerySet[WebhookDelivery]) -> None:
        done, refused = 0, []
        for delivery in queryset:
            try:
                services.delivery_resend(delivery=delivery, actor=_actor(request))
                done += 1
            except services.ResendRefused as exc:
                refused.append(f"{delivery.pk}: {exc}")
        self.message_user(request, f"{done} delivery(ies) queued for resending.")
        for message in refused:
            self.message_user(request, message, messages.WARNING)
