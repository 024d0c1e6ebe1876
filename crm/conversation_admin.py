"""Conversations in the admin: the lifecycle actions, the handoffs screen, the agents'
notifications, template suggestions, handoff routing and the daily analytics counters.

Every action goes through crm.conversations (its event in the same transaction, audited as the
admin user) and needs `crm.change_conversation`. The handoffs screen lists the open
conversations whose bot is off: `unassigned` (no agent yet), `assigned` and `waiting` (the
contact wrote after the last answer).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from core import audit
from core.admin_tables import ReadOnlyMixin
from crm import conversations
from crm.conversation_models import (
    AgentNotification,
    AnalyticsDaily,
    HandoffRouting,
    TemplateSuggestion,
)
from crm.models import Conversation, ConversationStatus, Handoff, Message

CHANGE = "crm.change_conversation"


class LifecycleActions(admin.ModelAdmin):
    """Assign to me, resolve, reopen, resume bot: each through the service, per conversation."""

    actions = ["assign_to_me", "resolve", "reopen", "resume_bot"]

    def has_lifecycle_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(CHANGE))

    def _each(
        self, request: HttpRequest, queryset: QuerySet[Conversation], verb: str, act: Any
    ) -> None:
        done, refused = 0, []
        for conversation in queryset:
            try:
                act(conversation, audit.user_actor(request))
                done += 1
            except ValueError as exc:
                refused.append(f"{str(conversation.pk)[:8]}: {exc}")
        if done:
            self.message_user(request, f"{verb}: {done} conversation(s).", messages.SUCCESS)
        for line in refused:
            self.message_user(request, line, messages.WARNING)

    @admin.action(description="Assign to me", permissions=["lifecycle"])
    def assign_to_me(self, request: HttpRequest, queryset: QuerySet[Conversation]) -> None:
        user: Any = request.user
        self._each(
            request,
            queryset,
            "Assigned to you",
            lambda c, actor: conversations.assign(conversation=c, user=user, actor=actor),
        )

    @admin.action(description="Resolve", permissions=["lifecycle"])
    def resolve(self, request: HttpRequest, queryset: QuerySet[Conversation]) -> None:
        self._each(
            request,
            queryset,
            "Resolved",
            lambda c, actor: conversations.resolve(conversation=c, actor=actor),
        )

    @admin.action(description="Reopen", permissions=["lifecycle"])
    def reopen(self, request: HttpRequest, queryset: QuerySet[Conversation]) -> None:
        self._each(
            request,
            queryset,
            "Reopened",
            lambda c, actor: conversations.reopen(conversation=c, actor=actor),
        )

    @admin.action(description="Resume bot (the AI answers again)", permissions=["lifecycle"])
    def resume_bot(self, request: HttpRequest, queryset: QuerySet[Conversation]) -> None:
        self._each(
            request,
            queryset,
            "Bot resumed",
            lambda c, actor: conversations.resume_bot(conversation=c, actor=actor),
        )


class HandoffState(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("unassigned", "open (no agent)"),
            ("assigned", "assigned"),
            ("waiting", "waiting (the contact wrote last)"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "unassigned":
            return queryset.filter(assigned_to=None)
        if self.value() == "assigned":
            return queryset.exclude(assigned_to=None)
        if self.value() == "waiting":
            return queryset.filter(waiting=True)
        return queryset


@admin.register(Handoff)
class HandoffAdmin(ReadOnlyMixin, LifecycleActions):
    list_display = (
        "short_id",
        "contact",
        "assigned_to",
        "waiting",
        "last_inbound_at",
        "created_at",
    )
    list_filter = (HandoffState, "assigned_to")
    list_select_related = ("contact", "assigned_to")
    ordering = ("last_inbound_at",)
    show_facets = admin.ShowFacets.NEVER

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        answered_after = Exists(
            Message.objects.filter(
                conversation=OuterRef("pk"),
                direction=Message.Direction.OUTBOUND,
                created_at__gte=OuterRef("last_inbound_at"),
            )
        )
        return (
            super()
            .get_queryset(request)
            .filter(bot_active=False, status=ConversationStatus.OPEN)
            .annotate(waiting=Q(last_inbound_at__isnull=False) & ~Q(answered_after))
        )

    @admin.display(description="id")
    def short_id(self, obj: Conversation) -> str:
        return str(obj.pk)[:8]

    @admin.display(description="waiting", boolean=True)
    def waiting(self, obj: Any) -> bool:
        return bool(getattr(obj, "waiting", False))


@admin.register(AgentNotification)
class AgentNotificationAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("created_at", "kind", "text", "recipient", "emailed_at", "read_at")
    list_filter = ("kind", ("read_at", admin.EmptyFieldListFilter))
    list_select_related = ("recipient",)
    ordering = ("-created_at",)
    actions = ["mark_read"]
    show_facets = admin.ShowFacets.NEVER

    def has_mark_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("crm.view_agentnotification"))

    @admin.action(description="Mark as read", permissions=["mark"])
    def mark_read(self, request: HttpRequest, queryset: QuerySet[AgentNotification]) -> None:
        marked = queryset.filter(read_at=None).update(read_at=timezone.now())
        self.message_user(request, f"{marked} notification(s) marked read.", messages.SUCCESS)


@admin.register(TemplateSuggestion)
class TemplateSuggestionAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("created_at", "conversation", "reason", "template", "used_at")
    list_filter = ("reason", ("used_at", admin.EmptyFieldListFilter))
    ordering = ("-created_at",)
    actions = ["send_template"]
    show_facets = admin.ShowFacets.NEVER

    def has_send_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(CHANGE))

    @admin.action(description="Send the template to the contact", permissions=["send"])
    def send_template(self, request: HttpRequest, queryset: QuerySet[TemplateSuggestion]) -> None:
        for suggestion in queryset.select_related("conversation"):
            try:
                conversations.send_suggestion(suggestion=suggestion)
            except ValueError as exc:
                self.message_user(request, f"{suggestion.pk}: {exc}", messages.WARNING)
            else:
                self.message_user(request, f"{suggestion.pk}: queued", messages.SUCCESS)


@admin.register(HandoffRouting)
class HandoffRoutingAdmin(admin.ModelAdmin):
    list_display = ("organization", "owner", "last_assigned", "updated_at")
    fields = ("organization", "owner")


@admin.register(AnalyticsDaily)
class AnalyticsDailyAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("day", "metric", "count", "organization")
    list_filter = ("metric", "organization")
    date_hierarchy = "day"
    ordering = ("-day", "metric")
    show_facets = admin.ShowFacets.NEVER
