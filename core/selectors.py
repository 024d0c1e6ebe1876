"""Core reads: finding the API key a request presents."""

from __future__ import annotations

from django.db import connection

from core import api_keys, rls
from core.models import ApiKey

# deskcomm migration 0008: the key by its prefix, and the session scoped to its organization.
AUTHENTICATE_SQL = "SELECT * FROM deskcomm_api_key_authenticate(%s)"


def api_key_for_token(token: str) -> ApiKey | None:
    """The key (revoked or not) whose full value is `token`, else None. One indexed query."""
    prefix = api_keys.prefix_of(token)
    if prefix is None:
        return None
    # Found by prefix under a bypass, then the session is scoped to the key's tenant (RLS).
    key = next(iter(ApiKey.objects.raw(AUTHENTICATE_SQL, [prefix])), None)
    if key is not None:
        rls.mark_scoped(connection, organization_id=key.organization_id)
    if key is None or not api_keys.matches(token, key.secret_hash):
        return None
    return key
