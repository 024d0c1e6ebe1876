"""Request middleware: the request id (bound for the request's whole life and echoed back), and
chunked request bodies held to the same size limit as any other.

A client-supplied `X-Request-ID` is kept when it is sane (1-128 characters from a safe set), so a
caller can follow its own id through emit -> handler -> webhook -> logs; anything else is replaced
by a fresh one (never reflected: it goes into logs, metadata and response headers). A valid W3C
`traceparent` header gives the request its `trace_id` (the 32-hex trace id), which events emitted
in the request carry as their correlation id; a malformed one is ignored.
"""

from __future__ import annotations

import io
import re
import uuid
from collections.abc import Callable

from django.conf import settings
from django.core.handlers.wsgi import LimitedStream
from django.http import HttpRequest, HttpResponse

from core import context

REQUEST_ID_HEADER = "X-Request-ID"
_REQUEST_ID_META = "HTTP_X_REQUEST_ID"
# Letters, digits and the separators ids usually carry (uuid, ULID, W3C trace ids, "svc:123").
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=/-]{0,127}")
# W3C Trace Context: version-traceid-parentid-flags; an all-zero trace or parent id is invalid.
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_SENTRY_TRACE = re.compile(r"([0-9a-f]{32})-([0-9a-f]{16})(?:-[01])?")


def request_id_from(request: HttpRequest) -> str:
    """The client's `X-Request-ID` when it is sane, else a new random id."""
    offered = request.META.get(_REQUEST_ID_META, "")
    if _SANE_REQUEST_ID.fullmatch(offered):
        return offered
    return uuid.uuid4().hex


def trace_id_from(request: HttpRequest) -> str | None:
    """The trace id of a valid W3C `traceparent` header, else of a Sentry `sentry-trace` header
    (`<trace id>-<span id>[-<sampled>]`), else None."""
    match = _TRACEPARENT.fullmatch(request.META.get("HTTP_TRACEPARENT", "").strip().lower())
    if match and match[1] != "ff" and set(match[2]) != {"0"} and set(match[3]) != {"0"}:
        return match[2]
    sentry = _SENTRY_TRACE.fullmatch(request.META.get("HTTP_SENTRY_TRACE", "").strip().lower())
    if sentry and set(sentry[1]) != {"0"}:
        return sentry[1]
    return None


class RequestIdMiddleware:
    """Binds `request_id` (and a `traceparent`'s `trace_id`) around the request (core.context)
    and returns the request id as a header.

    Install it first in MIDDLEWARE so everything after it (other middleware, views, emit, audit,
    log records) sees the id, and every response carries it.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = request_id_from(request)
        request.request_id = request_id  # type: ignore[attr-defined]
        # bind_log opens the scope the API authentication adds the tenant to (annotate_log).
        trace_id = trace_id_from(request)
        with context.bind(request_id=request_id, trace_id=trace_id), context.bind_log():
            response = self.get_response(request)
        response[REQUEST_ID_HEADER] = request_id
        return response


class ChunkedBodyMiddleware:
    """Give a chunked request body (no Content-Length) a length, so the size limit applies.

    Django reads a WSGI body only up to Content-Length, so a chunked body (which gunicorn
    de-chunks and marks `wsgi.input_terminated`) arrived empty: a body past the limit became an
    empty-body 400 instead of a 413. This reads at most DATA_UPLOAD_MAX_MEMORY_SIZE + 1 bytes and
    sets Content-Length to what it read; past the limit, Django's own check (RequestDataTooBig,
    a 413 in the API) then refuses it without reading the rest.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if _is_unsized_chunked(request):
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            body = request.META["wsgi.input"].read(None if limit is None else limit + 1)
            request.META["CONTENT_LENGTH"] = str(len(body))
            request._stream = LimitedStream(io.BytesIO(body), len(body))  # type: ignore[assignment]
        return self.get_response(request)


def _is_unsized_chunked(request: HttpRequest) -> bool:
    meta = request.META
    chunked = "chunked" in meta.get("HTTP_TRANSFER_ENCODING", "").lower()
    return chunked and bool(meta.get("wsgi.input_terminated")) and not meta.get("CONTENT_LENGTH")
