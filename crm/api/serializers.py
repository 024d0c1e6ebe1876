"""Request and response shapes of the CRM API."""

from __future__ import annotations

from rest_framework import serializers

from core.api.pagination import PageQuery
from core.api.serializers import StrictBooleanField, StrictIntegerField
from crm.models import Lead
from eventbus.api.serializers import StrictCharField, StrictSerializer

NAME_CHARS = 200
USER_ID_MAX = 2**31 - 1  # auth_user.id is an integer
ROW_ID_MAX = 2**63 - 1
STAGE_CHARS = 64
REASON_CHARS = 500


class LeadInput(StrictSerializer):
    name = StrictCharField(max_length=NAME_CHARS, help_text="What the lead is called.")
    source = StrictCharField(
        max_length=50, required=False, help_text="Where it came from (default `api`)."
    )
    pipeline_id = StrictCharField(max_length=STAGE_CHARS, required=False)
    stage_id = StrictCharField(max_length=STAGE_CHARS, required=False, help_text="Default `new`.")
    contact_id = serializers.UUIDField(
        required=False, allow_null=True, help_text="A contact of the key's organization."
    )
    owner_id = StrictIntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=USER_ID_MAX,
        help_text="A user of the key's organization who works the lead.",
    )
    value_cents = StrictIntegerField(required=False, allow_null=True, min_value=0, max_value=10**15)


class LeadUpdate(StrictSerializer):
    name = StrictCharField(max_length=NAME_CHARS, required=False)
    source = StrictCharField(max_length=50, required=False)
    pipeline_id = StrictCharField(max_length=STAGE_CHARS, required=False)
    contact_id = serializers.UUIDField(required=False, allow_null=True)
    value_cents = StrictIntegerField(required=False, allow_null=True, min_value=0, max_value=10**15)


class StageInput(StrictSerializer):
    stage_id = StrictCharField(max_length=STAGE_CHARS)
    pipeline_id = StrictCharField(max_length=STAGE_CHARS, required=False)


class AssignInput(StrictSerializer):
    owner_id = StrictIntegerField(
        allow_null=True,
        min_value=1,
        max_value=USER_ID_MAX,
        help_text="A user of the organization; null unassigns.",
    )


class WonInput(StrictSerializer):
    value_cents = StrictIntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=10**15,
        help_text="The deal's value; default the lead's.",
    )
    reason = StrictCharField(max_length=REASON_CHARS, required=False, allow_blank=True)


class LostInput(StrictSerializer):
    reason = StrictCharField(max_length=REASON_CHARS, help_text="Why the deal was lost.")


class LeadFilter(PageQuery, StrictSerializer):
    status = serializers.ChoiceField(choices=Lead.Status.choices, required=False)
    stage_id = StrictCharField(max_length=STAGE_CHARS, required=False)
    pipeline_id = StrictCharField(max_length=STAGE_CHARS, required=False)
    owner_id = serializers.IntegerField(required=False, min_value=1, max_value=USER_ID_MAX)
    contact_id = serializers.UUIDField(required=False)


class LeadSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    source = serializers.CharField()
    pipeline_id = serializers.CharField()
    stage_id = serializers.CharField()
    status = serializers.ChoiceField(choices=Lead.Status.choices)
    contact_id = serializers.UUIDField(allow_null=True)
    owner_id = serializers.IntegerField(allow_null=True)
    value_cents = serializers.IntegerField(allow_null=True)
    won_at = serializers.DateTimeField(allow_null=True)
    lost_at = serializers.DateTimeField(allow_null=True)
    close_reason = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class LeadPageSerializer(serializers.Serializer):
    results = LeadSerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True)
    next = serializers.URLField(allow_null=True)


class ActivityInput(StrictSerializer):
    kind = StrictCharField(
        max_length=32, required=False, help_text="`note` (default), `call`, `email`, ..."
    )
    note = StrictCharField(max_length=10_000, required=False, allow_blank=True)


class ActivityFilter(StrictSerializer):
    limit = serializers.IntegerField(required=False, min_value=1, help_text="Default 50, max 200.")
    before_id = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=ROW_ID_MAX,
        help_text="`next_before_id` of the previous page.",
    )

    validate_limit = PageQuery.validate_limit


class ActivitySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    lead_id = serializers.UUIDField()
    kind = serializers.CharField()
    note = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()


class ActivityPageSerializer(serializers.Serializer):
    results = ActivitySerializer(many=True)
    next_before_id = serializers.IntegerField(allow_null=True)


class MessageInput(StrictSerializer):
    body = StrictCharField(max_length=4096, required=False, allow_blank=True)
    media_urls = serializers.ListField(
        child=serializers.URLField(max_length=2000), required=False, max_length=10
    )
    is_template = StrictBooleanField(
        required=False,
        help_text="An approved template, which may be sent outside the 24-hour window.",
    )
    channel = serializers.ChoiceField(choices=[("whatsapp", "whatsapp")], required=False)

    def validate(self, attrs: dict) -> dict:
        attrs = super().validate(attrs)
        if not (attrs.get("body") or "").strip() and not attrs.get("media_urls"):
            raise serializers.ValidationError({"body": ["A message needs a body or media."]})
        return attrs


class QueuedMessageSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    conversation_id = serializers.UUIDField()
    contact_id = serializers.UUIDField()
    status = serializers.CharField()
    is_template = serializers.BooleanField()
    created_at = serializers.DateTimeField()
