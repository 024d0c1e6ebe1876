"""The per-store rate limiter every worker process shares: a token bucket in one database row.

Seed 000 §6.4: 300 requests per minute per store, whichever process sends them. Each request
takes a token in one `UPDATE ... RETURNING` evaluated on database time, so processes on several
machines agree without a lock held between statements. A 429's Retry-After sets
`blocked_until`, which stops every process of the store until it passes.

The bucket holds `burst` tokens and refills at `(limit - 2 * burst) / window` per second: any
window of `window` seconds (plus up to `burst / rate` seconds of network delay between taking a
token and the request reaching the API) then holds at most `limit` requests.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.db import connection

from nuvemshop.conf import nuvemshop_settings

logger = logging.getLogger(__name__)

# -- name: ensure_bucket
# -- A store's bucket starts full; an existing one is left as it is.
ENSURE_BUCKET_SQL = """
INSERT INTO nuvemshop_ratebucket (ns_store_id, tokens, refilled_at)
VALUES (%(store)s, %(burst)s, clock_timestamp())
ON CONFLICT (ns_store_id) DO NOTHING
"""

# -- name: take_token
# -- Refill for the time elapsed, take one token if at least one is there and the store is not
# -- blocked by a 429. No row back: no token now.
TAKE_SQL = """
WITH clock AS (SELECT clock_timestamp() AS now)
UPDATE nuvemshop_ratebucket AS bucket
   SET tokens = LEAST(%(burst)s,
                      bucket.tokens + %(rate)s * EXTRACT(EPOCH FROM clock.now - bucket.refilled_at))
                - 1,
       refilled_at = clock.now
  FROM clock
 WHERE bucket.ns_store_id = %(store)s
   AND (bucket.blocked_until IS NULL OR bucket.blocked_until <= clock.now)
   AND LEAST(%(burst)s,
             bucket.tokens + %(rate)s * EXTRACT(EPOCH FROM clock.now - bucket.refilled_at)) >= 1
RETURNING bucket.tokens
"""

# -- name: wait_for_token
# -- Seconds until a token is there (refill) or the 429 block ends, whichever is later.
WAIT_SQL = """
SELECT GREATEST(
         EXTRACT(EPOCH FROM COALESCE(blocked_until, clock_timestamp()) - clock_timestamp()),
         (1 - LEAST(%(burst)s,
                    tokens + %(rate)s * EXTRACT(EPOCH FROM clock_timestamp() - refilled_at)))
           / %(rate)s,
         0.01)
  FROM nuvemshop_ratebucket WHERE ns_store_id = %(store)s
"""

# -- name: block_store
# -- A 429 told us to wait: every process of the store waits (never shortens a longer block).
BLOCK_SQL = """
UPDATE nuvemshop_ratebucket
   SET blocked_until = GREATEST(COALESCE(blocked_until, clock_timestamp()),
                                clock_timestamp() + make_interval(secs => %(seconds)s))
 WHERE ns_store_id = %(store)s
"""


class RateLimitTimeout(Exception):
    """No token came within MAX_RATE_WAIT_SECONDS (transient: the delivery is retried)."""


@dataclass(frozen=True)
class Budget:
    """The bucket's size and refill rate (tokens per second) for a limit per window."""

    burst: int
    rate: float

    @classmethod
    def configured(cls) -> Budget:
        limit = max(1, nuvemshop_settings.RATE_LIMIT_REQUESTS)
        window = max(0.001, nuvemshop_settings.RATE_LIMIT_WINDOW_SECONDS)
        burst = max(1, limit // 10)
        return cls(burst=burst, rate=max(limit - 2 * burst, 1) / window)


def acquire(ns_store_id: int) -> None:
    """Block until the store's shared bucket gives this process a token."""
    budget = Budget.configured()
    params = {"store": ns_store_id, "burst": budget.burst, "rate": budget.rate}
    deadline = time.monotonic() + nuvemshop_settings.MAX_RATE_WAIT_SECONDS
    with connection.cursor() as cursor:
        cursor.execute(ENSURE_BUCKET_SQL, params)
        while True:
            cursor.execute(TAKE_SQL, params)
            if cursor.fetchone() is not None:
                return
            cursor.execute(WAIT_SQL, params)
            row = cursor.fetchone()
            wait = float(row[0]) if row else 0.05
            if time.monotonic() + wait > deadline:
                raise RateLimitTimeout(f"no Nuvemshop API token for store {ns_store_id}")
            time.sleep(min(wait, 1.0))  # re-checked: another process may have taken it


def block(ns_store_id: int, seconds: float) -> None:
    """Stop every process of the store for `seconds` (the API's Retry-After)."""
    budget = Budget.configured()
    with connection.cursor() as cursor:
        cursor.execute(
            ENSURE_BUCKET_SQL, {"store": ns_store_id, "burst": budget.burst, "rate": budget.rate}
        )
        cursor.execute(BLOCK_SQL, {"store": ns_store_id, "seconds": seconds})
    logger.warning(
        "nuvemshop store throttled", extra={"ns_store_id": ns_store_id, "retry_after": seconds}
    )
