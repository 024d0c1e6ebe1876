"""Core reads: finding the API key a request presents."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import connection

from core import api_keys, db, pooler, rate_limits, rls
from core.models import ApiKey

# The key's columns in the model's field order, so a row becomes an ApiKey by `from_db` (a raw
# queryset maps columns to fields anew on every call: a sixth of an API emit's Python, py-spy).
KEY_COLUMNS = ", ".join(connection.ops.quote_name(f.column) for f in ApiKey._meta.concrete_fields)
# The rate-limit client of a key (core.api.throttling).
THROTTLE_KEY_PREFIX = "api_key:"
# deskcomm migration 0008: the key by its prefix, and the session scoped to its organization.
# Behind a transaction-mode pooler (core.pooler) the scope is set for that statement only, and
# remembered for the request's next transactions (core migration 0012).
_LOOKUP = {
    False: "deskcomm_api_key_authenticate(%(prefix)s)",
    True: "deskcomm_api_key_authenticate(%(prefix)s, true)",
}
AUTHENTICATE_SQL = {pooled: f"SELECT {KEY_COLUMNS} FROM {call}" for pooled, call in _LOOKUP.items()}
# The same, and the request counted against the key's rate limit in the same statement, only
# when the presented key's hash is the stored one and the key is not revoked (nobody who knows
# only a key's public prefix can spend its allowance). The last column: the request is allowed.
# The hash is compared again in Python, in constant time, before the key is accepted.
_COUNT_VERIFIED = rate_limits.upsert_sql(
    "SELECT %(client)s::text || k.id, %(now)s + %(interval)s FROM k"
    " WHERE k.secret_hash = %(hash)s::text AND k.revoked_at IS NULL"
)
AUTHENTICATE_AND_HIT_SQL = {
    pooled: f"WITH k AS MATERIALIZED (SELECT * FROM {call}), hit AS (\n{_COUNT_VERIFIED}\n)\n"
    f"SELECT {KEY_COLUMNS}, EXISTS (SELECT FROM hit) FROM k"
    for pooled, call in _LOOKUP.items()
}


def api_key_for_token(token: str) -> ApiKey | None:
    """The key (revoked or not) whose full value is `token`, else None. One indexed query."""
    key, _ = _authenticate(token, AUTHENTICATE_SQL, {})
    return key


def api_key_and_hit(
    token: str, rate: rate_limits.Rate, now: dt.datetime
) -> tuple[ApiKey | None, bool]:
    """As `api_key_for_token`, counting the request against the key's `rate` in the same query.

    The second item: the request is within the rate (False for a revoked or unknown key too,
    which is not counted).
    """
    params = {"client": THROTTLE_KEY_PREFIX, "hash": api_keys.hash_key(token), **rate.params(now)}
    return _authenticate(token, AUTHENTICATE_AND_HIT_SQL, params)


def _authenticate(
    token: str, sql: dict[bool, str], params: dict[str, Any]
) -> tuple[ApiKey | None, bool]:
    prefix = api_keys.prefix_of(token)
    if prefix is None:
        return None, False
    pooled = pooler.pooled()
    params = {"prefix": prefix, **params}
    if pooled:  # past a transaction-mode pooler nothing is prepared (core.pooler)
        with connection.cursor() as cursor:
            cursor.execute(sql[pooled], params)
            row = cursor.fetchone()
    else:  # prepared: planning the statement took as long as running it (0.5 of 1.1 ms)
        with db.bound_cursor() as bound:
            bound.execute(sql[pooled], params, prepare=True)
            row = bound.fetchone()
    if row is None:
        return None, False
    width = len(ApiKey._meta.concrete_fields)
    key = ApiKey.from_db(connection.alias, None, row[:width])  # type: ignore[arg-type]
    # Found by prefix under a bypass, then the session is scoped to the key's tenant (RLS).
    if pooled:
        rls.set_scope(organization_id=key.organization_id)
    else:
        rls.mark_scoped(connection, organization_id=key.organization_id)
    if not api_keys.matches(token, key.secret_hash):
        return None, False
    return key, len(row) > width and bool(row[width])  # the hit's column, when asked
