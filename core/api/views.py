"""The base class of every integration API view."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import NotFound
from rest_framework.serializers import Serializer
from rest_framework.views import APIView

from core.api.authentication import ApiClient
from core.api.errors import PayloadTooLarge, error_body

Found = TypeVar("Found")


class ApiView(APIView):
    """Authenticated by API key, scoped by `required_scopes`, throttled per key, body-limited.

    Subclasses set `required_scopes = {"GET": "events:read", ...}` and scope every query by
    `self.client(request).organization_id`.
    """

    required_scopes: ClassVar[dict[str, str]] = {}
    metadata_class = None  # no OPTIONS introspection: 405 like any unmapped method

    def initial(self, request: Any, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # authentication, scopes, throttling
        enforce_body_limit(request)

    @staticmethod
    def client(request: Any) -> ApiClient:
        client: ApiClient = request.user
        return client

    @staticmethod
    def validated(
        serializer_class: type[Serializer], data: Any, *, partial: bool = False
    ) -> dict[str, Any]:
        """The serializer's validated data, or a 400 with its field errors (`partial`: PATCH)."""
        serializer = serializer_class(data=data, partial=partial)
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)


def found_or_404(found: Found | None, message: str) -> Found:
    """A selector's result, or a 404 `not_found` (selectors return None for other tenants' ids)."""
    if found is None:
        raise NotFound(message)
    return found


def enforce_body_limit(request: Any) -> None:
    """413 for a body over DATA_UPLOAD_MAX_MEMORY_SIZE, before anything parses it.

    DRF's JSON parser reads the raw stream, which skips Django's size check; reading the body
    through Django first applies it (by Content-Length, before reading a byte).
    """
    try:
        request._request.body  # noqa: B018  (read for its check)
    except RequestDataTooBig:
        raise PayloadTooLarge() from None


@csrf_exempt  # a POST here is a 405 in the API's shape, not a CSRF page
def ping(request: HttpRequest) -> JsonResponse:
    """`GET /api/ping`: liveness only (the process answers; no database, no authentication).

    Readiness with dependency checks is `/api/v1/health`'s job. The load benchmark uses this as
    its floor: what any request costs on this server.
    """
    if request.method not in ("GET", "HEAD"):
        refused = JsonResponse(error_body("method_not_allowed", "Use GET."), status=405)
        refused["Allow"] = "GET, HEAD"  # RFC 9110: a 405 lists what is allowed
        return refused
    return JsonResponse({"status": "ok"})
