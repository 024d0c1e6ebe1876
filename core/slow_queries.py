"""The slowest SQL statements by mean time, from `pg_stat_statements` (seed 001 §9.3's
`dba.slow_queries_top20`): `manage.py slow_queries` prints them, and /metrics exports their mean
and call count labelled by `queryid` (20 series at most: bounded).

The extension needs `shared_preload_libraries = 'pg_stat_statements'` on the server (the dev
tool's embedded server sets it when the library is installed) and `CREATE EXTENSION
pg_stat_statements` in the database (a superuser, once). Without either, `top` answers None and
the exporter has no series. Statement texts come normalized ($1 for each constant): no values.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from django.db import DatabaseError, connection, transaction
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

TOP = 20
INSTALLED_SQL = "SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_stat_statements')"
TOP_SQL = """
SELECT queryid, substring(min(query), 1, 120), sum(calls)::bigint,
       sum(total_exec_time) / nullif(sum(calls), 0) AS mean_ms, sum(total_exec_time)
  FROM pg_stat_statements
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND query NOT ILIKE '%%pg_stat_statements%%' AND queryid IS NOT NULL
 GROUP BY queryid  -- one row per statement, whichever role ran it
 ORDER BY mean_ms DESC NULLS LAST
 LIMIT %(limit)s
"""


@dataclass(frozen=True)
class Statement:
    queryid: int
    query: str  # the first 120 characters of the normalized text (this database's only)
    calls: int
    mean_ms: float
    total_ms: float


def top(limit: int = TOP) -> list[Statement] | None:
    """The `limit` statements with the highest mean time; None when pg_stat_statements is not
    loaded and installed."""
    with connection.cursor() as cursor:
        cursor.execute(INSTALLED_SQL)
        (installed,) = cursor.fetchone() or (False,)
        if not installed:
            return None
        try:
            with transaction.atomic():  # not preloaded: the view raises; the savepoint absorbs it
                cursor.execute(TOP_SQL, {"limit": limit})
                rows = cursor.fetchall()
        except DatabaseError:
            return None
    return [Statement(*row) for row in rows]


class SlowStatementsCollector(Collector):
    """The top statements' mean time and calls, by queryid (scrape time)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        mean = GaugeMetricFamily(
            "deskcomm_db_slow_statement_mean_seconds",
            "Mean execution time of the 20 slowest statements (pg_stat_statements), by queryid.",
            labels=["queryid"],
        )
        calls = GaugeMetricFamily(
            "deskcomm_db_slow_statement_calls",
            "Calls of the 20 slowest statements (pg_stat_statements), by queryid.",
            labels=["queryid"],
        )
        for statement in top() or []:
            mean.add_metric([str(statement.queryid)], statement.mean_ms / 1000)
            calls.add_metric([str(statement.queryid)], statement.calls)
        yield mean
        yield calls
