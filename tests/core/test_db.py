"""core.db.drop_database: a scratch database goes, whatever still uses it."""

from __future__ import annotations

import ast
import select
import subprocess
import sys
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from django.core.signals import request_finished
from django.db import close_old_connections, connection
from psycopg import sql
from psycopg.rows import dict_row

from core import rls
from core.db import bound_cursor, drop_database, skip_health_check_when_quiet
from tests.support.db import database_url
from tests.support.wire import traced


@pytest.fixture
def admin(db: None) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(database_url(), autocommit=True) as conn:
        yield conn


def scratch(admin: psycopg.Connection[tuple[object, ...]], suffix: str) -> tuple[str, str]:
    name = f"{connection.settings_dict['NAME']}_{suffix}"
    drop_database(admin, name)
    admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return name, database_url().rsplit("/", 1)[0] + f"/{name}"


def exists(admin: psycopg.Connection[tuple[object, ...]], name: str) -> bool:
    return (
        admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        is not None
    )


def test_an_unused_database_is_dropped_and_a_missing_one_is_no_error(
    admin: psycopg.Connection[tuple[object, ...]],
) -> None:
    name, _ = scratch(admin, "drop_unused")
    drop_database(admin, name)
    assert not exists(admin, name)
    drop_database(admin, name)  # already gone: nothing to do


def test_a_database_still_in_use_is_dropped_and_its_sessions_ended(
    admin: psycopg.Connection[tuple[object, ...]],
) -> None:
    name, url = scratch(admin, "drop_in_use")
    with psycopg.connect(url, autocommit=True) as lingering:
        drop_database(admin, name)
        assert not exists(admin, name)
        with pytest.raises(psycopg.OperationalError):
            lingering.execute("SELECT 1")


@pytest.mark.django_db(transaction=True)  # closes the connection: no test transaction around
def test_the_bound_cursor_is_reused_and_a_nested_block_gets_its_own() -> None:
    with bound_cursor() as first:
        first.row_factory = dict_row
        first.execute("SELECT 1 AS one")
        with bound_cursor() as nested:
            assert nested is not first
            nested.execute("SELECT 2")
            assert nested.fetchone() == (2,)
        assert first.fetchone() == {"one": 1}  # the nested block did not touch its results
    with bound_cursor() as again:
        assert again is first or again is nested
        again.execute("SELECT 3")
        assert again.fetchone() == (3,)  # rows as tuples again, whatever the last user chose
    connection.close()
    with bound_cursor() as reconnected:
        assert reconnected is not again  # the old connection's cursor is never handed out
        reconnected.execute("SELECT 4")
        assert reconnected.fetchone() == (4,)


@pytest.mark.django_db
def test_a_bound_statement_is_prepared_when_its_caller_asks_and_only_then() -> None:
    query = "SELECT count(*) FROM pg_prepared_statements WHERE statement = %s"
    with bound_cursor() as cursor:
        for _ in range(10):
            cursor.execute("SELECT %s::int + 2", [1])
        cursor.execute("SELECT %s::int + 1", [1], prepare=True)
        cursor.execute(query, ["SELECT $1::int + 1"])
        assert cursor.fetchone() == (1,)
        cursor.execute(query, ["SELECT $1::int + 2"])
        assert cursor.fetchone() == (0,)  # run ten times, never prepared
        with connection.cursor() as django_cursor:  # the ORM's cursors never prepare
            django_cursor.execute("SELECT count(*) FROM pg_prepared_statements")
            before = django_cursor.fetchone()
            django_cursor.execute("SELECT count(*) FROM pg_prepared_statements")
            assert django_cursor.fetchone() == before


@pytest.mark.django_db(transaction=True)  # ends the connection: no test transaction around
def test_a_quiet_connection_skips_the_health_check_and_an_ended_one_is_replaced(
    admin: psycopg.Connection[tuple[object, ...]],
) -> None:
    assert connection.settings_dict["CONN_HEALTH_CHECKS"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    close_old_connections()  # what request_started runs first: a health check is due again
    skip_health_check_when_quiet()  # then this (deskcomm.apps connects it after Django's)
    with traced() as wire, connection.cursor() as cursor:
        cursor.execute("SELECT 2")
    assert wire.statements == ["SELECT 2"]  # no `SELECT 1` first

    admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    socket = connection.connection.pgconn.socket
    assert select.select([socket], [], [], 10)[0], "the server never ended the session"
    close_old_connections()
    skip_health_check_when_quiet()
    with connection.cursor() as cursor:  # checked, found dead, reconnected: no error
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone() != (pid,)


@pytest.mark.django_db(transaction=True)  # close_old_connections ends a test transaction
def test_a_request_ends_with_the_scope_reset_alone_not_a_health_check_before_it() -> None:
    rls.set_scope(organization_id=uuid.uuid4())  # as an API key's request leaves the session
    with traced() as wire:
        request_finished.send(sender=None)  # what a server process runs after each response
    assert len(wire.statements) == 1, wire.statements  # no `SELECT 1` first
    assert "set_config" in wire.statements[0]
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('app.organization_id')")
        assert cursor.fetchone() == ("",)


ORDER_SCRIPT = """
import weakref
import django
django.setup()
from django.core.signals import request_finished, request_started
for signal in (request_started, request_finished):
    refs = [entry[1] for entry in signal.receivers]
    print([getattr(r() if isinstance(r, weakref.ref) else r, "__name__", "") for r in refs])
"""


def test_the_health_check_skip_runs_after_djangos_own_handler_in_a_new_process() -> None:
    # The test client disconnects and reconnects close_old_connections around each request,
    # so the order that matters (a server process's, from start-up) is read in a new one.
    result = subprocess.run(
        [sys.executable, "-c", ORDER_SCRIPT], capture_output=True, text=True, check=True
    )
    started, finished = (ast.literal_eval(line) for line in result.stdout.splitlines()[-2:])
    assert started.index("skip_health_check_when_quiet") > started.index("close_old_connections")
    # At the end too, and before the scope reset, the first statement after Django's handler.
    skip = finished.index("skip_health_check_when_quiet")
    assert finished.index("close_old_connections") < skip < finished.index("on_request_boundary")
