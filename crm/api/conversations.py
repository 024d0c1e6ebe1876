"""`/api/v1/conversations...` and `GET /api/v1/analytics/daily`, scoped to the API key's
organization (never the body's). Reads need `conversations:read` (or `conversations:write`,
which implies it); assign/resolve/reopen `conversations:write`; analytics `analytics:read`.
Another tenant's ids are 404s; a conversation in the wrong state is a 409; bad input a 400.
Each change goes through crm.conversations (its event in the same transaction).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from django.contrib.auth.models import User
from rest_framework import serializers
from rest_framework.response import Response

from core.api.errors import InvalidState
from core.api.permissions import WriteImpliesRead
from core.api.schema import errors, ok, request_example, write_implies_read
from core.api.views import ApiView, found_or_404
from crm import analytics, conversations
from crm.conversation_scopes import ANALYTICS_READ, CONVERSATIONS_READ, CONVERSATIONS_WRITE
from crm.models import Conversation, ConversationStatus
from eventbus.api.serializers import StrictCharField, StrictSerializer

ViewMethod = TypeVar("ViewMethod", bound=Callable[..., Response])
NOT_FOUND = "No such conversation in this organization."
MAX_DAYS = 366
EXAMPLE_ID = "7f0c8a51-3a4e-4f55-9d0e-0b1f8a9c2d31"
CONVERSATION = {
    "id": EXAMPLE_ID,
    "contact_id": "0d7e5f6a-1b2c-4d3e-8f9a-0b1c2d3e4f5a",
    "channel": "whatsapp",
    "status": "open",
    "bot_active": False,
    "assigned_to_id": 12,
    "assigned_at": "2026-12-06T14:02:11Z",
    "resolved_at": None,
    "resolved_by": "",
    "last_inbound_at": "2026-12-06T13:58:40Z",
    "created_at": "2026-12-06T13:58:40Z",
}
DAILY = {
    "results": [
        {"day": "2026-12-05", "metric": "message.received", "count": 412},
        {"day": "2026-12-05", "metric": "ai.responded", "count": 380},
    ]
}


operation = write_implies_read(CONVERSATIONS_READ, CONVERSATIONS_WRITE, tag="conversations")


class ConversationSerializer(serializers.ModelSerializer[Conversation]):
    """A conversation: ids, lifecycle and bot state (no chat id: it is the phone number)."""

    class Meta:
        model = Conversation
        fields = (
            "id",
            "contact_id",
            "channel",
            "status",
            "bot_active",
            "assigned_to_id",
            "assigned_at",
            "resolved_at",
            "resolved_by",
            "last_inbound_at",
            "created_at",
        )
        read_only_fields = fields


class ConversationListSerializer(serializers.Serializer):
    results = ConversationSerializer(many=True)


class ConversationFilterSerializer(StrictSerializer):
    status = serializers.ChoiceField(choices=ConversationStatus.choices, required=False)
    assigned_to_id = serializers.IntegerField(required=False, min_value=1)
    bot_active = serializers.BooleanField(required=False)
    limit = serializers.IntegerField(
        required=False, min_value=1, max_value=200, help_text="Default 50, max 200."
    )


class AssignSerializer(StrictSerializer):
    user_id = serializers.IntegerField(
        min_value=1, help_text="An agent of the organization (a staff user bound to it)."
    )


class ResolveSerializer(StrictSerializer):
    note = StrictCharField(max_length=500, required=False, allow_blank=True, default="")


class ReopenSerializer(StrictSerializer):
    reason = StrictCharField(max_length=500, required=False, allow_blank=True, default="")


class DailyFilterSerializer(StrictSerializer):
    since = serializers.DateField(help_text="First day (UTC), `YYYY-MM-DD`.")
    until = serializers.DateField(help_text=f"Last day (UTC), inclusive; at most {MAX_DAYS} days.")
    metric = serializers.ChoiceField(
        choices=[(m, m) for m in analytics.METRICS], required=False, help_text="One counter."
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        if attrs["until"] < attrs["since"]:
            raise serializers.ValidationError({"until": ["Must not be before `since`."]})
        if attrs["until"] - attrs["since"] >= dt.timedelta(days=MAX_DAYS):
            raise serializers.ValidationError({"until": [f"At most {MAX_DAYS} days."]})
        return attrs


class DailySerializer(serializers.Serializer):
    day = serializers.DateField()
    metric = serializers.CharField()
    count = serializers.IntegerField()


class DailyListSerializer(serializers.Serializer):
    results = DailySerializer(many=True)


class ConversationView(ApiView):
    permission_classes = [WriteImpliesRead]
    write_scope = CONVERSATIONS_WRITE  # a key that may change these may read them
    required_scopes = {"GET": CONVERSATIONS_READ, "POST": CONVERSATIONS_WRITE}

    def conversation(self, request: Any, conversation_id: uuid.UUID) -> Conversation:
        found = Conversation.objects.filter(
            organization_id=self.client(request).organization_id, pk=conversation_id
        ).first()
        return found_or_404(found, NOT_FOUND)

    def answer(self, conversation: Conversation) -> Response:
        conversation.refresh_from_db()
        return Response(ConversationSerializer(conversation).data)

    def change_state(
        self,
        request: Any,
        conversation_id: uuid.UUID,
        serializer: type[StrictSerializer],
        change: Callable[[Conversation, str, dict[str, Any]], object],
    ) -> Response:
        """Validate the body, find the organization's conversation, run the lifecycle service
        `change(conversation, actor, data)` (409 when the conversation is not in the state it
        needs) and answer the conversation as it is now."""
        data = self.validated(serializer, request.data)
        conversation = self.conversation(request, conversation_id)
        try:
            change(conversation, self.client(request).actor, data)
        except conversations.ConversationStateError as exc:
            raise InvalidState(str(exc)) from None
        return self.answer(conversation)


class ConversationsView(ConversationView):
    @operation(
        name="list",
        summary="List conversations",
        description="The organization's conversations, newest first, filtered by `status`, "
        "`assigned_to_id` and `bot_active` (false: handed off to a person).",
        scope=CONVERSATIONS_READ,
        parameters=[ConversationFilterSerializer],
        responses={
            200: ok(ConversationListSerializer, {"results": [CONVERSATION]}),
            **errors(400, 403),
        },
    )
    def get(self, request: Any) -> Response:
        query = self.validated(ConversationFilterSerializer, request.query_params.dict())
        rows = Conversation.objects.filter(organization_id=self.client(request).organization_id)
        for field in ("status", "assigned_to_id", "bot_active"):
            if field in query:
                rows = rows.filter(**{field: query[field]})
        rows = rows.order_by("-created_at")[: query.get("limit", 50)]
        return Response(ConversationListSerializer({"results": list(rows)}).data)


class ConversationDetailView(ConversationView):
    @operation(
        name="retrieve",
        summary="Get a conversation",
        description="One conversation: status, assignee, bot state and its window's last "
        "inbound message time.",
        scope=CONVERSATIONS_READ,
        responses={
            200: ok(ConversationSerializer, CONVERSATION),
            **errors(403, 404, e404=NOT_FOUND),
        },
    )
    def get(self, request: Any, conversation_id: uuid.UUID) -> Response:
        return Response(ConversationSerializer(self.conversation(request, conversation_id)).data)


class ConversationAssignView(ConversationView):
    @operation(
        name="assign",
        summary="Assign a conversation",
        description="Assigns the conversation to an agent of the organization (a staff user "
        "bound to it) and emits `conversation.assigned` (mode `manual`). Assigning it to its "
        "assignee changes nothing.",
        scope=CONVERSATIONS_WRITE,
        request=AssignSerializer,
        examples=[request_example("To agent 12", {"user_id": 12})],
        responses={
            200: ok(ConversationSerializer, CONVERSATION),
            **errors(400, 403, 404, 413, 415, e404=NOT_FOUND),
        },
    )
    def post(self, request: Any, conversation_id: uuid.UUID) -> Response:
        data = self.validated(AssignSerializer, request.data)
        conversation = self.conversation(request, conversation_id)
        user = User.objects.filter(pk=data["user_id"]).first()
        try:
            if user is None:
                raise conversations.NotAnAgent("no such user")
            conversations.assign(
                conversation=conversation, user=user, actor=self.client(request).actor
            )
        except conversations.NotAnAgent:
            raise serializers.ValidationError(
                {"user_id": ["Not an active agent of this organization."]}
            ) from None
        return self.answer(conversation)


class ConversationResolveView(ConversationView):
    @operation(
        name="resolve",
        summary="Resolve a conversation",
        description="Marks an open conversation resolved and emits `conversation.resolved` "
        "(`resolved_by`: this API key; `duration_s` since it was opened or reopened). "
        "Resolving a resolved conversation is a 409.",
        scope=CONVERSATIONS_WRITE,
        request=ResolveSerializer,
        examples=[request_example("With a note", {"note": "order re-sent"})],
        responses={
            200: ok(ConversationSerializer, {**CONVERSATION, "status": "resolved"}),
            **errors(
                400,
                403,
                404,
                409,
                413,
                415,
                e404=NOT_FOUND,
                e409="the conversation is already resolved",
            ),
        },
    )
    def post(self, request: Any, conversation_id: uuid.UUID) -> Response:
        return self.change_state(
            request,
            conversation_id,
            ResolveSerializer,
            lambda c, actor, data: conversations.resolve(
                conversation=c, actor=actor, note=data["note"]
            ),
        )


class ConversationReopenView(ConversationView):
    @operation(
        name="reopen",
        summary="Reopen a conversation",
        description="Reopens a resolved conversation and emits `conversation.reopened`. "
        "Reopening an open conversation is a 409.",
        scope=CONVERSATIONS_WRITE,
        request=ReopenSerializer,
        examples=[request_example("Customer came back", {"reason": "customer wrote again"})],
        responses={
            200: ok(ConversationSerializer, CONVERSATION),
            **errors(
                400,
                403,
                404,
                409,
                413,
                415,
                e404=NOT_FOUND,
                e409="the conversation is not resolved",
            ),
        },
    )
    def post(self, request: Any, conversation_id: uuid.UUID) -> Response:
        return self.change_state(
            request,
            conversation_id,
            ReopenSerializer,
            lambda c, actor, data: conversations.reopen(
                conversation=c, actor=actor, reason=data["reason"]
            ),
        )


class AnalyticsDailyView(ApiView):
    required_scopes = {"GET": ANALYTICS_READ}

    @operation(
        name="daily",
        tag="analytics",
        summary="Daily counters",
        description="The organization's daily counters (UTC days) from `since` to `until` "
        "inclusive (at most 366 days), by day and metric: messages received, sent, delivered, "
        "read and failed, AI answers, lead activities, conversations resolved and reopened. "
        "Days without activity are absent.",
        scope=ANALYTICS_READ,
        parameters=[DailyFilterSerializer],
        responses={200: ok(DailyListSerializer, DAILY), **errors(400, 403)},
    )
    def get(self, request: Any) -> Response:
        query = self.validated(DailyFilterSerializer, request.query_params.dict())
        rows = analytics.daily(
            self.client(request).organization_id,
            since=query["since"],
            until=query["until"],
            metrics=[query["metric"]] if query.get("metric") else None,
        )
        return Response(DailyListSerializer({"results": rows}).data)
