"""`/api/v1/events`: emit, list, read, reprocess and discard, scoped to the key's organization."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.serializers import Serializer

import eventbus
from core import context
from core.api import idempotency
from core.api.conf import api_settings
from core.api.errors import InvalidState
from core.api.pagination import Position, page
from core.api.schema import REQUEST_ID_PARAMETER, errors, ok, request_example
from core.api.views import ApiView, found_or_404
from core.models import Organization
from core.replica.routing import replica_view
from eventbus.api import examples, scopes
from eventbus.api.serializers import (
    ActionResultSerializer,
    DiscardSerializer,
    EmitSerializer,
    EventDetailSerializer,
    EventFilterSerializer,
    EventPageSerializer,
    EventSerializer,
    ReprocessSerializer,
    emit_error,
)
from eventbus.operations import selectors, services
from eventbus.store.errors import EmitRateLimited, EventTypeNotEmittable, EventValidationError
from eventbus.store.models import EventLog
from eventbus.store.provenance import Provenance

IDEMPOTENCY_SCOPE = "events.create"
IDEMPOTENCY_PARAMETER = OpenApiParameter(
    idempotency.HEADER,
    str,
    OpenApiParameter.HEADER,
    required=False,
    description="Retry safely: the same key and body within 24 h replays the first response "
    "(with `Idempotent-Replayed: true`); the same key with another body is a 409.",
)

EMIT_EXAMPLE = OpenApiExample(
    "A lead moved to another stage",
    request_only=True,
    value={
        "event_type": "lead.stage_changed",
        "entity_kind": "lead",
        "entity_id": "3f2c681b-8281-48ec-9c16-bbe021c83df3",
        "payload": {"from_stage_id": "new", "to_stage_id": "qualified"},
        "metadata": {"trace_id": "erp-sync-42"},
    },
)


class NotEmittable(exceptions.PermissionDenied):
    """403: the type is not open to the API (its owner did not declare the `api` door)."""

    default_code = EventTypeNotEmittable.code


class EventsView(ApiView):
    required_scopes = {"GET": scopes.EVENTS_READ, "POST": scopes.EVENTS_WRITE}

    @extend_schema(
        operation_id="events_list",
        summary="List events, newest first",
        description="The organization's events, newest first, optionally narrowed by status, "
        "event type, entity, consumer or creation time. Pages are cursor-based: follow `next` "
        "until it is null (a page never skips or repeats an event while new ones arrive).",
        parameters=[EventFilterSerializer, REQUEST_ID_PARAMETER],
        responses={200: ok(EventPageSerializer, examples.EVENT_PAGE), **errors(400, 403)},
    )
    @replica_view
    def get(self, request: Any) -> Response:
        query = self.validated(EventFilterSerializer, request.query_params.dict())
        filters = selectors.EventFilters(
            statuses=[query["status"]] if "status" in query else None,
            event_type=query.get("event_type"),
            entity_kind=query.get("entity_kind"),
            entity_id=query.get("entity_id"),
            created_after=query.get("created_after"),
            created_before=query.get("created_before"),
            consumer=query.get("consumer"),
        )
        return events_page_response(request, query, filters, _events)

    @extend_schema(
        operation_id="events_emit",
        summary="Emit an event",
        description="Records an event for the key's organization and schedules a delivery to "
        "every consumer subscribed to its type (webhooks included). Only the types "
        "`GET /api/v1/event-types` lists as `emittable` may be emitted: any other is refused "
        "with 403 `event_type_not_emittable` (naming the type and the app that owns it) and "
        "nothing is written. The event's `provenance` says it came from this key, in the API "
        "and in every webhook that carries it. An organization emits at most "
        "`EVENTBUS_DOOR_EMIT_RATE` events a minute through the API and pipelines together "
        "(429 with `Retry-After` beyond it). Send an `Idempotency-Key` to retry safely: the "
        "same key and body within 24 h returns the first response.",
        request=EmitSerializer,
        examples=[EMIT_EXAMPLE],
        parameters=[IDEMPOTENCY_PARAMETER, REQUEST_ID_PARAMETER],
        responses={
            201: ok(EventSerializer, {**examples.EVENT, "status": "pending"}),
            **errors(
                400,
                403,
                409,
                413,
                415,
                e403=(
                    "event_type_not_emittable",
                    "lead.won is owned by crm and cannot be emitted through the API: only the "
                    "types listed by GET /api/v1/event-types as emittable are",
                ),
                e409="This Idempotency-Key was already used with a different request body.",
            ),
        },
    )
    def post(self, request: Any) -> Response:
        body = self.validated(EmitSerializer, request.data)
        key = idempotency.key_from(request)
        if key is None:
            return Response(EventSerializer(_emit(request, body)).data, status=201)
        outcome = idempotency.run_once(
            organization_id=self.client(request).organization_id,
            scope=IDEMPOTENCY_SCOPE,
            key=key,
            request_hash=idempotency.body_hash(request.data),
            work=lambda: (201, EventSerializer(_emit(request, body)).data),
        )
        response = Response(outcome.body, status=outcome.status)
        if outcome.replayed:
            response[idempotency.REPLAYED_HEADER] = "true"
        return response


class EventView(ApiView):
    """Base of the views about one event (`<uuid:event_id>` in the path)."""

    def event(self, request: Any, event_id: uuid.UUID) -> EventLog:
        """The organization's event, with deliveries; 404 for any other id (other tenants too)."""
        event = selectors.event_with_deliveries(
            organization_id=self.client(request).organization_id, event_id=event_id
        )
        return found_or_404(event, "No such event in this organization.")

    def act(
        self,
        request: Any,
        event_id: uuid.UUID,
        *,
        body: type[Serializer],
        action: Callable[..., int],
        nothing: Callable[[EventLog], str],
    ) -> tuple[int, EventLog]:
        """Run an operator service on the event (404 first); 409 `nothing(event)` if none moved.

        Returns how many deliveries moved and the event as it is afterwards.
        """
        event = self.event(request, event_id)
        data = self.validated(body, request.data)
        client = self.client(request)
        try:
            moved = action(
                organization_id=client.organization_id,
                event_id=event_id,
                consumer=data.get("consumer"),
                actor=client.actor,
                reason=data["reason"],
            )
        except services.UnknownConsumerError as exc:
            raise serializers.ValidationError({"consumer": [str(exc)]}) from None
        if not moved:
            raise InvalidState(nothing(event))
        return moved, self.event(request, event_id)


