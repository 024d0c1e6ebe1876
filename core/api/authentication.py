"""`Authorization: Bearer <API key>`: the key names the organization (tenant) and the scopes.

Nothing in a request body or query string can choose the organization: every view scopes its
queries by `request.user.organization_id`, which only this module sets.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any, ClassVar

from django.utils import timezone
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed

from core import context, selectors, services
from core.api import throttling
from core.api.conf import api_settings
from core.models import ApiKey

SCHEME = b"bearer"


@dataclass(frozen=True)
class ApiClient:
    """The authenticated caller (DRF's `request.user`): a key of one organization."""

    key_id: int
    prefix: str
    organization_id: uuid.UUID
    scopes: frozenset[str]
    # Counted against the key's rate limit when authenticated: within it (True) or refused
    # (False); None when the view does not throttle per key (core.api.throttling).
    allowed: bool | None = None
    is_authenticated: ClassVar[bool] = True

    @property
    def actor(self) -> str:
        """How audit rows and event metadata name this caller."""
        return f"api_key:{self.prefix}"

    @classmethod
    def from_key(cls, key: ApiKey, allowed: bool | None = None) -> ApiClient:
        return cls(key.pk, key.display_prefix, key.organization_id, frozenset(key.scopes), allowed)


class ApiKeyAuthentication(BaseAuthentication):
    """DRF authentication class for Deskcomm API keys."""

    def authenticate(self, request: Any) -> tuple[ApiClient, ApiKey] | None:
        scheme, _, credentials = get_authorization_header(request).partition(b" ")
        if scheme.lower() != SCHEME:
            return None  # no key (or another scheme): the permission check answers 401
        token = _decode(credentials.strip())
        allowed: bool | None = None
        view = (getattr(request, "parser_context", None) or {}).get("view")
        if throttling.throttles(view):  # the request is counted in the key's own query
            key, allowed = selectors.api_key_and_hit(token, throttling.api_rate(), timezone.now())
        else:
            key = selectors.api_key_for_token(token)
        if key is None:
            raise AuthenticationFailed("Invalid API key.")
        if key.revoked_at is not None:
            raise AuthenticationFailed("This API key has been revoked.")
        resolution = dt.timedelta(seconds=api_settings.KEY_LAST_USED_RESOLUTION_SECONDS)
        services.api_key_mark_used(api_key=key, resolution=resolution)
        context.annotate_log(organization_id=key.organization_id)
        return ApiClient.from_key(key, allowed), key

    def authenticate_header(self, request: Any) -> str:
        # Present on 401 responses; its presence is also what makes DRF answer 401, not 403.
        return 'Bearer realm="deskcomm-api"'


def _decode(credentials: bytes) -> str:
    if not credentials:
        raise AuthenticationFailed("Missing API key after 'Bearer'.")
    try:
        return credentials.decode("ascii")
    except UnicodeDecodeError:
        raise AuthenticationFailed("Invalid API key.") from None
