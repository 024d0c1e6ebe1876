"""One JSON error shape for every API response that is not a success.

    {"error": {"code": "validation_error", "message": "...", "fields": {"payload": ["..."]},
               "request_id": "..."}}

`code` is stable and machine-readable, `message` is for people, `fields` maps a field (dotted
path for nested ones, the header name for headers) to its problems, `request_id` matches the
`X-Request-ID` response header. DRF's own handler still sets the headers (`WWW-Authenticate`,
`Retry-After`) and rolls back the request's transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core import context

logger = logging.getLogger(__name__)

VALIDATION_MESSAGE = "The request is invalid; see `fields` for each problem."
SERVER_ERROR_MESSAGE = "Internal error; quote the request id when reporting it."
API_PREFIX = "/api/"


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "payload_too_large"
    default_detail = "The request body is larger than this server accepts."


class IdempotencyConflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "idempotency_conflict"
    default_detail = "This Idempotency-Key was already used with a different request body."


class Gone(exceptions.APIException):
    status_code = status.HTTP_410_GONE
    default_code = "gone"
    default_detail = "The object is no longer available."


class InvalidState(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "invalid_state"
    default_detail = "The object is not in a state that allows this action."


def error_body(code: str, message: str, fields: Mapping[str, list[str]] | None = None) -> dict:
    """The error document (the request id comes from the ambient context)."""
    return {
        "error": {
            "code": code,
            "message": message,
            "fields": dict(fields or {}),
            "request_id": context.current().get("request_id", ""),
        }
    }


def exception_handler(exc: Exception, ctx: dict[str, Any]) -> Response:
    """DRF's EXCEPTION_HANDLER: every exception becomes the error shape (unknown ones a 500)."""
    api_exc = _as_api_exception(exc)
    if api_exc is None:
        logger.error("unhandled API error", exc_info=exc)
        return Response(error_body("server_error", SERVER_ERROR_MESSAGE), status=500)
    response = drf_exception_handler(api_exc, ctx)
    assert response is not None  # DRF handles every APIException
    response.data = _body_for(api_exc)
    return response


@csrf_exempt  # no session or form here: a POST to an unknown path is a 404, not a CSRF 403
def api_not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """An /api/ path that names no endpoint (or an id that is not an id): JSON 404."""
    return JsonResponse(error_body("not_found", f"No API endpoint at {request.path}."), status=404)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler400: errors raised before any view (e.g. a disallowed Host) keep the API's shape."""
    if not request.path.startswith(API_PREFIX):
        return defaults.bad_request(request, exception)
    return JsonResponse(error_body("bad_request", "Bad request."), status=400)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: a crash outside DRF's handler, in the API's shape under /api/."""
    if not request.path.startswith(API_PREFIX):
        return defaults.server_error(request)
    return JsonResponse(error_body("server_error", SERVER_ERROR_MESSAGE), status=500)


def _as_api_exception(exc: Exception) -> exceptions.APIException | None:
    if isinstance(exc, exceptions.APIException):
        return exc
    if isinstance(exc, Http404):
        return exceptions.NotFound()
    if isinstance(exc, DjangoPermissionDenied):
        return exceptions.PermissionDenied()
    if isinstance(exc, RequestDataTooBig):
        return PayloadTooLarge()
    return None


def _body_for(exc: exceptions.APIException) -> dict:
    if isinstance(exc, exceptions.ValidationError):
        return error_body("validation_error", VALIDATION_MESSAGE, flatten(exc.detail))
    return error_body(exc.default_code, str(exc.detail))


def flatten(detail: Any, path: str = "") -> dict[str, list[str]]:
    """DRF's nested errors as {dotted.path: [messages]} (a top-level list: non_field_errors)."""
    if isinstance(detail, Mapping):
        out: dict[str, list[str]] = {}
        for key, value in detail.items():
            out.update(flatten(value, f"{path}.{key}" if path else str(key)))
        return out
    if isinstance(detail, list) and any(isinstance(item, Mapping | list) for item in detail):
        out = {}
        for index, item in enumerate(detail):
            out.update(flatten(item, f"{path}.{index}" if path else str(index)))
        return out
    messages = [str(item) for item in detail] if isinstance(detail, list) else [str(detail)]
    return {path or "non_field_errors": messages} if messages else {}
