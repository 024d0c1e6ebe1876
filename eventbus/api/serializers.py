"""Request and response shapes of the event endpoints (also their OpenAPI schema)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core.api.conf import api_settings
from core.api.pagination import CursorField
from core.api.serializers import PlainRepresentation, ReusedFields, SparseValidation
from eventbus.store.catalog import EVENT_TYPE_PATTERN
from eventbus.store.errors import EventValidationError
from eventbus.store.models import DeliveryStatus, Status
from eventbus.store.provenance import BUS_KEYS

# Set by the server from the request, the key and the bus; a client sending them is told so.
SERVER_METADATA_KEYS = (
    "request_id",
    "actor_id",
    "source",
    "emitted_at",
    "causation_id",
    *BUS_KEYS,
)
# EventValidationError.field -> where that value sits in the request body.
_FIELD_PATHS = {
    "idempotency_key": "metadata.idempotency_key",
    "schema_version": "metadata.schema_version",
}


class StrictSerializer(serializers.Serializer):
    """Rejects fields it does not declare (a typo, or an `organization` the key already sets)."""

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(self.initial_data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return attrs


class StrictCharField(serializers.CharField):
    """Takes JSON strings only: DRF's CharField would turn `0` or `true` into "0" / "True"."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class EmitSerializer(SparseValidation, ReusedFields, StrictSerializer):
    event_type = serializers.RegexField(
        EVENT_TYPE_PATTERN,
        max_length=200,
        help_text="`{entity}.{action}`: a type `GET /api/v1/event-types` lists as `emittable` "
        "(e.g. `lead.stage_changed`). Any other is refused with 403 `event_type_not_emittable`.",
    )
    entity_kind = StrictCharField(max_length=64, help_text="e.g. `lead`.")
    entity_id = serializers.UUIDField(required=False, allow_null=True, default=None)
    payload = serializers.DictField(
        required=False, default=dict, help_text="Must hold the type's required fields."
    )
    metadata = serializers.DictField(
        required=False,
        default=dict,
        help_text="Your correlation data. `idempotency_key` makes the emit idempotent for good; "
        "`schema_version` picks a payload version. The server sets "
        + ", ".join(f"`{key}`" for key in SERVER_METADATA_KEYS)
        + ".",
    )

    ordering_key = StrictCharField(
        required=False,
        allow_null=True,
        default=None,
        max_length=255,
        help_text="Consumers declared ordered handle one key's events one at a time, in emit "
        "order. Default: the catalog's (a `message.*` or `conversation.*` event's conversation).",
    )
    priority = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=-10,
        max_value=10,
        help_text="Higher is claimed first within each consumer (-10..10). Default: the type's.",
    )

    def validate_metadata(self, value: dict[str, Any]) -> dict[str, Any]:
        reserved = sorted(set(value) & set(SERVER_METADATA_KEYS))
        if reserved:
            raise serializers.ValidationError(
                f"{', '.join(reserved)}: set by the server (send X-Request-ID for the request id)."
            )
        return value


def emit_error(exc: EventValidationError) -> serializers.ValidationError:
    """An emit rejection as a 400 on the request field at fault."""
    field = _FIELD_PATHS.get(exc.field or "", exc.field) or "non_field_errors"
    return serializers.ValidationError({field: [str(exc)]})


class EventFilterSerializer(SparseValidation, ReusedFields, StrictSerializer):
    status = serializers.ChoiceField(choices=Status.choices, required=False)
    event_type = serializers.CharField(required=False, max_length=200)
    entity_kind = serializers.CharField(required=False, max_length=64)
    entity_id = serializers.UUIDField(required=False)
    created_after = serializers.DateTimeField(required=False, help_text="Inclusive.")
    created_before = serializers.DateTimeField(required=False, help_text="Exclusive.")
    consumer = serializers.CharField(
        required=False, max_length=200, help_text="Events fanned out to this consumer."
    )
    limit = serializers.IntegerField(required=False, min_value=1, help_text="Default 50, max 200.")
    cursor = CursorField(required=False, help_text="`next_cursor` of the previous page.")

    def validate_limit(self, value: int) -> int:
        if value > api_settings.MAX_PAGE_SIZE:
            raise serializers.ValidationError(f"At most {api_settings.MAX_PAGE_SIZE}.")
        return value


class DeliverySerializer(PlainRepresentation, serializers.Serializer):
    consumer = serializers.CharField()
    status = serializers.ChoiceField(choices=DeliveryStatus.choices)
    attempts = serializers.IntegerField()
    max_attempts = serializers.IntegerField()
    next_attempt_at = serializers.DateTimeField()
    last_error = serializers.CharField(allow_null=True)
    error_class = serializers.CharField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    updated_at = serializers.DateTimeField()
    redelivered = serializers.BooleanField(
        help_text="An earlier run may have happened without its outcome being recorded (its "
        "worker died, stalled past its lease or lost the database): side effects may exist."
    )
    redelivery_reason = serializers.CharField(allow_null=True)


class EventSerializer(PlainRepresentation, ReusedFields, serializers.Serializer):
    id = serializers.UUIDField()
    event_type = serializers.CharField()
    entity_kind = serializers.CharField()
    entity_id = serializers.UUIDField(allow_null=True)
    status = serializers.ChoiceField(choices=Status.choices)
    payload = serializers.DictField()
    metadata = serializers.DictField()
    provenance = serializers.DictField(
        allow_null=True,
        help_text="Who produced the event, set by the server: `door` (`api`, `pipeline` or `app`) "
        "and `producer` (`api_key:<prefix>`, `pipeline:<id>` with its `execution_id`, "
        "`app:<label>` with its `component`, or `system`). Null for events recorded before "
        "provenance was.",
    )
    consumed_by = serializers.ListField(child=serializers.CharField())
    attempts = serializers.IntegerField(help_text="Failed attempts, all consumers together.")
    last_error = serializers.CharField(allow_null=True)
    ordering_key = serializers.CharField(allow_null=True)
    priority = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class EventDetailSerializer(EventSerializer):
    deliveries = DeliverySerializer(many=True, help_text="One per consumer.")


class EventPageSerializer(serializers.Serializer):
    results = EventSerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True)
    next = serializers.URLField(allow_null=True)


class ReprocessSerializer(StrictSerializer):
    consumer = StrictCharField(
        required=False,
        max_length=200,
        help_text="Re-run this consumer's delivery (dead or done); without it, every dead one.",
    )
    reason = StrictCharField(required=False, allow_blank=True, max_length=1000, default="")


class DiscardSerializer(StrictSerializer):
    consumer = StrictCharField(
        required=False, max_length=200, help_text="Only this consumer's dead delivery."
    )
    reason = StrictCharField(max_length=1000, help_text="Why (kept in the audit trail).")


class ActionResultSerializer(serializers.Serializer):
    moved = serializers.IntegerField(help_text="Deliveries reprocessed or discarded.")
    event = EventDetailSerializer()
