"""`/api/v1/lgpd/data-requests`: create (lgpd:write), list and read (lgpd:read), per organization.

The tenant comes from the API key; a contact of another organization is "no such contact".
Views parse, call one service or selector, format.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from deskcomm import context
from deskcomm.api.conf import api_settings
from deskcomm.api.pagination import CursorField, Position, page
from deskcomm.api.schema import REQUEST_ID_PARAMETER, errors
from deskcomm.api.views import ApiView
from eventbus.api.serializers import EventFilterSerializer, StrictSerializer
from lgpd import exports, selectors, services
from lgpd.models import DataRequest
from lgpd.scopes import LGPD_READ, LGPD_WRITE


class DataRequestInput(StrictSerializer):
    contact_id = serializers.UUIDField(help_text="A contact of the key's organization.")
    kind = serializers.ChoiceField(
        choices=DataRequest.Kind.choices,
        help_text="`access`: an export of everything held (D+7); `redact`: anonymization (D+15).",
    )


class DataRequestFilter(StrictSerializer):
    contact_id = serializers.UUIDField(required=False)
    limit = serializers.IntegerField(required=False, min_value=1, help_text="Default 50, max 200.")
    cursor = CursorField(required=False, help_text="`next_cursor` of the previous page.")

    validate_limit = EventFilterSerializer.validate_limit


class DataRequestSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    contact_id = serializers.UUIDField()
    kind = serializers.CharField()
    channel = serializers.CharField()
    status = serializers.CharField()
    requested_by = serializers.CharField()
    received_at = serializers.DateTimeField()
    export_generated_at = serializers.DateTimeField(allow_null=True)
    export_expires_at = serializers.DateTimeField(allow_null=True)
    export_sha256 = serializers.CharField(allow_blank=True)
    export_url = serializers.SerializerMethodField(
        help_text="Signed download link while the export exists and has not expired."
    )
    redacted_at = serializers.DateTimeField(allow_null=True)
    sla_warned_at = serializers.DateTimeField(allow_null=True)
    sla_escalated_at = serializers.DateTimeField(allow_null=True)
    completed_at = serializers.DateTimeField(allow_null=True)

    def get_export_url(self, request: DataRequest) -> str | None:
        expires = request.export_expires_at
        if not request.export_name or request.export_deleted_at or not expires:
            return None
        return exports.download_url(request) if timezone.now() < expires else None


class DataRequestPageSerializer(serializers.Serializer):
    results = DataRequestSerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True)
    next = serializers.URLField(allow_null=True)


CREATE_EXAMPLE = OpenApiExample(
    "A contact asked for a copy of their data",
    request_only=True,
    value={"contact_id": "3f2c681b-8281-48ec-9c16-bbe021c83df3", "kind": "access"},
)


class DataRequestsView(ApiView):
    required_scopes = {"GET": LGPD_READ, "POST": LGPD_WRITE}

    @extend_schema(
        operation_id="lgpd_data_requests_list",
        summary="List the organization's data-subject requests, newest first",
        parameters=[DataRequestFilter, REQUEST_ID_PARAMETER],
        responses={200: DataRequestPageSerializer, **errors(400, 403)},
    )
    def get(self, request: Any) -> Response:
        query = self.validated(DataRequestFilter, request.query_params.dict())
        limit = query.get("limit") or int(api_settings.PAGE_SIZE)
        cursor: Position | None = query.get("cursor")
        rows = selectors.data_requests_page(
            organization_id=self.client(request).organization_id,
            before=(cursor.created_at, cursor.id) if cursor else None,
            limit=limit + 1,
            contact_id=query.get("contact_id"),
        )
        return Response(
            page(request, rows, limit=limit, position_of=_position, render=_render_many)
        )

    @extend_schema(
        operation_id="lgpd_data_requests_create",
        summary="Record an access or redaction request for a contact",
        request=DataRequestInput,
        examples=[CREATE_EXAMPLE],
        parameters=[REQUEST_ID_PARAMETER],
        responses={201: DataRequestSerializer, **errors(400, 403, 413, 415)},
    )
    def post(self, request: Any) -> Response:
        body = self.validated(DataRequestInput, request.data)
        client = self.client(request)
        with context.bind(actor_id=client.actor, source="api"):
            try:
                created = services.data_request_create(
                    organization_id=client.organization_id,
                    contact_id=body["contact_id"],
                    kind=body["kind"],
                    channel=DataRequest.Channel.API,
                    actor=client.actor,
                )
            except services.UnknownContactError as exc:
                raise serializers.ValidationError({"contact_id": [str(exc)]}) from None
        return Response(DataRequestSerializer(created).data, status=201)


class DataRequestDetailView(ApiView):
    required_scopes = {"GET": LGPD_READ}

    @extend_schema(
        operation_id="lgpd_data_requests_retrieve",
        summary="One data-subject request and its timeline",
        parameters=[REQUEST_ID_PARAMETER],
        responses={200: DataRequestSerializer, **errors(403, 404)},
    )
    def get(self, request: Any, request_id: uuid.UUID) -> Response:
        found = selectors.data_request_get(
            organization_id=self.client(request).organization_id, request_id=request_id
        )
        if found is None:
            raise NotFound("No such data request in this organization.")
        return Response(DataRequestSerializer(found).data)


def _position(row: DataRequest) -> Position:
    return Position(row.received_at, row.id)


def _render_many(rows: Any) -> list[Any]:
    return list(DataRequestSerializer(rows, many=True).data)