class EventDetailView(EventView):
    required_scopes = {"GET": scopes.EVENTS_READ}

    @extend_schema(
        operation_id="events_retrieve",
        summary="Get an event",
        description="One event with its payload and, per consumer, the delivery state "
        "(pending, processing, done, dead), attempts and last error. Events of other "
        "organizations answer 404.",
        parameters=[REQUEST_ID_PARAMETER],
        responses={200: ok(EventDetailSerializer, examples.EVENT_DETAIL), **errors(403, 404)},
    )
    def get(self, request: Any, event_id: uuid.UUID) -> Response:
        return Response(EventDetailSerializer(self.event(request, event_id)).data)


class EventReprocessView(EventView):
    required_scopes = {"POST": scopes.EVENTS_REPROCESS}

    @extend_schema(
        operation_id="events_reprocess",
        summary="Reprocess an event",
        description="Queues the event's failed (dead) deliveries again, or, with `consumer`, "
        "that consumer's delivery even if it succeeded. Each starts again from attempt 1. "
        "409 when there is nothing to reprocess. Recorded in the audit log with your key.",
        request=ReprocessSerializer,
        examples=[request_example("Run one consumer again", examples.REPROCESS_REQUEST)],
        parameters=[REQUEST_ID_PARAMETER],
        responses={
            200: ok(ActionResultSerializer, examples.REPROCESSED),
            **errors(400, 403, 404, 409, 413, 415),
        },
    )
    def post(self, request: Any, event_id: uuid.UUID) -> Response:
        moved, event = self.act(
            request,
            event_id,
            body=ReprocessSerializer,
            action=services.event_reprocess,
            nothing=lambda _: "Nothing to reprocess: no dead delivery (or done, for a consumer).",
        )
        return Response(ActionResultSerializer({"moved": moved, "event": event}).data)


class EventDiscardView(EventView):
    required_scopes = {"POST": scopes.EVENTS_DISCARD}

    @extend_schema(
        operation_id="events_discard",
        summary="Discard an event's failed deliveries",
        description="Gives up on the event's failed (dead) deliveries, or only `consumer`'s: "
        "they will not be retried. A `reason` is required and kept in the audit log. 409 when "
        "the event has no failed delivery.",
        request=DiscardSerializer,
        examples=[request_example("Give up on one consumer", examples.DISCARD_REQUEST)],
        parameters=[REQUEST_ID_PARAMETER],
        responses={
            200: ok(ActionResultSerializer, examples.DISCARDED),
            **errors(
                400,
                403,
                404,
                409,
                413,
                415,
                e409="Nothing to discard: the event has no dead delivery.",
            ),
        },
    )
    def post(self, request: Any, event_id: uuid.UUID) -> Response:
        moved, event = self.act(
            request,
            event_id,
            body=DiscardSerializer,
            action=services.event_discard,
            nothing=lambda _: "Nothing to discard: the event has no dead delivery.",
        )
        return Response(ActionResultSerializer({"moved": moved, "event": event}).data)


def _emit(request: Any, body: dict[str, Any]) -> EventLog:
    client = ApiView.client(request)
    # The key's organization by its id, not loaded (`request.auth.organization` is a query):
    # emit's one statement checks the tenant itself and locks it (FOR KEY SHARE).
    organization = Organization(pk=client.organization_id)
    with context.bind(actor_id=client.actor, source="api"):
        try:
            return eventbus.emit(
                body["event_type"],
                organization=organization,
                entity_kind=body["entity_kind"],
                entity_id=body["entity_id"],
                payload=body["payload"],
                metadata=body["metadata"],
                ordering_key=body["ordering_key"],
                priority=body["priority"],
                provenance=Provenance.api_key(client.prefix),
            )
        except EventTypeNotEmittable as exc:
            raise NotEmittable(str(exc)) from None
        except EmitRateLimited as exc:
            raise exceptions.Throttled(wait=exc.retry_after, detail=str(exc)) from None
        except EventValidationError as exc:
            raise emit_error(exc) from None


def events_page_response(
    request: Any,
    query: dict[str, Any],
    filters: selectors.EventFilters,
    render: Callable[[Sequence[EventLog]], list[Any]],
) -> Response:
    """One page of the organization's events (`limit` and `cursor` from the query)."""
    limit = query.get("limit") or api_settings.PAGE_SIZE
    cursor: Position | None = query.get("cursor")
    rows = selectors.events_page(
        organization_id=ApiView.client(request).organization_id,
        filters=filters,
        before=(cursor.created_at, cursor.id) if cursor else None,
        limit=limit + 1,
    )
    return Response(page(request, rows, limit=limit, position_of=_position, render=render))


def _position(event: EventLog) -> Position:
    return Position(event.created_at, event.id)


def _events(events: Any) -> list[Any]:
    return list(EventSerializer(events, many=True).data)
