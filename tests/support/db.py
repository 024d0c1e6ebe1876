"""The test database from outside pytest-django's connection: its URL, a second connection, and
the side-effect table the test consumers write to."""

from __future__ import annotations

import datetime as dt
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

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


def side_effect_pids(consumer: str) -> set[int]:
    """The processes that ran `consumer`'s side effects."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT pid FROM test_side_effect WHERE consumer = %s", [consumer])
        return {row[0] for row in cursor.fetchall()}


def database_url() -> str:
    """The URL of the database the tests run on (pytest-django's test database)."""
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def listening_backends() -> int:
    """Server sessions of the test database waiting on the bus's LISTEN."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND query = 'LISTEN eventbus_wakeup'"
        )
        return int(cursor.fetchone()[0])


def sessions_locking(table: str) -> int:
    """Other server sessions of the test database holding a lock on `table`. A killed client's
    session lives on until its server process notices the closed socket (on a busy machine, a
    moment after the kill), and keeps its row locks until then."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(DISTINCT l.pid) FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
            " WHERE a.datname = current_database() AND l.pid <> pg_backend_pid()"
            " AND l.relation = %s::regclass",
            [table],
        )
        return int(cursor.fetchone()[0])


def raw_connection() -> psycopg.Connection:
    """A second, independent connection to the test database."""
    return psycopg.connect(database_url(), autocommit=True)


def claim_plan(*, start: uuid.UUID, consumers: list[str], now: dt.datetime) -> str:
    """EXPLAIN of the bus's claim statement for these consumers (after an ANALYZE)."""
    from eventbus.store.sql import statement

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE eventbus_delivery")
        cursor.execute(
            "EXPLAIN (FORMAT TEXT) " + statement("claim"),
            {
                "start": start,
                "batch": 100,
                "consumers": consumers,
                "probing": [],
                "key_start": str(uuid.uuid4()),
                "per_key": 1,
                "now": now,
                "token": start,
                "worker": "w",
                "lease_until": now,
            },
        )
        return "\n".join(row[0] for row in cursor.fetchall())


@contextmanager
def as_web_process() -> Iterator[None]:
    """Requests through Django's test client as a web process makes them: each starts with the
    session closed (neither tenant nor bypass: core.rls), so a view sees only what it scopes
    itself to. Only meaningful when the test role is subject to RLS (not a superuser)."""
    from core import rls

    before = os.environ.get(rls.PROCESS_ENV)
    os.environ[rls.PROCESS_ENV] = "false"
    rls.set_scope()  # marked scoped, so every request_started resets it to closed
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(rls.PROCESS_ENV, None)
        else:
            os.environ[rls.PROCESS_ENV] = before
        rls.set_scope(bypass=rls.process_bypasses())
        rls.reset_scope()


def role_bypasses_rls() -> bool:
    """True when the test role is a superuser or BYPASSRLS (row-level security does not apply)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user")
        row = cursor.fetchone()
    return bool(row and row[0])


def as_superuser(statement: str) -> None:
    """`statement` in this worker's test database as the server's superuser (CREATE / DROP
    EXTENSION pg_stat_statements: not a trusted extension)."""
    from dev.pg_roles import PG_SUPERUSER

    db = connection.settings_dict
    target = f"host={db['HOST']} port={db['PORT']} dbname={db['NAME']} user={PG_SUPERUSER}"
    with psycopg.connect(target, autocommit=True) as superuser:
        superuser.execute(statement)
