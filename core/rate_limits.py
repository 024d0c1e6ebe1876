"""Per-client rate limits shared by every process, kept in PostgreSQL (no Redis needed).

The algorithm is GCRA (the "generic cell rate algorithm", a leaky bucket with one timestamp per
client): a rate of N per period allows a burst of N, then one request every period/N. The state is
one row per client in the UNLOGGED table `deskcomm_throttlestate`, moved by ONE conditional upsert
per request, so it is exact across processes (the row lock serialises a client's concurrent
requests for the length of one statement) and costs no WAL flush. Times come from Python.

The API counts a request in the statement that finds its key (`core.selectors.api_key_and_hit`),
with `upsert_sql`; anything else counts with `hit`.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from django.db import connection

PERIODS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
_RATE = re.compile(r"\s*(\d+)\s*/\s*(second|minute|hour|day)s?\s*")


def upsert_sql(rows: str) -> str:
    """HIT for the client and first `tat` of `rows` (a VALUES list or a SELECT), then:

    allowed when, after adding this request's emission interval, the theoretical arrival time is
    at most one period ahead of now; the WHERE makes a refused request change nothing (and
    RETURNING then yields no row). A new client starts with a full allowance.
    """
    return f"""INSERT INTO deskcomm_throttlestate AS t (key, tat)
{rows}
ON CONFLICT (key) DO UPDATE
   SET tat = greatest(t.tat, %(now)s) + %(interval)s
 WHERE greatest(t.tat, %(now)s) + %(interval)s <= %(now)s + %(period)s
RETURNING tat"""


HIT_SQL = upsert_sql("VALUES (%(key)s, %(now)s + %(interval)s)")

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

    def params(self, now: dt.datetime, cost: int = 1) -> dict[str, Any]:
        """The upsert's parameters but the client's key (`cost` requests at once)."""
        return {"now": now, "interval": self.interval * cost, "period": self.period}


def parse_rate(text: str) -> Rate:
    """'600/minute' -> Rate(600, 60 s). Units: second, minute, hour, day."""
    match = _RATE.fullmatch(text or "")
    if not match or int(match.group(1)) < 1:
        raise ValueError(f"rate {text!r} must look like '600/minute' (second|minute|hour|day)")
    return Rate(int(match.group(1)), dt.timedelta(seconds=PERIODS[match.group(2)]))


def hit(key: str, rate: Rate, now: dt.datetime, cost: int = 1) -> float | None:
    """Count `cost` requests at once; None when allowed, else the seconds to wait before
    retrying (all or nothing: a refused hit counts none of them). More than the rate allows
    in a period is never allowed: refused with the whole period to wait."""
    if cost > rate.count:
        return rate.period.total_seconds()
    with connection.cursor() as cursor:
        cursor.execute(HIT_SQL, {"key": key, **rate.params(now, cost)})
        if cursor.fetchone() is not None:
            return None
    return wait_after_refusal(key, rate, now, cost)


def wait_after_refusal(key: str, rate: Rate, now: dt.datetime, cost: int = 1) -> float:
    """Seconds until `key`'s next `cost` requests would be allowed (they were just refused)."""
    with connection.cursor() as cursor:
        cursor.execute(TAT_SQL, {"key": key})
        row = cursor.fetchone()
    tat = row[0] if row else now
    return max((tat + rate.interval * cost - rate.period - now).total_seconds(), 0.0)
