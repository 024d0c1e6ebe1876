"""Per-key rate limiting shared by every web process, kept in PostgreSQL (no Redis needed).

The algorithm is GCRA (the "generic cell rate algorithm", a leaky bucket with one timestamp per
client): a rate of N per period allows a burst of N, then one request every period/N. The state is
one row per client in the UNLOGGED table `deskcomm_throttlestate`, moved by ONE conditional upsert
per request, so it is exact across processes (the row lock serialises a key's concurrent
requests for the length of one statement) and costs no WAL flush. Times come from Python.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.utils import timezone
from rest_framework.throttling import BaseThrottle

from core.api.conf import api_settings

PERIODS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
_RATE = re.compile(r"\s*(\d+)\s*/\s*(second|minute|hour|day)s?\s*")

# HIT. Allowed when, after adding this request's emission interval, the theoretical arrival time
# is at most one period ahead of now; the WHERE makes a refused request change nothing (and
# RETURNING then yields no row). A new client starts with a full allowance.
HIT_SQL = """
INSERT INTO deskcomm_throttlestate AS t (key, tat)
VALUES (%(key)s, %(now)s + %(interval)s)
ON CONFLICT (key) DO UPDATE
   SET tat = greatest(t.tat, %(now)s) + %(interval)s
 WHERE greatest(t.tat, %(now)s) + %(interval)s <= %(now)s + %(period)s
RETURNING tat
"""

# REFUSED. Only on the refusal path: how long until the next request would be allowed.
TAT_SQL = "SELECT tat FROM deskcomm_throttlestate WHERE key = %(key)s"


@dataclass(frozen=True)
class Rate:
    """N requests per period."""

    count: int
    period: dt.timedelta

    @property
    def interval(self) -> dt.timedelta:
        return self.period / self.count


def parse_rate(text: str) -> Rate:
    """'600/minute' -> Rate(600, 60 s). Units: second, minute, hour, day."""
    match = _RATE.fullmatch(text or "")
    if not match or int(match.group(1)) < 1:
        raise ValueError(f"rate {text!r} must look like '600/minute' (second|minute|hour|day)")
    return Rate(int(match.group(1)), dt.timedelta(seconds=PERIODS[match.group(2)]))


def hit(key: str, rate: Rate, now: dt.datetime) -> float | None:
    """Count one request; None when allowed, else the seconds to wait before retrying."""
    params: dict[str, Any] = {
        "key": key,
        "now": now,
        "interval": rate.interval,
        "period": rate.period,
    }
    with connection.cursor() as cursor:
        cursor.execute(HIT_SQL, params)
        if cursor.fetchone() is not None:
            return None
        cursor.execute(TAT_SQL, params)
        row = cursor.fetchone()
    tat = row[0] if row else now
    return max((tat + rate.interval - rate.period - now).total_seconds(), 0.0)


class ApiKeyRateThrottle(BaseThrottle):
    """DRF throttle: `API_THROTTLE_RATE` per API key (429 with `Retry-After` beyond it)."""

    def __init__(self) -> None:
        self._wait: float | None = None

    def allow_request(self, request: Any, view: Any) -> bool:
        client = request.user
        if not getattr(client, "is_authenticated", False):
            return True  # nothing to count: such requests already failed authentication
        rate = parse_rate(api_settings.THROTTLE_RATE)
        self._wait = hit(f"api_key:{client.key_id}", rate, timezone.now())
        return self._wait is None

    def wait(self) -> float | None:
        # Retry-After is whole seconds; round up so a client that obeys it is let through.
        return None if self._wait is None else max(1, math.ceil(self._wait))
