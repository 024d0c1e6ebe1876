"""The test database from outside pytest-django's connection: its URL, a second connection, and
the side-effect table the test consumers write to."""

from __future__ import annotations

import datetime as dt
import uuid

import psycopg
from django.db import connection

SIDE_EFFECT_TABLE_SQL = """
CREATE TABLE IF NOT EXISTS test_side_effect (
    event_id uuid NOT NULL,
    consumer text NOT NULL,
    runs integer NOT NULL,
    pid integer NOT NULL,
    PRIMARY KEY (event_id, consumer)
)
"""


def side_effect_rows() -> list[tuple[str, str, int]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT event_id::text, consumer, runs FROM test_side_effect")
        return list(cursor.fetchall())


def database_url() -> str:
    """The URL of the database the tests run on (pytest-django's test database)."""
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def raw_connection() -> psycopg.Connection:
    """A second, independent connection to the test database."""
    return psycopg.connect(database_url(), autocommit=True)


def claim_plan(*, start: uuid.UUID, consumers: list[str], now: dt.datetime) -> str:
    """EXPLAIN of the bus's claim statement for these consumers (after an ANALYZE)."""
    from eventbus.sql import statement

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE eventbus_delivery")
        cursor.execute(
            "EXPLAIN (FORMAT TEXT) " + statement("claim"),
            {
                "start": start,
                "batch": 100,
                "consumers": consumers,
                "probing": [],
                "now": now,
                "token": start,
                "worker": "w",
                "lease_until": now,
            },
        )
        return "\n".join(row[0] for row in cursor.fetchall())
