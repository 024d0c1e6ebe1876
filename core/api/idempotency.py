"""`Idempotency-Key`: run a POST once per (organization, operation, key) within the TTL (24 h).

The key's row is inserted in the same transaction as the work, before it:
- first request: the INSERT wins, the work runs, the response is stored, all commit together
  (work that fails rolls the key back too, so a corrected retry with the same key can run);
- a concurrent duplicate: its INSERT waits on the first one's uncommitted row, then finds it
  committed and replays the stored response: the work never runs twice;
- later, same body: the stored response is replayed (`Idempotent-Replayed: true`);
- later, another body: 409 `idempotency_conflict`;
- after the TTL: the row is taken over as if new (and purged by `purge_idempotency_keys`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.utils.encoders import JSONEncoder

from core.api.conf import api_settings
from core.api.errors import IdempotencyConflict

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
_META = "HTTP_IDEMPOTENCY_KEY"
_SANE_KEY = re.compile(r"[\x21-\x7e]{1,255}")  # visible ASCII, like the header spec's examples

# CLAIM. Wins for a new key; waits behind a concurrent transaction holding the same key.
CLAIM_SQL = """
INSERT INTO deskcomm_idempotencykey (organization_id, scope, key, request_hash, created_at)
VALUES (%(org)s, %(scope)s, %(key)s, %(hash)s, %(now)s)
ON CONFLICT (organization_id, scope, key) DO NOTHING
RETURNING id
"""

# EXISTING. The committed row of a key we did not win, locked so a takeover cannot race.
EXISTING_SQL = """
SELECT id, request_hash, status_code, response::text, created_at FROM deskcomm_idempotencykey
 WHERE organization_id = %(org)s AND scope = %(scope)s AND key = %(key)s
   FOR UPDATE
"""

# TAKEOVER. An expired key is reused by a new request, as if it had never been seen.
TAKEOVER_SQL = """
UPDATE deskcomm_idempotencykey
   SET request_hash = %(hash)s, created_at = %(now)s, status_code = NULL, response = NULL
 WHERE id = %(id)s
"""

STORE_SQL = """
UPDATE deskcomm_idempotencykey SET status_code = %(status)s, response = %(body)s::jsonb
 WHERE id = %(id)s
"""


@dataclass(frozen=True)
class Outcome:
    """The response to send: fresh from the work, or replayed from the first request."""

    status: int
    body: Any
    replayed: bool


def key_from(request: Any) -> str | None:
    """The request's Idempotency-Key header, validated; None when absent."""
    value = request.META.get(_META)
    if value is None:
        return None
    if not _SANE_KEY.fullmatch(value):
        raise serializers.ValidationError(
            {HEADER: ["Must be 1-255 visible ASCII characters (a UUID is a good choice)."]}
        )
    return value


def body_hash(data: Any) -> str:
    """SHA-256 of the body's canonical JSON (key order and spacing do not matter)."""
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def run_once(
    *,
    organization_id: uuid.UUID,
    scope: str,
    key: str,
    request_hash: str,
    work: Callable[[], tuple[int, Any]],
) -> Outcome:
    """Run `work` (returning status and JSON body) once for this key; replay it afterwards."""
    now = timezone.now()
    params: dict[str, Any] = {
        "org": organization_id,
        "scope": scope,
        "key": key,
        "hash": request_hash,
        "now": now,
    }
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(CLAIM_SQL, params)
        claimed = cursor.fetchone()
        if claimed is None:
            cursor.execute(EXISTING_SQL, params)
            row_id, stored_hash, status, body, created_at = cursor.fetchone()
            if not _expired(created_at, now):
                return _replay(stored_hash, request_hash, status, body)
            cursor.execute(TAKEOVER_SQL, {**params, "id": row_id})
            claimed = (row_id,)
        status, body = work()
        cursor.execute(
            STORE_SQL,
            {"id": claimed[0], "status": status, "body": json.dumps(body, cls=JSONEncoder)},
        )
    return Outcome(status, body, replayed=False)


def _expired(created_at: dt.datetime, now: dt.datetime) -> bool:
    return now - created_at >= dt.timedelta(seconds=api_settings.IDEMPOTENCY_TTL_SECONDS)


def _replay(stored_hash: str, request_hash: str, status: int, body: str) -> Outcome:
    if stored_hash != request_hash:
        raise IdempotencyConflict()
    return Outcome(status, json.loads(body), replayed=True)


def respond_once(request: Any, *, scope: str, work: Callable[[], tuple[int, Any]]) -> Response:
    """The response of `work` (status, JSON body): run once per Idempotency-Key when the
    request sends one (replayed with `Idempotent-Replayed: true`), else simply run. The tenant
    is the API key's."""
    key = key_from(request)
    if key is None:
        code, body = work()
        return Response(body, status=code)
    outcome = run_once(
        organization_id=request.user.organization_id,
        scope=scope,
        key=key,
        request_hash=body_hash(request.data),
        work=work,
    )
    response = Response(outcome.body, status=outcome.status)
    if outcome.replayed:
        response[REPLAYED_HEADER] = "true"
    return response
