"""Request id for every web request: bound in the correlation context, echoed in the response.

Audit rows and events written while handling the request carry it, so the correlation view can
show everything one request caused (R-O5). A well-formed `X-Request-ID` from the caller (a proxy,
a client) is kept; anything else gets a fresh id.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from deskcomm import context

HEADER = "X-Request-ID"
VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{8,100}$")


class RequestIdMiddleware:
    """Bind `request_id` for the duration of the request and return it as `X-Request-ID`."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = incoming_request_id(request) or uuid.uuid4().hex
        with context.bind(request_id=request_id, source="web"):
            response = self.get_response(request)
        response[HEADER] = request_id
        return response


def incoming_request_id(request: HttpRequest) -> str | None:
    """The caller's request id when it is safe to store and show (else None)."""
    value = request.headers.get(HEADER, "")
    return value if VALID_REQUEST_ID.match(value) else None
