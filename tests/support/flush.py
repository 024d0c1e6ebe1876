"""The flush after a transactional test (`django_db(transaction=True)`, `transactional_db`,
`live_server`), without running every post_migrate receiver again each time.

Django's flush empties every table (TRUNCATE), then sends post_migrate, whose receivers write
the rows a migrated database starts with: content types, permissions, the bus's routes and
schemas, the default job schedules. That second half took about ten times the first (0.6 s of
CPU and hundreds of round trips a test; docs/testing.md). The first flush of a test database
is Django's own; what post_migrate wrote then is kept (in memory, `COPY ... TO STDOUT`), and
every later flush empties the tables that have rows and puts those rows back (`COPY ... FROM
STDIN`), in one transaction: the next test starts from the same rows, with the same ids.

post_migrate also resets the connection's statement_timeout (core.db_timeouts): done here too.
A new post_migrate receiver with an effect other than rows must be mirrored in `_fast_flush`.
"""

from __future__ import annotations

import graphlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connections, transaction
from django.test import TransactionTestCase

# The session bypasses row-level security for the statements below (the test role is a platform
# member, core.rls): every row is seen, and put back.
BYPASS_SQL = "SELECT set_config('app.rls_bypass', 'on', true)"
REFERENCES_SQL = """
SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint
 WHERE contype = 'f' AND conrelid = ANY(%(tables)s::regclass[])
   AND confrelid = ANY(%(tables)s::regclass[]) AND conrelid <> confrelid
"""


@dataclass(frozen=True)
class Baseline:
    """The rows post_migrate wrote after the first flush of one database, table by table."""

    database: tuple[Any, ...]  # host, port, name: a test that points `default` elsewhere
    tables: dict[str, bytes]  # in an order that inserts referenced rows first


_baselines: dict[str, Baseline] = {}


def install() -> Callable[[], None]:
    """Replace TransactionTestCase's flush for this session; returns the undo."""
    original = TransactionTestCase._fixture_teardown

    def _fixture_teardown(self: TransactionTestCase) -> None:
        if self.available_apps is not None or self.serialized_rollback or self.reset_sequences:
            original(self)  # Django's own variants (no test of this suite uses them)
            return
        aliases = list(self._databases_names(include_mirrors=False))
        known = [_baselines.get(alias) for alias in aliases]
        if all(b is not None and b.database == _identity(a) for a, b in zip(aliases, known)):
            for alias, baseline in zip(aliases, known):
                _fast_flush(alias, baseline)  # type: ignore[arg-type]
            return
        original(self)
        for alias in aliases:
            _baselines[alias] = _snapshot(alias)

    TransactionTestCase._fixture_teardown = _fixture_teardown  # type: ignore[method-assign]

    def undo() -> None:
        TransactionTestCase._fixture_teardown = original  # type: ignore[method-assign]

    return undo


def _identity(alias: str) -> tuple[Any, ...]:
    settings = connections[alias].settings_dict
    return (settings["HOST"], settings["PORT"], settings["NAME"])


def _tables(alias: str) -> list[str]:
    connection = connections[alias]
    return sorted(connection.introspection.django_table_names(only_existing=True))


def _with_rows(cursor: Any, tables: list[str]) -> list[str]:
    """The tables that have a row (one statement, an index-free probe each)."""
    probes = " UNION ALL ".join(
        f"SELECT {i} WHERE EXISTS (SELECT FROM {cursor.db.ops.quote_name(t)})"
        for i, t in enumerate(tables)
    )
    cursor.execute(probes)
    return [tables[row[0]] for row in cursor.fetchall()]


def _snapshot(alias: str) -> Baseline:
    connection = connections[alias]
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        cursor.execute(BYPASS_SQL)
        filled = _with_rows(cursor, _tables(alias))
        rows = {}
        for table in _insert_order(cursor, filled):
            with cursor.cursor.copy(f"COPY {connection.ops.quote_name(table)} TO STDOUT") as copy:
                rows[table] = b"".join(bytes(chunk) for chunk in copy)
    return Baseline(_identity(alias), rows)


def _insert_order(cursor: Any, tables: list[str]) -> list[str]:
    cursor.execute(REFERENCES_SQL, {"tables": tables})
    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter(
        {table: set() for table in tables}
    )
    for referencing, referenced in cursor.fetchall():
        sorter.add(referencing.strip('"'), referenced.strip('"'))
    return list(sorter.static_order())


def _fast_flush(alias: str, baseline: Baseline) -> None:
    from django.contrib.contenttypes.models import ContentType

    connection = connections[alias]
    quote = connection.ops.quote_name
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        cursor.execute(BYPASS_SQL)
        filled = set(_with_rows(cursor, _tables(alias))) | set(baseline.tables)
        # CASCADE: the tables referencing these are empty already, or among them.
        cursor.execute(f"TRUNCATE {', '.join(quote(t) for t in sorted(filled))} CASCADE")
        for table, rows in baseline.tables.items():
            with cursor.cursor.copy(f"COPY {quote(table)} FROM STDIN") as copy:
                copy.write(rows)
        cursor.execute("RESET statement_timeout")  # core.db_timeouts' post_migrate receiver
    ContentType.objects.clear_cache()
