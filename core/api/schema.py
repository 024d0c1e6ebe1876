"""OpenAPI (drf-spectacular) pieces shared by every endpoint: auth scheme, error shape and its
examples, response examples, headers, how to get an API key.

Imported by `DeskcommConfig.ready()` so the authentication extension is registered before the
first schema is generated. Every operation documents its answers with an example: `ok()` for
its success (each app's `api/examples.py` holds the values), `errors()` for its error statuses
(one example each, in the one error shape). A schema's description is its serializer's own
docstring only, never a base class's (`IntegratorSchema`): those are written for developers.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import get_doc
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
)
from rest_framework import serializers

from core import scopes

ViewMethod = TypeVar("ViewMethod", bound=Callable[..., Any])

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
EXAMPLE_REQUEST_ID = "9b2f6c1e-5d4a-4f3b-8e7d-2a1c0b9f8e7d"
# One example answer per error status: (code, message, fields).
ERROR_EXAMPLES: dict[int, tuple[str, str, dict[str, list[str]]]] = {
    400: (
        "validation_error",
        "The request is invalid; see `fields` for each problem.",
        {"reason": ["Not a valid string."]},
    ),
    401: ("not_authenticated", "Authentication credentials were not provided.", {}),
    403: (
        "permission_denied",
        "This API key lacks the scope 'events:write' needed here.",
        {},
    ),
    404: ("not_found", "No such event in this organization.", {}),
    409: (
        "invalid_state",
        "Nothing to reprocess: no dead delivery (or done, for a consumer).",
        {},
    ),
    410: ("gone", "The export expired on 2026-04-01 and was deleted.", {}),
    413: ("payload_too_large", "The request body is larger than this server accepts.", {}),
    415: ("unsupported_media_type", 'Unsupported media type "text/plain" in request.', {}),
    429: ("throttled", "Request was throttled. Expected available in 12 seconds.", {}),
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


Said = str | tuple[str, str]  # an example's message, or its (code, message)


def error_example(status: int, said: Said = "") -> dict[str, Any]:
    """The error document of an example answer with `status`: its usual code and message, or
    the message (with the code) `said`."""
    code, message, fields = ERROR_EXAMPLES[status]
    if said:
        code, message = said if isinstance(said, tuple) else (code, said)
        fields = {}
    return {
        "error": {
            "code": code,
            "message": message,
            "fields": fields,
            "request_id": EXAMPLE_REQUEST_ID,
        }
    }


def errors(*statuses: int, **said: Said) -> dict[int, OpenApiResponse]:
    """The documented error responses of an operation (401 and 429 apply to every one), each
    with an example; `said` (`e409="..."`, or `e403=(code, message)`) gives an operation's own
    example for a status."""
    wanted = sorted({401, 429, *statuses})
    responses = {}
    for status in wanted:
        body = error_example(status, said.get(f"e{status}", ""))
        example = OpenApiExample(body["error"]["code"], value=body)
        responses[status] = OpenApiResponse(
            ErrorSerializer, ERROR_DESCRIPTIONS[status], examples=[example]
        )
    return responses


def ok(
    serializer: Any, example: Any, *, summary: str = "", description: str = ""
) -> OpenApiResponse:
    """A success response documented with an example answer (`example`: its body)."""
    return OpenApiResponse(
        serializer,
        description,
        examples=[OpenApiExample(summary or "Example", value=example)],
    )


def request_example(summary: str, value: Any) -> OpenApiExample:
    """An example request body."""
    return OpenApiExample(summary, value=value, request_only=True)


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
    """Descriptions for integrators: an operation's own text (its `extend_schema` description,
    else its handler's docstring), never a base class's, then the scope it needs; a schema's is
    its serializer's own docstring, never a base class's (a mixin's notes are for developers)."""

    def get_description(self) -> str:
        handler = getattr(self.view, self.method.lower(), None)
        own_doc = handler.__doc__ if handler is not None else None
        return get_doc(handler) if own_doc else ""

    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_basic_serializer(serializer, direction)
        own = type(serializer).__dict__.get("__doc__")
        extended = getattr(serializer, "_spectacular_annotation", {}).get("description")
        if extended:
            return schema
        if own:
            schema["description"] = inspect.cleandoc(own)
        else:
            schema.pop("description", None)
        return schema

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
HEALTHY: dict[str, Any] = {
    "status": "ok",
    "checks": {
        "database": {"status": "ok", "required": True, "duration_ms": 3},
        "storage": {"status": "ok", "required": True, "duration_ms": 1},
        "broker": {"status": "ok", "required": True, "duration_ms": 4},
    },
    "version": "0.1.0",
    "commit": "d7937ed",
}
PROBES = {
    "/api/ping": {
        "operationId": "probes_ping",
        "summary": "Liveness: the service answers",
        "description": 'Answers `{"status": "ok"}` as soon as the process is up; it touches '
        "no database and needs no API key. Use it for load balancer liveness probes; readiness "
        "is `/api/v1/health`.",
        "responses": {"200": {"description": "The process is up.", "example": {"status": "ok"}}},
    },
    "/api/v1/health": {
        "operationId": "probes_health",
        "summary": "Readiness: the service and its dependencies",
        "description": "Runs every health check (database, queues, storage...) in parallel "
        "within a time budget. 200 with `status: ok` when every required check passed, 503 "
        "with `status: fail` otherwise; `checks` has one entry per check. No API key needed, "
        "not rate-limited.",
        "responses": {
            "200": {
                "description": "Every required check passed.",
                "example": {**HEALTHY, "duration_ms": 5},
            },
            "503": {
                "description": "A required check failed or timed out.",
                "example": {
                    **HEALTHY,
                    "status": "fail",
                    "checks": {
                        **HEALTHY["checks"],
                        "broker": {"status": "timeout", "required": True},
                    },
                    "duration_ms": 2003,
                },
            },
        },
    },
}


API_KEYS = """

## Getting an API key

Every operation but the health probes needs an API key of your organization, sent as
`Authorization: Bearer dck_<prefix>_<secret>`. A platform operator creates it, with the scopes
the integration needs and nothing more, in the admin (*API keys*, *Add API key*) or on the server:

    python manage.py create_api_key --organization <your-slug> --name "ERP sync" \\
        --scopes events:read events:write

The key is printed once, then only its prefix is shown; `manage.py revoke_api_key <prefix>`
revokes it. Each operation states the scope it needs (**Required scope**); a key without it gets
`403 permission_denied`. The scopes:

"""


def add_api_key_guide(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """POSTPROCESSING_HOOKS: how to get an API key, and every declared scope, in the API's
    description (core.scopes: what each app declared, so the list is never stale)."""
    table = "\n".join(
        ["| scope | allows |", "|---|---|"]
        + [f"| `{name}` | {text} |" for name, text in scopes.declared().items()]
    )
    info = result.setdefault("info", {})
    info["description"] = f"{info.get('description', '')}{API_KEYS}{table}\n"
    return result


def add_probe_operations(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """POSTPROCESSING_HOOKS: the liveness and readiness probes (plain Django views, no API key),
    first in the document; then the rest, versioned (v1) operations before the legacy outbox."""
    probes = {path: {"get": _probe(spec)} for path, spec in PROBES.items()}
    paths = sorted(result.get("paths", {}).items(), key=lambda item: _path_order(item[0]))
    result["paths"] = {**probes, **dict(paths)}
    return result


def _probe(spec: dict[str, Any]) -> dict[str, Any]:
    responses = {
        code: {
            "description": r["description"],
            "content": {"application/json": {"schema": PROBE_RESPONSE, "example": r["example"]}},
        }
        for code, r in spec["responses"].items()
    }
    return {**spec, "tags": ["health"], "security": [], "responses": responses}


def _path_order(path: str) -> tuple[bool, str]:
    return (not path.startswith("/api/v1/"), path)


def operation(
    name: str,
    summary: str,
    *,
    description: str,
    scope: str,
    tag: str,
    implied_by: str | None = None,
    parameters: Sequence[Any] = (),
    **kwargs: Any,
) -> Callable[[ViewMethod], ViewMethod]:
    """`extend_schema` of an operation: id `<tag>_<name>`, its tag, the scope it needs (and the
    one that implies it), the X-Request-ID parameter."""
    note = f"Scope: `{scope}`" + (f" (or `{implied_by}`)." if implied_by else ".")
    return extend_schema(
        operation_id=f"{tag}_{name}",
        summary=summary,
        description=f"{description}\n\n{note}",
        tags=[tag],
        parameters=[*parameters, REQUEST_ID_PARAMETER],
        **kwargs,
    )


class Operation(Protocol):
    """`operation` with the scope it implies filled in (`write_implies_read`)."""

    def __call__(
        self, name: str, summary: str, *, scope: str, tag: str = ..., **kwargs: Any
    ) -> Callable[[ViewMethod], ViewMethod]: ...


def write_implies_read(read_scope: str, write_scope: str, *, tag: str) -> Operation:
    """`operation` for an API whose write scope implies its read scope (a key that may change
    these may read them: core.api.permissions.WriteImpliesRead), on tag `tag` by default."""

    def scoped(
        name: str, summary: str, *, scope: str, tag: str = tag, **kwargs: Any
    ) -> Callable[[ViewMethod], ViewMethod]:
        implied_by = write_scope if scope == read_scope else None
        return operation(name, summary, scope=scope, tag=tag, implied_by=implied_by, **kwargs)

    return scoped
