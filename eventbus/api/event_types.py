"""`GET /api/v1/event-types`: the event catalog as an integrator sees it.

Every declared type with its owner, the doors open to it, each schema version's payload as a
JSON Schema (the required fields; more are allowed), whether the version is still accepted, and
whether the calling key may emit it (the `api` door is open to the type and the key holds
`events:write`). Reading it takes `events:read`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from core.api.schema import REQUEST_ID_PARAMETER, errors, ok
from core.api.views import ApiView
from eventbus.api import examples, scopes
from eventbus.store import catalog


class SchemaVersionSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    description = serializers.CharField(allow_blank=True)
    superseded_on = serializers.DateField(allow_null=True)
    accepted = serializers.BooleanField(
        help_text="Whether an emit of this version is still accepted (not past its support window)."
    )
    payload_schema = serializers.DictField(help_text="JSON Schema (2020-12) of the payload.")


class EventTypeSerializer(serializers.Serializer):
    event_type = serializers.CharField()
    owner = serializers.CharField(help_text="The app that owns the type and emits it.")
    doors = serializers.ListField(
        child=serializers.ChoiceField(choices=catalog.DOORS),
        help_text="Who may emit it: `app` (the owner's code), `api` (POST /api/v1/events), "
        "`pipeline` (a pipeline's emit-event node).",
    )
    emittable = serializers.BooleanField(
        help_text="Whether this key may emit it through POST /api/v1/events."
    )
    latest_version = serializers.IntegerField()
    priority = serializers.IntegerField()
    versions = SchemaVersionSerializer(many=True)


class EventTypeListSerializer(serializers.Serializer):
    results = EventTypeSerializer(many=True)


def payload_schema(schema: catalog.EventSchema) -> dict[str, Any]:
    """The version's payload as a JSON Schema: an object with its required fields."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"{schema.name} v{schema.version}",
        "type": "object",
        "required": list(schema.required),
        "properties": {name: {} for name in schema.required},
        "additionalProperties": True,
    }


def describe(name: str, *, may_write: bool) -> dict[str, Any]:
    today = timezone.localdate()
    versions = catalog.versions_of(name)
    doors = catalog.doors_of(name)
    return {
        "event_type": name,
        "owner": catalog.owner_of(name),
        "doors": [door for door in catalog.DOORS if door in doors],
        "emittable": may_write and catalog.API in doors,
        "latest_version": versions[-1].version,
        "priority": catalog.priority_of(name),
        "versions": [
            {
                "version": v.version,
                "description": v.description,
                "superseded_on": v.superseded_on,
                "accepted": v.is_supported(today),
                "payload_schema": payload_schema(v),
            }
            for v in versions
        ],
    }


class EventTypesView(ApiView):
    required_scopes: ClassVar[dict[str, str]] = {"GET": scopes.EVENTS_READ}

    @extend_schema(
        operation_id="event_types_list",
        summary="List the event types",
        description="The event catalog: every type, the app that owns it, the doors it may be "
        "emitted through, each version's payload schema, and whether this key may emit it "
        "(`emittable`: the type is open to the API and the key holds `events:write`). "
        "Any other type sent to POST /api/v1/events is refused with 403 "
        "`event_type_not_emittable`.",
        parameters=[REQUEST_ID_PARAMETER],
        responses={200: ok(EventTypeListSerializer, examples.EVENT_TYPES), **errors(403)},
    )
    def get(self, request: Any) -> Response:
        may_write = scopes.EVENTS_WRITE in self.client(request).scopes
        results = [describe(name, may_write=may_write) for name in catalog.declared_types()]
        return Response(EventTypeListSerializer({"results": results}).data)
