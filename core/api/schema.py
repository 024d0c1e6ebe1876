"""OpenAPI (drf-spectacular) pieces shared by every endpoint: auth scheme, error shape, headers.

Imported by `DeskcommConfig.ready()` so the authentication extension is registered before the
first schema is generated.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

ERROR_DESCRIPTIONS = {
    400: "Invalid input (`validation_error`, `parse_error`).",
    401: "No API key, or an invalid or revoked one.",
    403: "The API key lacks the scope this operation needs.",
    404: "No such object in the key's organization (other tenants' ids are 404 too).",
    409: "Conflict: an Idempotency-Key reused with another body, or an object in the wrong state.",
    410: "Gone: the object existed but is no longer available (e.g. an expired export).",
    413: "The request body is over the size limit.",
    415: "The body is not JSON.",
    429: "Rate limit exceeded; retry after `Retry-After` seconds.",
}

REQUEST_ID_PARAMETER = OpenApiParameter(
    "X-Request-ID",
    str,
    OpenApiParameter.HEADER,
    required=False,
    description="Your id for this request (1-128 of `A-Za-z0-9._:@+=/-`); one is generated "
    "otherwise. Returned in the `X-Request-ID` response header and stored with events and audit "
    "records.",
)


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "core.api.authentication.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "dck_<prefix>_<secret>",
            "description": "An organization's API key: `Authorization: Bearer dck_...`.",
        }


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Stable, machine-readable, e.g. `validation_error`.")
    message = serializers.CharField(help_text="For people.")
    fields = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Problems per field (dotted paths for nested fields; header names for headers).",
    )
    request_id = serializers.CharField(help_text="Same as the `X-Request-ID` response header.")


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


def errors(*statuses: int) -> dict[int, OpenApiResponse]:
    """The documented error responses of an operation (401 and 429 apply to every one)."""
    wanted = sorted({401, 429, *statuses})
    return {code: OpenApiResponse(ErrorSerializer, ERROR_DESCRIPTIONS[code]) for code in wanted}


def add_common_headers(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """POSTPROCESSING_HOOKS: X-Request-ID on every response, Retry-After on every 429."""
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            for status, response in operation.get("responses", {}).items():
                headers = response.setdefault("headers", {})
                headers["X-Request-ID"] = {
                    "schema": {"type": "string"},
                    "description": "The request id (yours if it was sane, else generated).",
                }
                if status == "429":
                    headers["Retry-After"] = {
                        "schema": {"type": "integer"},
                        "description": "Seconds to wait before retrying.",
                    }
    return result
