"""Pipeline, execution and order serializers of the API (snake_case; definitions as stored)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

from core.api.serializers import StrictBooleanField, StrictIntegerField
from eventbus.api.serializers import StrictCharField, StrictSerializer
from eventbus.store.errors import EventValidationError
from eventbus.store.storable import JsonLimits, check_text, json_text
from pipelines.models import Execution, Pipeline, Step

MAX_ITEMS = 500
MAX_TOTAL_CENTS = 10**13


class PipelineSerializer(serializers.ModelSerializer[Pipeline]):
    definition = serializers.JSONField(
        source="authored_definition",
        help_text="`{nodes, edges}`, in the key order it was written in.",
    )

    class Meta:
        model = Pipeline
        fields = ("id", "name", "trigger", "enabled", "definition", "created_at", "updated_at")
        read_only_fields = fields


class PipelineListSerializer(serializers.Serializer):
    results = PipelineSerializer(many=True)


DEFINITION_LIMITS = JsonLimits(256 * 1024, "a pipeline definition's size", 32)


class DefinitionField(serializers.JSONField):
    """A JSON object PostgreSQL can store (validated as a definition by the service)."""

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        if not isinstance(value, dict):
            raise serializers.ValidationError("Must be an object with `nodes` and `edges`.")
        try:
            json_text("definition", value, DEFINITION_LIMITS)
        except EventValidationError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return value


class StoredCharField(StrictCharField):
    """A JSON string a text column can hold (no NUL, no unpaired surrogate)."""

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        try:
            return check_text(self.field_name or "value", value)
        except EventValidationError as exc:
            raise serializers.ValidationError(str(exc)) from None


class PipelineInputSerializer(StrictSerializer):
    name = StoredCharField(max_length=200, min_length=1)
    trigger = StoredCharField(
        max_length=120, help_text="`order.pre`, `order.post` or `event.<type>`."
    )
    enabled = StrictBooleanField(required=False, default=True)
    definition = DefinitionField(help_text="`{nodes, edges}`; validated, errors by node.")


class PipelineUpdateSerializer(StrictSerializer):
    name = StoredCharField(max_length=200, min_length=1, required=False)
    trigger = StoredCharField(max_length=120, required=False)
    enabled = StrictBooleanField(required=False)
    definition = DefinitionField(required=False)


class StepSerializer(serializers.ModelSerializer[Step]):
    class Meta:
        model = Step
        fields = (
            "node_id",
            "node_type",
            "status",
            "attempts",
            "started_at",
            "finished_at",
            "duration_ms",
            "input_excerpt",
            "output_excerpt",
            "error",
        )
        read_only_fields = fields


class ExecutionSerializer(serializers.ModelSerializer[Execution]):
    pipeline_id = serializers.UUIDField()
    steps = StepSerializer(many=True)

    class Meta:
        model = Execution
        fields = (
            "id",
            "pipeline_id",
            "trigger",
            "event_id",
            "order_id",
            "status",
            "attempts",
            "failed_node",
            "error",
            "started_at",
            "finished_at",
            "steps",
        )
        read_only_fields = fields


class ExecutionListSerializer(serializers.Serializer):
    results = ExecutionSerializer(many=True)


class ExecutionFilterSerializer(StrictSerializer):
    status = serializers.ChoiceField(choices=Execution.Status.choices, required=False)
    limit = serializers.IntegerField(
        required=False, min_value=1, max_value=200, help_text="Default 50, max 200."
    )


class NestedStrictSerializer(serializers.Serializer):
    """StrictSerializer for a nested object (no `initial_data` there): unknown keys are 400s."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)


class OrderItemSerializer(NestedStrictSerializer):
    sku = StoredCharField(max_length=64, required=False, allow_blank=True, default="")
    name = StoredCharField(max_length=200)
    qty = StrictIntegerField(min_value=1, max_value=1_000_000)
    unit_cents = StrictIntegerField(min_value=0, max_value=MAX_TOTAL_CENTS)


class CustomerSerializer(NestedStrictSerializer):
    name = StoredCharField(max_length=200, required=False, allow_blank=True, default="")
    email = serializers.EmailField(max_length=254, required=False, allow_blank=True, default="")
    phone = StoredCharField(max_length=32, required=False, allow_blank=True, default="")


class OrderCreateSerializer(StrictSerializer):
    number = StoredCharField(max_length=64, min_length=1, help_text="Your order number.")
    total_cents = StrictIntegerField(min_value=0, max_value=MAX_TOTAL_CENTS)
    currency = serializers.RegexField(r"^[A-Z]{3}$", required=False, default="BRL")
    items = OrderItemSerializer(many=True, required=False, max_length=MAX_ITEMS)
    customer = CustomerSerializer(required=False)
    shipping_address = StoredCharField(max_length=2000, required=False, allow_blank=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        if not attrs["number"].strip():
            raise serializers.ValidationError({"number": ["Must not be blank."]})
        items = attrs.get("items") or []
        if items:
            total = sum(item["qty"] * item["unit_cents"] for item in items)
            if total != attrs["total_cents"]:
                raise serializers.ValidationError(
                    {
                        "total_cents": [
                            f"Must equal the items' sum ({total}), got {attrs['total_cents']}."
                        ]
                    }
                )
        return attrs


class OrderSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    number = serializers.CharField()
    status = serializers.CharField()
    total_cents = serializers.IntegerField()
    currency = serializers.CharField()
    items = serializers.ListField(child=serializers.DictField())
    status_tag = serializers.CharField()
    status_name = serializers.CharField()
    phase = serializers.CharField()
    confirmed_at = serializers.DateTimeField(allow_null=True)
    pre_execution_id = serializers.UUIDField(
        allow_null=True, help_text="The order.pre execution, when the organization has one."
    )
