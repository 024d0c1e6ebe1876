"""core.migration_ops.add_index_online: an index built without blocking the table's writers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, cast

import pytest
from django.db import connection

from core.migration_ops import add_index_online
from tests.support.db import raw_connection
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

DEFINITION = "(k) WHERE status = 'processing'"


@pytest.fixture
def plain() -> Iterator[str]:
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE test_online (id bigint, k text, status text)")
        cursor.execute(
            "INSERT INTO test_online"
            " SELECT g, 'k' || g, 'processing' FROM generate_series(1, 500) g"
        )
    yield "test_online"
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS test_online")


@pytest.fixture
def partitioned() -> Iterator[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE test_parted (id bigint, k text, status text, at date)"
            " PARTITION BY RANGE (at)"
        )
        for month in ("01", "02"):
            following = f"{int(month) + 1:02d}"
            cursor.execute(
                f"CREATE TABLE test_parted_{month} PARTITION OF test_parted"
                f" FOR VALUES FROM ('2026-{month}-01') TO ('2026-{following}-01')"
            )
        cursor.execute(
            "INSERT INTO test_parted SELECT g, 'k' || g, 'processing',"
            " date '2026-01-01' + (g % 50) FROM generate_series(1, 500) g"
        )
    yield "test_parted"
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS test_parted")


def build(index: str, table: str) -> None:
    operation = add_index_online(index, table, DEFINITION)
    with connection.schema_editor(atomic=False) as editor:
        operation.code(cast(Any, None), editor)  # the operation reads no historical models


def valid(index: str) -> bool | None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", [index]
        )
        row = cursor.fetchone()
    return None if row is None else bool(row[0])


def test_a_plain_tables_writers_go_on_while_the_index_builds(plain: str) -> None:
    with raw_connection() as holder, raw_connection() as writer:
        # A transaction that wrote to the table stays open: the build must wait for it to end.
        holder.execute("BEGIN")
        holder.execute("INSERT INTO test_online VALUES (0, 'held', 'processing')")
        errors: list[BaseException] = []

        def run() -> None:
            try:
                build("test_online_idx", plain)
            except BaseException as exc:  # reported below
                errors.append(exc)
            finally:
                connection.close()

        builder = threading.Thread(target=run)
        builder.start()
        try:
            # Until it has started waiting, the build is not yet in the way of anything.
            with raw_connection() as watch:

                def build_waits() -> bool:
                    row = watch.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'CREATE INDEX%%'"
                        " AND wait_event_type = 'Lock'"
                    ).fetchone()
                    return bool(row and row[0])

                wait_for(build_waits, timeout=20, what="the build to wait for the open writer")
            # A plain CREATE INDEX queued behind the open writer would hold up this one too.
            writer.execute("SET lock_timeout = '2s'")
            writer.execute("INSERT INTO test_online VALUES (1000, 'new', 'processing')")
        finally:
            holder.execute("COMMIT")
            builder.join(30)
    assert not builder.is_alive() and errors == []
    assert valid("test_online_idx") is True


def test_a_partitioned_tables_index_is_built_partition_by_partition(partitioned: str) -> None:
    build("test_parted_idx", partitioned)
    build("test_parted_idx", partitioned)  # again: nothing to do
    assert valid("test_parted_idx") is True
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, i.indisvalid FROM pg_inherits h"
            " JOIN pg_class c ON c.oid = h.inhrelid JOIN pg_index i ON i.indexrelid = c.oid"
            " WHERE h.inhparent = 'test_parted_idx'::regclass ORDER BY 1"
        )
        attached = cursor.fetchall()
        cursor.execute(
            "CREATE TABLE test_parted_03 PARTITION OF test_parted"
            " FOR VALUES FROM ('2026-03-01') TO ('2026-04-01')"
        )
        cursor.execute(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'test_parted_idx'::regclass"
        )
        after_new_partition = cursor.fetchone()[0]
    assert attached == [
        ("test_parted_01_test_parted_idx", True),
        ("test_parted_02_test_parted_idx", True),
    ]
    assert after_new_partition == 3  # a later partition inherits the index


def test_the_bus_migration_built_the_busy_index_valid() -> None:
    assert valid("delivery_ordering_busy_idx") is True


def test_an_unknown_table_is_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match="no table test_missing"):
        build("test_missing_idx", "test_missing")
