"""deskcomm.db.drop_database: a scratch database goes, whatever still uses it."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from django.db import connection
from psycopg import sql
from psycopg.rows import dict_row

from deskcomm.db import bound_cursor, drop_database
from tests.conftest import database_url


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
