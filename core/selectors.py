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
# core migration 0013: the key by its prefix and the presented token's hash (a SECURITY DEFINER
# function: the web role cannot bypass), and the session scoped to its organization. Behind a
# transaction-mode pooler (core.pooler) the scope is set for that transaction only, and
# remembered for the request's next transactions.
_LOOKUP = {
    False: "deskcomm_api_key_authenticate(%(prefix)s, %(hash)s, false)",
    True: "deskcomm_api_key_authenticate(%(prefix)s, %(hash)s, true)",
}
# The last column: the tenant proof the function set (core.rls), for the request's next scopes.
_PROOF = "current_setting('app.tenant_proof', true)"
AUTHENTICATE_SQL = {
    pooled: f"SELECT {KEY_COLUMNS}, {_PROOF} FROM {call}" for pooled, call in _LOOKUP.items()
}
# The same, and the request counted against the key's rate limit in the same statement, only
# when the presented key's hash is the stored one and the key is not revoked (nobody who knows
# only a key's public prefix can spend its allowance). The next column: the request is allowed.
# The hash is compared again in Python, in constant time, before the key is accepted.
_COUNT_VERIFIED = rate_limits.upsert_sql(
    "SELECT %(client)s::text || k.id, %(now)s + %(interval)s FROM k"
    " WHERE k.secret_hash = %(hash)s::text AND k.revoked_at IS NULL"
)
AUTHENTICATE_AND_HIT_SQL = {
    pooled: f"WITH k AS MATERIALIZED (SELECT * FROM {call}), hit AS (\n{_COUNT_VERIFIED}\n)\n"
    f"SELECT {KEY_COLUMNS}, EXISTS (SELECT FROM hit), {_PROOF} FROM k"
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
    params = {"client": THROTTLE_KEY_PREFIX, **rate.params(now)}
    return _authenticate(token, AUTHENTICATE_AND_HIT_SQL, params)


def _authenticate(
    token: str, sql: dict[bool, str], params: dict[str, Any]
) -> tuple[ApiKey | None, bool]:
    prefix = api_keys.prefix_of(token)
    if prefix is None:
        return None, False
    pooled = pooler.pooled()
    params = {"prefix": prefix, "hash": api_keys.hash_key(token), **params}
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
    if not api_keys.matches(token, key.secret_hash):
        return None, False
    if key.revoked_at is not None:
        return key, False  # the function scoped nothing: the caller answers 401
    # Found under the owner's bypass, then the session was scoped to the key's tenant (RLS).
    proof = str(row[-1] or "")
    if pooled:
        rls.set_scope(organization_id=key.organization_id, proof=proof)
    else:
        rls.mark_scoped(connection, organization_id=key.organization_id, proof=proof)
    rls.mark_key_request()
    return key, len(row) > width + 1 and bool(row[width])  # the hit's column, when asked
