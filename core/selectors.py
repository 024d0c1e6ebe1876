"""Core reads: finding the API key a request presents."""

from __future__ import annotations

from django.db import connection

from core import api_keys, pooler, rls
from core.models import ApiKey

# The key's columns in the model's field order, so a row becomes an ApiKey by `from_db` (a raw
# queryset maps columns to fields anew on every call: a sixth of an API emit's Python, py-spy).
KEY_COLUMNS = ", ".join(connection.ops.quote_name(f.column) for f in ApiKey._meta.concrete_fields)
# deskcomm migration 0008: the key by its prefix, and the session scoped to its organization.
AUTHENTICATE_SQL = f"SELECT {KEY_COLUMNS} FROM deskcomm_api_key_authenticate(%s)"
# Behind a transaction-mode pooler (core.pooler): the scope set for that statement only, and
# remembered for the request's next transactions (core migration 0012).
POOLED_AUTHENTICATE_SQL = f"SELECT {KEY_COLUMNS} FROM deskcomm_api_key_authenticate(%s, true)"


def api_key_for_token(token: str) -> ApiKey | None:
    """The key (revoked or not) whose full value is `token`, else None. One indexed query."""
    prefix = api_keys.prefix_of(token)
    if prefix is None:
        return None
    # Found by prefix under a bypass, then the session is scoped to the key's tenant (RLS).
    if pooler.pooled():
        key = _key_by_prefix(POOLED_AUTHENTICATE_SQL, prefix)
        if key is not None:
            rls.set_scope(organization_id=key.organization_id)
    else:
        key = _key_by_prefix(AUTHENTICATE_SQL, prefix)
        if key is not None:
            rls.mark_scoped(connection, organization_id=key.organization_id)
    if key is None or not api_keys.matches(token, key.secret_hash):
        return None
    return key


def _key_by_prefix(sql: str, prefix: str) -> ApiKey | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, [prefix])
        row = cursor.fetchone()
    if row is None:
        return None
    return ApiKey.from_db(connection.alias, None, row)  # type: ignore[arg-type]
