"""OpenAPI (drf-spectacular) pieces shared by every endpoint: auth scheme, error shape, headers.

Imported by `DeskcommConfig.ready()` so the authentication extension is registered before the
first schema is generated.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import get_doc
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


class IntegratorSchema(AutoSchema):
    """Operation descriptions for integrators: the operation's own text (its `extend_schema`
    description, else its handler's docstring), never a base class's; then the scope it needs."""

    def get_description(self) -> str:
        handler = getattr(self.view, self.method.lower(), None)
        own_doc = handler.__doc__ if handler is not None else None
        return get_doc(handler) if own_doc else ""

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation = super().get_operation(*args, **kwargs)
        scope = required_scope(self.view, self.method)
        if operation is None or scope is None:
            return operation
        operation["x-required-scope"] = scope
        description = operation.get("description", "")
        if f"`{scope}`" not in description:
            stated = f"**Required scope:** `{scope}`."
            operation["description"] = f"{description}\n\n{stated}".strip()
        return operation


def required_scope(view: Any, method: str) -> str | None:
    """The API key scope an operation needs (core.api.permissions.HasRequiredScope)."""
    scopes: dict[str, str] = getattr(view, "required_scopes", {})
    return scopes.get(method.upper())


PROBE_RESPONSE = {"type": "object", "additionalProperties": True}
PROBES = {
    "/api/ping": {
        "operationId": "probes_ping",
        "summary": "Liveness: the service answers",
        "description": 'Answers `{"status": "ok"}` as soon as the process is up; it touches '
        "no database and needs no API key. Use it for load balancer liveness probes; readiness "
        "is `/api/v1/health`.",
        "responses": {"200": {"description": "The process is up."}},
    },
    "/api/v1/health": {
        "operationId": "probes_health",
        "summary": "Readiness: the service and its dependencies",
        "description": "Runs every health check (database, queues, storage...) in parallel "
        "within a time budget. 200 with `status: ok` when every required check passed, 503 "
        "with `status: fail` otherwise; `checks` has one entry per check. No API key needed, "
        "not rate-limited.",
        "responses": {
            "200": {"description": "Every required check passed."},
            "503": {"description": "A required check failed or timed out."},
        },
    },
}


def add_probe_operations(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """POSTPROCESSING_HOOKS: the liveness and readiness probes (plain Django views, no API key),
    first in the document; then the rest, versioned (v1) operations before the legacy outbox."""
    probes = {path: {"get": _probe(spec)} for path, spec in PROBES.items()}
    paths = sorted(result.get("paths", {}).items(), key=lambda item: _path_order(item[0]))
    result["paths"] = {**probes, **dict(paths)}
    return result


def _probe(spec: dict[str, Any]) -> dict[str, Any]:
    json_body = {"application/json": {"schema": PROBE_RESPONSE}}
    responses = {code: {**r, "content": json_body} for code, r in spec["responses"].items()}
    return {**spec, "tags": ["health"], "security": [], "responses": responses}


def _path_order(path: str) -> tuple[bool, str]:
    return (not path.startswith("/api/v1/"), path)
