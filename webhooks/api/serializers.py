"""Request and response shapes of the webhook endpoints (also their OpenAPI schema)."""

from __future__ import annotations

from rest_framework import serializers

from eventbus.api.serializers import StrictCharField, StrictSerializer
from eventbus.store.models import DeliveryStatus
from webhooks.services import MAX_DESCRIPTION, MAX_EVENT_TYPES
from webhooks.ssrf import MAX_URL_LENGTH

# Deliveries are bigint ids: a larger `before` could only be a typo, and Postgres would refuse it.
MAX_DELIVERY_ID = 2**63 - 1


class WebhookSubscriptionInputSerializer(StrictSerializer):
    """Create (every field but `description` required) or change (PATCH: any of them)."""

    url = StrictCharField(
        max_length=MAX_URL_LENGTH,
        help_text="Where deliveries are POSTed: `https://` (plain `http` only when the server "
        "allows it), no credentials or fragment, no private, loopback or metadata address; an "
        "IPv4 host only as four decimal numbers (`0177.0.0.1`, `127.1`, `2130706433` are refused).",
    )
    event_types = serializers.ListField(
        child=StrictCharField(max_length=200),
        allow_empty=False,
        max_length=MAX_EVENT_TYPES,
        help_text="Declared event types (`lead.created`), entity wildcards (`lead.*`) or `*`.",
    )
    description = StrictCharField(max_length=MAX_DESCRIPTION, required=False, allow_blank=True)


class WebhookSubscriptionSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    url = serializers.CharField()
    description = serializers.CharField()
    event_types = serializers.ListField(child=serializers.CharField())
    enabled = serializers.BooleanField()
    consecutive_failures = serializers.IntegerField(
        help_text="Failed deliveries in a row; the subscription is disabled at the threshold."
    )
    disabled_at = serializers.DateTimeField(allow_null=True)
    disabled_reason = serializers.CharField()
    secret_rotation_ends_at = serializers.DateTimeField(
        source="previous_secret_expires_at",
        allow_null=True,
        help_text="Until then deliveries are also signed with the previous secret.",
    )
    created_at = serializers.DateTimeField()


class WebhookSubscriptionSecretSerializer(WebhookSubscriptionSerializer):
    secret = serializers.CharField(
        help_text="The signing secret (`whsec_...`, Standard Webhooks). Shown this once only."
    )


class WebhookSubscriptionListSerializer(serializers.Serializer):
    results = WebhookSubscriptionSerializer(many=True, help_text="Oldest first.")


class WebhookPingSerializer(serializers.Serializer):
    event_id = serializers.UUIDField(
        help_text="The `webhook.ping` event queued for this subscription only."
    )


class WebhookDeliveryFilterSerializer(StrictSerializer):
    subscription = serializers.UUIDField(required=False, help_text="Only this subscription's.")
    status = serializers.ChoiceField(choices=DeliveryStatus.choices, required=False)
    before = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_DELIVERY_ID,
        help_text="Only deliveries with a smaller id (the last id of the previous page).",
    )
    limit = serializers.IntegerField(
        required=False, min_value=1, max_value=200, help_text="Default 50, max 200."
    )


class WebhookDeliverySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    webhook_id = serializers.UUIDField(
        help_text="`X-Webhook-Delivery` / `webhook-id`: the same on every attempt and resend."
    )
    subscription_id = serializers.UUIDField()
    event_id = serializers.UUIDField()
    event_type = serializers.CharField(source="event.event_type")
    status = serializers.ChoiceField(choices=DeliveryStatus.choices)
    attempts = serializers.IntegerField(help_text="Attempts started.")
    next_attempt_at = serializers.DateTimeField()
    last_error = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class WebhookAttemptSerializer(serializers.Serializer):
    attempt = serializers.IntegerField()
    at = serializers.DateTimeField(source="created_at")
    status_code = serializers.IntegerField(
        allow_null=True, help_text="Null when no response came (timeout, refused...)."
    )
    duration_ms = serializers.IntegerField()
    response_excerpt = serializers.CharField(help_text="At most 2 KiB of the response body.")
    error_class = serializers.CharField()
    error = serializers.CharField()


class WebhookDeliveryDetailSerializer(WebhookDeliverySerializer):
    attempt_log = WebhookAttemptSerializer(
        many=True, source="webhook_attempts.all", help_text="Every HTTP attempt, oldest first."
    )


class WebhookDeliveryListSerializer(serializers.Serializer):
    results = WebhookDeliverySerializer(many=True, help_text="Newest first.")
