"""`/api/v1/lgpd/data-requests`: create (lgpd:write), list, read and download the export
(lgpd:read), per organization; `/api/v1/contacts/<id>/consents`: record (consents:write) and
list (consents:read) a contact's consents.

The tenant comes from the API key; a contact or request of another organization is "no such
contact" / 404. Views parse, call one service or selector, format.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from core import context
from core.api.authentication import ApiClient
from core.api.conf import api_settings
from core.api.errors import Gone, InvalidState
from core.api.pagination import CursorField, Position, page
from core.api.permissions import WriteImpliesRead
from core.api.schema import REQUEST_ID_PARAMETER, errors, ok, request_example
from core.api.serializers import StrictBooleanField
from core.api.views import ApiView, found_or_404
from core.replica.routing import replica_view
from crm.models import Contact
from eventbus.api.serializers import EventFilterSerializer, StrictCharField, StrictSerializer
from lgpd import api_examples as examples
from lgpd import exports, selectors, services
from lgpd.models import DataRequest
from lgpd.scopes import CONSENTS_READ, CONSENTS_WRITE, LGPD_READ, LGPD_WRITE
from lgpd.views import serve_export


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
    export_deleted_at = serializers.DateTimeField(allow_null=True)
    export_deleted_reason = serializers.CharField(allow_blank=True)
    export_link_sent_at = serializers.DateTimeField(
        allow_null=True, help_text="When the single-use link was e-mailed to the data subject."
    )
    export_link_used_at = serializers.DateTimeField(allow_null=True)
    export_url = serializers.SerializerMethodField(
        help_text="While the export can be downloaded: its API path (needs `lgpd:read`)."
    )
    redacted_at = serializers.DateTimeField(allow_null=True)
    sla_warned_at = serializers.DateTimeField(allow_null=True)
    sla_escalated_at = serializers.DateTimeField(allow_null=True)
    completed_at = serializers.DateTimeField(allow_null=True)

    def get_export_url(self, request: DataRequest) -> str | None:
        try:
            exports.check_available(request)
        except exports.Unavailable:
            return None
        return exports.api_url(request)


class DataRequestPageSerializer(serializers.Serializer):
    results = DataRequestSerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True)
    next = serializers.URLField(allow_null=True)


CREATE_EXAMPLE = request_example(
    "A contact asked for a copy of their data", examples.CREATE_REQUEST
)
NOT_FOUND = "No such data request in this organization."


class DataRequestsView(ApiView):
    required_scopes = {"GET": LGPD_READ, "POST": LGPD_WRITE}

    @extend_schema(
        operation_id="lgpd_data_requests_list",
        summary="List data-subject requests",
        description="The organization's LGPD requests (access and redaction), newest first, "
        "with their status and legal due date; cursor-paginated (follow `next`).",
        parameters=[DataRequestFilter, REQUEST_ID_PARAMETER],
        responses={200: ok(DataRequestPageSerializer, examples.PAGE), **errors(400, 403)},
    )
    @replica_view
    def get(self, request: Any) -> Response:
        query = self.validated(DataRequestFilter, request.query_params.dict())
        limit = query.get("limit") or api_settings.PAGE_SIZE
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
        summary="Create a data-subject request",
        description="Records a contact's access (export) or redaction request. The work runs "
        "in the background; poll the request (or subscribe to its events) for the outcome. "
        "The legal deadline counts from now.",
        request=DataRequestInput,
        examples=[CREATE_EXAMPLE],
        parameters=[REQUEST_ID_PARAMETER],
        responses={201: ok(DataRequestSerializer, examples.RECEIVED), **errors(400, 403, 413, 415)},
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
        summary="Get a data-subject request",
        description="One request with its status, due date and timeline (received, "
        "processing, done or failed), and the export link once an access request is ready.",
        parameters=[REQUEST_ID_PARAMETER],
        responses={
            200: ok(DataRequestSerializer, examples.COMPLETED),
            **errors(403, 404, e404=NOT_FOUND),
        },
    )
    def get(self, request: Any, request_id: uuid.UUID) -> Response:
        return Response(DataRequestSerializer(_found(self.client(request), request_id)).data)


class DataRequestExportView(ApiView):
    required_scopes = {"GET": LGPD_READ}

    @extend_schema(
        operation_id="lgpd_data_requests_export",
        summary="Download an access request's export",
        description="The personal data bundle of a completed access request, as an attachment. "
        "Every download is recorded in the audit log; 410 once the export has expired.",
        parameters=[REQUEST_ID_PARAMETER],
        responses={
            (200, "application/json"): OpenApiResponse(
                OpenApiTypes.BINARY, description="The export bundle, as an attachment."
            ),
            **errors(403, 404, 410, e404=NOT_FOUND),
        },
    )
    def get(self, request: Any, request_id: uuid.UUID) -> HttpResponseBase:
        client = self.client(request)
        found = _found(client, request_id)
        try:
            exports.check_available(found)
        except exports.Unavailable as exc:
            raise Gone(str(exc)) from None
        return serve_export(found, actor=client.actor, channel=services.DownloadChannel.API)


def _found(client: ApiClient, request_id: uuid.UUID) -> DataRequest:
    found = selectors.data_request_get(
        organization_id=client.organization_id, request_id=request_id
    )
    return found_or_404(found, "No such data request in this organization.")


def _position(row: DataRequest) -> Position:
    return Position(row.received_at, row.id)


def _render_many(rows: Any) -> list[Any]:
    return list(DataRequestSerializer(rows, many=True).data)


class ConsentInput(StrictSerializer):
    consent_type = serializers.RegexField(
        r"^[a-z][a-z0-9_]{0,63}$",
        help_text="What the consent is for, e.g. `marketing_whatsapp` (the WhatsApp sends "
        "check it).",
    )
    granted = StrictBooleanField(help_text="true: given; false: withdrawn.")
    source = StrictCharField(
        max_length=64, required=False, help_text="Where it was given (default `api`)."
    )
    evidence = StrictCharField(
        max_length=2000,
        required=False,
        allow_blank=True,
        help_text="What the person said or submitted.",
    )


class ConsentSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    contact_id = serializers.UUIDField()
    consent_type = serializers.CharField()
    granted = serializers.BooleanField()
    source = serializers.CharField()
    evidence = serializers.CharField(allow_blank=True)
    recorded_at = serializers.DateTimeField()


class ConsentListSerializer(serializers.Serializer):
    results = ConsentSerializer(many=True)


CONTACT_NOT_FOUND = "No such contact in this organization."
REDACTED_CONTACT = "This contact's personal data was redacted: no consent can be recorded."


class ConsentsView(ApiView):
    permission_classes = [WriteImpliesRead]
    write_scope = CONSENTS_WRITE
    required_scopes = {"GET": CONSENTS_READ, "POST": CONSENTS_WRITE}

    @extend_schema(
        operation_id="consents_list",
        summary="List a contact's consents",
        description="Every consent record of the contact, newest first: what was given or "
        "withdrawn, where, and the evidence. The latest record of a type is the one in force.",
        tags=["consents"],
        parameters=[REQUEST_ID_PARAMETER],
        responses={
            200: ok(ConsentListSerializer, examples.CONSENTS),
            **errors(403, 404, e404=CONTACT_NOT_FOUND),
        },
    )
    def get(self, request: Any, contact_id: uuid.UUID) -> Response:
        contact = _contact(self.client(request), contact_id)
        rows = selectors.consents_of(contact)
        return Response({"results": ConsentSerializer(rows, many=True).data})

    @extend_schema(
        operation_id="consents_create",
        summary="Record a consent",
        description="Records that the contact gave or withdrew a consent, with its evidence, "
        "and emits `lgpd.consent_changed`. A withdrawn `marketing_whatsapp` stops WhatsApp "
        "sends to the contact. A redacted contact is a 409.",
        tags=["consents"],
        request=ConsentInput,
        examples=[request_example("Opted out of offers", examples.CONSENT_REQUEST)],
        parameters=[REQUEST_ID_PARAMETER],
        responses={
            201: ok(ConsentSerializer, examples.CONSENT),
            **errors(400, 403, 404, 409, 413, 415, e404=CONTACT_NOT_FOUND, e409=REDACTED_CONTACT),
        },
    )
    def post(self, request: Any, contact_id: uuid.UUID) -> Response:
        client = self.client(request)
        contact = _contact(client, contact_id)
        body = self.validated(ConsentInput, request.data)
        if contact.anonymized_at is not None:
            raise InvalidState(REDACTED_CONTACT)
        with context.bind(actor_id=client.actor, source="api"):
            record = services.consent_record(
                contact=contact,
                consent_type=body["consent_type"],
                granted=body["granted"],
                source=body.get("source") or "api",
                evidence=body.get("evidence", ""),
            )
        return Response(ConsentSerializer(record).data, status=201)


def _contact(client: ApiClient, contact_id: uuid.UUID) -> Contact:
    found = selectors.contact_get(organization_id=client.organization_id, contact_id=contact_id)
    return found_or_404(found, CONTACT_NOT_FOUND)
