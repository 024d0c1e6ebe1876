"""Core reads: finding the API key a request presents."""

from __future__ import annotations

from deskcomm import api_keys
from deskcomm.models import ApiKey


def api_key_for_token(token: str) -> ApiKey | None:
    """The key (revoked or not) whose full value is `token`, else None. One indexed query."""
    prefix = api_keys.prefix_of(token)
    if prefix is None:
        return None
    key = ApiKey.objects.filter(prefix=prefix).select_related("organization").first()
    if key is None or not api_keys.matches(token, key.secret_hash):
        return None
    return key
