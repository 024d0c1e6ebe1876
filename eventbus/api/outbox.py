"""Seed 004's outbox API over the event log: `GET /api/outbox`, `POST /api/outbox/{id}/reprocess`.

Seed 004 kept an `outbox_events` table (PENDING -> PUBLISHED, or FAILED after the relay's last
attempt). Here the event log is the outbox (R-P2): an outbox row is an event, its `id` is the
event id, and its status summarises the event's deliveries:

| seed 004  | event_log.status      | meaning here                                          |
|-----------|-----------------------|-------------------------------------------------------|
| PENDING   | pending, processing   | some consumer has not finished yet (including retries)|
| PUBLISHED | done                  | every consumer finished                               |
| FAILED    | dead                  | a delivery is dead (in the DLQ), awaiting reprocess   |

Reprocessing a FAILED row puts its dead deliveries back to pending (attempts 0, due now), so only
the consumers that died run again; the row reads PENDING until they finish.
"""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.response import Response

from core.api.pagination import CursorField
from core.api.schema import REQUEST_ID_PARAMETER, errors, ok, request_example
from core.api.views import ApiView
from core.replica.routing import replica_view
from eventbus.api import examples, scopes
from eventbus.api.serializers import EventFilterSerializer, StrictCharField, StrictSerializer
from eventbus.api.views import EventView, events_page_response
from eventbus.operations import selectors, services
from eventbus.store.models import EventLog

OUTBOX_STATUSES: dict[str, tuple[str, ...]] = {
    "PENDING": ("pending", "processing"),
    "PUBLISHED": ("done",),
    "FAILED": ("dead",),
}
_SEED_STATUS = {ours: seed for seed, statuses in OUTBOX_STATUSES.items() for ours in statuses}


class OutboxFilterSerializer(StrictSerializer):
    status = serializers.ChoiceField(choices=list(OUTBOX_STATUSES), required=False)
    limit = serializers.IntegerField(required=False, min_value=1, help_text="Default 50, max 200.")
    cursor = CursorField(required=False, help_text="`next_cursor` of the previous page.")

    validate_limit = EventFilterSerializer.validate_limit


class OutboxRowSerializer(serializers.Serializer):
    """An event in the outbox's envelope (aggregate, correlation and causation ids), in this
    API's snake_case."""

    id = serializers.UUIDField(help_text="The event id (an outbox row's id is its event's id).")
    event_type = serializers.CharField()
    event_version = serializers.SerializerMethodField()
    organization_id = serializers.UUIDField()
    aggregate_type = serializers.CharField(source="entity_kind")
    aggregate_id = serializers.UUIDField(source="entity_id", allow_null=True)
    correlation_id = serializers.SerializerMethodField()
    causation_id = serializers.SerializerMethodField()
    payload = serializers.DictField()
    status = serializers.SerializerMethodField()
    attempts = serializers.IntegerField(help_text="Failed attempts, all consumers together.")
    last_error = serializers.CharField(allow_null=True)
    available_at = serializers.DateTimeField(
        source="next_attempt_at", allow_null=True, help_text="When the latest retry is due."
    )
    occurred_at = serializers.DateTimeField(source="created_at")

    @extend_schema_field(OpenApiTypes.INT)
    def get_event_version(self, event: EventLog) -> Any:
        return event.metadata.get("schema_version")

    @extend_schema_field({"type": "string", "nullable": True})
    def get_correlation_id(self, event: EventLog) -> Any:
        """The trace id when the producer set one, else the request id."""
        return event.metadata.get("trace_id") or event.metadata.get("request_id")

    @extend_schema_field({"type": "string", "format": "uuid", "nullable": True})
    def get_causation_id(self, event: EventLog) -> Any:
        """The event that caused this one (a pipeline's trigger event), when there is one."""
        return event.metadata.get("causation_id")

    @extend_schema_field({"type": "string", "enum": list(OUTBOX_STATUSES)})
    def get_status(self, event: EventLog) -> str:
        return _SEED_STATUS[event.status]


class OutboxPageSerializer(serializers.Serializer):
    results = OutboxRowSerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True)
    next = serializers.URLField(allow_null=True)


class OutboxReprocessSerializer(StrictSerializer):
    reason = StrictCharField(required=False, allow_blank=True, max_length=1000, default="")


class OutboxReprocessResultSerializer(serializers.Serializer):
    moved = serializers.IntegerField(help_text="Dead deliveries put back to pending.")
    row = OutboxRowSerializer()


class OutboxListView(ApiView):
    required_scopes = {"GET": scopes.OUTBOX_READ}

    @extend_schema(
        operation_id="outbox_list",
        summary="List outbox rows, newest first",
        description="The event log as an outbox: one row per event with its overall status "
        "(`PENDING`, `PUBLISHED`, `FAILED`), newest first, filterable by status. "
        "Kept for integrations written against the outbox; new ones should use "
        "`GET /api/v1/events`.",
        parameters=[OutboxFilterSerializer, REQUEST_ID_PARAMETER],
        responses={200: ok(OutboxPageSerializer, examples.OUTBOX_PAGE), **errors(400, 403)},
    )
    @replica_view
    def get(self, request: Any) -> Response:
        query = self.validated(OutboxFilterSerializer, request.query_params.dict())
        statuses = OUTBOX_STATUSES.get(query.get("status", ""))
        return events_page_response(request, query, selectors.EventFilters(statuses), _rows)


class OutboxReprocessView(EventView):
    required_scopes = {"POST": scopes.OUTBOX_REPROCESS}

    @extend_schema(
        operation_id="outbox_reprocess",
        summary="Retry a failed outbox row",
        description="Puts a `FAILED` row back to `PENDING`: its failed deliveries are queued "
        "again. 409 for a row in any other status. New integrations should use "
        "`POST /api/v1/events/{event_id}/reprocess`.",
        request=OutboxReprocessSerializer,
        examples=[
            request_example("Retry after the ERP came back", examples.OUTBOX_REPROCESS_REQUEST)
        ],
        parameters=[REQUEST_ID_PARAMETER],
        responses={
            200: ok(OutboxReprocessResultSerializer, examples.OUTBOX_REPROCESSED),
            **errors(
                400,
                403,
                404,
                409,
                413,
                415,
                e409="The row is PUBLISHED; only FAILED rows can be reprocessed.",
            ),
        },
    )
    def post(self, request: Any, event_id: uuid.UUID) -> Response:
        moved, event = self.act(
            request,
            event_id,
            body=OutboxReprocessSerializer,
            action=services.event_reprocess,
            nothing=lambda event: (
                f"The row is {_SEED_STATUS[event.status]}; only FAILED rows can be reprocessed."
            ),
        )
        result = {"moved": moved, "row": event}
        return Response(OutboxReprocessResultSerializer(result).data)


def _rows(events: Any) -> list[Any]:
    return list(OutboxRowSerializer(events, many=True).data)
